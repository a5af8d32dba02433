"""Hypothesis strategies for recovery functions and the frames of one stream: a cursor that moves on
in order most of the time, with duplicates, reordering (a number from behind), gaps, jumps far
ahead (rogue frames), untagged frames, numbers that wrap past 65535, and idle stretches longer
than the recovery timeout."""

from __future__ import annotations

from typing import Optional

from hypothesis import strategies as st

from netapp.frer.abi import HISTORY_MAX, HISTORY_MIN, SEQ_SPACE, Algo
from netapp.frer.model import RecoveryConfig

MS = 1_000_000


def configs() -> st.SearchStrategy[RecoveryConfig]:
    latent = st.fixed_dictionaries(
        {
            "latent": st.booleans(),
            "latent_difference": st.integers(0, 8),
            "latent_period_ns": st.integers(1, 20) .map(lambda n: n * MS),
            "latent_reset_period_ns": st.integers(20, 200).map(lambda n: n * MS),
            "latent_paths": st.integers(2, 4),
        }
    )
    return st.builds(
        lambda algo, length, reset_ms, individual, take_no_sequence, latent_args: RecoveryConfig(
            algo=algo, history_len=length, reset_ns=reset_ms * MS, individual=individual,
            take_no_sequence=take_no_sequence, **latent_args,
        ),
        st.sampled_from(Algo),
        st.integers(HISTORY_MIN, HISTORY_MAX),
        st.sampled_from([0, 5, 20, 50]),
        st.booleans(),
        st.booleans(),
        latent,
    )  # fmt: skip


STEP = st.one_of(
    st.just(("next", 1)).map(lambda s: s),
    st.tuples(st.just("next"), st.just(1)),
    st.tuples(st.just("dup"), st.integers(0, 3)),
    st.tuples(st.just("back"), st.integers(1, 40)),
    st.tuples(st.just("gap"), st.integers(2, 40)),
    st.tuples(st.just("far"), st.integers(100, 40_000)),
    st.tuples(st.just("tagless"), st.just(0)),
)
GAP = st.one_of(st.integers(0, 200_000), st.integers(0, 200_000), st.integers(0, 120 * MS))


def frames(min_size: int = 10, max_size: int = 120) -> st.SearchStrategy[list[tuple[Optional[int], int]]]:
    """(sequence number or None, time) pairs, times never decreasing."""

    def walk(start: int, now: int, steps: list[tuple[tuple[str, int], int]]) -> list[tuple[Optional[int], int]]:
        cursor, out = start, []
        for (kind, n), gap in steps:
            now += gap
            if kind == "tagless":
                out.append((None, now))
                continue
            if kind == "next":
                cursor += 1
                seq = cursor
            elif kind == "dup":
                seq = cursor - n
            elif kind == "back":
                seq = cursor - n
            else:  # gap, far: the cursor moves on past the numbers skipped
                cursor += n
                seq = cursor
            out.append((seq % SEQ_SPACE, now))
        return out

    start = st.one_of(st.integers(0, SEQ_SPACE - 1), st.integers(SEQ_SPACE - 40, SEQ_SPACE - 1))
    now = st.integers(1, 400 * 86400 * 10**9)
    return st.builds(walk, start, now, st.lists(st.tuples(STEP, GAP), min_size=min_size, max_size=max_size))
