"""A PUT replacing a session's path that the maps refuse after the reclaim wrote the new path into
the old one's slot (netapp.atsss.reclaim): the undo puts the old path back in its slot, whole and
up, with its uplink entry, and later changes of the session go through."""

from __future__ import annotations

import errno
from ctypes import c_uint32
from typing import Any, Optional

import pytest

from netapp.atsss.index import MP_SEQ_SKIP, SessionIndex
from netapp.atsss.service import Atsss, carried_into
from netapp.atsss.table import AtsssTables, Moved
from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.service.contract import DataplaneUnavailable
from tests.atsss.atsss import PathSpec, path_value, session_key
from tests.atsss.test_changes_in_flight import ADMIN, UE
from tests.atsss.test_replaced_paths import peer, peer_in, spec


LEFT_A = PathSpec("192.0.2.50", "198.51.100.50", sport=5050, dport=6050)
LEFT_B = PathSpec("192.0.2.51", "198.51.100.51", sport=5051, dport=6051)


def refuse_once(dpp: FakeDpp, table: str) -> None:
    """The next write of `table` refused (as a full map would), the later ones let through."""
    update = dpp.table_update
    refused = []

    def once(name: str, keys: Any, values: Any, flags: int = 0) -> None:
        if name == table and not refused:
            refused.append(name)
            raise DataplaneError(errno.E2BIG, f"dpp_table_update({name})")
        update(name, keys, values, flags)

    dpp.table_update = once  # type: ignore[method-assign]


def assert_maps_hold(fake: Dataplane, atsss: Atsss, numbers: tuple[int, ...]) -> None:
    """The maps hold the stored session over path(n) of `numbers`: each in its slot and up, its
    uplink entry leading to that slot, the session's mask of the paths up whole."""
    (stored,) = atsss.list_sessions(ADMIN)
    assert [str(path.peer) for path in stored.paths] == [peer(n) for n in numbers]
    assert [peer_in(fake.table, slot) for slot in stored.slots] == [peer(n) for n in numbers]
    paths = fake.table("dpp_atsss_paths")
    assert all(paths.get(c_uint32(slot)).flags & 1 for slot in stored.slots)
    uplinks = sorted(value.path for _, value in fake.table("dpp_atsss_uplink").items())
    assert uplinks == sorted(stored.slots)
    held = SessionIndex(fake.table).get(session_key(UE))
    assert held is not None and list(held.path[: len(numbers)]) == stored.slots
    assert held.up == (1 << len(numbers)) - 1


def test_a_replacement_refused_after_the_reclaim_is_undone_and_the_session_changes_again(store):
    """The new path's uplink entry refused: the reclaim had written the new path into the slot and
    deleted the old path's entry, and the new one's was never written; the undo, which deletes the
    new path's entry, finds none to delete and goes on. Before, its refused delete left the slot
    with the new path, down, and every later sync of the session (a PUT, a reconcile) refused alike."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    atsss.put_session(ADMIN, "ue5", spec((1, 2)))
    refuse_once(dpp, "dpp_atsss_uplink")
    with pytest.raises(DataplaneUnavailable):
        atsss.put_session(ADMIN, "ue5", spec((3, 2)))
    assert_maps_hold(fake, atsss, (1, 2))
    atsss.reconcile()
    assert_maps_hold(fake, atsss, (1, 2))
    atsss.put_session(ADMIN, "ue5", spec((5, 2)))
    assert_maps_hold(fake, atsss, (5, 2))


def test_a_replacement_refused_at_its_last_write_puts_the_old_path_back_past_every_dccp_number_it_sent(store):
    """Packets took DCCP numbers from the old path after the change read it, up to the reclaim's wait
    (a run that read the path up before it was marked down): the reclaim read them after the wait;
    the sync refused at its last write (the gate), the undo writes the old path back past them.
    Before, the undo had only the read from before the change: numbers 100-149 given again."""
    dpp, fake, atsss, slot = sent_100_numbers(store, (1, 2))
    wait = dpp.table_wait_readers
    waits = []

    def packets_in_flight() -> None:
        if not waits:
            took_numbers(fake, slot, 50)
        waits.append(1)
        wait()

    dpp.table_wait_readers = packets_in_flight  # type: ignore[method-assign]
    refuse_once(dpp, "dpp_atsss_gate")
    with pytest.raises(DataplaneUnavailable):
        atsss.put_session(ADMIN, "ue5", spec((3, 2)))
    assert_maps_hold(fake, atsss, (1, 2))
    assert fake.table("dpp_atsss_paths").get(c_uint32(slot)).dccp_seq >= 150, "numbers 0-149 were sent"


def sent_100_numbers(store, numbers: tuple[int, ...]) -> tuple[FakeDpp, Dataplane, Atsss, int]:
    """A service over the fake with the session of path(n) of `numbers`, whose first path (in the
    slot returned) has sent DCCP numbers 0-99."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    made, _ = atsss.put_session(ADMIN, "ue5", spec(numbers))
    took_numbers(fake, made.slots[0], 100)
    return dpp, fake, atsss, made.slots[0]


