"""A session PUT with a path replaced by another subflow (its first, its second, both) keeps its
pair of path slots (2s - 1, 2s) and its session slot s (netapp.atsss.admission.replaced_slots,
netapp.atsss.reclaim): the new path is written into the slot of the path it replaces once no packet
can still send on that one. Where a changed session's words are stored in place (the writer
program) and where it is written whole (the fake), in the store and in the maps; in the kernel,
frames through xdp_atsss go on the session's paths before, during the wait and after, each
path's DCCP numbers never given twice, the MP_SEQ numbers rising; the same subflow on another
access keeps its slot and its DCCP numbers."""

from __future__ import annotations

import ipaddress
import struct
from ctypes import c_uint32
from typing import Any, Iterator, Optional

import pytest

from netapp.atsss.abi import Path, PathFlags, paired_path_slots, paired_session_slot
from netapp.atsss.index import SessionIndex
from netapp.atsss.models import AtsssSession, AtsssSessionSpec
from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps, uplink_key
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.service.store import Store
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.atsss.atsss import (XDP_TX, AtsssProgram, Decoded, decode, delete_every_session, ethernet, session_key,
                               ue_packet)
from tests.atsss.test_changes_in_flight import ADMIN, CAROL, UE, path
from tests.utils.object_tables import ObjectTables

# The session's paths at each PUT, by path(n): its first replaced, then its second, then both.
PUTS = ((1, 2), (3, 2), (3, 4), (5, 6))


def spec(numbers: tuple[int, ...], ue: str = UE, name: str = "ue5", **first: Any) -> AtsssSessionSpec:
    """The UE's round-robin session over path(n) for each of `numbers`; `first`: its first path's changes."""
    paths = [path(n, **(first if i == 0 else {})) for i, n in enumerate(numbers)]
    return AtsssSessionSpec.model_validate({"name": name, "ue": ue, "mode": "round_robin", "paths": paths})


def peer(n: int) -> str:
    """path(n)'s peer: the UE's address on its access."""
    return f"198.51.100.{n}"


def peer_in(table_of: Any, slot: int) -> str:
    """The peer of the path written in `slot` of dpp_atsss_paths."""
    written = table_of("dpp_atsss_paths").get(c_uint32(slot))
    assert written is not None
    return str(ipaddress.ip_address(struct.pack("=I", written.peer[0])))


def paired(session: AtsssSession, slot: int) -> bool:
    """Whether the session in `slot` of dpp_atsss_slots has its paths in the slot's pair."""
    return slot == paired_session_slot(session.slots[0]) and set(session.slots) == set(paired_path_slots(slot))


def test_a_path_replaced_takes_the_slot_of_the_one_it_replaces_where_sessions_are_written_whole(store):
    """The fake (no writer program): the session written whole, out of its slot and back; each PUT's
    new path in the slot its old one left, the session back in the slot of that pair, its MP_SEQ
    counter rising, the new path's DCCP numbers from 0; one wait a round, two when both are new."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    atsss.create_session(ADMIN, "other", spec((7, 8), ue="10.60.0.9", name="other"))  # slots 1 and 2
    key = session_key(UE)
    made, counters, waits = [], [], []
    for numbers in PUTS:
        waited = dpp.reader_waits
        session, _ = atsss.put_session(ADMIN, "ue5", spec(numbers))
        waits.append(dpp.reader_waits - waited)
        index = SessionIndex(fake.table)
        held = index.get(key)
        assert held is not None and paired(session, index.slot(key) or 0), (session.slots, index.slot(key))
        assert list(held.path[:2]) == session.slots
        counters.append(held.mp_seq)
        made.append(session.slots)
        assert [peer_in(fake.table, slot) for slot in session.slots] == [peer(n) for n in numbers]
    assert made == [[3, 4]] * 4, "the session's pair kept through every replacement"
    assert waits[2] == waits[1] < waits[3], f"the replacement's rounds: one, then two for both paths ({waits})"
    assert counters == sorted(set(counters)), f"MP_SEQ counted on: {counters}"


@pytest.fixture
def kernel_service(atsss: AtsssProgram, tmp_path, node_ns) -> Iterator[tuple[Atsss, ObjectTables]]:
    """The service over xdp_atsss's maps, with its session writer; the tables' adapter, whose wait
    for the programs' runs a test may watch."""
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    TenantService(lambda: store).put_tenant(ADMIN, "carol",
                                            TenantSpec.model_validate({"traffic": [{"dst": "10.60.0.0/24"}]}))
    tables = ObjectTables(atsss.obj)
    service = Atsss(store, AtsssMaps(tables.table), netns=node_ns)
    try:
        yield service, tables
    finally:
        delete_every_session(service, ADMIN)
        store.close()


