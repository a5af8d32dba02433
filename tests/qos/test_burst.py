"""Burst accounting: whatever is offered, a policer in the kernel never lets more than rate x T +
burst through in any stretch of time T. The token bucket's burst is its bucket; a window's is what a
window lets through (R W / 8e9), so that a W-long stretch, which spans two windows, gets at most
R W / 8e9 + burst; GCRA's is its bucket's, as the token bucket's. Offered loads from 0.3 to 3 times the rate, 1 to 400 Gb/s."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings

from netapp.qos.abi import Algo
from tests.qos.strategies import RATES, configs, sequences

POLICER = 11
ALGOS = (Algo.TOKEN_BUCKET, Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW, Algo.GCRA)


def most_in_any_stretch(passed: list[tuple[int, int]], length: int) -> int:
    """The most bytes passed within [t, t + length) for any t (a packet's time: the maximum is at one)."""
    most, first, inside = 0, 0, 0
    for size, now in passed:
        inside += size
        while passed[first][1] <= now - length:
            inside -= passed[first][0]
            first += 1
        most = max(most, inside)
    return most


def bucket_excess(config, passed: list[tuple[int, int]]) -> Fraction:
    """How far the bytes passed between any two passed packets (both included) exceed
    R (t_j - t_i) / 8e9 + B: never above 0."""
    worst = Fraction(-config.burst)
    for i, (_, start) in enumerate(passed):
        total = 0
        for size, now in passed[i:]:
            total += size
            worst = max(worst, total - Fraction(config.rate * (now - start), 8 * 10**9) - config.burst)
    return worst


@pytest.mark.parametrize("algo", ALGOS, ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_no_stretch_of_time_gets_more_than_rate_times_it_plus_the_burst(police, rate, algo):
    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(config=configs(rate, algo), packets=sequences(rate, max_size=300))
    def check(config, packets):
        police.configure(POLICER, config)
        decisions = police.decisions(POLICER, packets)
        passed = [packet for packet, ok in zip(packets, decisions) if ok]
        if algo in (Algo.TOKEN_BUCKET, Algo.GCRA):
            assert bucket_excess(config, passed) <= 0
        else:
            assert most_in_any_stretch(passed, config.window_ns) <= 2 * config.window_allowance

    check()
