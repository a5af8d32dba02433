"""The AI module against a real InfluxDB 1.8: the Flux reader over points written in the
collector's schema, and the recorder's points read back."""

from __future__ import annotations

import math
import time

import pytest
from influxdb_client.client.write_api import SYNCHRONOUS

from netapp.ai.forecast import Forecast
from netapp.ai.policy import MOVE, CpuView, Decision
from netapp.ai.reader import InfluxReader, ReadError, cpu_query, flux_string
from netapp.ai.record import InfluxRecorder
from netapp.telemetry.poll import CPU, INTENT, Point, counter_fields

NODE = "edge-1"
S = 1_000_000_000


def cpu_point(node: str, cpu: int, time_ns: int, rate: float | None, capacity: int = 1000, **state) -> Point:
    """A dpp_cpu point as the collector builds it (netapp.telemetry.collector._cpu_points)."""
    fields = counter_fields(
        0, 0, math.nan if rate is None else rate, math.nan if rate is None else rate * 100
    )
    fields.update(
        enabled=state.get("enabled", True), overloaded=state.get("overloaded", False), capacity_pps=capacity
    )
    if capacity > 0 and rate is not None:
        fields["load"] = rate / capacity
    return Point(CPU, {"node": node, "cpu": str(cpu)}, fields, time_ns)


def intent_point(intent: str, time_ns: int, rate: float, tenant: str = "operator") -> Point:
    tags = {"node": NODE, "tenant": tenant, "intent": intent}
    return Point(INTENT, tags, counter_fields(0, 0, rate, rate * 100), time_ns)


def write(client, bucket: str, points: list[Point]) -> None:
    client.write_api(write_options=SYNCHRONOUS).write(
        bucket=bucket, record="\n".join(p.line() for p in points)
    )


def test_the_cpu_series_come_back_per_cpu_oldest_first_with_the_last_state(influx_client, test_bucket):
    now = time.time_ns()
    points = [cpu_point(NODE, 0, now - 5 * S, None)]  # the first poll: no rate yet
    points += [cpu_point(NODE, 0, now - (4 - i) * S, 100.0 * (i + 1)) for i in range(4)]
    points += [cpu_point(NODE, 1, now - (4 - i) * S, 50.0, overloaded=(i == 3)) for i in range(4)]
    points += [cpu_point("another-node", 0, now - S, 999.0)]
    points += [cpu_point(NODE, 0, now - 60 * S, 999.0)]  # outside the window
    write(influx_client, test_bucket, list(reversed(points)))

    series = InfluxReader(influx_client, test_bucket, NODE).cpu_series(window_s=30)

    assert sorted(series) == [0, 1]
    zero, one = series[0], series[1]
    assert math.isnan(zero.loads[0]) and zero.loads[1:] == pytest.approx((0.1, 0.2, 0.3, 0.4))
    assert list(zero.times_ns) == sorted(zero.times_ns) and len(zero.times_ns) == 5
    assert zero.times_ns[-1] // 1000 == (now - S) // 1000  # microseconds: what Flux returns
    assert (zero.enabled, zero.overloaded, zero.capacity_pps, zero.last_load) == (True, False, 1000, 0.4)
    assert one.loads == pytest.approx((0.05,) * 4)
    assert one.overloaded is True  # the state of the last poll


def test_an_unmetered_cpu_has_no_load(influx_client, test_bucket):
    now = time.time_ns()
    write(influx_client, test_bucket, [cpu_point(NODE, 0, now - i * S, 500.0, capacity=0) for i in range(3)])
    (series,) = InfluxReader(influx_client, test_bucket, NODE).cpu_series(window_s=30).values()
    assert series.capacity_pps == 0 and all(math.isnan(load) for load in series.loads)
    assert math.isnan(series.last_load)


def test_each_intent_comes_back_with_its_last_rate(influx_client, test_bucket):
    now = time.time_ns()
    write(
        influx_client,
        test_bucket,
        [
            intent_point("prio-0", now - 2 * S, 100.0),
            intent_point("prio-0", now - S, 300.0),
            intent_point("prio-1", now - S, 50.0, tenant="tenant-a"),
            intent_point("stale", now - 60 * S, 10.0),
        ],
    )
    rates = InfluxReader(influx_client, test_bucket, NODE).intent_rates(window_s=10)
    assert rates == {("operator", "prio-0"): 300.0, ("tenant-a", "prio-1"): 50.0}


def test_nothing_written_yet_reads_as_nothing(influx_client, test_bucket):
    reader = InfluxReader(influx_client, test_bucket, NODE)
    assert reader.cpu_series(10) == {} and reader.intent_rates(10) == {}


def test_a_missing_bucket_is_a_read_error_that_says_so(influx_client):
    with pytest.raises(ReadError, match="InfluxDB query failed"):
        InfluxReader(influx_client, "no_such_db/autogen", NODE).cpu_series(10)


def test_a_node_name_cannot_break_out_of_the_query():
    assert flux_string('a" or r.node != "b') == '"a\\" or r.node != \\"b"'
    assert 'r.node == "edge\\\\1"' in cpu_query("db/autogen", "edge\\1", 5)


def test_forecasts_and_decisions_are_written_where_the_series_are(
    influxd, influx_client, database, test_bucket
):
    recorder = InfluxRecorder(influx_client, test_bucket, NODE)
    view = CpuView(0, True, False, 1000, 0.6, 0.9)
    move = Decision(
        MOVE,
        0,
        0.6,
        0.9,
        "forecast 0.90 >= 0.8",
        target_cpu=1,
        intent="prio-0",
        tenant="operator",
        outcome="applied",
    )
    now = time.time_ns()
    recorder.record([(view, Forecast(0.6, 0.1, 3, 0.9, 12))], [move], now)

    (forecast,) = rows(influxd, database, "SELECT * FROM dpp_ai_forecast")
    assert forecast == {
        "time": now,
        "cpu": "0",
        "node": NODE,
        "load": 0.6,
        "forecast": 0.9,
        "horizon": 3,
        "observations": 12,
    }
    (decision,) = rows(influxd, database, "SELECT * FROM dpp_ai_decision")
    assert decision == {
        "time": now,
        "action": "move",
        "cpu": "0",
        "node": NODE,
        "forecast": 0.9,
        "load": 0.6,
        "reason": "forecast 0.90 >= 0.8",
        "outcome": "applied",
        "dry_run": False,
        "intent": "prio-0",
        "tenant": "operator",
        "target_cpu": 1,
    }
    assert recorder.failures == 0


def test_a_failed_write_is_counted_not_raised(influx_client):
    recorder = InfluxRecorder(influx_client, "no_such_db/autogen", NODE)
    recorder.record(
        [], [Decision(MOVE, 0, 0.5, 0.9, "why", target_cpu=1, intent="a", tenant="t")], time.time_ns()
    )
    assert recorder.failures == 1


def rows(influxd, database: str, influxql: str) -> list[dict]:
    """InfluxQL rows as dicts (column -> value)."""
    answer = influxd.query(influxql, db=database)
    found = []
    for series in answer["results"][0].get("series", []):
        found += [dict(zip(series["columns"], values)) for values in series["values"]]
    return found
