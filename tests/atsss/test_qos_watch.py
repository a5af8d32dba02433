"""The smoothing of MEC 015's QoS check over measured losses, by sequences of poll windows: each
path's loss an exponentially weighted average of the windows (Atsss.note_losses; a window without
Ack Vectors keeps it), and maxLoss's hysteresis (netapp.atsss.mts.LOSS_MARGIN) folded over the
statuses as netapp.atsss.qos_watch.QosWatch folds them. No data plane: the service's averages are
plain Python, and the check reads only the session it is given (tests/atsss/test_mts.py runs both
through the kernel's uplink)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterator, Optional

import pytest

from netapp.atsss import store as stored
from netapp.atsss.models import AtsssSession, AtsssSessionPatch, AtsssSessionSpec
from netapp.atsss.mts import LOSS_MARGIN, QOS, QosD, QosStatus, qos_check
from netapp.atsss.qos_watch import QosWatch
from netapp.atsss.service import Atsss, path_key
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store

MAX_LOSS_2 = QosD(maxLoss=2)  # at most 1%
LOSS_NOT_MET = {"maxLoss": QosStatus.NOT_MET}
ADMIN = Principal("operator", frozenset({Scope.ADMIN}))


def session(*losses: Optional[float], up: bool = True, rtt_us: int = 0) -> AtsssSession:
    paths = [{"access": "3GPP" if n % 2 else "non-3GPP", "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}",
              "local_port": 5000 + n, "peer_port": 6000 + n, "source_mac": "02:00:00:00:aa:01",
              "next_hop_mac": "02:00:00:00:bb:01", "loss": loss, "up": up, "rtt_us": rtt_us}
             for n, loss in enumerate(losses, start=1)]
    return AtsssSession.model_validate({
        "name": "ue5", "tenant": "alice", "ue": "10.60.0.5", "mode": "weighted", "effective_mode": "weighted",
        "paths": paths, "slots": list(range(1, len(paths) + 1)), "revision": 1, "updated_at": "2026-11-29T12:00:00Z"})


@pytest.fixture
def atsss(tmp_path) -> Iterator[Atsss]:
    store = Store.open(tmp_path / "netapp.db")
    yield Atsss(store)
    store.close()


def averaged(atsss: Atsss, windows: list[Optional[float]], weight: float) -> list[tuple[Optional[float], bool]]:
    """Path 0's average after each window, and whether the poll said its session's loss changed."""
    ue5 = session(None)
    found = []
    for window in windows:
        changed = atsss.note_losses({path_key(ue5, 0): window}, weight)
        found.append((atsss.measured_losses(ue5)[0], changed == {("alice", "ue5")}))
    return found


def test_a_paths_loss_is_the_weighted_average_of_its_windows_and_a_window_without_vectors_keeps_it(atsss):
    found = averaged(atsss, [None, 0.1, None, 0.5, 0.0, None, 0.0], weight=0.3)
    assert [loss for loss, _ in found] == pytest.approx([None, 0.1, 0.1, 0.22, 0.154, 0.154, 0.1078])
    assert found[0][0] is None, "no window judged anything yet: unknown, not 0"
    assert [changed for _, changed in found] == [False, True, False, True, True, False, True]


def test_a_weight_of_one_takes_each_window_alone(atsss):
    assert [loss for loss, _ in averaged(atsss, [0.1, 0.5, None, 0.0], weight=1.0)] == [0.1, 0.5, 0.5, 0.0]


def test_a_path_the_poll_did_not_read_is_forgotten_and_starts_again_from_its_next_window(atsss):
    ue5 = session(None, None)
    atsss.note_losses({path_key(ue5, 0): 0.4, path_key(ue5, 1): 0.2}, 0.3)
    atsss.note_losses({path_key(ue5, 1): 0.2}, 0.3)  # path 0 gone (its slot emptied, say)
    atsss.note_losses({path_key(ue5, 0): 0.1, path_key(ue5, 1): 0.2}, 0.3)
    assert atsss.measured_losses(ue5) == pytest.approx([0.1, 0.2])


def folded(products: list[float]) -> list[QosStatus]:
    """The statuses one after the other over a path of these losses, each check held by the
    status before it, as the watch holds them."""
    statuses, held = [], None
    for product in products:
        check = qos_check(MAX_LOSS_2, session(product), held)
        held = check.requirements
        statuses.append(check.status)
    return statuses


def test_not_met_only_past_the_bound_and_met_again_only_below_the_bound_less_the_margin():
    bound = 0.01
    products = [0.009, 0.0101, 0.0095, 0.0085, 0.0081, 0.0079, 0.0095, 0.01, 0.0105, 0.002]
    met, not_met = QosStatus.MET, QosStatus.NOT_MET
    assert folded(products) == [met, not_met, not_met, not_met, not_met, met, met, met, not_met, met]
    assert bound * (1 - LOSS_MARGIN) == pytest.approx(0.008)
    # the same products checked alone (no status before: a GET before any poll) flap with them
    assert [qos_check(MAX_LOSS_2, session(product)).status for product in products] == [
        met, not_met, met, met, met, met, met, met, not_met, met]


def test_a_held_not_met_within_the_margin_says_what_it_waits_for():
    status, reason, _ = qos_check(MAX_LOSS_2, session(0.09, 0.1), {"maxLoss": QosStatus.NOT_MET})
    assert status is QosStatus.NOT_MET
    assert reason is not None and "0.009" in reason and "0.008" in reason and "20%" in reason, reason


def test_an_unknown_loss_is_unverified_past_the_bound_and_a_held_not_met_in_the_margin_stays():
    assert qos_check(MAX_LOSS_2, session(0.2, None)).status is QosStatus.UNVERIFIED
    assert qos_check(MAX_LOSS_2, session(0.009, None), LOSS_NOT_MET).status is QosStatus.NOT_MET
    assert qos_check(MAX_LOSS_2, session(0.009, None), {"maxLoss": QosStatus.MET}).status is QosStatus.MET
    assert qos_check(MAX_LOSS_2, session(0.005, None), LOSS_NOT_MET).status is QosStatus.MET


# maxLoss and maxLatency together (the one pair qosD may ask: redundancy serves both): at most 1%,
# and 10 µs one way, which a path of a 10 µs RTT meets and one of 100 µs misses.
LOSS_AND_LATENCY = QosD(maxLoss=2, maxLatency=1000)
FAST, SLOW = 10, 100


def folded_checks(states: list[tuple[float, int]]) -> list[tuple[QosStatus, Optional[str]]]:
    """The checks one after the other of a path of these (loss, RTT), each held by the one before
    as the watch holds them."""
    checks, held = [], None
    for loss, rtt_us in states:
        check = qos_check(LOSS_AND_LATENCY, session(loss, rtt_us=rtt_us), held)
        held = check.requirements
        checks.append((check.status, check.reason))
    return checks


def test_a_latency_missed_then_met_again_leaves_a_loss_within_its_bound_met():
    """The loss was never past its bound: the latency's NOT_MET must not hold it to maxLoss's margin."""
    checks = folded_checks([(0.009, SLOW), (0.009, FAST)])
    assert checks[0][0] is QosStatus.NOT_MET and "qosD.maxLatency" in checks[0][1] and "maxLoss" not in checks[0][1]
    assert checks[1] == (QosStatus.MET, None)


def test_a_loss_missed_stays_not_met_in_its_margin_while_the_latency_recovers_and_each_is_told():
    checks = folded_checks([(0.011, SLOW), (0.009, FAST), (0.0079, FAST)])
    assert checks[0][0] is QosStatus.NOT_MET
    assert "qosD.maxLatency" in checks[0][1] and "qosD.maxLoss" in checks[0][1], "both requirements missed are told"
    assert checks[1][0] is QosStatus.NOT_MET and checks[1][1].startswith("qosD.maxLoss") and "maxLatency" not in checks[1][1]
    assert checks[2] == (QosStatus.MET, None)


def test_the_watch_tells_the_session_met_once_its_latency_recovers_over_a_loss_within_its_bound(atsss):
    """Through QosWatch and the service (the store only): the held status of each requirement is
    what the next poll's check holds, and a change of the session's qosStatus is told."""
    paths = [{"access": access, "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}", "local_port": 5000 + n,
              "peer_port": 6000 + n, "source_mac": "02:00:00:00:aa:01", "next_hop_mac": "02:00:00:00:bb:01",
              "rtt_us": SLOW} for n, access in ((1, "3GPP"), (2, "non-3GPP"))]
    atsss.create_session(ADMIN, "ue5", AtsssSessionSpec.model_validate(
        {"name": "ue5", "ue": "10.60.0.5", "mode": "weighted", "paths": paths}))
    # as the MTS API stores it (netapp.atsss.mts), in a mode the store alone runs: the check reads qosD only
    with atsss.store.transaction():
        stored.save_mts(atsss.store, "operator", "m1", "10.60.0.5", {
            "appInsId": "app1", "mtsMode": QOS, "qosD": LOSS_AND_LATENCY.model_dump(exclude_none=True),
            "mode": "weighted"}, datetime.now(timezone.utc))
    watch = QosWatch(atsss, loss_weight=1.0)
    ue5 = atsss.get_session(ADMIN, "ue5")
    assert watch({path_key(ue5, 0): 0.1, path_key(ue5, 1): 0.09}) == [], "the first check sets where it stands"
    assert watch.statuses[("operator", "m1")] == {"maxLatency": QosStatus.NOT_MET, "maxLoss": QosStatus.MET}
    atsss.patch_session(ADMIN, "ue5", AtsssSessionPatch.model_validate(
        {"paths": [{"index": 0, "rtt_us": FAST}, {"index": 1, "rtt_us": FAST}]}))
    changes = watch({path_key(ue5, 0): 0.1, path_key(ue5, 1): 0.091})  # 0.0091: within 1%, not 20% below it
    assert [(change.before, change.after, change.reason) for change in changes] == [
        (QosStatus.NOT_MET, QosStatus.MET, None)]