def took_numbers(fake: Dataplane, slot: int, count: int) -> None:
    """Packets took `count` DCCP numbers from the path in `slot`."""
    paths = fake.table("dpp_atsss_paths")
    path = paths.get(c_uint32(slot))
    path.dccp_seq += count
    paths.update([(c_uint32(slot), path)])


def numbers_taken_at_first_write(dpp: FakeDpp, fake: Dataplane, table: str, slot: int, count: int) -> None:
    """Packets take `count` DCCP numbers from the path in `slot` at the change's first write of
    `table`: after the change read the maps for its undo, before the sync empties or rewrites it."""
    update = dpp.table_update
    taken = []

    def in_flight(name: str, keys: Any, values: Any, flags: int = 0) -> None:
        if name == table and not taken:
            taken.append(name)
            took_numbers(fake, slot, count)
        update(name, keys, values, flags)

    dpp.table_update = in_flight  # type: ignore[method-assign]


def test_a_one_path_replacement_refused_at_its_last_write_puts_the_old_path_back_past_its_numbers(store):
    """A one-path session's new path takes a free slot and the sync empties the old one (no reclaim):
    the sync read it just before; refused at its last write (the gate), the undo writes it back past
    the numbers packets took after the change's read. Before, numbers 100-149 were given again."""
    dpp, fake, atsss, slot = sent_100_numbers(store, (1,))
    numbers_taken_at_first_write(dpp, fake, "dpp_atsss_uplink", slot, 50)
    refuse_once(dpp, "dpp_atsss_gate")
    with pytest.raises(DataplaneUnavailable):
        atsss.put_session(ADMIN, "ue5", spec((3,)))
    assert_maps_hold(fake, atsss, (1,))
    assert fake.table("dpp_atsss_paths").get(c_uint32(slot)).dccp_seq >= 150, "numbers 0-149 were sent"


def test_a_replacement_refused_as_its_new_path_goes_up_puts_the_old_path_back_past_its_numbers(store):
    """The reclaim's write of the slot refused after its whole write (the new path down in the
    slot), before its up flag: the old path read after the wait, kept before that write, goes back
    with the numbers it sent up to the wait. Before, the read was kept only once the round ended."""
    dpp, fake, atsss, slot = sent_100_numbers(store, (1, 2))
    wait, update = dpp.table_wait_readers, dpp.table_update
    waited, writes = [], []

    def packets_in_flight() -> None:
        if not waited:
            took_numbers(fake, slot, 50)
        waited.append(1)
        wait()

    def refused_second_write_after_the_wait(name: str, keys: Any, values: Any, flags: int = 0) -> None:
        if name == "dpp_atsss_paths" and waited and len(writes) < 2:
            writes.append(name)
            if len(writes) == 2:  # the first is the whole write, the second the words in place
                raise DataplaneError(errno.EIO, f"dpp_table_update({name})")
        update(name, keys, values, flags)

    dpp.table_wait_readers = packets_in_flight  # type: ignore[method-assign]
    dpp.table_update = refused_second_write_after_the_wait  # type: ignore[method-assign]
    with pytest.raises(DataplaneUnavailable):
        atsss.put_session(ADMIN, "ue5", spec((3, 2)))
    assert len(writes) == 2
    assert_maps_hold(fake, atsss, (1, 2))
    assert fake.table("dpp_atsss_paths").get(c_uint32(slot)).dccp_seq >= 150, "numbers 0-149 were sent"


def took_mp_seq(fake: Dataplane, ue: str, count: int) -> int:
    """Packets took `count` MP_SEQ numbers from the UE's session (its entry of dpp_atsss_slots);
    returns the counter then."""
    slot = SessionIndex(fake.table).slot(session_key(ue))
    assert slot is not None
    value = fake.table("dpp_atsss_slots").get(c_uint32(slot))
    value.mp_seq += count
    fake.table("dpp_atsss_slots").update([(c_uint32(slot), value)])
    return value.mp_seq


