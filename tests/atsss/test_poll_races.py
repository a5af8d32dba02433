"""What the telemetry's poll reads outside ATSSS's service lock, with a change made while it reads,
interleaved at a chosen read with no sleep (tests/utils/interleave.py).

The poll (Atsss.readings) reads the served sessions' slots: a reconcile, or another session's
change whose maps refused it, drops none of the readings of the sessions it left as they were
(the served list loaded again made every reading of the poll go), and a path whose reading was
dropped because its session changed keeps its measured loss; one of a session deleted forgets it.
Over a pinned pipeline's maps (root)."""

from __future__ import annotations

from typing import Any, Callable, Optional

import pytest

from netapp.atsss.models import AtsssSessionPatch
from netapp.atsss.service import Atsss, PathReading, path_key
from netapp.dataplane.errors import DataplaneError
from netapp.service.contract import DataplaneUnavailable, Principal, Scope
from tests.atsss.test_flows import OTHER_UE, atsss, flow_packet, node, send, session  # noqa: F401 - fixtures
from tests.utils.interleave import SecondChange, calling_back

CAROL = Principal("tenant-a", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
DAVE = Principal("tenant-b", frozenset({Scope.READ, Scope.INTENTS_WRITE}))


def both_tenants_sending(node, atsss: Atsss) -> None:
    """Tenant A's session and tenant B's, A's UE sending 1 packet (on its first path), B's 2 (one on
    each path)."""
    atsss.create_session(CAROL, "ue7", session())
    atsss.create_session(DAVE, "ue8", session("ue8", OTHER_UE, step=1))
    send(node, flow_packet())
    for _ in range(2):
        send(node, flow_packet(ue=OTHER_UE))


def at_the_polls_read(atsss: Atsss, monkeypatch, second: Callable[[], Any]) -> SecondChange:
    """`second` made once the poll has taken the served sessions, before it reads their slots."""
    change = SecondChange(atsss._lock, second, ends_first=True)
    atsss._lock = change
    monkeypatch.setattr(atsss, "_served_sessions", calling_back(atsss._served_sessions, change.at_read))
    return change


def polled(readings: list[PathReading]) -> dict[tuple[str, int], int]:
    return {(reading.session.tenant, reading.index): reading.counts.packets for reading in readings}


def test_a_reconcile_while_the_poll_reads_drops_none_of_its_readings(node, atsss, monkeypatch):
    """A reconcile changes no stored session: every reading stands (the served list it reloaded
    dropped them all)."""
    both_tenants_sending(node, atsss)
    reconcile = at_the_polls_read(atsss, monkeypatch, atsss.reconcile)

    readings = atsss.readings()
    reconcile.join()

    assert polled(readings) == {("tenant-a", 0): 1, ("tenant-a", 1): 0, ("tenant-b", 0): 1, ("tenant-b", 1): 1}


def refused_once(atsss: Atsss, monkeypatch) -> None:
    """The maps refuse the next sync (a change's), and take the one after (its put-back)."""
    sync = atsss._maps.sync
    calls = []

    def refusing(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise DataplaneError(5, "atsss_sync")
        return sync(*args, **kwargs)

    monkeypatch.setattr(atsss._maps, "sync", refusing)


def patch_refused(atsss: Atsss, monkeypatch) -> None:
    """Tenant B's PATCH, which the maps refuse."""
    refused_once(atsss, monkeypatch)
    with pytest.raises(DataplaneUnavailable):
        atsss.patch_session(DAVE, "ue8", AtsssSessionPatch.model_validate({"paths": [{"index": 0, "rtt_us": 500}]}))


def test_a_change_the_maps_refused_while_the_poll_reads_drops_only_its_own_sessions_readings(node, atsss,
                                                                                                monkeypatch):
    """Tenant B's session was changed (and put back) while its slots were read: its readings are
    dropped; tenant A's session was not touched, and its readings stand (the put-back reloaded the
    served list, which dropped A's too)."""
    both_tenants_sending(node, atsss)
    change = at_the_polls_read(atsss, monkeypatch, lambda: patch_refused(atsss, monkeypatch))

    readings = atsss.readings()
    change.join()

    assert polled(readings) == {("tenant-a", 0): 1, ("tenant-a", 1): 0}
    monkeypatch.undo()
    assert polled(atsss.readings()) == {("tenant-a", 0): 1, ("tenant-a", 1): 0, ("tenant-b", 0): 1,
                                        ("tenant-b", 1): 1}, "the next poll reads B's session again"


def windows_of(readings: list[PathReading]) -> dict[tuple[str, str, int], Optional[float]]:
    """The poll's windows of its readings, none judging a number (each path's average kept)."""
    return {path_key(reading.session, reading.index): None for reading in readings}


def measured_ue8(atsss: Atsss, monkeypatch, second: Callable[[], Any]) -> list[Optional[float]]:
    """Both sessions' paths measured (A's 10%, B's 20%), then a poll during which `second` runs, its
    windows noted: B's paths' measured loss after it, by position, as its session was."""
    ue8 = atsss.get_session(DAVE, "ue8")
    ue7 = atsss.get_session(CAROL, "ue7")
    atsss.note_losses({**{path_key(ue7, index): 0.1 for index in range(2)},
                       **{path_key(ue8, index): 0.2 for index in range(2)}})
    change = at_the_polls_read(atsss, monkeypatch, second)
    readings = atsss.readings()
    change.join()
    assert ("tenant-b", 0) not in polled(readings), "B's readings dropped: the case this test is about"
    atsss.note_losses(windows_of(readings))
    assert atsss.measured_losses(ue7) == [0.1, 0.1]
    return atsss.measured_losses(ue8)


def test_a_path_whose_reading_was_dropped_as_its_session_changed_keeps_its_measured_loss(node, atsss, monkeypatch):
    """B's session PATCHed while the poll read it: its readings dropped, its paths still served in
    the same slots, their averages kept (forgotten, they started over from the next window)."""
    both_tenants_sending(node, atsss)
    rtt = AtsssSessionPatch.model_validate({"paths": [{"index": 0, "rtt_us": 500}]})

    assert measured_ue8(atsss, monkeypatch, lambda: atsss.patch_session(DAVE, "ue8", rtt)) == [0.2, 0.2]


def test_a_path_whose_session_was_deleted_while_the_poll_read_it_forgets_its_measured_loss(node, atsss,
                                                                                             monkeypatch):
    both_tenants_sending(node, atsss)

    assert measured_ue8(atsss, monkeypatch, lambda: atsss.delete_session(DAVE, "ue8")) == [None, None]
