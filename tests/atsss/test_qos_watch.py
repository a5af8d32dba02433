"""The smoothing of MEC 015's QoS check over measured losses, by sequences of poll windows: each
path's loss an exponentially weighted average of the windows (Atsss.note_losses; a window without
Ack Vectors keeps it), and maxLoss's hysteresis (netapp.atsss.mts.LOSS_MARGIN) folded over the
statuses as netapp.atsss.qos_watch.QosWatch folds them. No data plane: the service's averages are
plain Python, and the check reads only the session it is given (tests/atsss/test_mts.py runs both
through the kernel's uplink)."""

from __future__ import annotations

from typing import Iterator, Optional

import pytest

from netapp.atsss.models import AtsssSession
from netapp.atsss.mts import LOSS_MARGIN, QosD, QosStatus, qos_status
from netapp.atsss.service import Atsss, path_key
from netapp.service.store import Store

MAX_LOSS_2 = QosD(maxLoss=2)  # at most 1%


def session(*losses: Optional[float], up: bool = True) -> AtsssSession:
    paths = [{"access": "3GPP" if n % 2 else "non-3GPP", "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}",
              "local_port": 5000 + n, "peer_port": 6000 + n, "source_mac": "02:00:00:00:aa:01",
              "next_hop_mac": "02:00:00:00:bb:01", "loss": loss, "up": up} for n, loss in enumerate(losses, start=1)]
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


def folded(products: list[float], held: Optional[QosStatus] = None) -> list[QosStatus]:
    """The statuses one after the other over a path of these losses, each check held by the
    status before it, as the watch holds them."""
    statuses = []
    for product in products:
        held, _ = qos_status(MAX_LOSS_2, session(product), held)
        statuses.append(held)
    return statuses


def test_not_met_only_past_the_bound_and_met_again_only_below_the_bound_less_the_margin():
    bound = 0.01
    products = [0.009, 0.0101, 0.0095, 0.0085, 0.0081, 0.0079, 0.0095, 0.01, 0.0105, 0.002]
    met, not_met = QosStatus.MET, QosStatus.NOT_MET
    assert folded(products) == [met, not_met, not_met, not_met, not_met, met, met, met, not_met, met]
    assert bound * (1 - LOSS_MARGIN) == pytest.approx(0.008)
    # the same products checked alone (no status before: a GET before any poll) flap with them
    assert [qos_status(MAX_LOSS_2, session(product))[0] for product in products] == [
        met, not_met, met, met, met, met, met, met, not_met, met]


def test_a_held_not_met_within_the_margin_says_what_it_waits_for():
    status, reason = qos_status(MAX_LOSS_2, session(0.09, 0.1), QosStatus.NOT_MET)
    assert status is QosStatus.NOT_MET
    assert reason is not None and "0.009" in reason and "0.008" in reason and "20%" in reason, reason


def test_an_unknown_loss_is_unverified_past_the_bound_and_a_held_not_met_in_the_margin_stays():
    assert qos_status(MAX_LOSS_2, session(0.2, None))[0] is QosStatus.UNVERIFIED
    assert qos_status(MAX_LOSS_2, session(0.009, None), QosStatus.NOT_MET)[0] is QosStatus.NOT_MET
    assert qos_status(MAX_LOSS_2, session(0.009, None), QosStatus.MET)[0] is QosStatus.MET
    assert qos_status(MAX_LOSS_2, session(0.005, None), QosStatus.NOT_MET)[0] is QosStatus.MET