def refused_at(dpp: FakeDpp, table: str, nth: int, meanwhile: Any) -> None:
    """The `nth` write of `table` refused, `meanwhile()` run just before it (packets in flight)."""
    update = dpp.table_update
    seen = []

    def counted(name: str, keys: Any, values: Any, flags: int = 0) -> None:
        if name == table:
            seen.append(name)
            if len(seen) == nth:
                meanwhile()
                raise DataplaneError(errno.E2BIG, f"dpp_table_update({name})")
        update(name, keys, values, flags)

    dpp.table_update = counted  # type: ignore[method-assign]


@pytest.mark.parametrize("ue", [UE, "10.45.0.77"], ids=["same-ue", "moved-to-another-ue"])
@pytest.mark.parametrize("refused", ["the-mark-down", "the-new-uplink"])
def test_a_replacement_refused_puts_the_session_back_past_every_number_its_packets_took(store, ue, refused):
    """A PUT replacing ue5's first path (and moving it to another UE address, or not) refused at the
    reclaim's first write (marking the old path down: before its wait) or at the new path's uplink
    entry (after it), packets taking numbers from both paths and the session up to the refusal: the
    undo puts the session back over its paths, none of their DCCP numbers nor its MP_SEQ numbers given
    again. Moved to another UE, the reclaim has deleted the old UE's session before its wait; the
    undo then found no session leading to the slots and wrote them whole with the numbers read before
    the change (100 where 150 had been taken)."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    made, _ = atsss.put_session(ADMIN, "ue5", spec((1, 2)))
    for slot in made.slots:
        took_numbers(fake, slot, 100)
    counters = [took_mp_seq(fake, UE, 1000)]

    def in_flight() -> None:
        for slot in made.slots:
            if fake.table("dpp_atsss_paths").get(c_uint32(slot)).flags & 1:  # up: a packet may pick it
                took_numbers(fake, slot, 50)
        if SessionIndex(fake.table).get(session_key(UE)) is not None:
            counters.append(took_mp_seq(fake, UE, 10))

    refused_at(dpp, *(("dpp_atsss_paths", 1) if refused == "the-mark-down" else ("dpp_atsss_uplink", 1)), in_flight)
    with pytest.raises(DataplaneUnavailable):
        atsss.put_session(ADMIN, "ue5", spec((3, 2), ue=ue))
    assert_maps_hold(fake, atsss, (1, 2))
    paths = fake.table("dpp_atsss_paths")
    assert paths.get(c_uint32(made.slots[1])).dccp_seq == 150, "the kept path's numbers go on"
    assert paths.get(c_uint32(made.slots[0])).dccp_seq >= 100 + (50 if refused == "the-mark-down" else 0)
    back = SessionIndex(fake.table).get(session_key(UE))
    assert back is not None and back.mp_seq >= counters[-1], "its MP_SEQ numbers not given again"
    assert SessionIndex(fake.table).get(session_key("10.45.0.77")) is None


def test_the_slots_a_refused_undo_left_full_give_the_next_session_none_of_their_numbers(store):
    """A create refused at its last write (the gate) after packets took numbers on its paths, and its
    undo refused as it empties the slots: the store has the slots free, the maps their paths still.
    The next session given them, with the same subflows (another UE's, maybe another tenant's), has
    its paths written whole: its DCCP numbers and counters from 0, not the refused session's, as a
    sync writing in place every slot that holds its subflow still would have left them."""
    fake, atsss = a_refused_undo_leaving_slots_full(store)
    atsss._owed = None  # the maps as a reconcile refused too leaves them (the next change's, below)
    paths = fake.table("dpp_atsss_paths")
    made, _ = atsss.put_session(ADMIN, "b", spec((1, 2), ue="10.45.0.9", name="b"))
    assert made.slots == [1, 2]
    assert [(paths.get(c_uint32(slot)).dccp_seq, paths.get(c_uint32(slot)).packets) for slot in made.slots] \
        == [(0, 0), (0, 0)]


@pytest.mark.parametrize("how", ["reconcile", "restart"])
def test_a_reconcile_empties_the_slots_and_uplink_entries_a_refused_undo_left(store, how):
    """The maps hold the stored sessions and nothing else after a reconcile (or a start): the paths a
    refused undo left in slots no session leads to are emptied, and their uplink entries deleted.
    Before, both stayed until the slots were given again, and the refused session's UE could send
    uplink packets through the entries to the data network (xdp_atsss decapsulates what an uplink
    entry leads to)."""
    fake, atsss = a_refused_undo_leaving_slots_full(store)
    paths, uplink = fake.table("dpp_atsss_paths"), fake.table("dpp_atsss_uplink")
    assert sorted(value.path for _, value in uplink.items()) == [1, 2], "the case: the entries left"
    if how == "reconcile":
        atsss.reconcile()
    else:
        Atsss.start(store, fake.table)
    assert [paths.get(c_uint32(slot)).family for slot in (1, 2)] == [0, 0]
    assert list(uplink.items()) == []


def test_a_reconcile_deletes_an_uplink_entry_of_no_path(store):
    """An uplink entry whose slot holds no path (its delete refused, say) is deleted by a reconcile."""
    fake = Dataplane(FakeDpp())
    atsss = Atsss.start(store, fake.table)
    made, _ = atsss.put_session(ADMIN, "a", spec((1, 2), ue="10.45.0.5", name="a"))
    uplink = fake.table("dpp_atsss_uplink")
    stray_key, stray = next(iter(uplink.items()))
    atsss.delete_session(ADMIN, "a")
    uplink.update([(stray_key, stray)])
    atsss.reconcile()
    assert list(uplink.items()) == []


def a_refused_undo_leaving_slots_full(store, dpp: Optional[FakeDpp] = None) -> tuple[Dataplane, Atsss]:  # noqa: ANN001
    """A create refused at its last write (the gate) after packets took 40 numbers on its paths
    (slots 1 and 2), and its undo refused as it empties them: the store has the slots free, the maps
    their paths and uplink entries still."""
    dpp = dpp or FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    update = dpp.table_update
    refusals: list[str] = []

    def refusing(name: str, keys: Any, values: Any, flags: int = 0) -> None:
        if name == "dpp_atsss_gate" and not refusals:
            for slot in (1, 2):
                took_numbers(fake, slot, 40)
            refusals.append(name)
            raise DataplaneError(errno.E2BIG, f"dpp_table_update({name})")
        if name == "dpp_atsss_paths" and refusals == ["dpp_atsss_gate"]:  # the undo's emptying
            refusals.append(name)
            raise DataplaneError(errno.E2BIG, f"dpp_table_update({name})")
        update(name, keys, values, flags)

    dpp.table_update = refusing  # type: ignore[method-assign]
    with pytest.raises(DataplaneUnavailable):
        atsss.put_session(ADMIN, "a", spec((1, 2), ue="10.45.0.5", name="a"))
    assert refusals == ["dpp_atsss_gate", "dpp_atsss_paths"] and atsss.list_sessions(ADMIN) == []
    assert fake.table("dpp_atsss_paths").get(c_uint32(1)).dccp_seq == 40, "the case: the slot left full"
    dpp.table_update = update  # type: ignore[method-assign]
    return fake, atsss


def test_the_next_change_reconciles_the_maps_a_refused_undo_left(store, caplog, slots_given_again):
    """A create refused at its last write (the gate), and its undo refused as it deletes the uplink
    entries after emptying the paths: slots 1 and 2 empty, their entries left. The next change
    reconciles the maps first (Atsss._changing): a create given those slots at once
    (`slots_given_again`), for other subflows, finds only its own uplink entries leading to them.
    Before, the entries left led there too until a restart: the refused session's UE's packets were
    counted as the new session's (maybe another tenant's) and went on to the data network."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    refuse_once(dpp, "dpp_atsss_gate")
    delete = dpp.table_delete
    refused = []

    def refusing(name: str, keys: Any) -> None:
        if name == "dpp_atsss_uplink" and not refused:
            refused.append(name)
            raise DataplaneError(errno.E2BIG, f"dpp_table_delete({name})")
        delete(name, keys)

    dpp.table_delete = refusing  # type: ignore[method-assign]
    with pytest.raises(DataplaneUnavailable):
        atsss.put_session(ADMIN, "a", spec((1, 2), ue="10.45.0.5", name="a"))
    uplink = fake.table("dpp_atsss_uplink")
    assert refused and sorted(value.path for _, value in uplink.items()) == [1, 2], "the case: entries left"
    assert [fake.table("dpp_atsss_paths").get(c_uint32(slot)).family for slot in (1, 2)] == [0, 0]
    made, _ = atsss.put_session(ADMIN, "b", spec((3, 4), ue="10.45.0.9", name="b"))
    assert made.slots == [1, 2]
    assert sorted(value.path for _, value in uplink.items()) == [1, 2], "b's entries alone"
    assert [peer_in(fake.table, slot) for slot in made.slots] == [peer(3), peer(4)]
    assert "the next change reconciles them first" in caplog.text


