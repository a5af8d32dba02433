"""One stream on two CPUs at once: the real program run from two threads, each pinned to its CPU,
each sending the stream's numbers 0..N-1 in order (the frames of two paths), so that both CPUs
decide about the same numbers in the same microseconds. Frames in order and duplicates are decided
without the lock, by a compare-and-swap of the state word (nf/frer/recover.h): the vector algorithm
passes every number exactly once, whatever the interleaving (two CPUs that read the same history
would otherwise both pass a number), and no count is lost under either algorithm, the CPUs' counts
added to the slot's (the match algorithm remembers one number: a path that runs ahead makes the
other's numbers pass again, as the standard has it, so only the sums hold there). And one CPU's
frames decided under the lock (rogue ones) while the other's go without it: the lock's way must
not undo a swap it did not see."""

from __future__ import annotations


import pytest

from netapp.frer.abi import HISTORY_MAX, SEQ_SPACE, Algo, Recovery
from netapp.frer.model import RecoveryConfig
from tests.frer.frer import XDP_DROP, XDP_PASS, frame
from tests.utils.dataplane import run_each_on_cpus, run_on_cpus, two_cpus

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


# The in-order CPU's numbers 0..IN_ORDER-1, and a number as far from all of them as can be: outside
# the history of each (rogue, decided under the lock) on the other CPU.
IN_ORDER = 60_000
FAR = IN_ORDER + (SEQ_SPACE - IN_ORDER) // 2


def test_frames_under_the_lock_undo_no_frame_decided_without_it(frer, cpus):
    for _ in range(ROUNDS):
        frer.configure(STREAM, RecoveryConfig(algo=Algo.VECTOR, history_len=HISTORY_MAX))
        frer.decide(STREAM, SEQ_SPACE - 1, 0)  # taken: the number before the in-order CPU's first
        in_order, rogue = cpus
        run_each_on_cpus(frer.prog, {in_order: frame(STREAM, 0, 0, auto_seq=True), rogue: frame(STREAM, FAR, 0)},
                         IN_ORDER)
        state: Recovery = frer.state(STREAM)
        assert (state.rogue, state.discarded) == (IN_ORDER, IN_ORDER), "every far frame rogue, discarded"
        assert state.passed == 1 + IN_ORDER, "every number passed once"
        assert (state.out_of_order, state.lost) == (0, 0), "each in order: none seen again behind a swap undone"
