"""ATSSS sessions read or changed while another change is under way, interleaved at a chosen point
with no sleep (tests/utils/interleave.py), over ATSSS's service on a pinned pipeline's maps: a
session's counters read as another tenant's session takes its slots answer its own counters or 404,
never the other's; an ATSSS session's PUT keeps the path order the UE's low-cost MTS session was
checked against; an MTS session's PUT forgets its QoS statuses with its write, not after it."""

from __future__ import annotations

import pytest
from fastapi import Response
from starlette.requests import Request

from netapp.atsss import mts
from netapp.atsss import store as stored
from netapp.atsss.models import AtsssSessionSpec, SteeringMode
from netapp.atsss.qos_watch import QosWatch
from netapp.atsss.service import Atsss, path_key
from netapp.service.contract import InvalidInput, NotFound, Principal, Scope
from tests.atsss.atsss import path_body
from tests.atsss.test_flows import (  # noqa: F401 - atsss and node: the fixtures
    CELL, OTHER_UE, UE, VIDEO, WIFI, atsss, flow_packet, node, send, session, steer_flows)
from tests.utils.interleave import SecondChange, calling_back

CAROL = Principal("tenant-a", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
DAVE = Principal("tenant-b", frozenset({Scope.READ, Scope.INTENTS_WRITE}))


def unmetered_first(name: str = "ue7") -> AtsssSessionSpec:
    """The UE's session with its non-3GPP path first: what low cost (mtsMode 0) runs over."""
    return AtsssSessionSpec.model_validate({"name": name, "ue": UE, "mode": "round_robin",
                                            "paths": [path_body(WIFI), path_body(CELL)]})


def mts_body(mode: int, qos: dict | None = None) -> mts.MtsSessionInfo:
    return mts.MtsSessionInfo.model_validate({"appInsId": "app-1", "requestType": 1, "flowFilter": [{"dstIp": UE}],
                                              "qosD": qos or {}, "mtsMode": mode, "trafficDirection": "00"})


def post(atsss: Atsss, body: mts.MtsSessionInfo) -> str:
    request = Request({"type": "http", "root_path": "", "headers": []})
    created = mts.mts_session_post(request, Response(), atsss, CAROL, body)
    assert created.sessionId is not None
    return created.sessionId


def packets(atsss: Atsss, who: Principal, name: str) -> list[int]:
    return [path.packets for path in atsss.session_counters(who, name).paths]


def slots_another_tenant_takes(node, atsss: Atsss) -> SecondChange:
    """Tenant A's session, its UE's packet sent (1 on its first path), and in place of the service's
    lock the change that gives its slots to tenant B's session once the test's read calls at_read."""
    atsss.create_session(CAROL, "ue7", session())
    send(node, flow_packet())
    slots = atsss.get_session(CAROL, "ue7").slots
    change = SecondChange(atsss._lock, lambda: another_tenant_takes_the_slots(node, atsss, slots), ends_first=True)
    atsss._lock = change
    return change


def another_tenant_takes_the_slots(node, atsss: Atsss, slots: list[int]) -> None:
    """Tenant A's session deleted, tenant B's created in its slots (the lowest free pair), and B's
    UE sending 4 packets: 2 on each path."""
    atsss.delete_session(CAROL, "ue7")
    taken = atsss.create_session(DAVE, "ue8", session("ue8", OTHER_UE))
    assert taken.slots == slots, "B's session is given A's slots: the case this test is about"
    for _ in range(4):
        send(node, flow_packet(ue=OTHER_UE))


def test_counters_read_as_another_tenants_session_takes_the_slots_are_the_sessions_own(node, atsss, monkeypatch,
                                                                                     slots_given_again):
    """Tenant A's session is deleted and tenant B's created in its slots (the lowest free pair)
    once A's counters request has read A's session; B's UE then sends 4 packets. Read under the
    lock, A's request answers A's own counters (1 packet), as they were before the delete. Read
    outside it, A's request read B's slots after that: B's 4 packets answered as A's."""
    change = slots_another_tenant_takes(node, atsss)
    monkeypatch.setattr(stored, "stored_session", calling_back(stored.stored_session, change.at_read))

    try:
        answered = packets(atsss, CAROL, "ue7")
    except NotFound:
        answered = None
    change.join()

    assert answered in ([1, 0], None), f"tenant A was answered {answered}: tenant B's counters are [2, 2]"
    assert packets(atsss, DAVE, "ue8") == [2, 2]


def test_a_poll_labels_no_session_with_the_counters_of_slots_another_tenant_took(node, atsss, monkeypatch,
                                                                                 slots_given_again):
    """The telemetry's poll (Atsss.readings) takes the served sessions, then reads their slots
    outside the lock. Tenant A's session is deleted and tenant B's created in its slots between the
    two, and B's UE sends 4 packets: the poll must not answer B's counters labelled with A's session
    (its points would carry tenant A's tag). It drops A's readings, whose session is no longer
    served as it was read; B's are the next poll's."""
    change = slots_another_tenant_takes(node, atsss)
    monkeypatch.setattr(atsss, "_served_sessions", calling_back(atsss._served_sessions, change.at_read))

    polled = atsss.readings()
    change.join()

    tenant_a = [reading.counts.packets for reading in polled if reading.session.tenant == "tenant-a"]
    assert tenant_a in ([1, 0], []), f"tenant A's session was polled with {tenant_a}: tenant B's counters are [2, 2]"
    monkeypatch.undo()
    again = {(reading.session.tenant, reading.index): reading.counts.packets for reading in atsss.readings()}
    assert again == {("tenant-b", 0): 2, ("tenant-b", 1): 2}, "the next poll reads B's session as B's"


def test_a_put_that_puts_a_metered_path_first_under_a_low_cost_mts_session_is_refused(atsss):
    """Low cost runs active-standby over the session's paths in their order, checked to put the
    unmetered first when the MTS session was written; a PUT reordering them afterwards is refused
    naming paths (it went through: the UE then ran low cost over the metered path first)."""
    atsss.create_session(CAROL, "ue7", unmetered_first())
    mts_id = post(atsss, mts_body(mts.LOW_COST))
    reordered = session()  # CELL, the metered path, first

    with pytest.raises(InvalidInput) as refused:
        atsss.put_session(CAROL, "ue7", reordered)

    assert refused.value.field == "paths"
    assert mts_id in str(refused.value) and "non-3GPP" in str(refused.value)
    kept = atsss.get_session(CAROL, "ue7")
    assert [path.access.value for path in kept.paths] == ["non-3GPP", "3GPP"]
    assert kept.mts_session == mts_id


def test_a_put_that_puts_a_metered_path_first_under_low_cost_flows_is_refused(atsss):
    """The same for an MTS session in low cost over flows of the UE (its filters' rules)."""
    atsss.create_session(CAROL, "ue7", unmetered_first())
    steer_flows(atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY, tenant="tenant-a")

    with pytest.raises(InvalidInput) as refused:
        atsss.put_session(CAROL, "ue7", session())

    assert refused.value.field == "paths" and "'video'" in str(refused.value)


def test_a_put_keeping_the_unmetered_path_first_under_a_low_cost_mts_session_goes_through(atsss):
    """What the refusal allows: a change that keeps the non-3GPP path first (here its weight)."""
    atsss.create_session(CAROL, "ue7", unmetered_first())
    post(atsss, mts_body(mts.LOW_COST))
    changed = unmetered_first().model_copy(deep=True)
    changed.paths[1].weight = 3

    session_, created = atsss.put_session(CAROL, "ue7", changed)

    assert (created, session_.paths[1].weight) == (False, 3)


def test_a_reordering_put_under_another_mts_mode_goes_through(atsss):
    """Only low cost depends on the paths' order."""
    atsss.create_session(CAROL, "ue7", unmetered_first())
    post(atsss, mts_body(mts.HIGH_THROUGHPUT))

    reordered, _ = atsss.put_session(CAROL, "ue7", session())

    assert [path.access.value for path in reordered.paths] == ["3GPP", "non-3GPP"]


def test_a_qos_status_checked_once_an_mts_put_has_written_is_kept(atsss, monkeypatch):
    """A poll checks the QoS session as soon as the PUT's write lets the lock go (Atsss.steer
    returned): the status it sets is the new qosD's first, over the session as written. When the
    PUT forgot the session's statuses after letting the lock go, it dropped the poll's: the next
    check was a first check again, and a change of qosStatus then was told to no one."""
    atsss.create_session(CAROL, "ue7", unmetered_first())
    mts_id = post(atsss, mts_body(mts.QOS, {"minTpt": 1000}))
    watch = QosWatch(atsss, loss_weight=1.0)
    steer = atsss.steer

    def a_poll_once_written(*args, **kwargs):
        written = steer(*args, **kwargs)
        steered = atsss.get_session(CAROL, "ue7")
        watch({path_key(steered, index): 0.5 for index in range(len(steered.slots))})
        return written

    monkeypatch.setattr(atsss, "steer", a_poll_once_written)
    mts.mts_session_put(atsss, CAROL, mts_id, mts_body(mts.QOS, {"minTpt": 2000}))

    assert atsss.qos_held.get(("tenant-a", mts_id)) == {"minTpt": "UNVERIFIED"}
