"""A bucket seen short by jiffies (dataplane/bpf/nf/qos/stamp.h): a token bucket or GCRA on the coarse
clock with a tick keeps, when it drops a packet of b bytes, a jiffies stamp up to which the coarse
clock cannot reach the time the bucket may hold b bytes, and the room b - 1; while the stamp holds,
a packet its CPU's credit does not cover and bigger than the room is dropped from the line alone. In
the kernel (xdp_police, the time and the jiffies given in the frame): every decision, each CPU's
credit, stamp and room the reference model's at 1, 100 and 400 Gb/s, ticks drawn so that stamps are
made; a drop's stamp and room as stamp.h has them, packets dropped on them up to the stamp whatever
time they give and read the time a jiffy later; with the kernel's own clock and jiffies, a stamp made
and kept. On the model, with (time, jiffies) pairs as the kernel makes them: every packet dropped on
the line is one the bucket itself drops. The control plane writes a coarse bucket's tick."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netapp.qos.abi import Algo, Clock, PolicerStats
from netapp.qos.applier import PolicerSpec, coarse_tick_ns, policer_value
from netapp.qos.model import (
    BUCKETS,
    NEVER,
    STAMP_AHEAD,
    STAMP_MARGIN,
    STAMP_PENDING,
    WORD,
    Policer,
    PolicerConfig,
    bucket_stamp,
    stamp_holds,
)
from tests.qos.strategies import RATES
from tests.qos.test_credit import POLICER, cpus, on_cpus, trains  # noqa: F401 - cpus: the fixture
from tests.qos.test_credit_jiffies import (
    EXAMPLES,
    assert_the_models,
    decided_on_kernel_times,
    random_packets,
    tick_times,
    with_cpus,
)

FULL_SIZE = 1514


def kernel_jiffies() -> int:
    """The kernel's 64-bit jiffies, as /proc/timer_list shows them (skips where it cannot be read)."""
    try:
        with open("/proc/timer_list") as timers:
            return next(int(line.split()[1]) for line in timers if line.startswith("jiffies:"))
    except (OSError, StopIteration):
        pytest.skip("no jiffies in /proc/timer_list")


def ticked_bucket(rate: int, algo: Algo, burst: int, tick: int) -> PolicerConfig:
    return PolicerConfig(rate=rate, burst=burst, algo=algo, clock=Clock.COARSE, tick_ns=tick)


