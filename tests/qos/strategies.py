"""Hypothesis strategies for policers and packet sequences scaled to their rate: gaps around one
packet's time at the rate (so that sequences both conform and exceed), now and then an idle gap long
enough to refill a bucket or skip windows."""

from __future__ import annotations

from hypothesis import strategies as st

from netapp.qos.abi import WINDOW_BYTES_MAX, WINDOW_SHIFT_MAX, WINDOW_SHIFT_MIN, Algo
from netapp.qos.model import PolicerConfig

GBPS = 10**9
RATES = {"1G": GBPS, "100G": 100 * GBPS, "400G": 400 * GBPS}
SIZE = st.integers(min_value=64, max_value=1514)


def window_shifts(rate: int) -> list[int]:
    """The windows that let 2 to 64 full-size packets through at `rate`, within the limits."""
    return [
        shift
        for shift in range(WINDOW_SHIFT_MIN, WINDOW_SHIFT_MAX + 1)
        if 3000 <= rate * (1 << shift) // 8_000_000_000 <= min(64 * 1514, WINDOW_BYTES_MAX)
    ]


def configs(rate: int, algo: Algo) -> st.SearchStrategy[PolicerConfig]:
    return st.builds(
        PolicerConfig,
        rate=st.just(rate),
        burst=st.integers(min_value=1514, max_value=16 * 1514),
        algo=st.just(algo),
        window_shift=st.sampled_from(window_shifts(rate)),
    )


def gaps(rate: int) -> st.SearchStrategy[int]:
    """ns between packets: mostly up to half a full-size packet's time at the rate (about twice the
    rate offered), now and then an idle time up to 50 ms."""
    near = st.integers(min_value=0, max_value=1514 * 4_000_000_000 // rate)
    idle = st.integers(min_value=0, max_value=50_000_000)
    return st.builds(lambda pick, n, i: i if pick == 0 else n, st.integers(0, 15), near, idle)


def sequences(rate: int, min_size: int = 20, max_size: int = 100) -> st.SearchStrategy[list[tuple[int, int]]]:
    """(size, time) pairs, never decreasing, from a start within 400 days of uptime (window numbers
    wrap at 2**32 windows: 73 minutes of 1 us windows)."""

    def timed(start: int, steps: list[tuple[int, int]]) -> list[tuple[int, int]]:
        now, timed_steps = start, []
        for size, gap in steps:
            now += gap
            timed_steps.append((size, now))
        return timed_steps

    start = st.integers(min_value=1, max_value=400 * 86400 * 10**9)
    steps = st.lists(st.tuples(SIZE, gaps(rate)), min_size=min_size, max_size=max_size)
    return st.builds(timed, start, steps)
