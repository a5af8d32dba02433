"""The policers' applier over the generic tables, of a loaded instance (libdpp) and of FakeDpp (the
same calls over dicts): values within the limits, windows from the burst, counters summed over
CPUs, ids checked."""

from __future__ import annotations

import dataclasses
from typing import Iterator

import pytest

from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.qos.abi import (GCRA_INTERVAL_SHIFT, GCRA_TAT_SHIFT, RATE_MAX, WINDOW_SHIFT_MIN, Algo, Clock, Gate,
                             PolicerStats)
from netapp.qos.applier import (PolicerApplier, PolicerSpec, coarse_tick_ns, cpu_share, policer_value,
                                window_shift_for)
from netapp.qos.views import policer_record
from tests.utils.kernel import require_kernel

SIZES = {"dpp_policers": 64}


POLICER_MAPS = ("dpp_policers", "dpp_policer_stats")


@pytest.fixture(scope="module")
def loaded() -> Iterator[Dataplane]:
    """One instance for the module's kernel tests: loading verifies the programs, seconds on a
    loaded machine. Each test gets it with the policers' maps zeroed (see `dataplane`)."""
    require_kernel()
    with Dataplane.open(map_sizes=SIZES) as opened:
        yield opened


def written_slots(dataplane: Dataplane) -> dict[str, list[int]]:
    """The ids of the policers' maps' slots that hold anything but zeroes, by map."""
    return {name: [index for index, value in dataplane.table(name).items() if any(bytes(value))]
            for name in POLICER_MAPS}


def zero_policer_maps(dataplane: Dataplane) -> None:
    ids = list(range(SIZES["dpp_policers"]))
    policers = dataplane.table("dpp_policers")
    policers.update_arrays(ids, (policers.spec.value * len(ids))())  # a C array is made zeroed
    dataplane.table("dpp_policer_stats").fill(ids)


@pytest.fixture(params=["kernel", "fake"])
def dataplane(request) -> Iterator[Dataplane]:
    if request.param == "fake":
        yield Dataplane(FakeDpp(map_sizes=SIZES))
        return
    shared = request.getfixturevalue("loaded")
    assert written_slots(shared) == {name: [] for name in POLICER_MAPS}, "a test before left policers behind"
    yield shared
    zero_policer_maps(shared)


def test_a_policer_is_written_with_its_window_and_its_state_zeroed(dataplane):
    applier = PolicerApplier(dataplane.table)
    applier.apply({5: PolicerSpec(rate=10**9, burst=125_000, algo=Algo.SLIDING_WINDOW, gate=Gate.CLOSED)})
    value = applier.state(5)
    assert (value.rate, value.burst, value.algo, value.gate) == (10**9, 125_000, Algo.SLIDING_WINDOW, Gate.CLOSED)
    assert value.window_shift == 19  # 524,288 ns: 65,536 bytes at 1 Gb/s; 2^20 would be 131,072
    assert (value.credit, value.last_ns, value.window, value.previous) == (0, 0, 0, 0)



@pytest.mark.parametrize("rate", [8_000, 10**9, 3 * 10**9, RATE_MAX])
def test_a_gcra_is_written_with_a_bytes_time_rounded_up_and_the_others_without(rate):
    """interval: 8e9 / rate ns a byte, in 2**-26 ns, the least integer not below it."""
    interval = policer_value(PolicerSpec(rate=rate, burst=3000, algo=Algo.GCRA)).interval
    exact = 8 * 10**9 * (1 << (GCRA_TAT_SHIFT + GCRA_INTERVAL_SHIFT))
    assert interval * rate >= exact > (interval - 1) * rate
    assert policer_value(PolicerSpec(rate=rate, burst=3000, algo=Algo.TOKEN_BUCKET)).interval == 0

@pytest.mark.parametrize(
    "rate, burst, shift",
    [(10**9, 125_000, 19), (8_000, 1, 19), (RATE_MAX, 1000, WINDOW_SHIFT_MIN), (8_000, 10**6, 32), (RATE_MAX, 1 << 30, 24)],
)
def test_the_window_is_the_longest_whose_allowance_fits_the_burst(rate, burst, shift):
    assert window_shift_for(rate, burst) == shift


@pytest.mark.parametrize("spec", [PolicerSpec(rate=7_999, burst=1500), PolicerSpec(rate=RATE_MAX + 1, burst=1500),
                                  PolicerSpec(rate=10**9, burst=0), PolicerSpec(rate=10**9, burst=(1 << 30) + 1),
                                  PolicerSpec(rate=10**9, burst=1500, algo=Algo.NONE)])