def frames(atsss: AtsssProgram, count: int) -> list[Decoded]:
    sent = []
    for _ in range(count):
        verdict, frame = atsss.run(ethernet(ue_packet(UE)))
        assert verdict == XDP_TX
        sent.append(decode(frame))
    return sent




def numbered_once(sent: list[Decoded]) -> None:
    """Each subflow's DCCP numbers rising (none given twice on it), the MP_SEQ numbers too."""
    by_subflow: dict[tuple[str, int], list[int]] = {}
    for frame in sent:
        by_subflow.setdefault((frame.dst, frame.dport), []).append(frame.seq)
    for subflow, numbers in by_subflow.items():
        assert numbers == sorted(set(numbers)), f"DCCP numbers of {subflow}: {numbers}"
    numbers = [frame.mp_seq for frame in sent]
    assert numbers == sorted(set(numbers)), f"MP_SEQ: {numbers}"


def test_a_path_replaced_through_the_writer_keeps_the_pair_and_frames_flow_on_the_session_s_paths(atsss,
                                                                                                  kernel_service):
    service, tables = kernel_service
    sent, slots, waits = [], [], []
    tables.table_wait_readers = lambda: waits.append(len(slots))  # type: ignore[method-assign]
    for numbers in PUTS:
        session, _ = service.put_session(CAROL, "ue5", spec(numbers))
        slot = SessionIndex(ObjectTables(atsss.obj).table).slot(session_key(UE))
        assert slot is not None and paired(session, slot), (session.slots, slot)
        slots.append((slot, session.slots))
        now = frames(atsss, 4)
        assert [frame.dst for frame in now] == [peer(numbers[n % 2]) for n in range(4)], "round-robin on its paths"
        sent += now
    assert slots == [(1, [1, 2])] * 4, "the session in slot 1 throughout, its paths in slots 1 and 2"
    assert waits == [0, 1, 2, 3, 3], \
        "the first write's (the index's shadow), then one for each replacement, two for both (a path up through each)"
    numbered_once(sent)
    assert [frame.seq for frame in sent if frame.dst == peer(2)] == [0, 1, 2, 3], "path(2) kept: its numbers go on"
    assert [frame.seq for frame in sent if frame.dst == peer(3)] == [0, 1, 2, 3], "path(3) new: from 0, then on"


def test_frames_sent_while_the_change_waits_go_on_the_kept_path_and_the_old_one_is_left_whole(atsss,
                                                                                             kernel_service):
    """The moment the sync waits for the programs' runs (the replaced path marked down, no packet can
    pick it): frames go on the kept path only; the slot still holds the old path, down, its uplink
    entry gone; after the wait the new path is there, up."""
    service, tables = kernel_service
    service.put_session(CAROL, "ue5", spec((1, 2)))
    frames(atsss, 2)
    old = ObjectTables(atsss.obj).table("dpp_atsss_paths").get(c_uint32(1))
    assert old is not None
    seen: list[tuple[list[str], Path, list[bytes]]] = []

    def during_the_wait() -> None:
        held = Path.from_buffer_copy(ObjectTables(atsss.obj).table("dpp_atsss_paths").get(c_uint32(1)))
        seen.append(([frame.dst for frame in frames(atsss, 4)], held, uplink_keys(atsss)))

    tables.table_wait_readers = during_the_wait  # type: ignore[method-assign]
    session, _ = service.put_session(CAROL, "ue5", spec((3, 2)))
    assert session.slots == [1, 2]
    assert len(seen) == 1, "one wait"
    dsts, held, keys_then = seen[0]
    assert dsts == [peer(2)] * 4, "the replaced path not picked while the change waits"
    assert held.peer[0] == Path.from_buffer_copy(old).peer[0] and not held.flags & PathFlags.UP, \
        "the old path whole in its slot, marked down"
    assert held.dccp_seq == 1, "it sent one frame, before the change"
    assert bytes(uplink_key(held)) not in keys_then and len(keys_then) == 1, "path(2)'s uplink entry alone meanwhile"
    assert len(uplink_keys(atsss)) == 2, "the uplink entries of path(2) and path(3), the old one's gone"
    after = frames(atsss, 2)
    assert [frame.dst for frame in after] == [peer(3), peer(2)] and after[0].seq == 0


