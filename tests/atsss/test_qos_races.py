"""What MEC 015's QoS watch reads outside ATSSS's service lock, with a change made while it reads,
interleaved at a chosen read with no sleep (tests/utils/interleave.py).

The QoS watch (netapp.atsss.qos_watch.QosWatch) reads the MTS sessions, then keeps each one's
statuses for its next check: one PUT or deleted after the read keeps none (the new qosD is checked
anew, not held by the old one's statuses). Store only: the watch reads the measured losses and the
store, no map."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

import pytest
from fastapi import Response
from starlette.requests import Request

from netapp.atsss import mts
from netapp.atsss import store as stored
from netapp.atsss.models import AtsssSessionSpec
from netapp.atsss.qos_watch import QosWatch
from netapp.atsss.service import Atsss, path_key
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store
from tests.utils.interleave import SecondChange, calling_back

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))


@pytest.fixture
def stored_only(store: Store) -> Iterator[Atsss]:
    """The service with no data plane: sessions stored only."""
    yield Atsss(store)


def redundant_session() -> AtsssSessionSpec:
    """A UE's session whose two paths name their interfaces: what maxLoss (redundancy) runs over."""
    paths = [{"access": access, "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}", "local_port": 5000 + n,
              "peer_port": 6000 + n, "source_mac": "02:00:00:00:aa:01", "next_hop_mac": "02:00:00:00:bb:01",
              "interface": f"acc{n}"} for n, access in ((1, "3GPP"), (2, "non-3GPP"))]
    return AtsssSessionSpec.model_validate({"name": "ue5", "ue": "10.60.0.5", "mode": "weighted", "paths": paths})


def max_loss(exponent: int) -> mts.MtsSessionInfo:
    """A QoS MTS session of the UE's whole downlink losing at most 10^-exponent."""
    return mts.MtsSessionInfo.model_validate({
        "appInsId": "app-1", "requestType": 1, "flowFilter": [{"dstIp": "10.60.0.5"}], "qosD": {"maxLoss": exponent},
        "mtsMode": mts.QOS, "trafficDirection": "00"})


def each_path_losing(atsss: Atsss, loss: float) -> dict[tuple[str, str, int], Optional[float]]:
    """A poll's windows: every path of the UE's session losing `loss` (together loss²)."""
    ue5 = atsss.get_session(ADMIN, "ue5")
    return {path_key(ue5, index): loss for index in range(len(ue5.slots))}


def held_not_met(atsss: Atsss) -> tuple[QosWatch, str]:
    """The watch, and an MTS session of maxLoss 2 (at most 1%) whose first check, at 25%, held
    maxLoss NOT_MET."""
    atsss.create_session(ADMIN, "ue5", redundant_session())
    created = mts.mts_session_post(Request({"type": "http", "root_path": "", "headers": []}), Response(), atsss,
                                   ADMIN, max_loss(2))
    assert created.sessionId is not None
    watch = QosWatch(atsss, loss_weight=1.0)
    assert watch(each_path_losing(atsss, 0.5)) == [], "the first check sets where it stands"
    assert atsss.qos_held == {("operator", created.sessionId): {"maxLoss": mts.QosStatus.NOT_MET}}
    return watch, created.sessionId


def at_the_watchs_read(atsss: Atsss, monkeypatch, second: Callable[[], Any]) -> SecondChange:
    """`second` made once the watch has read the MTS sessions, before it keeps their statuses."""
    change = SecondChange(atsss._lock, second, ends_first=True)
    atsss._lock = change
    monkeypatch.setattr(stored, "load_mts", calling_back(stored.load_mts, change.at_read))
    return change


def test_a_check_that_read_an_mts_session_before_its_put_keeps_no_status_for_the_new_qosd(stored_only, monkeypatch):
    """The session held NOT_MET under maxLoss 2 (1%); a poll at 9% together reads it, then a PUT
    makes it maxLoss 1 (10%) before the poll keeps its statuses. 9% is within 10% but not 20% below
    it: checked anew, MET; held by the old qosD's NOT_MET, NOT_MET still. The poll keeps no status
    of the session it read before the PUT: the GET says MET, and the next poll's check is the new
    qosD's first. Kept as the poll checked it (the old qosD's NOT_MET), the GET said NOT_MET and
    the next check held the new requirement to the old one's margin."""
    watch, mts_id = held_not_met(stored_only)
    put = at_the_watchs_read(stored_only, monkeypatch,
                             lambda: mts.mts_session_put(stored_only, ADMIN, mts_id, max_loss(1)))

    told = watch(each_path_losing(stored_only, 0.3))
    put.join()

    assert told == [], "the change the poll saw was of a qosD no longer stored"
    assert ("operator", mts_id) not in stored_only.qos_held
    assert mts.mts_session_get(stored_only, ADMIN, mts_id).qosStatus is mts.QosStatus.MET
    assert watch(each_path_losing(stored_only, 0.29)) == [], "the new qosD's first check tells nothing"
    assert stored_only.qos_held[("operator", mts_id)] == {"maxLoss": mts.QosStatus.MET}


def test_a_check_that_read_an_mts_session_before_its_delete_keeps_no_status_of_it(stored_only, monkeypatch):
    """Kept, the deleted session's statuses stayed in the service until a later poll."""
    watch, mts_id = held_not_met(stored_only)
    delete = at_the_watchs_read(stored_only, monkeypatch, lambda: mts.mts_session_delete(stored_only, ADMIN, mts_id))

    watch(each_path_losing(stored_only, 0.3))
    delete.join()

    assert stored_only.qos_held == {}
