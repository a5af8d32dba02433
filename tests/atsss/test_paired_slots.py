"""The session slot paired with a session's paths (netapp.atsss.index, 6.; nf/atsss/index.h,
atsss_touch_paths): the index gives a new session the slot of dpp_atsss_slots whose pair of path
slots (2s - 1, 2s) holds its first path when that slot is free, whatever order the sessions come
in, so that the downlink requests its paths' lines with the session's; a session whose paired slot
is held takes the lowest free one and is served on its own paths all the same (the paths the
downlink touches are a hint, path[] decides), as is a session whose pair is another's paths; one
given the pair a delete freed, its paired slot retired, moves into it at the end of the next write
that waits for the programs' runs, and is served on its paths before and after; a session written
again (where a changed session is written whole) leaves its slot, and its write waits and moves
it back, its frames on its paths and its MP_SEQ numbers rising throughout, in a full bucket too
(through the hash and back into a way in the same write); through
the service (the pinned pipeline), a new session's paths take a free pair of path slots and its
session the slot paired with them."""

from __future__ import annotations

from ctypes import c_uint32
from typing import Callable, Optional

from fastapi import Response
from starlette.requests import Request

from netapp.atsss import mts
from netapp.atsss import store as stored
from netapp.atsss.abi import INDEX4_WAYS, Mode, Session, paired_path_slots, paired_session_slot
from netapp.atsss.index import MP_SEQ_SKIP, SessionIndex
from netapp.atsss.models import AtsssSessionPatch, SteeringMode
from netapp.atsss.service import Atsss
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.dataplane.tables import Table
from tests.atsss.atsss import XDP_TX, AtsssProgram, PathSpec, decode, ethernet, session_key, ue_packet
from tests.atsss.test_index import index  # noqa: F401 (the fixture: a SessionIndex over the program's maps)
from tests.atsss.test_service_pipeline import (ADMIN, held_slot, instance, kernel, same_bucket,  # noqa: F401
                                               session, start)
from tests.utils.interleave import calling_back


def path_in(slot: int) -> PathSpec:
    """The path written in `slot`: its peer says which slot it is."""
    return PathSpec("192.0.2.1", f"198.51.100.{slot}", 5001, 5002 + slot)


def put(atsss: AtsssProgram, index: SessionIndex, ue: str, slots: list[int]) -> None:
    """The UE's round-robin session over the paths in `slots`, each written there first."""
    for slot in slots:
        atsss.add_path(slot, path_in(slot))
    value = Session(mode=Mode.ROUND_ROBIN, n_paths=len(slots))
    value.path[: len(slots)] = slots
    index.write([(session_key(ue), value)])


def peers_of(atsss: AtsssProgram, ue: str, packets: int) -> list[str]:
    """The outer destinations of `packets` packets to `ue`, in order."""
    peers = []
    for _ in range(packets):
        verdict, frame = atsss.run(ethernet(ue_packet(ue)))
        assert verdict == XDP_TX
        peers.append(decode(frame).dst)
    return peers


def test_the_pairing_of_session_and_path_slots():
    assert [paired_path_slots(slot) for slot in (1, 2, 3)] == [(1, 2), (3, 4), (5, 6)]
    assert [paired_session_slot(path) for path in (0, 1, 2, 3, 4, 5)] == [0, 1, 1, 2, 2, 3]


def test_a_new_session_takes_the_slot_paired_with_its_paths_in_whatever_order_sessions_come(atsss, index):
    put(atsss, index, "10.91.0.3", [5, 6])
    put(atsss, index, "10.91.0.1", [1, 2])
    put(atsss, index, "10.91.0.2", [3])
    assert [index.slot(session_key(ue)) for ue in ("10.91.0.1", "10.91.0.2", "10.91.0.3")] == [1, 2, 3], \
        "each in the slot paired with its first path, not the lowest free one at its write"
    assert peers_of(atsss, "10.91.0.3", 4) == [path_in(slot).peer for slot in (5, 6, 5, 6)]
    assert peers_of(atsss, "10.91.0.2", 2) == [path_in(3).peer] * 2


def test_a_session_whose_paired_slot_is_held_takes_the_lowest_free_one_and_is_served_on_its_own_paths(atsss, index):
    put(atsss, index, "10.91.0.6", [11])
    put(atsss, index, "10.91.0.7", [12, 40])  # paired with slot 6 too: held
    assert [index.slot(session_key(ue)) for ue in ("10.91.0.6", "10.91.0.7")] == [6, 1]
    assert peers_of(atsss, "10.91.0.7", 4) == [path_in(slot).peer for slot in (12, 40, 12, 40)], \
        "the paths its slot's pair would touch are not its own: path[] says which it takes"
    assert peers_of(atsss, "10.91.0.6", 2) == [path_in(11).peer] * 2


