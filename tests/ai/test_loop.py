"""The loop with fakes around it: a ramp in the series becomes a move through the API, recorded;
dry runs change nothing; failures are reported and the loop goes on."""

from __future__ import annotations

import math
import time

import pytest

from netapp.ai.client import ApiError
from netapp.ai.forecast import Holt
from netapp.ai.loop import describe, forecast_cpu
from netapp.ai.policy import CLEAR_OVERLOADED, MARK_OVERLOADED, MOVE
from netapp.ai.reader import ReadError
from tests.ai.fakes import RAMP, FakeNetApp, FakeReader, make_loop, ramp_on_cpu_0, record, series


def test_given_a_ramp_on_one_cpu_then_the_second_step_moves_a_flow_and_records_it():
    reader, netapp = ramp_on_cpu_0()
    loop, recorder = make_loop(reader, netapp)
    assert loop.step() == []  # the first forecast at `high` is not confirmed yet
    assert netapp.calls == []  # and nothing needed the intents
    (decision,) = loop.step()
    assert (decision.action, decision.cpu, decision.target_cpu, decision.outcome) == (MOVE, 0, 1, "applied")
    assert netapp.calls == [("steer_intents",), ("move_intent", "operator", "prio-0", 1)]
    forecasts, decisions, time_ns = recorder.steps[-1]
    assert [(view.cpu, round(f.value, 6)) for view, f in forecasts] == [(0, 0.9), (1, 0.1)]
    assert decisions == [decision] and time_ns == 1234
    assert loop.decisions() == [(1234, decision)]
    assert loop.views[0].load == 0.6


def test_in_dry_run_the_decision_is_recorded_and_nothing_changes():
    reader, netapp = ramp_on_cpu_0()
    loop, recorder = make_loop(reader, netapp, dry_run=True)
    loop.step()
    (decision,) = loop.step()
    assert decision.outcome == "dry-run"
    assert netapp.calls == [("steer_intents",)]
    assert recorder.steps[-1][1] == [decision]


def test_a_refused_change_is_recorded_as_failed_with_the_reason():
    reader, netapp = ramp_on_cpu_0()
    netapp.error = ApiError("PUT /api/v1/intents/prio-0: 409 conflict")
    loop, recorder = make_loop(reader, netapp)
    loop.step()
    (decision,) = loop.step()
    assert decision.outcome == "failed: PUT /api/v1/intents/prio-0: 409 conflict"
    assert recorder.steps[-1][1] == [decision]


def test_no_other_cpu_free_marks_the_cpu_overloaded_through_the_api():
    reader = FakeReader({0: series(0, RAMP), 1: series(1, (0.7,) * 5)})
    netapp = FakeNetApp([record("prio-0", 0)])
    loop, _ = make_loop(reader, netapp)
    loop.step()
    (decision,) = loop.step()
    assert decision.action == MARK_OVERLOADED
    assert netapp.calls[-1] == ("set_overloaded", 0, True)


def test_a_cpu_with_too_few_loads_has_no_forecast():
    view, forecast = forecast_cpu(series(0, (math.nan, 0.5, math.nan)), Holt(), 3, min_points=3)
    assert forecast is None and math.isnan(view.forecast) and view.load == 0.5


def test_a_falling_load_is_never_forecast_below_zero():
    view, forecast = forecast_cpu(series(0, (0.9, 0.6, 0.3, 0.05)), Holt(), 5, min_points=3)
    assert forecast.value < 0 and view.forecast == 0.0


def test_given_influxdb_fails_then_the_running_loop_counts_it_and_recovers():
    reader, netapp = ramp_on_cpu_0()
    reader.error = ReadError("InfluxDB query failed: connection refused")
    loop, recorder = make_loop(reader, netapp, clock=time.monotonic)
    loop.start()
    try:
        wait_until(lambda: loop.stats.failed_steps >= 2)
        assert loop.stats.last_error == "InfluxDB query failed: connection refused"
        reader.error = None
        wait_until(lambda: len(recorder.steps) >= 2)
    finally:
        loop.stop()
    assert loop.stats.steps > loop.stats.failed_steps


def test_every_decision_reads_as_one_line():
    reader, netapp = ramp_on_cpu_0()
    loop, _ = make_loop(reader, netapp)
    loop.step()
    (decision,) = loop.step()
    assert describe(decision).startswith("move operator/prio-0 from CPU 0 to CPU 1 (forecast 0.90 >= 0.8;")


def wait_until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out")
        time.sleep(0.01)


def test_a_mark_of_its_own_is_cleared_through_the_api_once_the_flows_ask_for_little():
    reader = FakeReader({0: series(0, RAMP), 1: series(1, (0.7,) * 5)}, rates={("operator", "prio-0"): 900.0})
    netapp = FakeNetApp([record("prio-0", 0)])
    now = [0.0]
    loop, _ = make_loop(reader, netapp, clock=lambda: now[0])
    loop.step()
    (mark,) = loop.step()
    assert mark.action == MARK_OVERLOADED and loop.marked == {0}
    # Marked: nothing is steered to CPU 0 any more, and the surge is over.
    reader.cpus = {0: series(0, (0.0,) * 5, overloaded=True), 1: series(1, (0.7,) * 5)}
    reader.rates = {("operator", "prio-0"): 200.0}
    now[0] = 5.0
    assert loop.step() == []  # cooling down
    now[0] = 11.0
    (clear,) = loop.step()
    assert (clear.action, clear.cpu, clear.load, clear.outcome) == (CLEAR_OVERLOADED, 0, 0.2, "applied")
    assert netapp.calls[-1] == ("set_overloaded", 0, False)
    assert loop.marked == frozenset()
    assert [d.action for _, d in loop.decisions()] == [MARK_OVERLOADED, CLEAR_OVERLOADED]
