"""Every query of the Grafana dashboard returns data from a real InfluxDB holding demo telemetry.

The demo runs as `netapp demo` runs it (netapp.testbed.demo, without its terminal view): the edge
site in network namespaces, the pipeline attached natively, `netapp serve` writing its telemetry
into a real InfluxDB 1.8, the paced traffic with its surges, the AI module writing its forecasts.
Each panel's target is then run the way Grafana's InfluxDB data source runs it: the variables'
own queries (SHOW TAG VALUES) give the values, Grafana's macros are put in (`$timeFilter`: the
last hour, `$__interval`: 1 s), and the query goes to InfluxDB's /query. Grafana itself does not
run here; what it adds on top (aliases, units, drawing) is not checked.

The test waits until every target answers a series with values and the alternative-node panel
shows forwarded packets (the first surge overflows a CPU some 20 s after the start), then checks
each target once more with every variable at "All". A field name InfluxDB does not hold answers
no series: the last check shows that such a query would fail this test.

Needs root, libdpp and influxd (skipped outside CI, a failure under CI). About 45 s.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from netapp.dashboards import GRAFANA_DASHBOARD
from netapp.telemetry.influxd import LocalInfluxd
from netapp.testbed.demo import INFLUX_DATABASE, Demo
from tests.utils.grafana import Target, names_in, regex_escaped, substituted, targets, variables
from tests.utils.influxd import require_influxd
from tests.utils.kernel import require_kernel

DATA_TIMEOUT_S = 90.0
SETUP_AND_CLEANUP_S = 90.0  # the site, InfluxDB and `netapp serve` up, then all of it removed
POLL_S = 1.0  # the demo's telemetry interval
FORWARD_PANEL = "Packets per second forwarded to alternative nodes"


@pytest.fixture(scope="module")
def demo() -> Iterator[Demo]:
    require_kernel()
    require_influxd()
    demo = Demo()
    try:
        demo.start()
        yield demo
    finally:
        demo.close()


@pytest.fixture(scope="module")
def model() -> dict[str, Any]:
    return json.loads(GRAFANA_DASHBOARD.read_text())


def run(influxd: LocalInfluxd, query: str) -> list[dict[str, Any]]:
    """The series InfluxDB answers (an error in the query fails the test at once)."""
    assert not names_in(query), f"not substituted: {query}"
    return influxd.query(query, db=INFLUX_DATABASE)["results"][0].get("series", [])


def values_of(series: list[dict[str, Any]]) -> list[Any]:
    """Every non-null value of every series, times left out."""
    return [value for one in series for row in one["values"] for value in row[1:] if value is not None]


def variable_values(influxd: LocalInfluxd, model: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each query variable's values, as Grafana lists them: its query with the variables before
    it at their first value. The variables after one without values (no data yet) have none."""
    found: dict[str, list[str]] = {}
    for name, variable in variables(model).items():
        if variable["type"] != "query":
            continue
        if not all(found.values()):
            found[name] = []
            continue
        chosen = {known: regex_escaped(values[0]) for known, values in found.items()}
        series = run(influxd, substituted(variable["query"], chosen))
        found[name] = sorted(value for _key, value in (series[0]["values"] if series else []))
    return found


Answers = dict[Target, list[Any]]


def answers(influxd: LocalInfluxd, model: Mapping[str, Any], values: Mapping[str, str]) -> Answers:
    """Each target's values, with the variables at `values`."""
    return {target: values_of(run(influxd, substituted(target.query, values))) for target in targets(model)}


def forwarded(got: Answers) -> list[Any]:
    return [value for target, values in got.items() if target.panel == FORWARD_PANEL for value in values]


def wait_for_every_panel(
    influxd: LocalInfluxd, model: Mapping[str, Any]
) -> tuple[dict[str, list[str]], Answers]:
    """Poll until every variable has a value, every target values and the forward panel a
    non-zero one; the last variable values and answers either way."""
    deadline = time.monotonic() + DATA_TIMEOUT_S
    while True:
        found = variable_values(influxd, model)
        got: Answers = {}
        if all(found.values()):
            got = answers(influxd, model, {name: regex_escaped(values[0]) for name, values in found.items()})
            if all(got.values()) and any(value > 0 for value in forwarded(got)):
                return found, got
        if time.monotonic() > deadline:
            return found, got
        time.sleep(POLL_S)


@pytest.mark.timeout(DATA_TIMEOUT_S + SETUP_AND_CLEANUP_S)
def test_every_query_of_the_dashboard_returns_demo_telemetry(demo, model):
    assert demo.influxd is not None
    found, got = wait_for_every_panel(demo.influxd, model)

    assert all(found.values()), f"variables without values after {DATA_TIMEOUT_S:g} s: {found}"
    assert found["node"] == [demo.node] and "embb" in found["slice"], found
    empty = [str(target) for target, values in got.items() if not values]
    assert not empty, f"targets without data after {DATA_TIMEOUT_S:g} s: {empty}"
    assert any(value > 0 for value in forwarded(got)), "no packet forwarded to the alternative node"

    every = {name: variables(model)[name]["allValue"] for name in found}
    at_all = answers(demo.influxd, model, every)
    empty = [str(target) for target, values in at_all.items() if not values]
    assert not empty, f"targets without data with every variable at All: {empty}"

    one = next(iter(targets(model)))
    typo = substituted(one.query.replace('"packets_rate"', '"packet_rate"'), every)
    assert typo != substituted(one.query, every)
    assert run(demo.influxd, typo) == [], "a field name InfluxDB does not hold would go unnoticed"
