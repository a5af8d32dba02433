"""Path slots a change emptied (retired: written for another path only after a wait for the programs'
runs, netapp.atsss.table.AtsssMaps.retired_slots) are passed over by the slots the store gives while
others are free and they are at most admission.PASSED_OVER: a create after a delete waits no grace
period. The store's functions with slots to avoid (netapp.atsss.store.free_pair, free_slots): the
lowest free slots but those, the ones passed over above the highest made free rows (gaps), none given
twice. A fake data plane (no program runs: the waits are counted)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from netapp.atsss import admission, store as stored
from netapp.atsss.index import SessionIndex
from netapp.atsss.service import Atsss
from netapp.atsss.store import free_pair, free_slots
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.service.contract import DataplaneFull
from netapp.service.store import Store
from tests.atsss.atsss import session_key
from tests.atsss.test_replaced_paths import ADMIN, paired, spec
from tests.atsss.test_slots import assert_consistent, free_rows


def hold(store: Store, slots: list[int]) -> None:
    """`slots` held, each by a one-path session of its own, as a create stores them (the triggers take
    their free rows)."""
    store.executemany("INSERT INTO atsss_path_slots (slot, tenant, name, position) VALUES (?, 'operator', ?, 0)",
                      [(slot, f"x{slot}") for slot in slots])


def test_a_create_after_a_delete_passes_over_the_freed_pair_and_waits_for_no_program_run(store):
    dpp = FakeDpp()
    fake = Dataplane(dpp)
    atsss = Atsss.start(store, fake.table)
    atsss.create_session(ADMIN, "ue5", spec((1, 2)))
    atsss.create_session(ADMIN, "ue6", spec((3, 4), ue="10.45.0.6", name="ue6"))
    atsss.delete_session(ADMIN, "ue5")
    assert atsss._maps is not None and atsss._maps.retired_slots() == {1, 2}
    waits = dpp.reader_waits

    created = atsss.create_session(ADMIN, "ue7", spec((5, 6), ue="10.45.0.7", name="ue7"))

    assert created.slots == [5, 6], "the pair above the held ones, not the one the delete just freed"
    assert dpp.reader_waits == waits, "no grace period for the create"
    index = SessionIndex(fake.table)
    assert paired(created, index.slot(session_key("10.45.0.7")) or 0), "the session in the slot of its pair"
    atsss.create_session(ADMIN, "ue8", spec((7,), ue="10.45.0.8", name="ue8"))
    assert atsss.get_session(ADMIN, "ue8").slots == [7], "a one-path session passes over them too"
    assert dpp.reader_waits == waits


def test_past_passed_over_a_create_takes_the_lowest_freed_pair_and_its_one_wait_frees_every_retired_slot(
        store, monkeypatch):
    monkeypatch.setattr(admission, "PASSED_OVER", 3)
    dpp = FakeDpp()
    atsss = Atsss.start(store, Dataplane(dpp).table)
    for n in range(3):
        atsss.create_session(ADMIN, f"ue{n}", spec((2 * n + 1, 2 * n + 2), ue=f"10.45.0.{n}", name=f"ue{n}"))
    atsss.delete_session(ADMIN, "ue0")
    atsss.delete_session(ADMIN, "ue1")
    assert atsss._maps is not None and atsss._maps.retired_slots() == {1, 2, 3, 4}
    waits = dpp.reader_waits

    created = atsss.create_session(ADMIN, "ue9", spec((7, 8), ue="10.45.0.9", name="ue9"))

    assert created.slots == [1, 2], "four retired, more than PASSED_OVER: the lowest free pair"
    assert dpp.reader_waits == waits + 1, "one wait before its paths are written in slots 1 and 2"
    assert atsss._maps.retired_slots() == set(), "the wait freed slots 3 and 4 too"
    again = atsss.create_session(ADMIN, "ue8", spec((9,), ue="10.45.0.8", name="ue8"))
    assert again.slots == [3] and dpp.reader_waits == waits + 1, "given with no wait more"


def test_the_store_passes_over_the_slots_avoided_below_and_above_the_highest(store):
    with store.transaction():
        hold(store, [5, 6, 8])
        store.executemany("INSERT INTO atsss_free_slots (slot) VALUES (?)", [(1,), (2,), (3,), (4,), (7,)])
        assert free_slots(store, 3, frozenset({1, 4})) == [2, 3, 7]
        assert free_slots(store, 4, frozenset({1, 4})) == [2, 3, 7, 9], "then above the highest"
        assert free_pair(store, frozenset({1, 4})) == 5, "1-2 and 3-4 avoided, 7-8 held: slots 9 and 10"
        assert free_pair(store, frozenset({9})) == 1
        assert free_pair(store, frozenset({1, 3, 10})) == 6, "9-10 avoided above the highest: 11 and 12"
        assert 9 in free_rows(store) and 10 in free_rows(store), "passed over above the highest: gaps, free rows"
        hold(store, [11, 12])
        assert_consistent(store)
        assert free_slots(store, 2, frozenset({13})) == [1, 2]
        assert free_slots(store, 8, frozenset({13})) == [1, 2, 3, 4, 7, 9, 10, 14]
        hold(store, [14])
        assert_consistent(store)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["pair", "slots", "session", "free"]), st.integers(1, 4),
                          st.frozensets(st.integers(1, 24), max_size=8)), max_size=30))
def test_slots_given_avoiding_some_are_the_lowest_others_and_leave_the_free_rows_the_gaps(store, steps):
    """Pairs and slots taken (held), a new session's (admission.paired_slots: a pair, then others),
    or held ones freed, each step avoiding a set of slots: what is given is never held nor avoided
    (a session's, never held), the lowest such, and the free rows stay the gaps below the highest
    slot given (no slot lost, none given twice)."""
    given_avoiding(store, steps, room=200)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["pair", "slots", "session", "free"]), st.integers(1, 4),
                          st.frozensets(st.integers(1, 16), max_size=6)), max_size=40))
def test_slots_given_avoiding_some_on_a_node_of_16_slots_leave_none_lost(store, steps):
    """The same on a node of 15 path slots and 7 session slots, full at times: a request the node
    cannot hold refused (and rolled back), the pairs' fallback to an avoided one taken. (The slot
    lost by a session's slots asked for beyond its pair, mended in 184928b, took it some 3,000
    examples to find: the test below holds that case.)"""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stored, "MAX_PATHS", 16)
        patch.setattr(stored, "MAX_SESSIONS", 8)
        given_avoiding(store, steps, room=16)


def given_avoiding(store: Store, steps: list, room: int) -> None:
    """The steps of the two tests above, over a store emptied first, on a node of `room` - 1 path
    slots: a step the node cannot hold (None, DataplaneFull) leaves the store as it was."""
    with store.transaction():
        store.execute("DELETE FROM atsss_path_slots")
        store.execute("DELETE FROM atsss_free_slots")
    for kind, count, avoid in steps:
        try:
            given_once(store, kind, count, avoid, room)
        except (Full, DataplaneFull):
            pass  # rolled back
        assert_consistent(store)


class Full(Exception):
    """The node has no room for the step (the store's functions said None)."""


def given_once(store: Store, kind: str, count: int, avoid: frozenset[int], room: int) -> None:
    """One step: its slots taken or freed in a transaction of its own; Full (rolled back) when the
    store's functions find no room."""
    with store.transaction():
        held = {slot for (slot,) in store.execute("SELECT slot FROM atsss_path_slots")}
        if kind == "free":
            gone = sorted(held)[:count]
            store.executemany("DELETE FROM atsss_path_slots WHERE slot = ?", [(slot,) for slot in gone])
        elif kind == "pair":
            pair = free_pair(store, avoid)
            if pair is None:
                raise Full
            first = 2 * pair - 1
            assert not {first, first + 1} & (held | avoid)
            lower = [odd for odd in range(1, first, 2) if not {odd, odd + 1} & (held | avoid)]
            assert not lower, f"a lower free pair passed over: {lower[0]}"
            hold(store, [first, first + 1])
        elif kind == "session":
            given = admission.paired_slots(store, count, avoid)
            assert len(set(given)) == count and not set(given) & held
            hold(store, given)
        else:
            given = free_slots(store, count, avoid)
            if given is None:
                raise Full
            expected = [slot for slot in range(1, room) if slot not in held | avoid][:count]
            assert given == expected
            hold(store, given)


@pytest.mark.parametrize("count", [1, 2])
def test_a_create_takes_retired_slots_when_no_other_is_left(store, count):
    """Every free slot avoided (here: the store's last ones, MAX_PATHS reached): the create is not
    refused, it takes them (and its write waits for the programs' runs)."""
    from netapp.atsss.abi import MAX_PATHS
    with store.transaction():
        hold(store, list(range(1, MAX_PATHS - 2)))
        store.execute("DELETE FROM atsss_path_slots WHERE slot IN (1, 2)")
        avoid = frozenset({1, 2, MAX_PATHS - 2, MAX_PATHS - 1})
        assert free_slots(store, count, avoid) is None
        assert admission.free_slots(store, count, avoid) == [1, 2][:count]
        assert admission.paired_slots(store, count, avoid) == [1, 2][:count]


def test_a_pair_taken_retired_for_want_of_others_leaves_no_slot_lost_from_the_free_rows(store):
    """The last pairs above the highest slot avoided (retired by creates whose write was refused), so
    a three-path session is given the retired pair 1-2 (free_pair's fallback) and one slot more:
    only that one is asked for. Asked for three and given 5, 32761 and 32763, the create took 5, and
    32762, avoided, was made a free row above 32761, which was then neither held nor free."""
    with store.transaction():
        hold(store, [slot for slot in range(3, 32761) if slot != 5])
        store.executemany("INSERT INTO atsss_free_slots (slot) VALUES (?)", [(1,), (2,), (5,)])
        avoid = frozenset({1, 2, 32762, 32764, 32766})
        assert free_pair(store, avoid) is None, "the case this test is about: no pair left but retired ones"
        given = admission.paired_slots(store, 3, avoid)
        assert given == [1, 2, 5]
        hold(store, given)
        assert_consistent(store)
        given = admission.paired_slots(store, 3, avoid)
        assert given == [32761, 32762, 32763], "the pair above the highest, 32762 retired (no other pair left), then 32763"
        hold(store, given)
        assert_consistent(store)


def test_a_wait_the_index_makes_frees_the_retired_path_slots_too(store):
    """A grace period is one whoever waits for it: the index's (a full bucket, a lacking slot) frees
    the path slots retired before it as the maps' own waits do, so that they are given again with
    no wait more."""
    dpp = FakeDpp()
    atsss = Atsss.start(store, Dataplane(dpp).table)
    atsss.create_session(ADMIN, "ue5", spec((1, 2)))
    atsss.create_session(ADMIN, "ue6", spec((3, 4), ue="10.45.0.6", name="ue6"))
    atsss.delete_session(ADMIN, "ue5")
    assert atsss._maps is not None and atsss._maps.retired_slots() == {1, 2}
    index = atsss._maps._sessions
    index._waited = False  # as at the start of a write
    assert index.wait()
    assert atsss._maps.retired_slots() == set()
    waits = dpp.reader_waits
    assert atsss.create_session(ADMIN, "ue7", spec((5, 6), ue="10.45.0.7", name="ue7")).slots == [1, 2]
    assert dpp.reader_waits == waits, "the slots written with no wait more"
