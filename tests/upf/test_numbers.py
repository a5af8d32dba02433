"""The numbers a new session is given on the fast path of establishments (netapp.upf.slots:
`free_numbers`, `Teids.choose_new`) against the full path's (`free_number` over `Taken`,
`Teids.choose`): the same numbers, the same cursor after them, the same refusal when none is free,
over random holders in small spaces (wrapping, full, the TEID array's edge)."""

from __future__ import annotations

import random

import pytest

from netapp.service.store import Store
from netapp.upf.models import FSeid, FTeid, Pdi, Pdr, RuleError, Session
from netapp.upf.sessions import SEID_SPACE, Upf, new_seid
from netapp.upf.flows import parse_flow
from netapp.upf.slots import Slots, Taken, Teids, free_number, free_numbers

SEID = 99  # the new session's: it holds nothing


def _reference(cursor: int, held: dict[int, int], space: int, count: int) -> tuple[list[int], int] | str:
    """`count` numbers as the full path gives them (`choose_slots`' walk); "full" if refused."""
    taken, chosen = Taken(held, SEID), []
    try:
        for _ in range(count):
            cursor = free_number(cursor, taken, space, "number")
            taken.add(cursor)
            chosen.append(cursor)
    except RuleError:
        return "full"
    return chosen, cursor


def _fast(cursor: int, held: dict[int, int], space: int, count: int) -> tuple[list[int], int] | str:
    try:
        return free_numbers(cursor, held, space, count, "number")
    except RuleError:
        return "full"


@pytest.mark.parametrize("seed", range(4))
def test_free_numbers_gives_what_the_full_walk_gives(seed):
    rng = random.Random(seed)
    for _ in range(500):
        space = rng.randint(2, 12)
        held = {number: rng.randint(1, 5) for number in rng.sample(range(1, space), rng.randint(0, space - 1))}
        cursor, count = rng.randint(0, space - 1), rng.randint(1, 4)
        assert _fast(cursor, held, space, count) == _reference(cursor, held, space, count), (cursor, held, space)


def _choosing(count: int) -> dict[int, Pdr]:
    """`count` uplink PDRs asking CHOOSE without a CHOOSE ID: a TEID each."""
    return {pdr_id: Pdr(id=pdr_id, precedence=pdr_id, pdi=Pdi(source_interface=0,
                                                               local_fteid=FTeid(choose=True, want_ipv4=True)))
            for pdr_id in range(1, count + 1)}


@pytest.mark.parametrize("seed", range(2))
def test_teids_chosen_new_are_those_choose_gives_at_the_arrays_edge(seed):
    """Below the array while fewer TEIDs than it holds are held, anywhere after (`Teids._free`)."""
    rng = random.Random(seed)
    for _ in range(200):
        array = rng.randint(3, 10)
        held = {teid: 1 for teid in rng.sample(range(1, array + 4), rng.randint(0, array + 2))}
        cursor, count = rng.randint(0, array + 3), rng.randint(1, 3)
        fast, full = Teids(array, "192.0.2.1", None), Teids(array, "192.0.2.1", None)
        for teids in (fast, full):
            teids.held, teids.cursor = dict(held), cursor
        try:
            chosen: tuple[list[int], int] | str = (fast.choose_new(SEID, count), fast.pending)
        except RuleError:
            chosen = "full"
        try:
            made = full.choose(Session(seid=SEID, node_id="smf", remote=FSeid(seid=9, ipv4="10.0.0.1")), _choosing(count))
            expected: tuple[list[int], int] | str = ([fteid.teid for _, fteid in made], full.pending)
        except RuleError:
            expected = "full"
        assert chosen == expected, (array, held, cursor, count)


def _walked_seid(next_seid: int, held: set[int]) -> int | str:
    """The SEID `new_seid` gives, by its walk alone (the reference of its first probe)."""
    seid = next_seid
    for _ in range(len(held) + 1):
        seid = seid if 0 < seid < SEID_SPACE else 1
        if seid not in held:
            return seid
        seid += 1
    return "full"