def uplink_keys(atsss: AtsssProgram) -> list[bytes]:
    return [bytes(key) for key, _ in ObjectTables(atsss.obj).table("dpp_atsss_uplink").items()]


def test_the_same_subflow_on_another_access_keeps_its_slot_and_its_dccp_numbers(atsss, kernel_service):
    service, tables = kernel_service
    service.put_session(CAROL, "ue5", spec((1, 2)))
    before = frames(atsss, 4)
    waits = []
    tables.table_wait_readers = lambda: waits.append(1)  # type: ignore[method-assign]
    session, _ = service.put_session(CAROL, "ue5", spec((1, 2), access="non-3GPP"))
    assert session.slots == [1, 2] and not waits, "stored in place: no wait"
    numbered_once(before + frames(atsss, 4))


def masks_at_waits(dpp: FakeDpp, fake: Dataplane) -> list[Optional[int]]:
    """The session's mask of the paths up at each wait for the programs' runs, from now on."""
    masks: list[Optional[int]] = []
    wait = dpp.table_wait_readers

    def watched() -> None:
        held = SessionIndex(fake.table).get(session_key(UE))
        masks.append(held.up if held is not None else None)
        wait()

    dpp.table_wait_readers = watched  # type: ignore[method-assign]
    return masks


def test_while_the_change_waits_the_session_s_mask_of_paths_up_leaves_the_replaced_one_out(store):
    """REDUNDANT's copies take their paths' slots from the session's mask of the paths up, not from
    the paths' flags: at the first wait of the PUT the replaced path's position is out of it (the
    kept one in), and both are in once the new path is written."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    atsss.put_session(ADMIN, "ue5", spec((1, 2)))
    masks = masks_at_waits(dpp, fake)
    atsss.put_session(ADMIN, "ue5", spec((3, 2)))
    held = SessionIndex(fake.table).get(session_key(UE))
    assert masks and masks[0] == 0b10, f"position 0 out of the mask while the change waits: {masks}"
    assert held is not None and held.up == 0b11


@pytest.mark.parametrize("numbers, after, other_up", [((1,), (3,), None), ((1, 2), (3, 2), False)])
def test_a_session_with_no_other_path_up_gives_its_new_path_a_free_slot_with_no_wait(store, numbers, after,
                                                                                       other_up):
    """One path, or its other down: the slot of the path replaced would leave the session no path up
    through the reclaim's wait; its new path takes a free slot, up at once, the session with a path
    up at every wait of the change (the fake's are the index's, for the session written whole)."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    down = {"up": other_up} if other_up is not None else {}
    body = spec(numbers).model_dump(mode="json")
    body["paths"][1:] = [{**other, **down} for other in body["paths"][1:]]
    made, _ = atsss.put_session(ADMIN, "ue5", AtsssSessionSpec.model_validate(body))
    body["paths"][0] = spec(after).model_dump(mode="json")["paths"][0]
    masks = masks_at_waits(dpp, fake)
    session, _ = atsss.put_session(ADMIN, "ue5", AtsssSessionSpec.model_validate(body))
    assert all(masks), f"a path of the session up at each wait: {masks}"
    assert session.slots[0] not in made.slots and session.slots[1:] == made.slots[1:], (made.slots, session.slots)
    written = fake.table("dpp_atsss_paths").get(c_uint32(session.slots[0]))
    assert peer_in(fake.table, session.slots[0]) == peer(after[0]) and written.flags & PathFlags.UP
    held = SessionIndex(fake.table).get(session_key(UE))
    assert held is not None and held.path[0] == session.slots[0] and held.up & 1


def test_a_one_path_session_replaced_sends_on_its_new_path_at_once(atsss, kernel_service):
    service, tables = kernel_service
    made, _ = service.put_session(CAROL, "ue5", spec((1,)))
    before = frames(atsss, 2)
    waits = []
    tables.table_wait_readers = lambda: waits.append(1)  # type: ignore[method-assign]
    session, _ = service.put_session(CAROL, "ue5", spec((3,)))
    assert session.slots != made.slots and not waits, "a free slot, no wait"
    after = frames(atsss, 2)
    assert [frame.dst for frame in before + after] == [peer(1)] * 2 + [peer(3)] * 2
    assert [frame.seq for frame in after] == [0, 1], "the new subflow's numbers from 0"


