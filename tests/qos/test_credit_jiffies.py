"""A window's credit without the clock (dataplane/bpf/nf/qos/police.h, "A window's credit without the
clock"): a window on the coarse clock stamps its CPU's credit with a jiffies deadline at most its
window's end, and a packet whose jiffies are not past it takes the credit as its window's without
reading the clock. In the kernel (xdp_police, the time and the jiffies given in the frame): every
decision, each CPU's credit and stamp the reference model's at 1, 100 and 400 Gb/s; with the chunks
the control plane writes, no W-long stretch of the coarse clock gets more than two windows; a credit
spent up to its stamp and not a jiffy after; with the kernel's own clock and jiffies, a stamp made and
packets passed on it. On the model, with (time, jiffies) pairs as the kernel makes them: no packet
passes on a credit of another window than its own (what a stamp past the window's end would do).
A window seen full (nf/qos/stamp.h): the room a drop saw kept with the stamp, packets
bigger dropped on it without the time while the stamp holds, on the model every such drop one the
window itself makes. A line left pending by a carve (its jiffies kept while it reads the clock) holds
no stamp for a program run meanwhile."""

from __future__ import annotations

import copy
import random
import time
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netapp.dataplane.handle import possible_cpus
from netapp.qos.abi import Algo, Clock, Gate
from netapp.qos.applier import (
    CLOCK_MONOTONIC_COARSE,
    WINDOW_CHUNK_SHARE,
    PolicerSpec,
    chunk_for,
    coarse_tick_ns,
    policer_value,
)
from netapp.qos.model import (
    BUCKETS,
    STAMP_MARGIN,
    WORD,
    Policer,
    PolicerConfig,
    credit_stamp,
    pending_stamp,
    seen_room,
    stamp_holds,
)
from netapp.qos.spec import MTU
from tests.qos.police import PoliceProgram, counters_tuple
from tests.qos.strategies import RATES, sequences, window_shifts
from tests.qos.test_burst import most_in_any_stretch
from tests.qos.test_credit import POLICER, WINDOWS, cpus, on_cpus, trains  # noqa: F401 - cpus: the fixture

