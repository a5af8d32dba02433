"""The Grafana dashboard: the shipped JSON is the builder's (grafanalib), every panel is wired to
the InfluxDB data source variable with sane targets, and every measurement, field and tag its
queries name is one api/telemetry.md documents. Whether the queries return data is checked against
a real InfluxDB holding demo telemetry in tests/integration/test_grafana_dashboard.py. Grafana
itself does not run in the tests."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from netapp.cli.main import app
from netapp.dashboards import GRAFANA_DASHBOARD
from netapp.dashboards.grafana import DATASOURCE, document, render
from tests.telemetry.test_schema import DOC, documented
from tests.utils.grafana import MACROS, names_in, panels, regex_escaped, substituted, targets, variables

REBUILD = "python -m netapp.dashboards.grafana"
SELECTOR = re.compile(r'(?:mean|last)\("(\w+)"\)')
FROM = re.compile(r'FROM "(\w+)"')
TAGS = re.compile(r'"(\w+)" (?:=~|!?=) ')
GROUPED = re.compile(r'GROUP BY time\(\$__interval\)((?:, "\w+")*) fill\(null\)$')


@pytest.fixture(scope="module")
def model() -> dict:
    return json.loads(GRAFANA_DASHBOARD.read_text())


def test_the_shipped_dashboard_is_the_builders_output():
    shipped = GRAFANA_DASHBOARD.read_text()
    assert shipped == render(document()), f"{GRAFANA_DASHBOARD.name} drifted: run `{REBUILD}`"


def test_the_panels_the_operators_asked_for_are_there(model):
    queries = [target.query for target in targets(model)]
    asked = {
        "per-intent rates": ('FROM "dpp_intent"', "packets_rate"),
        "per-slice rates": ('FROM "dpp_slice"', "packets_rate"),
        "CPU load": ('FROM "dpp_cpu"', '"load"'),
        "AI forecast": ('FROM "dpp_ai_forecast"', '"forecast"'),
        "alternative-node traffic": ('FROM "dpp_action"', "'forward'"),
        "drops by reason": ('FROM "dpp_reason"', '"reason"'),
    }
    for what, needles in asked.items():
        assert any(all(needle in query for needle in needles) for query in queries), what


def test_every_panel_has_targets_a_unique_id_and_the_datasource_variable(model):
    ids = [panel["id"] for panel in model["panels"]]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    assert [panel["title"] for panel in model["panels"] if panel["type"] == "row"], "rows group the panels"
    for panel in panels(model):
        assert panel["type"] == "timeseries" and panel["targets"], panel["title"]
        assert panel["datasource"] == DATASOURCE == {"type": "influxdb", "uid": "${datasource}"}
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)) and all(ref_ids), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE and target["rawQuery"] is True, panel["title"]
            assert target["resultFormat"] == "time_series" and target["alias"], panel["title"]
    datasource = variables(model)["datasource"]
    assert (datasource["type"], datasource["query"]) == ("datasource", "influxdb")


def test_panels_tile_the_grid_without_overlapping(model):
    taken: set[tuple[int, int]] = set()
    for panel in model["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        columns, lines = range(grid["x"], grid["x"] + grid["w"]), range(grid["y"], grid["y"] + grid["h"])
        cells = {(x, y) for x in columns for y in lines}
        assert not cells & taken, f"{panel['title']!r} overlaps another panel"
        taken |= cells


def test_every_query_is_filtered_by_time_grouped_by_interval_and_uses_defined_variables(model):
    known = set(variables(model)) | {macro[1:] for macro in MACROS}
    for target in targets(model):
        assert " AND $timeFilter GROUP BY time($__interval)" in target.query, target
        assert GROUPED.search(target.query), target
        assert names_in(target.query) <= known, f"{target}: {names_in(target.query) - known}"
        assert '"node" =~ /^$node$/' in target.query, f"{target}: every panel follows the node variable"


def test_each_variable_query_uses_only_the_variables_before_it(model):
    defined: set[str] = set()
    for name, variable in variables(model).items():
        assert names_in(variable["query"]) <= defined, name
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE, name
            assert variable["includeAll"] and variable["allValue"] == ".*", f"{name}: All is one regex"
        defined.add(name)


def test_every_measurement_field_and_tag_queried_is_documented(model):
    schema = documented()
    doc = DOC.read_text()
    for target in targets(model):
        (measurement,) = FROM.findall(target.query)
        fields = set(SELECTOR.findall(target.query))
        grouped = GROUPED.search(target.query)
        assert grouped, target
        tags = set(TAGS.findall(target.query)) | set(re.findall(r'"(\w+)"', grouped.group(1)))
        if measurement in schema:
            assert fields <= set(schema[measurement]["field"]), target
            assert tags <= set(schema[measurement]["tag"]), target
        else:  # the AI module's measurements: one table row each, "| `name` | tags | fields |"
            row = re.search(rf"^\| `{measurement}` \|(.*)$", doc, re.MULTILINE)
            assert row, f"{target}: {measurement} is not in {DOC.name}"
            assert fields | tags <= set(re.findall(r"`(\w+)`", row.group(1))), target


def test_substitution_leaves_no_grafana_syntax_for_influxdb():
    query = 'SELECT mean("x") FROM "m" WHERE "i" =~ /^$intent$/ AND "t" = \'${tenant}\' AND $timeFilter'
    values = {"intent": regex_escaped("a.b/c"), "tenant": "t"}

    expected = 'SELECT mean("x") FROM "m" WHERE "i" =~ /^a\\.b\\/c$/ AND "t" = \'t\' AND time > now() - 1h'
    assert substituted(query, values) == expected
    assert substituted("GROUP BY time($__interval)", {}) == "GROUP BY time(1s)"


def test_netapp_dashboards_export_writes_the_shipped_json(tmp_path):
    out = tmp_path / "dpp-netapp.json"

    to_file = CliRunner().invoke(app, ["dashboards", "export", "--output", str(out)])
    to_stdout = CliRunner().invoke(app, ["dashboards", "export"])

    assert to_file.exit_code == 0 and out.read_text() == GRAFANA_DASHBOARD.read_text()
    assert to_stdout.exit_code == 0 and to_stdout.stdout == GRAFANA_DASHBOARD.read_text()


def test_export_to_a_missing_folder_says_so_in_one_line(tmp_path):
    result = CliRunner().invoke(app, ["dashboards", "export", "--output", str(tmp_path / "no" / "x.json")])

    assert result.exit_code == 2
    missing = tmp_path / "no" / "x.json"
    assert result.stderr == f"netapp: {missing}: cannot write the dashboard: No such file or directory\n"