def two_paths(first: int) -> Session:
    """A round-robin session over path slots `first` and first + 1."""
    value = Session(mode=Mode.ROUND_ROBIN, n_paths=2)
    value.path[:2] = [first, first + 1]
    return value


def test_a_create_given_the_pair_a_delete_freed_waits_for_no_program_run():
    """The store may give a new session the pair a delete just freed (past admission.PASSED_OVER
    retired path slots); its paired slot is retired, and waiting for it would be a grace period
    under the service's lock for each such create."""
    fake = FakeDpp()
    index = SessionIndex(lambda name: Table(fake, name))
    index.write([(session_key(f"10.91.0.{n}"), two_paths(2 * n - 1)) for n in range(1, 6)])
    waits = fake.reader_waits  # the first write's (a fresh shadow takes every slot as retired)
    index.delete([session_key("10.91.0.3")])
    index.write([(session_key("10.91.0.99"), two_paths(5))])
    assert fake.reader_waits == waits, "free slots to spare: no wait for the retired paired slot 3"
    assert index.slot(session_key("10.91.0.99")) == 6, "the lowest free slot, served unpaired"


def test_a_deleted_session_s_slot_is_taken_again_by_the_session_paired_with_it_once_a_wait_freed_it(atsss, index):
    put(atsss, index, "10.91.0.8", [1, 2])
    index.delete([session_key("10.91.0.8")])
    put(atsss, index, "10.91.0.9", [1, 2])  # slot 1 retired: not waited for
    assert index.slot(session_key("10.91.0.9")) == 2, "the lowest free slot, the paired one still retired"
    assert peers_of(atsss, "10.91.0.9", 2) == [path_in(1).peer, path_in(2).peer], "served unpaired, by path[]"
    index.write([(session_key("10.91.0.9"), index.get(session_key("10.91.0.9")))])  # type: ignore[list-item]
    assert index.slot(session_key("10.91.0.9")) == 1, "written again, it waited: slot 1 freed, taken by its session"
    assert peers_of(atsss, "10.91.0.9", 2) == [path_in(1).peer, path_in(2).peer]


def rewritten_until_a_wait(index: SessionIndex, ue: str, waited: Callable[[], bool]) -> None:
    """The UE's session written again as it is (a way of its bucket retired each time) until the
    index has waited for the programs' runs: a write needing a clean way waits once every way of
    the bucket is retired, at the latest."""
    for _ in range(INDEX4_WAYS):
        index.write([(session_key(ue), index.get(session_key(ue)))])  # type: ignore[list-item]
        if waited():
            return
    raise AssertionError("no write waited")


def test_a_session_served_unpaired_moves_into_its_paired_slot_at_the_next_write_that_waits():
    """The pair a delete freed is given to a new session, served from the lowest free slot (6) while
    its paired one (3) is retired; a later write (another session's) waits, which frees slot 3: the
    session is moved into it at the end of that write, whole, its MP_SEQ counter MP_SEQ_SKIP on. It
    stayed in slot 6 until written again."""
    fake = FakeDpp()
    index = SessionIndex(lambda name: Table(fake, name))
    index.write([(session_key(f"10.91.0.{n}"), two_paths(2 * n - 1)) for n in range(1, 6)])
    index.delete([session_key("10.91.0.3")])
    unpaired = two_paths(5)
    unpaired.mp_seq = 41
    index.write([(session_key("10.91.0.99"), unpaired)])
    assert index.slot(session_key("10.91.0.99")) == 6
    waits = fake.reader_waits

    rewritten_until_a_wait(index, "10.91.0.1", lambda: fake.reader_waits > waits)

    assert index.slot(session_key("10.91.0.99")) == 3, "in the slot paired with its paths"
    moved = index.get(session_key("10.91.0.99"))
    assert moved is not None and list(moved.path[:2]) == [5, 6] and moved.mp_seq == 41 + MP_SEQ_SKIP
    assert SessionIndex(lambda name: Table(fake, name)).slot(session_key("10.91.0.99")) == 3, "the maps say so too"


