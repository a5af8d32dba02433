"""The ATSSS weight policy alone (weights inversely to the RTTs, only where they would move a share
by the tolerance, paths down or weighted 0 left alone), and in the loop with fakes around it
(applied, dry run, refused; no RTT asked for when no session is weighted)."""

from __future__ import annotations

from typing import Any

import pytest

from netapp.ai.client import ApiError
from netapp.ai.weights import PathState, SessionState, WeightConfig, WeightPolicy
from tests.ai.fakes import FakeNetApp, FakeReader, make_loop


def session(weights: tuple[int, ...] = (1, 1), up: tuple[bool, ...] = (True, True), mode: str = "weighted",
            name: str = "ue5", tenant: str = "carol") -> SessionState:
    return SessionState(tenant, name, mode, tuple(PathState(i, u, w) for i, (w, u) in enumerate(zip(weights, up))))


def rtts(*values: float, name: str = "ue5", tenant: str = "carol") -> dict[tuple[str, str, int], float]:
    return {(tenant, name, index): value for index, value in enumerate(values) if value}


def body(weights: tuple[int, ...] = (1, 1), mode: str = "weighted") -> dict[str, Any]:
    """An AtsssSession as GET /api/v1/atsss/sessions answers it (the fields the policy reads)."""
    return {"tenant": "carol", "name": "ue5", "mode": mode, "effective_mode": mode,
            "paths": [{"up": True, "weight": weight, "rtt_us": 0} for weight in weights]}


def test_the_weights_are_inverse_to_the_rtts_and_sum_to_the_scale():
    (decision,) = WeightPolicy().decide([session()], rtts(10_000, 30_000))
    assert (decision.weights, decision.previous, decision.rtts_us) == ((75, 25), (1, 1), (10_000, 30_000))
    assert decision.changed() == {0: 75, 1: 25}
    (three,) = WeightPolicy(WeightConfig(scale=1000)).decide([session((1, 1, 1), (True,) * 3)],
                                                             rtts(10_000, 20_000, 40_000))
    assert three.weights == (571, 286, 143)


def test_a_split_within_the_tolerance_is_left_alone():
    assert WeightPolicy().decide([session((74, 26))], rtts(10_000, 30_000)) == []
    assert WeightPolicy().decide([session((72, 28))], rtts(10_000, 30_000)) == [], "a share moves by 0.03 only"
    (moved,) = WeightPolicy(WeightConfig(tolerance=0.02)).decide([session((72, 28))], rtts(10_000, 30_000))
    assert moved.weights == (75, 25)


def test_a_path_down_keeps_its_weight_and_the_others_share_the_scale():
    state = session((1, 1, 1), (True, False, True))
    (decision,) = WeightPolicy().decide([state], rtts(10_000, 1_000, 40_000))
    assert decision.weights == (80, 1, 20) and decision.rtts_us == (10_000, None, 40_000)
    assert decision.changed() == {0: 80, 2: 20}


def test_no_decision_without_every_rtt_two_paths_up_or_weighted_mode():
    policy = WeightPolicy()
    assert policy.decide([session()], rtts(10_000, 0)) == [], "path 1's RTT unknown"
    assert policy.decide([session(up=(True, False))], rtts(10_000, 30_000)) == [], "one path up"
    assert policy.decide([session(mode="round_robin")], rtts(10_000, 30_000)) == []
    assert policy.decide([session((5, 0))], rtts(10_000, 30_000)) == [], "weight 0: the operator's never"
    assert policy.decide([session()], rtts(10_000, 30_000, name="other")) == [], "another session's RTTs"


@pytest.mark.parametrize("config, says", [
    ({"scale": 1}, "scale must be within 2..65535"),
    ({"scale": 70000}, "scale must be within 2..65535"),
    ({"tolerance": 0}, "0 < tolerance < 1"),
    ({"tolerance": 1.5}, "0 < tolerance < 1"),
])
def test_a_bad_setting_says_which_and_what_is_allowed(config, says):
    with pytest.raises(ValueError, match=says):
        WeightConfig(**config)


def test_the_loop_sets_the_weights_through_the_api_and_records_them():
    reader = FakeReader({}, rtts=rtts(10_000, 30_000))
    netapp = FakeNetApp([], sessions=[body()])
    loop, recorder = make_loop(reader, netapp, weights=WeightPolicy())
    assert loop.step() == []
    (decision,) = loop.weight_decisions
    assert decision.outcome == "applied"
    assert netapp.calls == [("atsss_sessions",), ("set_weights", "carol", "ue5", {0: 75, 1: 25})]
    assert recorder.weights == [([decision], 1234)]


def test_in_dry_run_or_refused_the_weights_are_recorded_with_the_outcome():
    loop, recorder = make_loop(FakeReader({}, rtts=rtts(10_000, 30_000)), FakeNetApp([], sessions=[body()]),
                               dry_run=True, weights=WeightPolicy())
    loop.step()
    assert [d.outcome for d in loop.weight_decisions] == ["dry-run"]
    refusing = FakeNetApp([], sessions=[body()], error=ApiError("PATCH /api/v1/atsss/sessions/ue5: 404 not found"))
    loop, recorder = make_loop(FakeReader({}, rtts=rtts(10_000, 30_000)), refusing, weights=WeightPolicy())
    loop.step()
    assert [d.outcome for d in recorder.weights[0][0]] == ["failed: PATCH /api/v1/atsss/sessions/ue5: 404 not found"]


def test_without_weighted_sessions_no_rtt_is_read():
    reader = FakeReader({}, error=None)
    reader.path_rtts = None  # type: ignore[assignment]  # called, it would raise TypeError
    loop, recorder = make_loop(reader, FakeNetApp([], sessions=[body(mode="round_robin")]), weights=WeightPolicy())
    loop.step()
    assert loop.weight_decisions == [] and recorder.weights == []