def test_a_change_whose_reconcile_is_refused_is_refused_and_the_next_heals(store):
    """The reconcile owed refused too: the change refused (503), the store without it, as
    the UPF's and the intents' changes are: no change is made over maps unlike the store (whose
    numbers a later heal would carry into the wrong paths). The change after it heals the maps."""
    dpp = FakeDpp()
    fake, atsss = a_refused_undo_leaving_slots_full(store, dpp)
    paths = fake.table("dpp_atsss_paths")
    refuse_once(dpp, "dpp_atsss_paths")
    with pytest.raises(DataplaneUnavailable, match="reconcile, owed since a refused change"):
        atsss.put_session(ADMIN, "b", spec((3, 4), ue="10.45.0.9", name="b"))
    assert atsss.list_sessions(ADMIN) == []
    made, _ = atsss.put_session(ADMIN, "c", spec((5, 6), ue="10.45.0.10", name="c"))
    assert sorted(int(slot) for slot, path in paths.items() if path.family) == sorted(made.slots)
    assert sorted(value.path for _, value in fake.table("dpp_atsss_uplink").items()) == sorted(made.slots)


def test_a_heal_carries_a_path_s_numbers_into_a_path_of_the_same_subflow_only():
    """carried_into: what a refused put back read of a slot goes to the path the store has there if
    it is the same subflow (another access or state may differ), to no other subflow's."""
    read = Moved({}, {1: path_value(LEFT_A, dccp_seq=40), 2: path_value(LEFT_A, dccp_seq=40)})
    tables = AtsssTables()
    tables.paths = {1: path_value(LEFT_A), 2: path_value(LEFT_B), 3: path_value(LEFT_A)}
    assert list(carried_into(tables, read).paths) == [1]
    assert carried_into(tables, read).paths[1].dccp_seq == 40