def ticks_per_packet(rate: int) -> st.SearchStrategy[int]:
    """A tick of 1/256 to 1/32 of a full-size packet's time at `rate` (synthetic: so that a drop's
    bucket needs the margin's ticks and more to hold a packet, stamps are made and packets come
    while they hold)."""
    packet_ns = FULL_SIZE * 8_000_000_000 // rate
    return st.integers(min_value=32, max_value=256).map(lambda k: max(1, packet_ns // k))


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_every_decision_each_cpus_credit_stamp_and_room_are_the_models(police, cpus, rate, algo):
    on_line = []

    @EXAMPLES
    @given(chunk=st.one_of(st.just(0), st.integers(min_value=64, max_value=6000)),
           burst=st.integers(min_value=FULL_SIZE, max_value=16 * FULL_SIZE), tick=ticks_per_packet(rate),
           packets=trains(rate), picks=st.lists(st.integers(0, 1), min_size=300, max_size=300), data=st.data())
    def check(chunk, burst, tick, packets, picks, data):
        config = ticked_bucket(rate, algo, burst, tick)
        police.configure(POLICER, config, chunk=chunk)
        model = Policer(config, chunk=chunk)
        sent = with_cpus(tick_times(data, packets, tick), on_cpus(cpus, packets, picks))
        expected = []
        for size, now, cpu, jiffies in sent:
            held = stamp_holds(model.stamps.get(cpu, 0), jiffies) and size > model.rooms.get(cpu, WORD)
            on_line.append(held and model.credits.get(cpu, 0) < size)
            expected.append(model.decide(size, now, cpu, jiffies))
        assert_the_models(police, model, cpus, police.decisions_on(POLICER, sent), expected)

    check()
    assert any(on_line), "no packet dropped on a stamp: the rule was not tried"


@pytest.mark.parametrize("chunk", (0, 1514), ids=("no-chunk", "chunk"))
@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_on_kernel_times_a_bucket_seen_short_drops_only_what_the_bucket_would(algo, chunk):
    """The model (whose every decision is the kernel's: above) on (coarse time, jiffies) pairs as the
    kernel makes them, about twice the rate on one CPU, half of the packets full-size, ticks of 1/3
    to 1/200 of a full-size packet's time: every packet dropped on the line (the bucket not asked) is one the bucket itself drops,
    asked at that time: each decision is that of the same policer with no room kept. (It tests the
    margin, not the last tick: a stamp three ticks later fails it, one or two later do not.)"""
    on_line = []

    @settings(max_examples=30, deadline=None)
    @given(k=st.integers(min_value=3, max_value=200), burst=st.integers(min_value=FULL_SIZE, max_value=8 * FULL_SIZE),
           start=st.integers(min_value=1, max_value=10**12), rnd=st.randoms(use_true_random=False))
    def check(k, burst, start, rnd):
        rate = 10**9
        tick = FULL_SIZE * 8_000_000_000 // rate // k
        model = Policer(ticked_bucket(rate, algo, burst, tick), chunk=chunk)
        # 0 to 12,000 ns apart: a full-size packet's time at the rate is 12,112 ns
        packets = random_packets(rnd, start, 12_000, lambda: rnd.choice((FULL_SIZE, rnd.randint(64, FULL_SIZE))))
        on_line.extend(decided_on_kernel_times(model, rnd, packets))

    check()
    assert sum(on_line) > len(on_line) // 100, "few packets dropped on a stamp: the rule was not tried"


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_a_bucket_seen_short_drops_up_to_its_stamp_without_the_clock(police, cpus, algo):
    """A ticked bucket of 3,000 bytes at 8 kb/s (a byte a ms), no chunk, ticks of 1 ms: emptied at
    (c0, j0), then a packet of 1,000 bytes it drops: the CPU keeps the room 999 (~ in short_credit)
    and the stamp of the time the bucket may hold 1,000 bytes, some 1,000 ticks out. A packet of
    1,000 bytes or more at jiffies up to the stamp is dropped on it whatever time it gives (a time an
    hour later, when the bucket is full: not read), the bucket's state untouched; one of 999 bytes is
    offered to the bucket (and passes, at that time) with the stamp kept; a jiffy after the stamp
    the time is read and the bucket passes the packet, no jiffies left pending."""
    tick, rate = 10**6, 8_000
    config = ticked_bucket(rate, algo, 3_000, tick)
    police.configure(POLICER, config, chunk=0)
    cpu, c0, j0 = cpus[0], 10**12, 5_000
    model = Policer(config)
    sent = [(1_500, c0, cpu, j0)] * 2 + [(1_000, c0, cpu, j0)]  # 3,000 bytes of a full bucket, then one over
    assert police.decisions_on(POLICER, sent) == [model.decide(size, now, 0, j) for size, now, _, j in sent]
    assert model.dropped_packets == 1
    share, state = police.per_cpu(POLICER)[cpu], police.state(POLICER)
    until = model.algorithm.fills_at(1_000)
    stamp = bucket_stamp(config, c0, until, j0)
    assert until - c0 >= 10**9 and stamp == j0 + (until - c0) // tick - STAMP_MARGIN
    assert (share.stamp, share.short_credit) == (stamp, ~999 & WORD)
    later = c0 + 3600 * 10**9  # an hour later: a full bucket, were the time read
    assert police.decisions_on(POLICER, [(1_000, later, cpu, stamp), (1_500, later, cpu, j0)]) == [False, False]
    assert police.state(POLICER).window == state.window and police.state(POLICER).last_ns == state.last_ns, \
        "the bucket was asked"
    assert police.decisions_on(POLICER, [(999, later, cpu, stamp)]) == [True], "a packet the room holds"
    assert police.per_cpu(POLICER)[cpu].stamp == stamp, "a stamp that held lost to a packet it did not drop"
    assert police.decisions_on(POLICER, [(1_000, later, cpu, stamp + 1)]) == [True]
    assert police.per_cpu(POLICER)[cpu].credit_window == 0, "a pass left its jiffies pending"


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_a_smaller_packet_the_bucket_drops_replaces_a_stamp_that_holds(police, cpus, algo):
    """The bucket of the test above emptied, a packet of 1,000 bytes dropped (room 999), then, a jiffy
    later, one of 500 bytes within that room: offered to the bucket, which drops it too, and its
    stamp and room 499 replace the first; a packet of 600 bytes is then dropped on the line whatever
    time it gives (the bucket not asked)."""
    tick, rate = 10**6, 8_000
    config = ticked_bucket(rate, algo, 3_000, tick)
    police.configure(POLICER, config, chunk=0)
    cpu, c0, j0 = cpus[0], 10**12, 5_000
    model = Policer(config)
    sent = [(1_500, c0, cpu, j0)] * 2 + [(1_000, c0, cpu, j0), (500, c0 + tick, cpu, j0 + 1)]
    assert police.decisions_on(POLICER, sent) == [model.decide(size, now, 0, j) for size, now, _, j in sent]
    assert model.dropped_packets == 2
    share = police.per_cpu(POLICER)[cpu]
    stamp = bucket_stamp(config, c0 + tick, model.algorithm.fills_at(500), j0 + 1)
    assert (share.stamp, share.short_credit) == (stamp, ~499 & WORD)
    state = police.state(POLICER)
    later = c0 + 3600 * 10**9  # an hour later: a full bucket, were the time read
    assert police.decisions_on(POLICER, [(600, later, cpu, stamp)]) == [False]
    assert police.state(POLICER).last_ns == state.last_ns and police.state(POLICER).window == state.window, \
        "the bucket was asked"


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_on_the_kernels_clock_and_jiffies_a_bucket_too_small_for_a_packet_is_stamped_and_drops_on_it(
        police, cpus, algo):
    """xdp_police reading the clock and the jiffies itself (time 0, jiffies 0), a bucket of one byte
    on the coarse clock with this kernel's tick: its first packet is dropped by the bucket (it never holds
    it: U never), which stamps the line STAMP_AHEAD - 1 ticks out less the margin from the kernel's
    jiffies (as /proc/timer_list shows them around it: not a time in ns, nor pending) with the room
    below the packet; the next packets are dropped on it, the bucket's state untouched (not asked),
    the stamp kept as it was."""
    tick = coarse_tick_ns()
    if not tick:
        pytest.skip("no CLOCK_MONOTONIC_COARSE: no tick to stamp in")
    config = ticked_bucket(8_000, algo, 1, tick)
    police.configure(POLICER, config, chunk=0)
    cpu, size = cpus[0], 64
    before = kernel_jiffies()
    assert police.decisions_on(POLICER, [(size, 0, cpu)]) == [False]
    after = kernel_jiffies()
    share, state = police.per_cpu(POLICER)[cpu], police.state(POLICER)
    assert share.short_credit == ~(size - 1) & WORD
    ahead = STAMP_AHEAD - 1 - STAMP_MARGIN
    assert before + ahead <= share.stamp <= after + ahead, f"stamp {share.stamp}, jiffies {before} to {after}"
    assert police.decisions_on(POLICER, [(size, 0, cpu)] * 4) == [False] * 4
    assert (police.state(POLICER).last_ns, police.state(POLICER).window) == (state.last_ns, state.window), \
        "the bucket was asked"
    assert police.per_cpu(POLICER)[cpu].stamp == share.stamp
    assert police.counters(POLICER).dropped_packets == 5
    assert bucket_stamp(config, 10**12, NEVER, 5_000) == 5_000 + STAMP_AHEAD - 1 - STAMP_MARGIN


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_a_coarse_bucket_is_written_with_the_kernels_tick_only_where_a_stamp_can_be_made(algo):
    """struct dpp_policer.previous: the tick the bucket's CPUs stamp their drops in, only on the
    coarse clock (a burst of two ticks' refill and a packet) and where an emptied bucket takes more
    than the margin's ticks to hold a frame (FRAME_MAX x 8e9 / (5 x 4 ms): 1.64 Mb/s); a window's
    previous is its state."""
    tick = 4 * 10**6
    def written(rate: int, burst: int, algo: Algo = algo):
        return policer_value(PolicerSpec(rate=rate, burst=burst, algo=algo), tick_ns=tick, cpus=2)
    slow, edge, fast = written(1_600_000, 125_000), written(1_700_000, 125_000), written(10**8, 125_000)
    assert [(value.clock, value.previous) for value in (slow, edge, fast)] == [
        (Clock.COARSE, tick), (Clock.COARSE, 0), (Clock.COARSE, 0)]
    assert written(10**8, 100_000).clock == Clock.PRECISE and written(10**8, 100_000).previous == 0
    assert written(10**5, 125_000, Algo.SLIDING_WINDOW).previous == 0


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_a_previous_of_2_to_the_32_or_more_is_no_tick(police, cpus, algo):
    """A window's packed word left in a bucket's previous (a window's last write racing the slot's
    rewrite) is no tick: a bucket too small for its packet makes no jiffies stamp of its drop (its U
    in ns instead)."""
    config = ticked_bucket(8_000, algo, 1, (1 << 32) + 10**6)
    police.configure(POLICER, config, chunk=0)
    cpu, size = cpus[0], 64
    assert police.decisions_on(POLICER, [(size, 10**12, cpu, 5_000)]) == [False]
    assert not stamp_holds(police.per_cpu(POLICER)[cpu].stamp, 5_000), "a jiffies stamp made"


def test_a_windows_pending_jiffies_left_in_a_token_buckets_line_is_no_bound(police, cpus):
    """A window's pending jiffies (2^63 | j) with short_credit 0, left in the line by a window's
    decision racing the slot's rewrite to a token bucket: a full bucket passes the packet."""
    config = PolicerConfig(rate=8_000, burst=3_000, algo=Algo.TOKEN_BUCKET, clock=Clock.PRECISE)
    police.configure(POLICER, config, chunk=0)
    cpu = cpus[0]
    police.write_share_of(POLICER, cpu, PolicerStats(stamp=STAMP_PENDING | 5_000, short_credit=0))
    assert police.decisions_on(POLICER, [(64, 10**12, cpu)]) == [True]