def test_a_new_seid_is_what_the_walk_gives(tmp_path):
    """The next SEID asked first alone: after one held, past SEID_SPACE (to 1), and 0 never given."""
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    try:
        upf = Upf(store)
        for seid in (1, 2, 5, SEID_SPACE - 1):
            upf.sessions.put(Session(seid=seid, node_id="smf", remote=FSeid(seid=9, ipv4="10.0.0.1")))
        held = {1, 2, 5, SEID_SPACE - 1}
        for next_seid in (0, 1, 3, 5, 6, SEID_SPACE - 1, SEID_SPACE, SEID_SPACE + 7):
            assert new_seid(next_seid, upf.sessions) == _walked_seid(next_seid, held), next_seid
    finally:
        store.close()


def test_every_number_a_session_holds_is_passed_over_after_the_cursor_wraps_and_given_once_released():
    """`Slots.hold` and `Teids.hold` (each table's numbers stored one by one): a URR slot, an SDF
    PDR's slot, two policers and a TEID held by one session are not given to the next one once the
    cursors come round to them, and are given again once the session is released."""
    holder = Session.model_construct(
        seid=5, node_id="smf", remote=FSeid(seid=9, ipv4="10.0.0.1"), urr_sets=(),
        pdrs={1: Pdr(id=1, precedence=1, pdi=Pdi(source_interface=0, local_fteid=FTeid(ipv4="192.0.2.1", teid=1)))},
        urr_slots={1: 1}, sdf_slots={1: 1}, qer_policers={1: (1, 2)})
    slots, teids = Slots(urr_count=6, sdf_count=6, policer_count=6), Teids(6, "192.0.2.1", None)
    slots.hold(holder)
    teids.hold(holder)

    def given() -> tuple[list[int], list[int], list[int], dict[int, int]]:
        slots.begin()
        sdf = slots.choose_sdf_slots(Session(seid=SEID, node_id="smf", remote=FSeid(seid=9, ipv4="10.0.0.1")),
                                     {1: Pdr(id=1, precedence=1, pdi=Pdi(source_interface=0, sdf_filters=(parse_flow("permit out ip from any to assigned"),)))})
        return slots.choose_new_urr_slots(SEID, [1]), slots.choose_new_policers(SEID, 2), teids.choose_new(SEID, 1), sdf

    assert given() == ([2], [3, 4], [2], {1: 2})
    slots.release(holder)
    teids.release(holder)
    assert given() == ([1], [1, 2], [1], {1: 1})


def test_sdf_pdr_slots_are_given_after_the_last_given_and_a_freed_one_once_they_wrap():
    """From a cursor, as URR slots and policers are: the first free slot from 1 walked every slot
    held before it, some two a session, on every establishment with SDF filters (from 1,924 us of
    CPU an establishment at 600 sessions to 3,180 at 3,200, bench.pfcp --applier dpp-sdf)."""
    slots = Slots(urr_count=0, sdf_count=6)  # slots 1 .. 5
    remote = FSeid(seid=9, ipv4="10.0.0.1")
    flows = (parse_flow("permit out ip from any to assigned"),)

    def established(seid: int, pdr_ids: list[int]) -> Session:
        slots.begin()
        pdi = Pdi(source_interface=0, sdf_filters=flows)
        pdrs = {pdr_id: Pdr(id=pdr_id, precedence=1, pdi=pdi) for pdr_id in pdr_ids}
        chosen = slots.choose_sdf_slots(Session(seid=seid, node_id="smf", remote=remote), pdrs)
        slots.settle()
        session = Session.model_construct(seid=seid, node_id="smf", remote=remote, urr_sets=(), pdrs=pdrs,
                                          urr_slots={}, sdf_slots=chosen, qer_policers={})
        slots.hold(session)
        return session

    first = established(1, [1, 2])
    assert first.sdf_slots == {1: 1, 2: 2}
    assert established(2, [1, 2]).sdf_slots == {1: 3, 2: 4}
    slots.release(first)
    assert established(3, [1]).sdf_slots == {1: 5}, "after the last given, not the first freed"
    assert established(4, [1, 2]).sdf_slots == {1: 1, 2: 2}, "freed, once past the last slot"
    with pytest.raises(RuleError, match="no slot for a PDR with SDF filters is free"):
        established(5, [1])
