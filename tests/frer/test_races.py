"""One stream on two CPUs at once: the real program run from two threads, each pinned to its CPU,
each sending the stream's numbers 0..N-1 in order (the frames of two paths), so that both CPUs
decide about the same numbers in the same microseconds. With the state under the slot's lock, the
vector algorithm passes every number exactly once, whatever the interleaving (without it, two CPUs
that read the same history both pass a number), and no count is lost under either algorithm (the
match algorithm remembers one number: a path that runs ahead makes the other's numbers pass again,
as the standard has it, so only the sums hold there)."""

from __future__ import annotations


import pytest

from netapp.frer.abi import HISTORY_MAX, SEQ_SPACE, Algo
from netapp.frer.model import RecoveryConfig
from tests.frer.frer import XDP_DROP, XDP_PASS, frame
from tests.utils.dataplane import run_on_cpus, two_cpus

STREAM = 13
# Below the number space less a history: a CPU far behind the other never finds its numbers ahead.
NUMBERS = SEQ_SPACE - HISTORY_MAX - 1
ROUNDS = 5


@pytest.fixture(scope="module")
def cpus() -> list[int]:
    return two_cpus()


def race(frer, cpus, algo: Algo):
    frer.configure(STREAM, RecoveryConfig(algo=algo, history_len=HISTORY_MAX))
    verdicts = run_on_cpus(frer.prog, frame(STREAM, 0, 0, auto_seq=True), NUMBERS, cpus)
    assert set(verdicts.values()) <= {XDP_PASS, XDP_DROP}
    state = frer.state(STREAM)
    assert state.passed + state.discarded == 2 * NUMBERS, "every frame counted once"
    assert state.lost == 0 and state.resets == 0
    return state


def test_every_number_passes_once_from_two_cpus(frer, cpus):
    for _ in range(ROUNDS):
        assert race(frer, cpus, Algo.VECTOR).passed == NUMBERS


def test_the_match_algorithms_counts_add_up_from_two_cpus(frer, cpus):
    for _ in range(ROUNDS):
        assert race(frer, cpus, Algo.MATCH).passed >= NUMBERS
