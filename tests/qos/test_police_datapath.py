"""The policers in the kernel against the reference model: every decision of xdp_police
(BPF_PROG_TEST_RUN, times given by the test) for hypothesis-made sequences of sizes and times, at
1, 100 and 400 Gb/s, each algorithm (GCRA against its own model, with its roundings); the counters; the gate, empty slots and policer 0."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from netapp.qos.abi import BURST_MAX, Algo, Gate
from netapp.qos.model import Policer, PolicerConfig
from tests.qos.police import counters_tuple
from tests.qos.strategies import RATES, configs, sequences

POLICER = 7
ALGOS = (Algo.TOKEN_BUCKET, Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW, Algo.GCRA)
EXAMPLES = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def replay(police, config: PolicerConfig, packets: list[tuple[int, int]]) -> Policer:
    police.configure(POLICER, config)
    model = Policer(config)
    expected = [model.decide(size, now) for size, now in packets]
    assert police.decisions(POLICER, packets) == expected, config
    assert counters_tuple(police.counters(POLICER)) == (
        model.passed_packets,
        model.passed_bytes,
        model.dropped_packets,
        model.dropped_bytes,
    )
    return model


@pytest.mark.parametrize("algo", ALGOS, ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_every_decision_is_the_models(police, rate, algo):
    @EXAMPLES
    @given(config=configs(rate, algo), packets=sequences(rate))
    def check(config, packets):
        replay(police, config, packets)

    check()


@pytest.mark.parametrize("algo", ALGOS, ids=lambda a: a.name.lower())
def test_at_the_limits_of_rate_the_decisions_are_the_models(police, algo):
    """8 kb/s with a long window and a bucket that takes seconds to fill; 400 Gb/s with the largest
    window a count holds."""
    slow = PolicerConfig(rate=8_000, burst=3000, algo=algo, window_shift=32)
    replay(police, slow, [(1500, 10**9 * k // 3) for k in range(1, 40)])
    fast = PolicerConfig(rate=400 * 10**9, burst=1 << 30, algo=algo, window_shift=24)
    replay(police, fast, [(1514, 10**12 + 30 * k) for k in range(200)] + [(1514, 10**12 + 60 * 10**9)])


def test_the_sliding_window_rounds_the_weighed_bytes_up(police):
    """1 byte/ns, windows of 1024 ns: 969 bytes in window 5, then 1 ns into window 6 they weigh
    969 x 1023 / 1024 = 968.05, counted as 969: 56 more bytes would make 1025 of 1024, 55 fit."""
    config = PolicerConfig(rate=8 * 10**9, burst=0, algo=Algo.SLIDING_WINDOW, window_shift=10)
    replay(police, config, [(969, 5 * 1024 + 5), (56, 6 * 1024 + 1), (55, 6 * 1024 + 1)])
    assert police.decisions(POLICER, []) == [] and police.counters(POLICER).passed_packets == 2


def test_a_closed_gate_drops_and_counts(police):
    config = PolicerConfig(rate=10**9, burst=10**6, algo=Algo.TOKEN_BUCKET, gate=Gate.CLOSED)
    police.configure(POLICER, config)
    assert police.decisions(POLICER, [(100, 10**9), (100, 2 * 10**9)]) == [False, False]
    assert counters_tuple(police.counters(POLICER)) == (0, 0, 2, 200)


@given(size=st.integers(min_value=64, max_value=1514))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_policer_0_and_an_empty_slot_pass_uncounted(police, size):
    police.configure(POLICER, None)
    assert police.passes(0, size, 10**9) and police.passes(POLICER, size, 10**9)
    assert counters_tuple(police.counters(POLICER)) == (0, 0, 0, 0)


def test_the_state_is_readable(police):
    """The token bucket's credit and clock, the windows' number and count, as netapp/qos reads them."""
    police.configure(POLICER, PolicerConfig(rate=8 * 10**9, burst=10_000, algo=Algo.TOKEN_BUCKET))
    assert police.passes(POLICER, 1000, 5_000)  # 5 us at 1 byte/ns: 5000 bytes in the bucket
    state = police.state(POLICER)
    assert (state.credit, state.last_ns) == (4000 * 8 * 10**9, 5_000)
    police.configure(POLICER, PolicerConfig(rate=8 * 10**9, burst=0, algo=Algo.FIXED_WINDOW, window_shift=20))
    assert police.passes(POLICER, 1000, 3 << 20)
    assert police.state(POLICER).window == 3 << 32 | 1000



def test_gcra_at_the_largest_burst_and_the_slowest_rate_does_not_wrap(police):
    """8 kb/s: a byte's time is 2**46 units, the burst's 2**30 bytes of it 2**76 before the shift:
    the kernel's two products give the model's decisions and arrival time (a full bucket of 2**30
    bytes: every packet passes; an idle 10**15 ns then refills a billion bytes)."""
    config = PolicerConfig(rate=8_000, burst=BURST_MAX, algo=Algo.GCRA)
    model = replay(police, config, [(1500, 10**12 + k) for k in range(50)] + [(1500, 10**12 + 10**15)])
    assert model.passed_packets == 51
    assert police.state(POLICER).window == model.algorithm.tat


@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_gcra_passes_a_packet_of_its_whole_burst_from_a_full_bucket(police, rate):
    """Its bytes' time rounded up is never more than the burst's: a 1500-byte burst passes a 1500-byte
    packet when full, then nothing until the bucket has refilled."""
    config = PolicerConfig(rate=rate, burst=1500, algo=Algo.GCRA)
    refill = 1500 * 8 * 10**9 // rate + 1
    model = replay(police, config, [(1500, 10**12), (64, 10**12), (1500, 10**12 + refill)])
    assert (model.passed_packets, model.dropped_packets) == (2, 1)