WINDOW_TRIES = 3  # runs of the kernel's-clock test, each a window's end may fall in (once in some 4 s windows)
EXAMPLES = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def kernel_times(packets: list[tuple[int, int]], tick: int, grids: tuple[int, int, int], late: list[tuple[int, int]]
                 ) -> list[tuple[int, int, int]]:
    """(size, coarse time, jiffies) for packets at real times, as the kernel's tick makes them: the
    coarse clock the last step of `tick` (steps at clock_phase + k tick) at or before the time, the
    jiffies counting the ticks of another grid (at jiffies_phase + k tick) from `base`, read just
    before the clock, each as its tick handler ran, up to a tick late, another lateness at each
    packet (`late`, never taking either back): behind the real time by less than two ticks,
    police.h's L."""
    clock_phase, jiffies_phase, base = grids
    start, coarse, jiffies, out = packets[0][1], 0, 0, []
    for (size, now), (clock_late, jiffies_late) in zip(packets, late):
        real = now + 4 * tick  # clear of time 0 (the kernel's clock)
        seen = real - clock_late
        coarse = max(coarse, seen - (seen - clock_phase) % tick)
        jiffies = max(jiffies, base + (real - jiffies_late - start - jiffies_phase) // tick)
        out.append((size, coarse, jiffies))
    return out


def with_cpus(timed: list[tuple[int, int, int]], placed: list[tuple[int, int, int]]) -> list[tuple[int, int, int, int]]:
    """(size, time, cpu, jiffies): kernel_times' packets on on_cpus' CPUs."""
    return [(size, now, cpu, jiffies) for (size, now, jiffies), (_, _, cpu) in zip(timed, placed)]


def tick_times(data: st.DataObject, packets: list[tuple[int, int]], tick: int) -> list[tuple[int, int, int]]:
    """kernel_times with grids, first jiffies and lateness drawn."""
    within = st.integers(0, tick - 1)
    edges = st.one_of(st.sampled_from((0, tick - 1)), within)  # on time, a tick late: the bounds' worst
    grids = data.draw(st.tuples(within, within, st.integers(3, 1 << 30)))
    late = data.draw(st.lists(st.tuples(edges, edges), min_size=len(packets), max_size=len(packets)))
    return kernel_times(packets, tick, grids, late)


def random_kernel_times(rnd: random.Random, packets: list[tuple[int, int]], tick: int) -> list[tuple[int, int, int]]:
    """kernel_times with grids, first jiffies and lateness drawn from `rnd` (each clock on time or a
    tick late: the bounds' worst)."""
    late = [(rnd.choice((0, tick - 1)), rnd.choice((0, tick - 1))) for _ in packets]
    grids = (rnd.randrange(tick), rnd.randrange(tick), rnd.randint(3, 1 << 30))
    return kernel_times(packets, tick, grids, late)


def random_packets(rnd: random.Random, start: int, most_gap: int, size: Callable[[], int]) -> list[tuple[int, int]]:
    """400 (size, time) from `start`, 0 to `most_gap` ns apart, drawn from `rnd` (hypothesis' own
    draws stay near 0: every packet at one time)."""
    packets = []
    for _ in range(400):
        start += rnd.randint(0, most_gap)
        packets.append((size(), start))
    return packets


def decided_on_kernel_times(model: Policer, rnd: random.Random, packets: list[tuple[int, int]]) -> list[bool]:
    """`packets` decided on CPU 0 at random_kernel_times of the model's tick, each checked by
    decided_as_without_room: whether each was dropped on its line's room."""
    timed = random_kernel_times(rnd, packets, model.config.tick_ns)
    return [decided_as_without_room(model, size, now, jiffies) for size, now, jiffies in timed]


def decided_as_without_room(model: Policer, size: int, now: int, jiffies: int) -> bool:
    """Whether CPU 0's packet is dropped on the room its line kept (the policer not asked), checking
    that the model decides it as the same policer with no room kept (a bucket: nothing in its line)
    does."""
    exact = copy.deepcopy(model)
    exact.rooms.clear()
    if model.config.algo in BUCKETS:  # a bucket's line: its stamp, or its bound seen short, goes too
        exact.stamps.clear()
    held = stamp_holds(model.stamps.get(0, 0), jiffies) and size > model.rooms.get(0, WORD)
    on_room = held and model.credits.get(0, 0) < size
    assert model.decide(size, now, 0, jiffies) == exact.decide(size, now, 0, jiffies), f"{size} at {now}"
    return on_room


def assert_the_models(police: PoliceProgram, model: Policer, cpus: list[int], decided: list[bool],
                      expected: list[bool]) -> None:
    """The kernel's decisions, counters and each CPU's credit, stamp and room (POLICER's) the model's."""
    assert decided == expected
    assert counters_tuple(police.counters(POLICER)) == (
        model.passed_packets, model.passed_bytes, model.dropped_packets, model.dropped_bytes)
    per_cpu = police.per_cpu(POLICER)
    assert {cpu: (per_cpu[cpu].credit, per_cpu[cpu].stamp, per_cpu[cpu].short_credit) for cpu in cpus} == {
        cpu: (model.credits.get(cpu, 0), model.stamps.get(cpu, 0), room_word(model, cpu)) for cpu in cpus}


def room_word(model: Policer, cpu: int) -> int:
    """struct dpp_policer_stats.short_credit as the kernel keeps the model's room seen: ~room, 0 none."""
    return ~model.rooms[cpu] & WORD if cpu in model.rooms else 0


def ticked_config(rate: int, algo: Algo, shift: int, ticks: int, burst: int = 0) -> PolicerConfig:
    """A window of 2**shift ns on the coarse clock, `ticks` ticks long."""
    return PolicerConfig(rate=rate, burst=burst, algo=algo, window_shift=shift, clock=Clock.COARSE,
                         tick_ns=(1 << shift) // ticks)


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_every_decision_each_cpus_credit_and_stamp_are_the_models(police, cpus, rate, algo):
    @EXAMPLES
    @given(chunk=st.one_of(st.just(0), st.integers(min_value=64, max_value=6000)), shift=st.sampled_from(window_shifts(rate)),
           ticks=st.integers(min_value=2, max_value=48), packets=sequences(rate),
           picks=st.lists(st.integers(0, 1), min_size=100, max_size=100), data=st.data())
    def check(chunk, shift, ticks, packets, picks, data):
        config = ticked_config(rate, algo, shift, ticks)
        police.configure(POLICER, config, chunk=chunk)
        model = Policer(config, chunk=chunk)
        timed = tick_times(data, packets, config.tick_ns)
        sent = with_cpus(timed, on_cpus(cpus, packets, picks))
        expected = [model.decide(size, now, cpu, jiffies) for size, now, cpu, jiffies in sent]
        assert_the_models(police, model, cpus, police.decisions_on(POLICER, sent), expected)

    check()


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_with_the_written_chunks_no_window_long_stretch_of_the_clock_gets_more_than_two(police, cpus, rate, algo):
    """test_credit's bound on the coarse clock with stamps: the passes at the times the clock read
    then (a packet passed on its stamp: the time it would have read)."""
    n = possible_cpus()

    @EXAMPLES
    @given(burst=st.integers(min_value=2 * WINDOW_CHUNK_SHARE * n * MTU, max_value=8 * WINDOW_CHUNK_SHARE * n * MTU),
           ticks=st.integers(min_value=5, max_value=40), packets=trains(rate),
           picks=st.lists(st.integers(0, 1), min_size=300, max_size=300), data=st.data())
    def check(burst, ticks, packets, picks, data):
        spec = PolicerSpec(rate=rate, burst=burst, algo=algo)
        chunk, written = chunk_for(algo, rate, burst, Gate.OPEN, n), policer_value(spec, tick_ns=0, cpus=n)
        config = ticked_config(rate, algo, written.window_shift, ticks, burst=written.burst)
        assert chunk >= MTU
        police.configure(POLICER, config, chunk=chunk)
        timed = tick_times(data, packets, config.tick_ns)
        sent = with_cpus(timed, on_cpus(cpus, packets, picks))
        decisions = police.decisions_on(POLICER, sent)
        passed = [(size, now) for (size, now, _, _), ok in zip(sent, decisions) if ok]
        assert most_in_any_stretch(passed, config.window_ns) <= 2 * config.window_allowance

    check()


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
def test_on_kernel_times_no_packet_passes_on_a_credit_of_another_window(algo):
    """The model (whose every decision is the kernel's: above) on (coarse time, jiffies) pairs as the
    kernel makes them, a packet every 0 to 3 us at 1 Gb/s (about twice the rate) on one CPU, windows
    of 5 to 20 ticks: a packet that passes on its CPU's credit (the window's count untouched) is of
    the window the credit was counted in. (A stamp kept one tick off the window's end instead of
    four fails it.)"""

    @settings(max_examples=40, deadline=None)
    @given(ticks=st.integers(min_value=5, max_value=20), shift=st.integers(min_value=15, max_value=19),
           start=st.integers(min_value=1, max_value=10**12), rnd=st.randoms(use_true_random=False))
    def check(ticks, shift, start, rnd):
        config = ticked_config(10**9, algo, shift, ticks)
        model = Policer(config, chunk=MTU)
        tick, packets = config.tick_ns, []
        for _ in range(400):  # drawn from `rnd`: hypothesis' own draws stay near 0, every packet at one time
            start += rnd.randint(0, 3000)
            packets.append((rnd.randint(64, 1514), start))
        late = [(rnd.choice((0, tick - 1)), rnd.choice((0, tick - 1))) for _ in packets]
        grids = (rnd.randrange(tick), rnd.randrange(tick), rnd.randint(3, 1 << 30))
        for size, now, jiffies in kernel_times(packets, tick, grids, late):
            counted = (model.algorithm.number, model.algorithm.count)
            if model.decide(size, now, 0, jiffies) and (model.algorithm.number, model.algorithm.count) == counted:
                assert model.windows[0] == now >> shift, f"a credit of window {model.windows[0]} spent at {now}"

    check()


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
def test_a_credit_is_spent_up_to_its_stamp_and_not_a_jiffy_after(police, cpus, algo):
    """A carve at (time c0, jiffies j0) stamps the credit j0 + floor((E - c0) / tick) - 4: a packet
    at those jiffies passes on the credit whatever time it gives (the clock is not read: here a time
    of the next window), the window's word untouched; one a jiffy later reads the time, finds the
    credit of the window before and counts in its own window with a chunk carved afresh."""
    shift, size, chunk, tick = 20, 1000, 10_000, 1 << 15  # windows of 32 ticks, 131,072 bytes each
    config = PolicerConfig(rate=10**9, burst=0, algo=algo, window_shift=shift, clock=Clock.COARSE, tick_ns=tick)
    police.configure(POLICER, config, chunk=chunk)
    cpu, c0, j0 = cpus[0], (10**6 << shift) + 3 * tick + 5, 1000
    stamp = j0 + 28 - STAMP_MARGIN  # 28 whole ticks (and some ns) to the window's end
    assert credit_stamp(config, c0, j0) == stamp
    assert police.decisions_on(POLICER, [(size, c0, cpu, j0)]) == [True]
    assert (police.per_cpu(POLICER)[cpu].stamp, police.state(POLICER).window & 0x7FFFFFFF) == (stamp, size + chunk)
    later = c0 + (1 << shift)  # a time of the next window: not read while the stamp holds
    assert police.decisions_on(POLICER, [(size, later, cpu, stamp)] * 2) == [True, True]
    share, word = police.per_cpu(POLICER)[cpu], police.state(POLICER).window
    assert (share.credit, word >> 32, word & 0x7FFFFFFF) == (chunk - 2 * size, (c0 >> shift) & 0xFFFFFFFF, size + chunk)
    assert police.decisions_on(POLICER, [(size, later, cpu, stamp + 1)]) == [True]
    share, word = police.per_cpu(POLICER)[cpu], police.state(POLICER).window
    assert (word >> 32, word & 0x7FFFFFFF) == ((later >> shift) & 0xFFFFFFFF, size + chunk)
    restamped = credit_stamp(config, later, stamp + 1)
    assert (share.credit, share.credit_window, share.stamp) == (chunk, later >> shift, restamped)


def test_on_the_kernels_clock_and_jiffies_a_coarse_windows_credit_is_stamped_and_spent(police, cpus):
    """xdp_police reading the clock and the jiffies itself (time 0, jiffies 0), a window of 2^32 ns
    on the coarse clock with this kernel's tick: the first packet carves and stamps, the next pass on
    the credit, the window's word untouched. The stamp is looked for only when the window had more
    than its margin and a tick left around the run (else none is made, rightly). A run a window's end
    falls in (its count is then another window's: once in some 4 s windows) is made again, with the
    policer written afresh, up to WINDOW_TRIES times."""
    tick = coarse_tick_ns()
    if not tick:
        pytest.skip("no CLOCK_MONOTONIC_COARSE: no tick to stamp in")
    shift, size, chunk, cpu = 32, 1000, 100_000, cpus[0]
    config = PolicerConfig(rate=10**9, burst=0, algo=Algo.FIXED_WINDOW, window_shift=shift, clock=Clock.COARSE,
                           tick_ns=tick)
    for _ in range(WINDOW_TRIES):
        police.configure(POLICER, config, chunk=chunk)
        before = time.clock_gettime_ns(CLOCK_MONOTONIC_COARSE)
        assert police.decisions_on(POLICER, [(size, 0, cpu)] * 5) == [True] * 5
        after = time.clock_gettime_ns(CLOCK_MONOTONIC_COARSE)
        if before >> shift == after >> shift:
            break
    else:
        pytest.fail(f"a window's end fell in each of {WINDOW_TRIES} runs of some ms, windows of 4.3 s")
    share, word = police.per_cpu(POLICER)[cpu], police.state(POLICER).window
    assert (share.credit, word & 0x7FFFFFFF) == (chunk - 4 * size, size + chunk)
    if (((after >> shift) + 1) << shift) - after > (STAMP_MARGIN + 2) * tick:
        assert share.stamp != 0


@pytest.mark.parametrize("chunk", (0, MTU), ids=("no-chunk", "chunk"))
@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
def test_on_kernel_times_a_window_seen_full_drops_only_what_the_window_would(algo, chunk):
    """The model on (coarse time, jiffies) pairs as the kernel makes them, about twice the rate on one
    CPU: every packet dropped on the room its CPU saw (the window not asked) is one the window itself
    drops, asked at that time: each decision is that of the same policer with no room kept. (The
    sliding window's room taken less the window before's weight over four ticks instead of one
    fails it.)"""

    on_room = []

    @settings(max_examples=30, deadline=None)
    @given(ticks=st.integers(min_value=5, max_value=20), shift=st.integers(min_value=15, max_value=19),
           start=st.integers(min_value=1, max_value=10**12), rnd=st.randoms(use_true_random=False))
    def check(ticks, shift, start, rnd):
        model = Policer(ticked_config(10**9, algo, shift, ticks), chunk=chunk)
        packets = random_packets(rnd, start, 3000, lambda: rnd.randint(64, 1514))
        on_room.extend(decided_on_kernel_times(model, rnd, packets))

    check()
    assert sum(on_room) > len(on_room) // 100, "few packets dropped on a room seen: the rule was not tried"


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
def test_a_window_seen_full_drops_up_to_its_stamp_without_the_clock(police, cpus, algo):
    """A ticked window without a chunk, filled, then a packet it drops at (c0, j0): the CPU keeps the
    room it saw (~room in short_credit) with its stamp; a packet bigger than the room at jiffies up
    to the stamp is dropped on it whatever time it gives (a time of the next window: not read), the
    window's word untouched; a jiffy later the time is read, the next window passes it."""
    shift, tick = 20, 1 << 15  # windows of 32 ticks, 131,072 bytes each
    config = PolicerConfig(rate=10**9, burst=0, algo=algo, window_shift=shift, clock=Clock.COARSE, tick_ns=tick)
    police.configure(POLICER, config, chunk=0)
    cpu, c0, j0 = cpus[0], (10**6 << shift) + 3 * tick + 5, 1000
    model, stamp = Policer(config), j0 + 28 - STAMP_MARGIN
    sent = [(1500, c0, cpu, j0)] * 87 + [(1000, c0, cpu, j0)]  # 130,500 bytes, then one over
    assert police.decisions_on(POLICER, sent) == [model.decide(size, now, 0, j) for size, now, _, j in sent]
    assert model.dropped_packets == 1
    share, word = police.per_cpu(POLICER)[cpu], police.state(POLICER).window
    room = seen_room(config, model.algorithm)
    assert (share.stamp, share.short_credit, room) == (stamp, ~room & WORD, 131_072 - 87 * 1500)
    later = c0 + (1 << shift)  # a time of the next window: not read while the stamp holds
    assert police.decisions_on(POLICER, [(room + 1, later, cpu, stamp)] * 2) == [False, False]
    assert police.state(POLICER).window == word, "the window was asked"
    assert police.decisions_on(POLICER, [(room, later, cpu, stamp)]) == [True], "a packet the room holds"
    assert police.decisions_on(POLICER, [(room + 1, later, cpu, stamp + 1)]) == [True]
    assert police.state(POLICER).window >> 32 == (later >> shift) & 0xFFFFFFFF
    assert police.per_cpu(POLICER)[cpu].short_credit == 0, "the room seen kept past its window"


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
def test_a_line_left_pending_by_a_program_interrupted_is_no_stamp(police, cpus, algo):
    """A CPU's line as a carve leaves it while it reads the clock (its jiffies kept, pending, in the
    stamp's word) when another program runs on that CPU meanwhile: a credit of a window gone by and
    the jiffies of a reading not yet made. The packet of that other program finds no stamp at those
    jiffies or later: it reads the time (here of the next window), empties the stale credit and
    counts in its own window, which it stamps. (Kept as bare jiffies, as before, the word passes
    the stamp's check: the stale credit is spent unchecked.)"""
    shift, size, chunk, tick = 20, 1000, 10_000, 1 << 15
    config = PolicerConfig(rate=10**9, burst=0, algo=algo, window_shift=shift, clock=Clock.COARSE, tick_ns=tick)
    police.configure(POLICER, config, chunk=chunk)
    cpu, j0, now = cpus[0], 5000, (10**6 << shift) + 3 * tick
    assert all(not stamp_holds(pending_stamp(j0), j0 + later) for later in (0, 1, 2**16, 2**40))
    slot = police.per_cpu(POLICER)[cpu]
    slot.credit, slot.credit_window, slot.stamp = chunk, (now >> shift) - 1, pending_stamp(j0)
    police.write_share_of(POLICER, cpu, slot)
    assert police.decisions_on(POLICER, [(size, now, cpu, j0)]) == [True]
    share, word = police.per_cpu(POLICER)[cpu], police.state(POLICER).window
    assert (word >> 32, word & 0x7FFFFFFF) == ((now >> shift) & 0xFFFFFFFF, size + chunk), "the stale credit spent"
    assert (share.credit, share.credit_window, share.stamp) == (chunk, now >> shift, credit_stamp(config, now, j0))