def test_a_session_moved_into_its_paired_slot_is_served_on_its_paths_before_and_after(atsss, index, monkeypatch):
    put(atsss, index, "10.91.0.8", [1, 2])
    index.delete([session_key("10.91.0.8")])
    put(atsss, index, "10.91.0.9", [1, 2])  # slot 1 retired: served from slot 2
    put(atsss, index, "10.91.0.10", [5, 6])
    assert [index.slot(session_key(ue)) for ue in ("10.91.0.9", "10.91.0.10")] == [2, 3]
    assert peers_of(atsss, "10.91.0.9", 3) == [path_in(slot).peer for slot in (1, 2, 1)]
    waits = []
    monkeypatch.setattr(index, "wait", calling_back(index.wait, lambda: waits.append(1)))

    rewritten_until_a_wait(index, "10.91.0.10", lambda: bool(waits))

    assert index.slot(session_key("10.91.0.9")) == 1
    assert peers_of(atsss, "10.91.0.9", 3) == [path_in(slot).peer for slot in (2, 1, 2)], \
        "its round-robin goes on from where the old slot's left it"
    assert peers_of(atsss, "10.91.0.10", 2) == [path_in(slot).peer for slot in (5, 6)]


def test_sessions_made_through_the_service_sit_in_the_slots_paired_with_their_paths(instance, store, kernel):
    """A one-path session first, then two-path ones: given slots lowest first, the second's would
    be 2 and 3, of two pairs; a new session's paths take a free pair, the index its slot."""
    atsss, node = start(store, instance)
    try:
        alone = session("alone", ue="10.60.0.11")
        made = [atsss.create_session(ADMIN, "alone", alone.model_copy(update={"paths": alone.paths[:1]}))]
        made += [atsss.create_session(ADMIN, f"s{n}", session(f"s{n}", ue=f"10.60.0.{12 + n}")) for n in range(3)]
        assert [s.slots for s in made] == [[1], [3, 4], [5, 6], [7, 8]]
        for s in made:
            assert paired_path_slots(held_slot(kernel, str(s.ue)))[: len(s.slots)] == tuple(s.slots), s.name
    finally:
        node.close()


def steer(atsss: Atsss, ue: str, mode: int, mts_id: Optional[str]) -> str:
    """MEC 015's mtsSessionPOST (`mts_id` None) or PUT of `mts_id`, steering the UE's whole downlink
    in `mode`: its id."""
    body = mts.MtsSessionInfo.model_validate({"appInsId": "app-1", "requestType": 1, "flowFilter": [{"dstIp": ue}],
                                              "qosD": {}, "mtsMode": mode, "trafficDirection": "00"})
    if mts_id is not None:
        mts.mts_session_put(atsss, ADMIN, mts_id, body)
        return mts_id
    request = Request({"type": "http", "root_path": "", "headers": []})
    created = mts.mts_session_post(request, Response(), atsss, ADMIN, body).sessionId
    assert created is not None
    return created


def test_a_session_patched_and_put_again_and_again_stays_in_its_paired_slot_its_numbers_going_on(store):
    """Where a changed session is written whole (the fake; an instance with no session writer), each
    change (a PATCH, a PUT, an MTS session's PUT of another mode) leaves the session's slot while
    packets read it: the write waits and moves it back, its MP_SEQ counter each time beyond the
    numbers packets took (here: 5 after each change)."""
    fake = Dataplane(FakeDpp())
    atsss = Atsss.start(store, fake.table)
    made = [atsss.create_session(ADMIN, f"s{n}", session(f"s{n}", ue=f"10.60.0.{12 + n}")) for n in range(3)]
    key = session_key("10.60.0.13")
    slots, numbers, mts_id = [], [], None
    for n in range(2 * INDEX4_WAYS):
        held = SessionIndex(fake.table)
        taken = held.get(key)
        assert taken is not None
        taken.mp_seq += 5  # packets took numbers
        fake.table("dpp_atsss_slots").update([(c_uint32(held.slot(key) or 0), taken)])
        if n % 3 == 2:
            mts_id = steer(atsss, "10.60.0.13", 1 + n % 2, mts_id)  # low latency, high throughput in turn
        elif n % 2:
            atsss.put_session(ADMIN, "s1", session("s1", ue="10.60.0.13", mode="weighted", weights=(1 + n, 1)))
        else:
            weigh = AtsssSessionPatch.model_validate({"paths": [{"index": 1, "weight": 10 + n}]})
            atsss.patch_session(ADMIN, "s1", weigh)
        slots.append(SessionIndex(fake.table).slot(key))
        written = SessionIndex(fake.table).get(key)
        assert written is not None and list(written.path[:2]) == made[1].slots
        numbers.append((taken.mp_seq, written.mp_seq))
    assert slots == [paired_session_slot(made[1].slots[0])] * len(slots), "each change back in its paired slot"
    assert all(after > before for before, after in numbers), f"MP_SEQ counted on beyond the numbers taken: {numbers}"


