"""The loop with fakes around it: a ramp in the series becomes a move through the API, recorded;
dry runs change nothing; failures are reported and the loop goes on."""

from __future__ import annotations

import dataclasses
import math
import time

import pytest

from netapp.ai.client import ApiError
from netapp.ai.forecast import Holt
from netapp.ai.loop import describe, forecast_cpu
from netapp.ai.policy import CLEAR_OVERLOADED, MARK_OVERLOADED, MOVE
from netapp.ai.reader import ReadError
from tests.ai.fakes import (
    RAMP,
    FakeNetApp,
    FakeReader,
    SteadySite,
    make_loop,
    ramp_on_cpu_0,
    record,
    run_steady,
    series,
)


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


# --- steady rates: a bounded number of moves, none of an idle flow, none back ---------------------

COOLDOWN_S = 10.0
# Steady rates (pkt/s, capacity 1000) that made the loop move one flow to and fro every cool-down:
# after a move the CPU that took the flow was left just under `high`, and Holt read the step in
# its series as a ramp going on and forecast it above; the CPU that gave the flow looked free.
STEADY_OVERLOADS = {
    "one-big-flow": {"a": 100, "b": 700, "x": 100},
    "three-flows": {"a": 250, "b": 550, "c": 300, "idle": 0, "x": 250},
    "idle-fits-busy-does-not": {"big": 900, "idle": 0, "x": 100},
    "slow-polls": {"a": 50, "b": 550, "c": 200, "x": 0},  # at 5 s polls the step outlasts the cool-down
}


def on_cpu_0_but_x(rates: dict[str, float]) -> dict[str, int]:
    return {intent: 1 if intent == "x" else 0 for intent in rates}


@pytest.mark.parametrize("interval_s", [1.0, 5.0], ids=["1s-polls", "5s-polls"])
@pytest.mark.parametrize("rates", STEADY_OVERLOADS.values(), ids=STEADY_OVERLOADS.keys())
def test_given_a_steady_overload_then_at_most_one_move_per_cool_down_none_idle_and_none_back(rates, interval_s):
    site = SteadySite(rates, on_cpu_0_but_x(rates))

    run_steady(site, interval_s, duration_s=240.0, cooldown_s=COOLDOWN_S)

    for earlier, later in zip(site.moves, site.moves[1:]):
        assert later[0] - earlier[0] >= COOLDOWN_S, site.moves
    assert [move for move in site.moves if rates[move[1]] == 0] == [], site.moves
    moved = [intent for _, intent, _, _ in site.moves]
    assert len(moved) == len(set(moved)), f"a flow moved twice: {site.moves}"
    # Relieved, one way or the other: CPU 0 is marked, or no longer at `high` with what it kept.
    kept = sum(rate for intent, rate in rates.items() if site.placement[intent] == 0)
    assert site.overloaded[0] or kept / site.capacity < 0.8, (site.moves, site.marks)


def test_after_a_move_the_flow_stays_while_the_rates_hold():
    rates = STEADY_OVERLOADS["three-flows"]
    site = SteadySite(rates, on_cpu_0_but_x(rates))

    run_steady(site, 1.0, duration_s=120.0, cooldown_s=COOLDOWN_S)

    assert site.moves[:1] == [(3.0, "c", 0, 1)]  # confirmed at the second forecast at `high`
    assert site.placement == {"a": 0, "b": 0, "c": 1, "idle": 0, "x": 1}
    assert site.moves == [(3.0, "c", 0, 1)]


def test_a_cpu_forecasts_from_the_loads_measured_wholly_after_its_last_change():
    steady = series(0, (0.2, 0.2, 0.2, 0.7, 0.7, 0.7, 0.7))  # polls at 0..6 s; a flow came at 2.5 s
    changed_ns = 2_500_000_000
    steady = dataclasses.replace(steady, times_ns=tuple(second * 1_000_000_000 for second in range(7)))

    view, forecast = forecast_cpu(steady, Holt(), 3, min_points=3, changed_ns=changed_ns)

    # The poll at 3 s covers 2..3 s, across the change: only those at 4, 5 and 6 s count.
    assert forecast.observations == 3 and view.forecast == pytest.approx(0.7)
    whole, _ = forecast_cpu(steady, Holt(), 3, min_points=3)
    assert whole.forecast > 0.8  # read as a ramp that goes on
    too_soon, _ = forecast_cpu(steady, Holt(), 3, min_points=4, changed_ns=changed_ns)
    assert math.isnan(too_soon.forecast)
