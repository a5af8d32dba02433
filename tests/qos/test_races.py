"""The policers under two CPUs at once: the real program run on one policer from two threads, each
pinned to its CPU (BPF_PROG_TEST_RUN runs an XDP program's repetitions on the caller's CPU), then the
totals checked: the counters add up to the packets sent, and the bytes passed never exceed what the
policer allows, whether the CPUs race for the last of a fixed budget (one time for every packet) or
for windows and refills on the kernel's clock."""

from __future__ import annotations

import time

import pytest

from netapp.qos.abi import Algo
from netapp.qos.model import Gcra, PolicerConfig
from tests.qos.police import XDP_DROP, XDP_PASS, frame
from tests.utils.dataplane import run_on_cpus, two_cpus

POLICER = 3
SIZE = 64
REPEAT = 200_000
ALGOS = (Algo.TOKEN_BUCKET, Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW, Algo.GCRA)


@pytest.fixture(scope="module")
def cpus() -> list[int]:
    return two_cpus()


def race(police, cpus, config: PolicerConfig, now_ns: int) -> tuple[int, int]:
    police.configure(POLICER, config)
    started = time.monotonic_ns()
    verdicts = run_on_cpus(police.prog, frame(POLICER, SIZE, now_ns), REPEAT, cpus)
    elapsed = time.monotonic_ns() - started
    assert set(verdicts.values()) <= {XDP_PASS, XDP_DROP}
    stats = police.counters(POLICER)
    assert stats.passed_packets + stats.dropped_packets == REPEAT * len(cpus)
    assert stats.passed_bytes + stats.dropped_bytes == REPEAT * len(cpus) * SIZE
    assert stats.passed_bytes == stats.passed_packets * SIZE
    return stats.passed_bytes, elapsed


def test_two_cpus_spend_a_bucket_exactly_once(police, cpus):
    """One time for every packet: no refill after the first, so exactly the bucket passes (the lock
    lets no CPU spend credit the other spent)."""
    burst = 8 << 20  # 131,072 packets: both CPUs race for most of their runs
    config = PolicerConfig(rate=10**9, burst=burst, algo=Algo.TOKEN_BUCKET)
    passed, _ = race(police, cpus, config, now_ns=10**12)  # 1,000 s after 0: the bucket is full
    assert passed == burst // SIZE * SIZE


def test_two_cpus_spend_a_gcra_bucket_exactly_once(police, cpus):
    """GCRA's arrival time by compare-and-swap, one time for every packet: exactly what the model
    passes at that time (a packet whose swap was lost eight times is dropped, and later ones take the
    room it left)."""
    config = PolicerConfig(rate=10**9, burst=8 << 20, algo=Algo.GCRA)
    model = Gcra(config)
    fits = 0
    while model.decide(SIZE, 10**12):
        fits += 1
    passed, _ = race(police, cpus, config, now_ns=10**12)
    assert passed == fits * SIZE


@pytest.mark.parametrize("algo", (Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW), ids=lambda a: a.name.lower())
def test_two_cpus_never_overspend_a_window(police, cpus, algo):
    """One time for every packet, one window: at most its allowance passes (a compare-and-swap lost
    eight times drops the packet: fewer may pass, never more)."""
    config = PolicerConfig(rate=10**9, burst=0, algo=algo, window_shift=26)  # 8,388,608 bytes
    passed, _ = race(police, cpus, config, now_ns=(10**12 >> 26) << 26)
    assert config.window_allowance - SIZE < passed <= config.window_allowance


@pytest.mark.parametrize("algo", ALGOS, ids=lambda a: a.name.lower())
def test_on_the_kernels_clock_two_cpus_pass_no_more_than_rate_times_time_plus_burst(police, cpus, algo):
    """Windows of 65 us and refills race with every packet; what passed stays within R T / 8e9 + B
    (a window's allowance being the windows' burst) over the time the runs took."""
    config = PolicerConfig(rate=10 * 10**9, burst=81_920, algo=algo, window_shift=16)
    passed, elapsed = race(police, cpus, config, now_ns=0)
    # a window's allowance for every window the runs touched: at most T / W + 2 of them
    slack = config.burst if algo in (Algo.TOKEN_BUCKET, Algo.GCRA) else 2 * config.window_allowance
    assert 0 < passed <= config.rate * elapsed / 8e9 + slack