def test_a_session_written_again_and_again_stays_in_its_paired_slot_and_its_frames_on_its_paths(atsss, index):
    """In the kernel: each write leaves slot 1 while packets read it; it waits and moves back, the
    round-robin going on over the session's own paths, the MP_SEQ numbers of its frames rising."""
    put(atsss, index, "10.91.0.9", [1, 2])
    key = session_key("10.91.0.9")
    frames = [decode(atsss.run(ethernet(ue_packet("10.91.0.9")))[1]) for _ in range(3)]
    slots = []
    for n in range(2 * INDEX4_WAYS):
        value = index.get(key)
        assert value is not None
        value.weight[:2] = [1 + n, 1]  # a change of what the control plane says, round-robin all the same
        index.write([(key, value)])
        slots.append(index.slot(key))
        for _ in range(2):
            verdict, frame = atsss.run(ethernet(ue_packet("10.91.0.9")))
            assert verdict == XDP_TX
            frames.append(decode(frame))
    assert slots == [1] * len(slots), f"each write back in the slot paired with paths 1 and 2: {slots}"
    assert [frame.dst for frame in frames] == [path_in(1 + n % 2).peer for n in range(len(frames))], \
        "the round-robin goes on over its own paths"
    numbers = [frame.mp_seq for frame in frames]
    assert all(after > before for before, after in zip(numbers, numbers[1:])), f"MP_SEQ rising: {numbers}"


def test_a_reconcile_writing_changed_sessions_whole_waits_once_for_them_all(store):
    """Three sessions changed in the store behind the service (another run's, say): the reconcile
    writes each whole (no writer here) in one write of the index, which waits once and moves each
    back into its paired slot; a wait for each would be a grace period each (ms) at 10,000."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    made = [atsss.create_session(ADMIN, f"s{n}", session(f"s{n}", ue=f"10.60.0.{12 + n}")) for n in range(3)]
    for changed in made:
        stored.save_session(store, changed.model_copy(update={"mode": SteeringMode.ROUND_ROBIN}))
    waits = dpp.reader_waits
    atsss.reconcile()
    assert dpp.reader_waits == waits + 1, "one wait for the three"
    held = SessionIndex(fake.table)
    values = [held.get(session_key(str(s.ue))) for s in made]
    assert [(held.slot(session_key(str(s.ue))), value.mode if value else None) for s, value in zip(made, values)] \
        == [(paired_session_slot(s.slots[0]), Mode.ROUND_ROBIN) for s in made]


def test_a_session_written_again_in_a_full_bucket_moves_back_into_a_way_in_the_same_write():
    """Where a changed session is written whole (2.): every way of its bucket live, it goes to the
    hash and its old way is retired; the same write waits and moves it back into a way (5.), in its
    paired slot, its MP_SEQ counter beyond the numbers packets took. Before, it stayed in the hash
    until a delete in its bucket."""
    fake = FakeDpp()
    index = SessionIndex(lambda name: Table(fake, name))
    ues = ["10.60.0.7", *same_bucket("10.60.0.7", INDEX4_WAYS - 1)]
    index.write([(session_key(ue), two_paths(2 * n + 1)) for n, ue in enumerate(ues)])
    key = session_key(ues[3])
    taken = index.get(key)
    assert taken is not None and index.slot(key) == 4
    taken.mp_seq = 41  # packets took numbers
    fake_slots = Table(fake, "dpp_atsss_slots")
    fake_slots.update([(c_uint32(4), taken)])

    index.write([(key, taken)])

    again = SessionIndex(lambda name: Table(fake, name))
    assert again.slot(key) == 4 and not list(again.hash.items()), "back in a way of its bucket, in its paired slot"
    written = again.get(key)
    assert written is not None and written.mp_seq > 41 and list(written.path[:2]) == [7, 8]


def test_a_session_written_again_in_a_full_bucket_is_served_on_its_paths_throughout(atsss, index):
    ues = ["10.60.0.7", *same_bucket("10.60.0.7", INDEX4_WAYS - 1)]
    for n, ue in enumerate(ues):
        put(atsss, index, ue, [2 * n + 1, 2 * n + 2])
    key = session_key(ues[2])
    peers = peers_of(atsss, ues[2], 2)
    for _ in range(3):
        index.write([(key, index.get(key))])  # type: ignore[list-item]
        assert index.slot(key) == 3, "back in its way and paired slot, not left in the hash"
        peers += peers_of(atsss, ues[2], 2)
    assert peers == [path_in(slot).peer for slot in (5, 6) * 4]