def test_both_paths_up_replaced_beside_one_down_keep_one_up_through_each_wait(store):
    """Three paths, the third down, the two up replaced: each new path takes its old one's slot, in
    two rounds (the second keeping the last path up), not one that would leave none up."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    body = spec((1, 2, 4)).model_dump(mode="json")
    body["paths"][2]["up"] = False
    made, _ = atsss.put_session(ADMIN, "ue5", AtsssSessionSpec.model_validate(body))
    body["paths"][:2] = spec((3, 5)).model_dump(mode="json")["paths"]
    masks = masks_at_waits(dpp, fake)
    session, _ = atsss.put_session(ADMIN, "ue5", AtsssSessionSpec.model_validate(body))
    assert session.slots == made.slots
    assert all(masks), f"a path of the session up at each wait: {masks}"


@pytest.mark.parametrize("down", [0, 1])
def test_both_paths_replaced_one_new_path_down_keep_a_path_up_through_each_wait(store, down):
    """Both paths up replaced, one of the new ones written down: the round kept back is the one whose
    new path is down, so the first round's new path, up, carries the session through the second's
    wait (holding back the last position whatever its new path left the mask empty there)."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    made, _ = atsss.put_session(ADMIN, "ue5", spec((1, 2)))
    body = spec((3, 5)).model_dump(mode="json")
    body["paths"][down]["up"] = False
    masks = masks_at_waits(dpp, fake)
    session, _ = atsss.put_session(ADMIN, "ue5", AtsssSessionSpec.model_validate(body))
    assert session.slots == made.slots
    assert len(masks) >= 2 and all(masks), f"a path of the session up at each wait: {masks}"


def test_a_path_slot_a_delete_emptied_is_written_for_another_session_only_after_a_wait(store, slots_given_again):
    """A run that read the deleted session's path slots before its delete may read a slot after it:
    the next session given the slots (the store's lowest free) has its paths written whole only once
    the programs' runs have been waited for, not into a slot such a run may still be reading (and
    sending another UE's packet on: the new session may be another tenant's)."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    first, _ = atsss.put_session(ADMIN, "ue5", spec((1, 2)))
    atsss.delete_session(ADMIN, "ue5")
    events: list[str] = []
    wait, update = dpp.table_wait_readers, dpp.table_update

    def watched_wait() -> None:
        events.append("wait")
        wait()

    def watched_update(name: str, keys: Any, values: Any, flags: int = 0) -> None:
        if name == "dpp_atsss_paths" and any(getattr(key, "value", key) in first.slots for key in keys):
            events.append("paths")
        update(name, keys, values, flags)

    dpp.table_wait_readers = watched_wait  # type: ignore[method-assign]
    dpp.table_update = watched_update  # type: ignore[method-assign]
    second, _ = atsss.put_session(ADMIN, "ue6", spec((3, 4), ue="10.45.0.9", name="ue6"))
    assert set(second.slots) == set(first.slots), "the store gives the freed slots again"
    assert "paths" in events and "wait" in events[: events.index("paths")], events


def test_a_session_moved_to_another_ue_as_its_path_is_replaced_sends_none_of_the_old_ue_s_on_the_new_path(
        atsss, kernel_service, monkeypatch):
    """A PUT that moves ue5 to another UE address and replaces its first path: the old UE's session,
    which the change deletes, is deleted before the wait, not after the slot is written for the new
    path: a packet to the old UE once the new path is up in the slot the old session still led to
    went out on it (the old UE's packet sent to the subflow of another device). Through xdp_atsss."""
    service, _ = kernel_service
    service.put_session(CAROL, "ue5", spec((1, 2)))
    reclaim = service._maps._reclaim  # type: ignore[union-attr]
    write_anew, seen = reclaim._write_anew, []

    def then_a_packet_to_the_old_ue(*args: Any) -> Any:
        written = write_anew(*args)
        verdict, frame = atsss.run(ethernet(ue_packet(UE)))
        seen.append(decode(frame).dst if verdict == XDP_TX else verdict)
        return written

    monkeypatch.setattr(reclaim, "_write_anew", then_a_packet_to_the_old_ue)
    moved, _ = service.put_session(CAROL, "ue5", spec((3, 2), ue="10.60.0.77"))
    assert moved.slots == [1, 2] and len(seen) == 1, "the case this test is about: the old path's slot written anew"
    assert isinstance(seen[0], int), f"the old UE's packet went out to {seen[0]}"
    verdict, frame = atsss.run(ethernet(ue_packet("10.60.0.77")))
    assert verdict == XDP_TX and decode(frame).dst in (peer(2), peer(3)), "the new UE's on the session's paths"
