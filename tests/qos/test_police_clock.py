"""The policers' clock (dataplane/bpf/nf/qos/police.h, "The clock"): which one the control plane
chooses (netapp.qos.applier.clock_for, at the edges of its bounds), which one the kernel reads for a
policer and for a chain or a rule's two policers (xdp_police, xdp_police_rule: the time each policer
kept, against CLOCK_MONOTONIC_COARSE and CLOCK_MONOTONIC read around the run) and for a chain's
child under a precise parent and a rule's own policer under a precise slice policer (written
precise, the kernel's records), the decisions on a
tick-stepped clock (kernel against the model, times given), and what a tick-stepped clock does to
each algorithm over time (the reference model, netapp.qos.model, on synthetic times): the delivered
bytes within police.h's bounds where the coarse clock is chosen, and not where it is not."""

from __future__ import annotations

import dataclasses
import random
import time
from fractions import Fraction

import pytest

from netapp.dataplane.fake import FakeDpp
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import SharedPolice
from netapp.qos.abi import Algo, Clock, Gate
from netapp.qos.applier import (
    CLOCK_MONOTONIC_COARSE,
    COARSE_LAG_TICKS,
    COARSE_WINDOW_TICKS,
    PolicerApplier,
    PolicerSpec,
    clock_for,
    coarse_tick_ns,
    policer_value,
)
from netapp.qos.model import Policer, PolicerConfig
from netapp.qos.rules import RulePolicers
from netapp.qos.spec import MTU
from netapp.qos.views import policer_record
from tests.qos.test_burst import most_in_any_stretch
from tests.utils.kernel import require_kernel

TICK = 1 << 22  # ns, about HZ=250's 4 ms; a power of two puts the windows' edge on a shift
NANOBITS = 8 * 10**9
CHILD, PARENT = 21, 22


