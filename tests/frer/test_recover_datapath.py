"""Sequence recovery in the kernel against the reference model (IEEE 802.1CB 7.4.3, 7.4.4): every
decision of xdp_frer (BPF_PROG_TEST_RUN, times given by the test) for hypothesis-made frame
sequences with duplicates, reordering, gaps, rogue jumps, untagged frames, wrap-around at 65535 and
idle stretches past the recovery timeout, under either algorithm and any history length; then
every counter and the state. And the cases the standard's readers get wrong, spelled out."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from netapp.frer.abi import Algo, Decision
from netapp.frer.model import Recovery, RecoveryConfig
from tests.frer.frer import XDP_DROP, XDP_PASS, frame
from tests.frer.strategies import MS, configs, frames

STREAM = 9
EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
T0 = 10**12


def replay(frer, config: RecoveryConfig, sequence) -> Recovery:
    frer.configure(STREAM, config)
    model = Recovery(config)
    for index, (seq, now) in enumerate(sequence):
        expected = model.decide(seq, now)
        got = frer.decide(STREAM, seq, now)
        assert got == expected, f"frame {index} (seq {seq}, t {now}): {got.name}, the model {expected.name}"
    state = frer.state(STREAM)
    assert state.counters() == model.counters
    assert (bool(state.take_any), state.seq) == (model.take_any, model.seq)
    return model


@EXAMPLES
@given(config=configs(), sequence=frames())
def test_every_decision_and_counter_is_the_models(frer, config, sequence):
    replay(frer, config, sequence)


def in_order(first: int, count: int, start_ns: int, gap_ns: int = 1000) -> list[tuple[int, int]]:
    return [((first + k) % 65536, start_ns + k * gap_ns) for k in range(count)]


def test_lost_counts_each_missing_number_once_when_it_leaves_the_history(frer):
    config = RecoveryConfig(history_len=8)
    sequence = in_order(0, 5, T0) + in_order(7, 20, T0 + 10_000)  # 5 and 6 never arrive
    model = replay(frer, config, sequence)
    assert model.counters["lost"] == 2 and frer.state(STREAM).lost == 2


def test_lost_is_not_over_counted_after_a_reset(frer):
    """A stream that loses nothing, idle past the timeout, then resumes elsewhere in the number
    space: one reset, nothing lost (the history the reset empties is not a loss)."""
    config = RecoveryConfig(history_len=32, reset_ns=10 * MS)
    sequence = in_order(0, 40, T0) + in_order(30_000, 100, T0 + 50 * MS)
    replay(frer, config, sequence)
    state = frer.state(STREAM)
    assert (state.resets, state.lost, state.passed, state.discarded) == (1, 0, 140, 0)


def test_the_reset_is_per_stream_and_counted_as_a_reset_not_a_latent_error(frer):
    config = RecoveryConfig(history_len=4, reset_ns=10 * MS, latent=True, latent_difference=100,
                            latent_period_ns=MS, latent_reset_period_ns=1000 * MS)  # fmt: skip
    frer.configure(STREAM + 1, config)
    frer.configure(STREAM, config)
    for seq, now in in_order(0, 3, T0):
        frer.decide(STREAM, seq, now)
        frer.decide(STREAM + 1, seq, now)
    frer.decide(STREAM + 1, 3, T0 + 20 * MS)  # the other stream times out; this one does not
    assert frer.decide(STREAM, 3, T0 + 5 * MS) == Decision.IN_ORDER
    assert (frer.state(STREAM).resets, frer.state(STREAM + 1).resets) == (0, 1)
    assert frer.state(STREAM + 1).latent_errors == 0


def test_a_latent_error_is_counted_when_one_path_goes_silent(frer):
    """Two paths: every frame once passed, once discarded, the difference flat; then only one path:
    the difference grows by one a frame, past the threshold by the next test."""
    config = RecoveryConfig(history_len=8, latent=True, latent_difference=5, latent_period_ns=MS,
                            latent_reset_period_ns=10_000 * MS)  # fmt: skip
    frer.configure(STREAM, config)
    now = T0
    for seq in range(100):
        for _ in range(2):
            now += 10_000
            frer.decide(STREAM, seq, now)
    assert frer.state(STREAM).latent_errors == 0
    for seq in range(100, 200):
        now += 20_000
        frer.decide(STREAM, seq, now)
    state = frer.state(STREAM)
    assert state.latent_errors >= 1 and state.resets == 0


def test_a_rogue_frame_is_discarded_and_disturbs_nothing(frer):
    frer.configure(STREAM, RecoveryConfig(history_len=16))
    for seq, now in in_order(100, 10, T0):
        frer.decide(STREAM, seq, now)
    assert frer.decide(STREAM, 20_000, T0 + 20_000) == Decision.ROGUE
    assert frer.decide(STREAM, 110, T0 + 30_000) == Decision.IN_ORDER
    state = frer.state(STREAM)
    assert (state.rogue, state.discarded, state.passed, state.seq) == (1, 1, 11, 110)


def test_an_unknown_stream_passes_untouched(frer):
    frer.configure(STREAM, None)
    verdict, decision, out = frer.run(frame(STREAM, 5, T0))
    assert (verdict, decision) == (XDP_PASS, Decision.NO_STREAM)


def test_without_take_no_sequence_an_untagged_frame_is_dropped_and_counted_tagless(frer):
    frer.configure(STREAM, RecoveryConfig(algo=Algo.MATCH))
    verdict, decision, _ = frer.run(frame(STREAM, None, T0))
    assert (verdict, decision) == (XDP_DROP, Decision.TAGLESS_DISCARDED)
    state = frer.state(STREAM)
    assert (state.tagless, state.discarded, state.passed) == (1, 0, 0)
