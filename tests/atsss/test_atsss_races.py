"""ATSSS sessions read or changed while another change is under way, interleaved at a chosen point
with no sleep (tests/utils/interleave.py), over ATSSS's service on a pinned pipeline's maps: a
session's counters read as another tenant's session takes its slots answer its own counters or 404,
never the other's."""

from __future__ import annotations

from netapp.atsss import store as stored
from netapp.atsss.service import Atsss
from netapp.service.contract import NotFound, Principal, Scope
from tests.atsss.test_flows import OTHER_UE, atsss, flow_packet, node, send, session  # noqa: F401
from tests.utils.interleave import SecondChange, calling_back

CAROL = Principal("tenant-a", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
DAVE = Principal("tenant-b", frozenset({Scope.READ, Scope.INTENTS_WRITE}))


def packets(atsss: Atsss, who: Principal, name: str) -> list[int]:
    return [path.packets for path in atsss.session_counters(who, name).paths]


def test_counters_read_as_another_tenants_session_takes_the_slots_are_the_sessions_own(node, atsss, monkeypatch):
    """Tenant A's session is deleted and tenant B's created in its slots (the lowest free pair)
    once A's counters request has read A's session; B's UE then sends 4 packets. Read under the
    lock, A's request answers A's own counters (1 packet), as they were before the delete. Read
    outside it, A's request read B's slots after that: B's 4 packets answered as A's."""
    atsss.create_session(CAROL, "ue7", session())
    send(node, flow_packet())
    slots = atsss.get_session(CAROL, "ue7").slots

    def others_take_the_slots() -> None:
        atsss.delete_session(CAROL, "ue7")
        taken = atsss.create_session(DAVE, "ue8", session("ue8", OTHER_UE))
        assert taken.slots == slots, "B's session is given A's slots: the case this test is about"
        for _ in range(4):
            send(node, flow_packet(ue=OTHER_UE))

    change = SecondChange(atsss._lock, others_take_the_slots, ends_first=True)
    atsss._lock = change
    monkeypatch.setattr(stored, "stored_session", calling_back(stored.stored_session, change.at_read))

    try:
        answered = packets(atsss, CAROL, "ue7")
    except NotFound:
        answered = None
    change.join()

    assert answered in ([1, 0], None), f"tenant A was answered {answered}: tenant B's counters are [2, 2]"
    assert packets(atsss, DAVE, "ue8") == [2, 2]