def edge_burst(rate: int, tick: int = TICK) -> int:
    """The least burst (bytes) the coarse clock is chosen for with a bucket: two ticks' refill and an MTU."""
    return -(-COARSE_LAG_TICKS * rate * tick // NANOBITS) + MTU


# --- the choice -----------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", [Algo.TOKEN_BUCKET, Algo.GCRA], ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", [8_000, 10**8, 400 * 10**9])
def test_a_bucket_is_coarse_from_two_ticks_refill_and_a_packet_on(algo, rate):
    burst = edge_burst(rate)
    if burst > 1 << 30:
        burst = 1 << 30  # 400 Gb/s: two ticks are 420 MB, within the largest burst
    assert clock_for(algo, rate, burst, 20, Gate.OPEN, TICK) == Clock.COARSE
    assert clock_for(algo, rate, burst - 1, 20, Gate.OPEN, TICK) == Clock.PRECISE


@pytest.mark.parametrize("algo", [Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW], ids=lambda a: a.name.lower())
def test_a_window_is_coarse_from_32_ticks_on(algo):
    edge = (COARSE_WINDOW_TICKS * TICK).bit_length() - 1  # 2^27 ns: 32 ticks of 2^22
    assert clock_for(algo, 10**9, 1 << 30, edge, Gate.OPEN, TICK) == Clock.COARSE
    assert clock_for(algo, 10**9, 1 << 30, edge - 1, Gate.OPEN, TICK) == Clock.PRECISE
    # one ns of tick more and 2^27 is short of 32 ticks
    assert clock_for(algo, 10**9, 1 << 30, edge, Gate.OPEN, TICK + 1) == Clock.PRECISE


def test_without_a_coarse_clock_every_policer_is_precise_and_a_closed_gate_is_coarse():
    assert clock_for(Algo.TOKEN_BUCKET, 8_000, 1 << 30, 32, Gate.OPEN, 0) == Clock.PRECISE
    assert clock_for(Algo.TOKEN_BUCKET, 10**9, 1, 10, Gate.CLOSED, TICK) == Clock.COARSE


def test_this_kernels_tick_is_the_coarse_clocks_step():
    """clock_getres's tick is what the clock steps by (a step seen from user space, the same clock)."""
    tick = coarse_tick_ns()
    first = time.clock_gettime_ns(CLOCK_MONOTONIC_COARSE)
    stepped = first
    while stepped == first:  # at most a tick (or two): the clock moves on by itself
        stepped = time.clock_gettime_ns(CLOCK_MONOTONIC_COARSE)
    assert tick in range(10**6 // 10, 10**7 + 1)  # HZ 100 .. 10000
    assert (stepped - first) % tick in (0, 1, tick - 1)  # one or more ticks, to a ns of rounding


def test_the_written_policer_and_its_record_say_the_clock():
    """Default bursts (the settings' 10 ms): a 4 ms tick's two and an MTU fit above 6 Mb/s."""
    applier = PolicerApplier(Dataplane(FakeDpp(map_sizes={"dpp_policers": 16})).table)
    applier.apply({1: PolicerSpec(rate=10**8, burst=125_000), 2: PolicerSpec(rate=10**6, burst=3000)})
    tick = coarse_tick_ns()
    expected = {policer_id: clock_for(Algo.TOKEN_BUCKET, rate, burst, 10, Gate.OPEN, tick).name.lower()
                for policer_id, rate, burst in ((1, 10**8, 125_000), (2, 10**6, 3000))}
    assert {policer_id: policer_record(applier, policer_id).clock for policer_id in (1, 2)} == expected
    assert policer_value(PolicerSpec(rate=10**8, burst=125_000), tick_ns=4 * 10**6).clock == Clock.COARSE
    assert policer_value(PolicerSpec(rate=10**8, burst=100_000 + MTU - 1), tick_ns=4 * 10**6).clock == Clock.PRECISE


def test_a_child_is_coarse_only_under_a_coarse_parent():
    """A chain decides on its first policer's reading: a child that could be coarse is written precise
    under a precise parent, whether the parent is written with it or was before."""
    applier = PolicerApplier(Dataplane(FakeDpp(map_sizes={"dpp_policers": 16})).table)
    coarse, precise = PolicerSpec(rate=10**8, burst=125_000), PolicerSpec(rate=10**8, burst=3000)
    tick = coarse_tick_ns()
    if not tick or policer_value(coarse).clock != Clock.COARSE:
        pytest.skip(f"a 10 ms burst is not coarse with this kernel's tick ({tick} ns)")
    applier.apply({1: coarse, 2: dataclasses.replace(coarse, parent=1), 3: precise,
                   4: dataclasses.replace(coarse, parent=3)})
    assert [applier.state(policer_id).clock for policer_id in (1, 2, 3, 4)] == [
        Clock.COARSE, Clock.COARSE, Clock.PRECISE, Clock.PRECISE]
    applier.apply({5: dataclasses.replace(coarse, parent=1), 6: dataclasses.replace(coarse, parent=3)})
    assert [applier.state(policer_id).clock for policer_id in (5, 6)] == [Clock.COARSE, Clock.PRECISE]
    applier.reconcile({policer_id: spec for policer_id, spec in
                       {1: coarse, 2: dataclasses.replace(coarse, parent=1), 3: precise,
                        4: dataclasses.replace(coarse, parent=3)}.items()}, range(1, 16))
    assert [applier.state(policer_id).clock for policer_id in (1, 2, 3, 4)] == [
        Clock.COARSE, Clock.COARSE, Clock.PRECISE, Clock.PRECISE]


@pytest.fixture(scope="module")
def kernel_tables():
    """A loaded instance's tables (the policers and the rules' slots in the kernel's maps), one for the
    module's tests (each writes afresh what it reads), with a 10 ms burst at 100 Mb/s coarse on this
    kernel's tick (else the choice is not there to test)."""
    require_kernel()
    if not coarse_tick_ns() or policer_value(COARSE).clock != Clock.COARSE:
        pytest.skip(f"a 10 ms burst is not coarse with this kernel's tick ({coarse_tick_ns()} ns)")
    with Dataplane.open(map_sizes={"dpp_policers": 64, "dpp_rule_policers": 8}) as opened:
        yield opened.table


COARSE, PRECISE = PolicerSpec(rate=10**8, burst=125_000), PolicerSpec(rate=10**8, burst=3000)
SLOW = PolicerSpec(rate=5 * 10**5, burst=125_000)  # coarse, and slow enough for a jiffies stamp: a tick


def test_a_rules_own_policer_is_coarse_only_with_a_coarse_slice_policer(kernel_tables):
    """A rule's two policers decide on the own one's reading: under a precise slice policer the own
    one is written precise, under a coarse one coarse (the kernel's records)."""
    rules = RulePolicers(kernel_tables)
    rules.place([("alice/a", 0, (COARSE, SharedPolice("slice alice/precise", PRECISE))),
                 ("alice/b", 1, (COARSE, SharedPolice("slice alice/coarse", COARSE))),
                 ("alice/c", 2, (COARSE, None))])
    clocks = {rule_id: tuple(rules.policers.state(policer_id).clock
                             for policer_id in rules.of_rule(rule_id) if policer_id)
              for rule_id in ("alice/a", "alice/b", "alice/c")}
    assert clocks == {"alice/a": (Clock.PRECISE, Clock.PRECISE), "alice/b": (Clock.COARSE, Clock.COARSE),
                      "alice/c": (Clock.COARSE,)}


def test_a_parent_rewritten_precise_takes_its_coarse_children_along(kernel_tables):
    """A parent rewritten from coarse to precise rewrites the clock of its coarse children in the same
    call (their configuration otherwise and their parent kept), not another's child."""
    applier = PolicerApplier(kernel_tables)
    applier.apply({1: COARSE, 2: dataclasses.replace(COARSE, parent=1), 3: COARSE,
                   4: dataclasses.replace(COARSE, parent=3)})
    assert applier.state(2).clock == Clock.COARSE
    applier.apply({1: PRECISE})
    child = applier.state(2)
    written = policer_value(COARSE)  # its burst the bucket's share (the CPUs' chunks apart)
    assert (child.clock, child.parent, child.rate, child.burst) == (Clock.PRECISE, 1, written.rate, written.burst)
    assert [applier.state(policer_id).clock for policer_id in (3, 4)] == [Clock.COARSE, Clock.COARSE]


def test_a_slice_policer_rewritten_precise_takes_its_rules_own_policers_along(kernel_tables):
    rules = RulePolicers(kernel_tables)
    rules.place([("alice/a", 0, (COARSE, SharedPolice("slice alice/s", COARSE)))])
    own = rules.of_rule("alice/a")[0]
    assert rules.policers.state(own).clock == Clock.COARSE
    rules.place([("alice/b", 1, (None, SharedPolice("slice alice/s", PRECISE)))])
    assert rules.policers.state(own).clock == Clock.PRECISE


def test_a_coarse_token_bucket_a_precise_child_reads_for_has_no_tick_and_a_gcra_keeps_its(kernel_tables):
    """A jiffies stamp's time holds for coarse readings only: a coarse token bucket whose child is
    precise is written without its tick (previous 0), whether the child is written with it or
    later (the parent's state then kept); a coarse child leaves the tick, and GCRA keeps its own."""
    applier = PolicerApplier(kernel_tables)
    gcra = dataclasses.replace(SLOW, algo=Algo.GCRA)
    applier.apply({1: SLOW, 2: dataclasses.replace(PRECISE, parent=1), 3: SLOW,
                   4: dataclasses.replace(SLOW, parent=3), 5: gcra, 6: dataclasses.replace(PRECISE, parent=5)})
    assert [applier.state(policer_id).previous for policer_id in (1, 3, 5)] == [0, coarse_tick_ns(), coarse_tick_ns()]
    applier.apply({7: SLOW})
    applier.apply({8: dataclasses.replace(PRECISE, parent=7)})
    assert (applier.state(7).clock, applier.state(7).previous) == (Clock.COARSE, 0)
    applier.apply({7: SLOW})  # the parent rewritten alone: its precise child still reads for it
    assert applier.state(7).previous == 0


def test_a_coarse_slice_token_bucket_a_precise_own_policer_reads_for_has_no_tick(kernel_tables):
    rules = RulePolicers(kernel_tables)
    rules.place([("alice/a", 0, (SLOW, SharedPolice("slice alice/t", SLOW)))])
    own, shared = rules.of_rule("alice/a")
    assert rules.policers.state(shared).previous == coarse_tick_ns()
    rules.place([("alice/a", 0, (PRECISE, SharedPolice("slice alice/t", SLOW)))])
    assert (rules.policers.state(own).clock, rules.policers.state(shared).previous) == (Clock.PRECISE, 0)


def test_reconcile_rewrites_a_bucket_whose_tick_is_not_the_one_wanted(kernel_tables):
    """A slot adopted from an older data plane, or one a window's last write left its word in
    (a sliding window rewritten a bucket), holds another previous: reconcile writes the tick."""
    applier = PolicerApplier(kernel_tables)
    applier.apply({9: SLOW})
    slot = applier.state(9)
    slot.previous = 1 << 40
    kernel_tables("dpp_policers").update({9: slot})
    applier.reconcile({9: SLOW}, range(9, 10))
    assert applier.state(9).previous == coarse_tick_ns()


# --- the clock the kernel reads -------------------------------------------------------------------


def between_ticks(run, kept) -> None:
    """run() with the coarse clock unchanged around it, then kept(its value, CLOCK_MONOTONIC before
    run()): whether what the policers kept is as expected. Retried while a tick falls within, or
    while user space's copy of the coarse clock (the vDSO's) is not yet the kernel's (a tick being
    published, on a loaded VM); a policer that reads the wrong clock fails every time."""
    seen = None
    for _ in range(20):
        coarse = time.clock_gettime_ns(CLOCK_MONOTONIC_COARSE)
        precise = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        run()
        if time.clock_gettime_ns(CLOCK_MONOTONIC_COARSE) != coarse:
            continue
        seen = kept(coarse, precise)
        if seen is True:
            return
    pytest.fail(f"not as expected in 20 runs between ticks; the last: {seen}")


BUCKET = PolicerConfig(rate=10**9, burst=10**6, algo=Algo.TOKEN_BUCKET)


@pytest.mark.parametrize("child_clock, parent_clock", [(Clock.COARSE, Clock.COARSE), (Clock.COARSE, Clock.PRECISE),
                                                       (Clock.PRECISE, Clock.COARSE), (Clock.PRECISE, Clock.PRECISE)],
                         ids=["coarse-coarse", "coarse-precise", "precise-coarse", "precise-precise"])
def test_a_chain_reads_its_first_policers_clock_once(police, child_clock, parent_clock):
    """The time each kept (a token bucket's last_ns): the coarse clock's value exactly, or the precise
    clock's, later than CLOCK_MONOTONIC before the run (the coarse one is behind it); the parent the
    child's, whatever its own (the control plane writes no coarse child under a precise parent)."""
    police.configure(PARENT, BUCKET, clock=parent_clock)
    police.configure(CHILD, BUCKET, parent=PARENT, clock=child_clock)

    def kept(coarse: int, precise: int):
        child, parent = police.state(CHILD).last_ns, police.state(PARENT).last_ns
        child_ok = child == coarse if child_clock == Clock.COARSE else child >= precise
        return (child_ok and parent == child) or (coarse, precise, child, parent)

    between_ticks(lambda: police.passes(CHILD, 100, 0), kept)
    assert police.counters(PARENT).passed_packets >= 1


def test_a_rules_own_and_shared_policers_share_a_reading_as_a_chain(police):
    police.configure(CHILD, BUCKET, clock=Clock.COARSE)
    police.configure(PARENT, BUCKET, clock=Clock.COARSE)
    police.name_rule_policers(3, CHILD, PARENT)

    def both(coarse: int, _: int):
        own, shared = police.state(CHILD).last_ns, police.state(PARENT).last_ns
        return own == shared == coarse or (coarse, own, shared)

    between_ticks(lambda: police.rule_passes(3, 100, 0), both)
    police.configure(CHILD, BUCKET, clock=Clock.PRECISE)

    def own_precise(coarse: int, precise: int):
        own, shared = police.state(CHILD).last_ns, police.state(PARENT).last_ns
        return own == shared >= precise or (coarse, precise, own, shared)

    between_ticks(lambda: police.rule_passes(3, 100, 0), own_precise)


# --- decisions and accuracy on a tick-stepped clock ----------------------------------------------


def coarse_times(times: list[int], tick: int, seed: int) -> list[int]:
    """What a coarse clock reads at each of `times`: the last tick at or before it, its grid at a
    random phase, one tick in ten late (applied with the next: a lag of up to two ticks)."""
    rng = random.Random(seed)
    phase = rng.randrange(tick)
    late = {k for k in range(times[0] // tick - 2, times[-1] // tick + 2) if rng.random() < 0.1}
    out = []
    for now in times:
        k = (now - phase) // tick
        while k in late:
            k -= 1
        out.append(max(k * tick + phase, 1))
    return out


def offered(rate: int, size: int, duration: int, start: int = 10**9) -> list[int]:
    """Packets of `size` bytes at twice `rate`, evenly spaced over `duration` ns from `start`."""
    gap = Fraction(size * NANOBITS, 2 * rate)
    return [start + int(k * gap) for k in range(int(duration / gap))]


def run_model(config: PolicerConfig, size: int, times: list[int], clock: list[int]) -> list[tuple[int, int]]:
    """The (size, real time) of the packets the model passes deciding on `clock`'s readings."""
    model = Policer(config)
    return [(size, now) for now, read in zip(times, clock) if model.decide(size, read)]


def bucket_excess(rate: int, burst: int, lag: int, passed: list[tuple[int, int]]) -> Fraction:
    """The most by which the bytes between two passed packets (both in) exceed R (t_j - t_i + lag)
    / 8e9 + B, in one pass: max over j of (S_j - R t_j) less the least (S_(i-1) - R t_i) before it."""
    worst, least, total = Fraction(-burst), None, 0
    for size, now in passed:
        start = Fraction(total) - Fraction(rate * now, NANOBITS)
        least = start if least is None else min(least, start)
        total += size
        worst = max(worst, total - Fraction(rate * now, NANOBITS) - least - Fraction(rate * lag, NANOBITS) - burst)
    return worst


@pytest.mark.parametrize("algo", [Algo.TOKEN_BUCKET, Algo.GCRA], ids=lambda a: a.name.lower())
@pytest.mark.parametrize("seed", [1, 2])
def test_a_bucket_at_the_coarse_edge_keeps_its_rate_and_its_bound(algo, seed):
    """10 Mb/s offered twice over, 200 ticks: with the burst at the edge (two ticks' refill and an
    MTU) the coarse clock delivers within a packet of R (T - L) / 8e9, and, offered in bursts,
    never more than R (T + L) / 8e9 + B in any stretch (L = two ticks), where the precise clock's
    R T / 8e9 + B is exceeded; half a tick's refill for a burst delivers half the rate."""
    rate, size, duration, lag = 10**7, 500, 200 * TICK, COARSE_LAG_TICKS * TICK
    times = offered(rate, size, duration)
    clock = coarse_times(times, TICK, seed)
    burst = edge_burst(rate)
    passed = run_model(PolicerConfig(rate=rate, burst=burst, algo=algo), size, times, clock)
    delivered = sum(s for s, _ in passed)
    assert delivered >= Fraction(rate * (duration - lag), NANOBITS) - size
    assert bucket_excess(rate, burst, lag, passed) <= 0
    # four times the rate on for 10 ticks, off for 7.3 (the bucket fills; the bursts start at every
    # phase of a tick): the bound holds, and its lag's part is needed
    bursts = [now for now in offered(2 * rate, size, duration) if (now - times[0]) % (173 * TICK // 10) < 10 * TICK]
    passed = run_model(PolicerConfig(rate=rate, burst=burst, algo=algo), size, bursts,
                       coarse_times(bursts, TICK, seed))
    assert bucket_excess(rate, burst, lag, passed) <= 0 < bucket_excess(rate, burst, 0, passed)
    small = PolicerConfig(rate=rate, burst=rate * TICK // NANOBITS // 2, algo=algo)
    assert sum(s for s, _ in run_model(small, size, times, clock)) < Fraction(rate * duration, NANOBITS) * 6 / 10
    assert sum(s for s, _ in run_model(small, size, times, times)) >= Fraction(rate * (duration), NANOBITS) * 95 / 100


@pytest.mark.parametrize("algo", [Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW], ids=lambda a: a.name.lower())
@pytest.mark.parametrize("seed", [1, 2])
def test_a_window_of_32_ticks_keeps_its_rate_and_its_bound(algo, seed):
    """Windows of 32 ticks, 10 Mb/s offered twice over for 20 windows: in any stretch of T no more
    than A (floor((T + L) / W) + 2); over the whole, within two windows' allowance of the precise
    clock's on the same arrivals, less L / W of the rate for the sliding window."""
    shift = (COARSE_WINDOW_TICKS * TICK).bit_length() - 1
    rate, size, lag = 10**7, 500, COARSE_LAG_TICKS * TICK
    config = PolicerConfig(rate=rate, burst=1 << 30, algo=algo, window_shift=shift)
    width, allowance = config.window_ns, config.window_allowance
    times = offered(rate, size, 20 * width)
    passed = run_model(config, size, times, coarse_times(times, TICK, seed))
    for stretch in (width // 2, width, 3 * width):
        assert most_in_any_stretch(passed, stretch) <= allowance * ((stretch + lag) // width + 2)
    precise = sum(s for s, _ in run_model(config, size, times, times))
    delivered = sum(s for s, _ in passed)
    loss = Fraction(lag, width) * Fraction(rate * 20 * width, NANOBITS) if algo == Algo.SLIDING_WINDOW else 0
    assert precise - 2 * allowance - loss <= delivered <= precise + 2 * allowance


@pytest.mark.parametrize("algo", [Algo.TOKEN_BUCKET, Algo.GCRA, Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW],
                         ids=lambda a: a.name.lower())
def test_the_kernels_decisions_on_a_tick_stepped_clock_are_the_models(police, algo):
    """A coarse policer in the kernel, its times given as a coarse clock reads them (xdp_police takes a
    frame's time for every policer): each decision the model's. 1 Gb/s offered twice over, windows
    of 2^15 ns, ticks of 2^12, so that 150 packets cross some 13 windows and 100 ticks."""
    rate, size, tick = 10**9, 700, 1 << 12
    config = PolicerConfig(rate=rate, burst=3 * rate * tick // NANOBITS + MTU, algo=algo, window_shift=15)
    times = offered(rate, size, 150 * size * NANOBITS // (2 * rate), start=10**12)
    packets = [(size, now) for now in coarse_times(times, tick, 3)]
    police.configure(CHILD, config, clock=Clock.COARSE)
    model = Policer(config)
    assert police.decisions(CHILD, packets) == [model.decide(s, now) for s, now in packets]
    assert 0 < model.passed_packets < len(packets)