def stored_slots(atsss: Atsss, name: str) -> list[int]:
    return next(session.slots for session in atsss.list_sessions(ADMIN) if session.name == name)


def a_delete_whose_put_back_was_refused(store) -> tuple[Dataplane, Atsss, list[int]]:  # noqa: ANN001
    """A delete of session "a" (UE 10.45.0.5, whose paths took 40 DCCP numbers each) refused at its
    last write (the gate), its put back refused as it writes the paths back: the session deleted from
    the maps, its paths emptied, the store holding it still. Returns its slots too."""
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    made, _ = atsss.put_session(ADMIN, "a", spec((1, 2), ue="10.45.0.5", name="a"))
    for slot in made.slots:
        took_numbers(fake, slot, 40)
    update, refused = dpp.table_update, []

    def refusing(name: str, keys: Any, values: Any, flags: int = 0) -> None:
        if (name, refused) in (("dpp_atsss_gate", []), ("dpp_atsss_paths", ["dpp_atsss_gate"])):
            refused.append(name)
            raise DataplaneError(errno.E2BIG, f"dpp_table_update({name})")
        update(name, keys, values, flags)

    dpp.table_update = refusing  # type: ignore[method-assign]
    with pytest.raises(DataplaneUnavailable):
        atsss.delete_session(ADMIN, "a")
    dpp.table_update = update  # type: ignore[method-assign]
    paths = fake.table("dpp_atsss_paths")
    assert refused == ["dpp_atsss_gate", "dpp_atsss_paths"], "the case: the put back refused"
    assert [paths.get(c_uint32(slot)).family for slot in made.slots] == [0, 0]
    assert SessionIndex(fake.table).get(session_key("10.45.0.5")) is None
    return fake, atsss, made.slots


def assert_written_back_past_their_numbers(fake: Dataplane, slots: list[int]) -> None:
    """Session "a"'s paths back with the DCCP numbers packets took (40 each), its MP_SEQ counting on
    past MP_SEQ_SKIP, as the put back would have written them: not from 0, which the UE's receiver
    has seen on these subflows already."""
    paths = fake.table("dpp_atsss_paths")
    assert [(paths.get(c_uint32(slot)).family, paths.get(c_uint32(slot)).dccp_seq) for slot in slots] \
        == [(4, 40), (4, 40)]
    back = SessionIndex(fake.table).get(session_key("10.45.0.5"))
    assert back is not None and back.mp_seq >= MP_SEQ_SKIP


def test_the_heal_carries_the_numbers_the_refused_put_back_was_to_carry(store):
    """The change after a refused put back (a_delete_whose_put_back_was_refused) reconciles first,
    carrying what the put back was to carry."""
    fake, atsss, slots = a_delete_whose_put_back_was_refused(store)
    atsss.put_session(ADMIN, "b", spec((3, 4), ue="10.45.0.9", name="b"))
    assert_written_back_past_their_numbers(fake, slots)
