"""The CPUs' credit (dataplane/bpf/nf/qos/police.h, "The CPUs' credit"): a policer's CPUs carve
chunks out of its bucket or current window and pass packets on them without its lock or
compare-and-swap. In the kernel (xdp_police, each packet run on a CPU the test chose): every
decision, the counters and each CPU's credit are the reference model's, at 1, 100 and 400 Gb/s, for
all four algorithms; with the chunks and bucket the control plane writes, no stretch of time gets
more than the algorithm allows, whichever CPUs the packets come on; two CPUs racing for a bucket or
a window neither make nor lose a byte; a window's credit is spent in its window only; a closed gate
drops what a credit would cover. The applier's choice and what the API shows of it, over FakeDpp and
a loaded instance."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netapp.dataplane.handle import possible_cpus
from netapp.qos.abi import CHUNK_MAX, Algo, Gate
from netapp.qos.applier import (
    NANOBITS_PER_BYTE,
    WINDOW_CHUNK_SHARE,
    PolicerApplier,
    PolicerSpec,
    chunk_for,
    policer_value,
)
from netapp.qos.model import Policer, PolicerConfig
from netapp.qos.spec import MTU
from netapp.qos.views import policer_record
from tests.qos.police import counters_tuple, frame
from tests.qos.strategies import RATES, sequences, window_shifts
from tests.qos.test_applier import dataplane, loaded  # noqa: F401 - the fixtures (a shared instance, FakeDpp)
from tests.qos.test_burst import bucket_excess, most_in_any_stretch
from tests.utils.dataplane import run_on_cpus, two_cpus

POLICER = 13
BUCKETS = (Algo.TOKEN_BUCKET, Algo.GCRA)
WINDOWS = (Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW)
ALGOS = BUCKETS + WINDOWS
EXAMPLES = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def cpus() -> list[int]:
    return two_cpus()


def trains(rate: int) -> st.SearchStrategy[list[tuple[int, int]]]:
    """(size, time) in trains: packets back to back (the same ns: trains of some 60 on average,
    longer than the bucket), a packet's time at the rate between them now and then, and an idle time
    that refills the bucket while the CPUs keep their credits: what shows credits held on top of a
    full bucket."""
    near = st.integers(min_value=0, max_value=1514 * 8_000_000_000 // rate)
    idle = st.integers(min_value=0, max_value=50_000_000)
    gap = st.builds(lambda pick, n, i: i if pick == 0 else n if pick == 1 else 0, st.integers(0, 63), near, idle)
    steps = st.lists(st.tuples(st.integers(min_value=64, max_value=1514), gap), min_size=100, max_size=300)

    def timed(start: int, pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        out = []
        for size, step in pairs:
            start += step
            out.append((size, start))
        return out

    return st.builds(timed, st.integers(min_value=1, max_value=400 * 86400 * 10**9), steps)


def on_cpus(cpus: list[int], packets: list[tuple[int, int]], picks: list[int]) -> list[tuple[int, int, int]]:
    """Each (size, time) with the CPU it comes on."""
    return [(size, now, cpus[pick % len(cpus)]) for (size, now), pick in zip(packets, picks)]


@pytest.mark.parametrize("algo", ALGOS, ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_every_decision_and_each_cpus_credit_are_the_models(police, cpus, rate, algo):
    @EXAMPLES
    @given(burst=st.integers(min_value=1514, max_value=16 * 1514), chunk=st.integers(min_value=64, max_value=6000),
           shift=st.sampled_from(window_shifts(rate)), packets=sequences(rate),
           picks=st.lists(st.integers(0, 1), min_size=100, max_size=100))
    def check(burst, chunk, shift, packets, picks):
        config = PolicerConfig(rate=rate, burst=burst, algo=algo, window_shift=shift)
        police.configure(POLICER, config, chunk=chunk)
        model = Policer(config, chunk=chunk)
        timed = on_cpus(cpus, packets, picks)
        expected = [model.decide(size, now, cpu) for size, now, cpu in timed]
        assert police.decisions_on(POLICER, timed) == expected
        assert counters_tuple(police.counters(POLICER)) == (
            model.passed_packets, model.passed_bytes, model.dropped_packets, model.dropped_bytes)
        per_cpu = police.per_cpu(POLICER)
        assert {cpu: per_cpu[cpu].credit for cpu in cpus} == {cpu: model.credits.get(cpu, 0) for cpu in cpus}

    check()


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_with_the_written_chunks_no_stretch_gets_more_than_rate_times_it_plus_the_burst_asked(police, cpus, rate, algo):
    n = possible_cpus()

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(burst=st.integers(min_value=8 * n * MTU, max_value=16 * n * MTU), packets=trains(rate),
           picks=st.lists(st.integers(0, 1), min_size=300, max_size=300))
    def check(burst, packets, picks):
        spec = PolicerSpec(rate=rate, burst=burst, algo=algo)
        chunk, written = chunk_for(algo, rate, burst, Gate.OPEN, n), policer_value(spec, tick_ns=0, cpus=n)
        assert chunk >= MTU and written.burst == burst - n * chunk
        police.configure(POLICER, PolicerConfig(rate=rate, burst=written.burst, algo=algo), chunk=chunk)
        timed = on_cpus(cpus, packets, picks)
        decisions = police.decisions_on(POLICER, timed)
        passed = [(size, now) for (size, now, _), ok in zip(timed, decisions) if ok]
        assert bucket_excess(PolicerConfig(rate=rate, burst=burst, algo=algo), passed) <= 0

    check()


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_credits_held_over_an_idle_time_and_a_full_bucket_pass_no_more_than_the_burst_asked(police, cpus, algo):
    """The worst case: each CPU carves its chunk, the bucket refills while they hold it, then both
    spend all at one instant: the burst asked passes, not a byte more (less its packets' leftovers)."""
    n, burst, size = possible_cpus(), 1_250_000, 1000
    spec = PolicerSpec(rate=10**9, burst=burst, algo=algo)
    chunk, written = chunk_for(algo, 10**9, burst, Gate.OPEN, n), policer_value(spec, tick_ns=0, cpus=n)
    police.configure(POLICER, PolicerConfig(rate=10**9, burst=written.burst, algo=algo), chunk=chunk)
    start = 10**12
    assert police.decisions_on(POLICER, [(size, start, cpu) for cpu in cpus]) == [True] * len(cpus)
    train = [(size, start + 10**9, cpus[k % len(cpus)]) for k in range(2 * burst // size)]
    passed = sum(size for ok in police.decisions_on(POLICER, train) if ok)
    assert burst - len(cpus) * size < passed <= burst


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
def test_two_cpus_racing_for_a_window_with_credits_never_overspend_it(police, cpus, algo):
    """One time for every packet, one window: what passed and what the CPUs' credits still hold are
    the window's count, which stays within its allowance (a swap lost eight times drops the packet:
    fewer may pass, never more)."""
    config = PolicerConfig(rate=10**9, burst=0, algo=algo, window_shift=26)  # 8,388,608 bytes
    size, repeat, chunk = 64, 200_000, 100_000
    police.configure(POLICER, config, chunk=chunk)
    run_on_cpus(police.prog, frame(POLICER, size, (10**12 >> 26) << 26), repeat, cpus)
    stats, per_cpu = police.counters(POLICER), police.per_cpu(POLICER)
    assert stats.passed_packets + stats.dropped_packets == repeat * len(cpus)
    count = police.state(POLICER).window & 0x7FFFFFFF
    assert stats.passed_bytes + sum(cpu.credit for cpu in per_cpu) == count
    assert config.window_allowance - size < count <= config.window_allowance


def test_two_cpus_racing_for_a_bucket_neither_make_nor_lose_a_byte(police, cpus):
    """One time for every packet (no refill after the first): what passed, what the CPUs' credits
    hold and what the bucket has left add up to the bucket, to the byte."""
    size, repeat, burst, chunk = 64, 200_000, 8 << 20, 100_000
    police.configure(POLICER, PolicerConfig(rate=10**9, burst=burst, algo=Algo.TOKEN_BUCKET), chunk=chunk)
    run_on_cpus(police.prog, frame(POLICER, size, 10**12), repeat, cpus)
    stats, per_cpu = police.counters(POLICER), police.per_cpu(POLICER)
    assert stats.passed_packets + stats.dropped_packets == repeat * len(cpus)
    held = sum(cpu.credit for cpu in per_cpu)
    assert all(cpu.credit <= chunk for cpu in per_cpu)
    left = police.state(POLICER).credit
    assert left % NANOBITS_PER_BYTE == 0 and left // NANOBITS_PER_BYTE < size
    assert stats.passed_bytes + held + left // NANOBITS_PER_BYTE == burst


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_with_the_written_chunks_no_window_long_stretch_gets_more_than_two_windows(police, cpus, rate, algo):
    """The windows' bound (test_burst) with each CPU's chunk as the control plane writes it: the
    carves are counted in their window, so the CPUs' credits add nothing to it."""
    n = possible_cpus()

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(burst=st.integers(min_value=2 * WINDOW_CHUNK_SHARE * n * MTU, max_value=8 * WINDOW_CHUNK_SHARE * n * MTU),
           packets=trains(rate), picks=st.lists(st.integers(0, 1), min_size=300, max_size=300))
    def check(burst, packets, picks):
        spec = PolicerSpec(rate=rate, burst=burst, algo=algo)
        chunk, written = chunk_for(algo, rate, burst, Gate.OPEN, n), policer_value(spec, tick_ns=0, cpus=n)
        config = PolicerConfig(rate=rate, burst=written.burst, algo=algo, window_shift=written.window_shift)
        assert chunk >= MTU and written.burst == burst
        police.configure(POLICER, config, chunk=chunk)
        timed = on_cpus(cpus, packets, picks)
        decisions = police.decisions_on(POLICER, timed)
        passed = [(size, now) for (size, now, _), ok in zip(timed, decisions) if ok]
        assert most_in_any_stretch(passed, config.window_ns) <= 2 * config.window_allowance

    check()


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
def test_a_windows_credit_is_spent_in_that_window_only(police, cpus, algo):
    """A CPU carves its chunk in one window, then a packet of the next window, which its credit would
    cover, goes to the shared word, which counts it with a chunk carved afresh in that window: the
    credit left from the window before passes nothing there."""
    shift, size, chunk = 20, 1000, 10_000
    config = PolicerConfig(rate=10**9, burst=0, algo=algo, window_shift=shift)  # 131,072 bytes a window
    police.configure(POLICER, config, chunk=chunk)
    start = 10**6 << shift
    cpu = cpus[0]
    assert police.decisions_on(POLICER, [(size, start, cpu)]) == [True]
    assert (police.per_cpu(POLICER)[cpu].credit, police.state(POLICER).window & 0x7FFFFFFF) == (chunk, size + chunk)
    after = start + (1 << shift)
    assert police.decisions_on(POLICER, [(size, after, cpu)]) == [True]
    share, state = police.per_cpu(POLICER)[cpu], police.state(POLICER)
    assert (state.window >> 32, state.window & 0x7FFFFFFF) == ((after >> shift) & 0xFFFFFFFF, size + chunk)
    assert (share.credit, share.credit_window) == (chunk, after >> shift)
    # and in the window it was carved in, it passes packets without the shared word
    assert police.decisions_on(POLICER, [(size, after + 1, cpu)] * 3) == [True] * 3
    assert police.per_cpu(POLICER)[cpu].credit == chunk - 3 * size
    assert police.state(POLICER).window & 0x7FFFFFFF == size + chunk


def test_a_closed_gate_drops_what_a_cpus_credit_would_cover(police, cpus):
    """The gate closed by a rewrite of the policer's slot alone (its CPUs' credits left in place)."""
    config = PolicerConfig(rate=10**9, burst=100_000, algo=Algo.GCRA)
    police.configure(POLICER, config, chunk=10_000)
    timed = [(100, 10**12, cpus[0])] * 2
    assert police.decisions_on(POLICER, timed) == [True, True]
    assert police.per_cpu(POLICER)[cpus[0]].credit == 9_900  # filled to the chunk by the first, spent by the second
    police.rewrite(POLICER, PolicerConfig(rate=10**9, burst=100_000, algo=Algo.GCRA, gate=Gate.CLOSED))
    assert police.decisions_on(POLICER, timed) == [False, False]
    assert police.per_cpu(POLICER)[cpus[0]].credit == 9_900
    assert counters_tuple(police.counters(POLICER)) == (2, 200, 2, 200)


# --- the control plane's choice ------------------------------------------------------------------


def test_a_chunk_is_an_eighth_of_the_burst_over_the_cpus_at_most_and_none_below_an_mtu():
    assert chunk_for(Algo.TOKEN_BUCKET, 10**9, 1_250_000, Gate.OPEN, 2) == 78_125
    assert chunk_for(Algo.GCRA, 10**9, 1_250_000, Gate.OPEN, 4) == 39_062
    assert chunk_for(Algo.GCRA, 10**9, 10**9, Gate.OPEN, 2) == CHUNK_MAX
    assert chunk_for(Algo.TOKEN_BUCKET, 10**9, 8 * 2 * MTU - 1, Gate.OPEN, 2) == 0
    assert chunk_for(Algo.TOKEN_BUCKET, 10**9, 8 * 2 * MTU, Gate.OPEN, 2) == MTU
    assert chunk_for(Algo.GCRA, 10**9, 1_250_000, Gate.CLOSED, 2) == 0


def test_a_windows_chunk_is_a_sixteenth_of_its_allowance_over_the_cpus_at_most_and_none_below_an_mtu():
    # 1 Gb/s, a burst of 1,250,000 bytes: windows of 2^23 ns, 1,048,576 bytes each
    assert chunk_for(Algo.FIXED_WINDOW, 10**9, 1_250_000, Gate.OPEN, 2) == 1_048_576 // 32
    assert chunk_for(Algo.SLIDING_WINDOW, 10**9, 1_250_000, Gate.OPEN, 4) == 1_048_576 // 64
    assert chunk_for(Algo.SLIDING_WINDOW, 400 * 10**9, 1 << 30, Gate.OPEN, 2) == CHUNK_MAX
    # 1 Gb/s, windows of 2^18 ns: 32,768 bytes, a sixteenth over 2 CPUs 1,024, under an MTU
    assert chunk_for(Algo.FIXED_WINDOW, 10**9, 40_000, Gate.OPEN, 2) == 0
    assert chunk_for(Algo.FIXED_WINDOW, 10**9, 1_250_000, Gate.CLOSED, 2) == 0


def test_the_applier_writes_each_cpus_chunk_and_the_bucket_less_them_and_shows_the_burst_asked(dataplane):  # noqa: F811 - the fixture
    applier = PolicerApplier(dataplane.table)
    n = dataplane.table("dpp_policer_stats").cpus
    spec = PolicerSpec(rate=10**9, burst=1_250_000, algo=Algo.GCRA)
    windowed = PolicerSpec(rate=10**9, burst=1_250_000, algo=Algo.FIXED_WINDOW)
    applier.apply({3: spec, 4: windowed})
    chunk = chunk_for(Algo.GCRA, spec.rate, spec.burst, Gate.OPEN, n)
    windows = chunk_for(Algo.FIXED_WINDOW, spec.rate, spec.burst, Gate.OPEN, n)
    assert windows > 0
    assert [cpu.chunk for cpu in dataplane.table("dpp_policer_stats").get(3)] == [chunk] * n
    assert [cpu.chunk for cpu in dataplane.table("dpp_policer_stats").get(4)] == [windows] * n
    assert (applier.state(3).burst, applier.state(4).burst) == (spec.burst - n * chunk, windowed.burst)
    assert policer_record(applier, 3).burst_bytes == policer_record(applier, 4).burst_bytes == spec.burst
    assert policer_record(applier, 3).counters.passed_packets == 0


def test_an_applier_without_the_windows_credit_writes_its_windows_no_chunk(dataplane):  # noqa: F811 - the fixture
    """The UPF's (dpp_upf_police decides windows on their shared word alone): its buckets' chunks as
    any applier's, its windows' none."""
    applier = PolicerApplier(dataplane.table, window_credit=False)
    n = dataplane.table("dpp_policer_stats").cpus
    applier.apply({5: PolicerSpec(rate=10**9, burst=1_250_000, algo=Algo.SLIDING_WINDOW),
                   6: PolicerSpec(rate=10**9, burst=1_250_000, algo=Algo.TOKEN_BUCKET)})
    assert [cpu.chunk for cpu in dataplane.table("dpp_policer_stats").get(5)] == [0] * n
    assert [cpu.chunk for cpu in dataplane.table("dpp_policer_stats").get(6)] == [
        chunk_for(Algo.TOKEN_BUCKET, 10**9, 1_250_000, Gate.OPEN, n)] * n