def test_a_policer_outside_the_limits_is_refused(spec):
    with pytest.raises(ValueError):
        policer_value(spec)


@pytest.mark.parametrize("bad_id", [0, SIZES["dpp_policers"]])
def test_ids_outside_the_map_are_refused_before_anything_is_written(dataplane, bad_id):
    applier = PolicerApplier(dataplane.table)
    with pytest.raises(ValueError, match="policer ids"):
        applier.apply({1: PolicerSpec(rate=10**9, burst=1500), bad_id: PolicerSpec(rate=10**9, burst=1500)})
    assert applier.state(1).algo == Algo.NONE


def test_counters_are_summed_over_cpus_and_removal_empties_the_slot(dataplane):
    applier = PolicerApplier(dataplane.table)
    applier.apply({2: PolicerSpec(rate=10**9, burst=1500)})
    stats = dataplane.table("dpp_policer_stats")
    per_cpu = [PolicerStats(passed_packets=cpu + 1, passed_bytes=100, dropped_packets=1, dropped_bytes=64)
               for cpu in range(stats.cpus)]
    stats.update({2: per_cpu})
    total = applier.counters(2)
    n = stats.cpus
    assert (total.passed_packets, total.passed_bytes, total.dropped_packets) == (n * (n + 1) // 2, 100 * n, n)
    applier.remove([2])
    assert applier.state(2).algo == Algo.NONE


def test_a_parent_is_written_with_its_children_and_a_chain_of_three_or_a_loop_is_refused(dataplane):
    applier = PolicerApplier(dataplane.table)
    spec = PolicerSpec(rate=10**9, burst=1500)
    applier.apply({5: PolicerSpec(rate=10**9, burst=1500, parent=4), 4: spec})
    assert (applier.state(5).parent, applier.state(4).parent) == (4, 0)
    with pytest.raises(ValueError, match="its parent 5 has a parent"):
        applier.apply({6: PolicerSpec(rate=10**9, burst=1500, parent=5), 5: PolicerSpec(rate=10**9, burst=1500, parent=4)})
    with pytest.raises(ValueError, match="its own parent"):
        applier.apply({7: PolicerSpec(rate=10**9, burst=1500, parent=7)})
    with pytest.raises(ValueError, match="policer ids"):
        applier.apply({8: PolicerSpec(rate=10**9, burst=1500, parent=SIZES["dpp_policers"])})
    assert [applier.state(policer_id).algo for policer_id in (6, 7, 8)] == [Algo.NONE] * 3, "nothing written"


def test_a_childs_record_names_its_parent(dataplane):
    applier = PolicerApplier(dataplane.table)
    applier.apply({3: PolicerSpec(rate=10**9, burst=125_000), 4: PolicerSpec(rate=10**8, burst=12_500, parent=3)})
    assert (policer_record(applier, 4).parent, policer_record(applier, 3).parent) == (3, None)


class WritesSeen:
    """The instance's tables, the order of the ids written into dpp_policers noted on the way through
    (each write still goes to the real table)."""

    def __init__(self, dataplane: Dataplane):
        self.dataplane, self.written = dataplane, []

    def __call__(self, name: str):
        table = self.dataplane.table(name)
        if name == "dpp_policers":
            update = table.update

            def noted(entries, *args):
                self.written += list(dict(entries))
                update(entries, *args)

            table.update = noted
        return table


def test_policers_are_emptied_children_before_their_parents(dataplane):
    """Asked in any order, the children go first, as the slots say (not as the caller lists them):
    a parent never empty while a child removed with it still names it."""
    seen = WritesSeen(dataplane)
    applier = PolicerApplier(seen)
    applier.apply({2: PolicerSpec(rate=10**9, burst=125_000), 5: PolicerSpec(rate=10**8, burst=12_500, parent=2),
                   7: PolicerSpec(rate=10**8, burst=12_500, parent=2), 9: PolicerSpec(rate=10**8, burst=12_500)})
    assert seen.written.index(2) < seen.written.index(5), "a parent is written before its children"
    seen.written.clear()
    applier.remove([2, 9, 5, 7])
    assert set(seen.written[:2]) == {5, 7} and set(seen.written) == {2, 5, 7, 9}
    assert [applier.state(policer_id).algo for policer_id in (2, 5, 7, 9)] == [Algo.NONE] * 4


UNCHAINED = [PolicerSpec(rate=10**8, burst=125_000), PolicerSpec(rate=10**8, burst=3000),
             PolicerSpec(rate=10**9, burst=3000, algo=Algo.GCRA), PolicerSpec(rate=8_000, burst=1500, gate=Gate.CLOSED),
             PolicerSpec(rate=10**9, burst=125_000, algo=Algo.SLIDING_WINDOW)]


def test_policers_without_parents_are_written_in_one_array_each_as_its_spec_makes_it(dataplane):
    """Policers none of which has a parent or a pair (a group of UPF establishments' QERs) are
    written from one C array: every slot holds its own spec's value (clock included), its state and
    its counters zeroed, whatever the slot held before."""
    applier = PolicerApplier(dataplane.table)
    ids = [9, 3, 17, 40, 11, 12, 13, 14, 15, 16]
    specs = {policer_id: UNCHAINED[index % len(UNCHAINED)] for index, policer_id in enumerate(ids)}
    applier.apply({policer_id: PolicerSpec(rate=5 * 10**9, burst=9000, algo=Algo.GCRA) for policer_id in ids})
    dataplane.table("dpp_policer_stats").fill(ids, PolicerStats(passed_packets=7, dropped_bytes=9))
    applier.apply(specs)
    for policer_id, spec in specs.items():
        written, wanted = applier.state(policer_id), policer_value(spec)
        assert bytes(written) == bytes(wanted), f"policer {policer_id}"
        assert applier.counters(policer_id).passed_packets == applier.counters(policer_id).dropped_bytes == 0


def test_a_group_of_a_few_policies_is_written_as_each_policer_alone_would_be(dataplane):
    """A group's policers are a few policies, one spec object many times (the fast path's) and equal
    ones apart: the values and chunks, worked out once a spec, are every policer's own, whatever
    mix of chunks the group has (one, or several: one counters' write each)."""
    applier = PolicerApplier(dataplane.table)
    tick = coarse_tick_ns()
    policies = [PolicerSpec(rate=10**9, burst=10**6), PolicerSpec(rate=10**9, burst=10**6),  # equal, apart
                PolicerSpec(rate=2 * 10**6, burst=3000), PolicerSpec(rate=10**8, burst=300000, algo=Algo.GCRA)]
    for mix in (policies[:2], policies):
        specs = {policer_id: mix[policer_id % len(mix)] for policer_id in range(1, 30)}
        applier.apply(specs)
        for policer_id, spec in specs.items():
            assert bytes(applier.state(policer_id)) == bytes(policer_value(spec, tick_ns=tick)), f"policer {policer_id}"
            share = cpu_share(spec)
            assert applier.counters(policer_id).chunk == (share.chunk if share else 0) * applier._cpus


def test_a_parent_rewritten_precise_with_no_parent_of_its_own_makes_its_coarse_child_precise(dataplane):
    coarse, precise = UNCHAINED[0], UNCHAINED[1]
    if policer_value(coarse).clock != Clock.COARSE or policer_value(precise).clock != Clock.PRECISE:
        pytest.skip(f"a 10 ms burst is not coarse with this kernel's tick ({coarse_tick_ns()} ns)")
    applier = PolicerApplier(dataplane.table)
    applier.apply({1: coarse, 5: coarse})
    applier.apply({2: dataclasses.replace(coarse, parent=1), 3: dataclasses.replace(coarse, parent=5)})
    applier.apply({1: precise, 4: coarse})  # no parent, no pair: written from one array
    assert [applier.state(policer_id).clock for policer_id in (1, 2, 3, 4)] == [
        Clock.PRECISE, Clock.PRECISE, Clock.COARSE, Clock.COARSE]
    assert applier.state(2).rate == coarse.rate and applier.state(2).parent == 1


class ReadsSeen:
    """The instance's tables, the slots read from dpp_policers counted on the way through (a record
    of every slot, `items`, and the slots looked up by id); each read still goes to the real table."""

    def __init__(self, dataplane: Dataplane):
        self.dataplane, self.scanned, self.looked_up = dataplane, 0, []
        self.policers = dataplane.table("dpp_policers")  # the one handed out

    def __call__(self, name: str):
        if name != "dpp_policers":
            return self.dataplane.table(name)
        table = self.policers
        items, lookup = table.items, table.lookup

        def scanned():
            self.scanned += 1
            return items()

        def looked_up(keys):
            self.looked_up += list(keys)
            return lookup(keys)

        table.items, table.lookup = scanned, looked_up
        return table


def test_a_parent_made_precise_reads_its_childrens_slots_only_once_the_index_is_made(dataplane):
    """The children of a parent rewritten precise come from the applier's index (made from every slot
    once, then kept as it writes): a later such rewrite reads no slot but the parent's and its
    children's, and finds the children as written since (a child moved to another parent, one
    emptied, one made a plain policer), as the slots hold them."""
    coarse, precise = UNCHAINED[0], UNCHAINED[1]
    if policer_value(coarse).clock != Clock.COARSE or policer_value(precise).clock != Clock.PRECISE:
        pytest.skip(f"a 10 ms burst is not coarse with this kernel's tick ({coarse_tick_ns()} ns)")
    seen = ReadsSeen(dataplane)
    applier = PolicerApplier(seen)
    applier.apply({1: coarse, 2: coarse})
    applier.apply({child: dataclasses.replace(coarse, parent=1) for child in (10, 11, 12, 13)})
    applier.apply({1: precise})  # the first: the index made from every slot
    assert seen.scanned == 1
    applier.apply({1: coarse, 2: coarse})
    applier.apply({10: dataclasses.replace(coarse, parent=1), 11: dataclasses.replace(coarse, parent=2),
                   20: dataclasses.replace(coarse, parent=2), 21: dataclasses.replace(coarse, parent=2)})
    applier.remove([12])
    applier.apply({13: coarse})
    seen.looked_up.clear()
    applier.apply({2: precise, 3: coarse})
    assert seen.scanned == 1, "no slot read but the parent's and its children's"
    assert sorted(seen.looked_up) == [2, 11, 20, 21]
    assert [applier.state(child).clock for child in (11, 20, 21)] == [Clock.PRECISE] * 3
    assert [applier.state(other).clock for other in (10, 13)] == [Clock.COARSE] * 2
    assert applier.state(11).parent == 2


def test_the_index_is_made_again_after_a_write_that_failed(dataplane):
    """A write that fails part way leaves slots the index cannot know: it is made again from every
    slot, and the child written before the failure is found."""
    coarse, precise = UNCHAINED[0], UNCHAINED[1]
    if policer_value(coarse).clock != Clock.COARSE or policer_value(precise).clock != Clock.PRECISE:
        pytest.skip(f"a 10 ms burst is not coarse with this kernel's tick ({coarse_tick_ns()} ns)")
    seen = ReadsSeen(dataplane)
    applier = PolicerApplier(seen)
    applier.apply({1: coarse, 2: coarse, 3: dataclasses.replace(coarse, parent=1)})
    applier.apply({1: precise})
    table = seen.policers
    update = table.update

    def fails_after_the_first(entries, *args):
        entries = list(dict(entries).items())
        update(entries[:1], *args)
        if len(entries) > 1:
            raise OSError("the second slot refused")

    table.update = fails_after_the_first
    with pytest.raises(OSError):
        applier.apply({4: dataclasses.replace(coarse, parent=2), 5: dataclasses.replace(coarse, parent=2)})
    table.update = update
    assert applier.state(4).parent == 2, "the first slot written"
    applier.apply({2: precise})
    assert applier.state(4).clock == Clock.PRECISE


class WritesInOrder:
    """A table that tells `seen` each write made through it (its name, the method, the first
    argument), then makes it."""

    def __init__(self, table, seen: list):
        self._table, self._seen = table, seen

    def __getattr__(self, name: str):
        attribute = getattr(self._table, name)
        if name not in ("fill", "update", "update_arrays"):
            return attribute

        def write(*args, **kwargs):
            self._seen.append((self._table.name, name, args))
            return attribute(*args, **kwargs)

        return write


@pytest.mark.parametrize("unchained", (True, False), ids=("unchained", "paired"))
def test_a_policers_cpu_slots_are_zeroed_without_a_chunk_before_it_and_given_their_chunk_after_it(
        dataplane, unchained):
    """The order that leaves a rewritten policer no credit of the old one (netapp.qos.applier's
    docstring): its CPUs' slots zeroed with no chunk, then its own slot, then its CPUs' slots with
    the chunk. (Written once, with the chunk, before its slot, as before, fails it.)"""
    seen: list = []
    applier = PolicerApplier(lambda name: WritesInOrder(dataplane.table(name), seen))
    spec = PolicerSpec(rate=10**9, burst=10**7, algo=Algo.TOKEN_BUCKET)
    applier.apply({5: spec}, pairs=None if unchained else {5: 6})
    stats = [(method, args) for name, method, args in seen if name == "dpp_policer_stats"]
    order = [name for name, _, args in seen if name == "dpp_policer_stats" or 5 in list(args[0])]
    assert order == ["dpp_policer_stats", "dpp_policers", "dpp_policer_stats"]
    (first, first_args), (last, last_args) = stats
    assert (first, list(first_args[0]), first_args[1:]) == ("fill", [5], ())
    assert (last, list(last_args[0]), last_args[1].chunk) == ("fill", [5], cpu_share(spec).chunk)
    assert cpu_share(spec).chunk and applier.counters(5).chunk == cpu_share(spec).chunk * dataplane.table(
        "dpp_policer_stats").cpus
