"""A window seen full in ns (dataplane/bpf/nf/qos/stamp.h): a window without a tick (the precise clock)
that drops a packet on a reading of the window its word counts keeps in its CPU's line a room and
the time U in ns before which no packet bigger than it fits (the fixed window: the room its count
leaves, until the window's end; the sliding window: the room below the packet, until its estimate
first has room for it); a packet its credit does not cover, bigger than the room, on a reading
before U, is dropped from the line alone. In the kernel (xdp_police, the time given in the frame):
every decision, each CPU's credit, U and room the reference model's at 1, 100 and 400 Gb/s; a drop's
U to the ns. On the model: every packet dropped on the line is one the window itself drops."""

from __future__ import annotations

import copy
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netapp.qos.abi import Algo
from netapp.qos.model import WINDOWS, WORD, Policer, PolicerConfig, until_stamp, window_until
from tests.qos.strategies import RATES, window_shifts
from tests.qos.test_bucket_until import decided_as_with_nothing_kept, replayed
from tests.qos.test_credit import POLICER, cpus, on_cpus, trains  # noqa: F401 - cpus: the fixture
from tests.qos.test_credit_jiffies import EXAMPLES, random_packets

SHIFT = 20  # 2^20 ns windows: at 8 Mb/s (a byte a us) 1,048 bytes each


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_every_decision_each_cpus_credit_u_and_room_are_the_models(police, cpus, rate, algo):
    dropped_on_line = []

    @EXAMPLES
    @given(chunk=st.one_of(st.just(0), st.integers(min_value=64, max_value=3000)),
           shift=st.sampled_from(window_shifts(rate)), packets=trains(rate),
           picks=st.lists(st.integers(0, 1), min_size=300, max_size=300))
    def check(chunk, shift, packets, picks):
        config = PolicerConfig(rate=rate, burst=0, algo=algo, window_shift=shift)
        dropped_on_line.extend(replayed(police, cpus, config, chunk, on_cpus(cpus, packets, picks)))

    check()
    assert any(dropped_on_line), "no packet dropped on a U: the rule was not tried"


# the window's bytes, the packet dropped, one bigger than the room kept at U - 1 (dropped on the
# line), one at U (passed)
SIZES = {Algo.FIXED_WINDOW: (500, 600, 600, 400), Algo.SLIDING_WINDOW: (200, 400, 500, 400)}


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
def test_a_drop_keeps_the_time_the_window_may_hold_the_packet_to_the_ns(police, cpus, algo):
    """Windows of 1,048 bytes at 8 Mb/s, no chunk: 900 bytes in the window before, some in this one
    (the sliding window then weighs 900 (W - t) / W), a packet dropped: the line keeps the model's
    room and U (the fixed window: 548 until its end; the sliding window: 399 until its estimate has
    room for 400). At U - 1 a packet bigger than the room is dropped on the line (the room as it
    was: the window's drop of it would keep its own); at U one of 400 bytes passes."""
    cpu, width = cpus[0], 1 << SHIFT
    counted, dropped, bigger, fits = SIZES[algo]
    config = PolicerConfig(rate=8_000_000, burst=0, algo=algo, window_shift=SHIFT)
    police.configure(POLICER, config, chunk=0)
    model = Policer(config)
    start, at = 10**6 * width, 10**6 * width + width // 4
    sent = [(900, start - width // 2, cpu), (counted, start + width // 8, cpu), (dropped, at, cpu)]
    assert police.decisions_on(POLICER, sent) == [model.decide(size, now, cpu) for size, now, _ in sent] == \
        [True, True, False]
    room, until = window_until(config, model.algorithm, dropped, at)
    assert at < until <= start + width and bigger > room
    share = police.per_cpu(POLICER)[cpu]
    assert (share.stamp, share.short_credit) == (until_stamp(at, until), ~room & WORD)
    assert police.decisions_on(POLICER, [(bigger, until - 1, cpu)]) == [False]
    assert police.per_cpu(POLICER)[cpu].short_credit == ~room & WORD, "the window was asked"
    assert police.decisions_on(POLICER, [(fits, until, cpu)]) == [True]
    assert model.decide(bigger, until - 1, cpu) is False and model.decide(fits, until, cpu) is True


@pytest.mark.parametrize("algo", WINDOWS, ids=lambda a: a.name.lower())
def test_every_packet_dropped_on_the_line_is_one_the_window_drops(algo):
    """The model (whose every decision is the kernel's: above) at some twice the rate on one CPU,
    packets of mixed sizes: each decision is that of the same policer with nothing in its line."""
    dropped_on_line = []

    @settings(max_examples=40, deadline=None)
    @given(rate=st.sampled_from((8_000_000, 10**9, 4 * 10**11)), chunk=st.sampled_from((0, 1514)),
           data=st.data(), rnd=st.randoms(use_true_random=False))
    def check(rate, chunk, data, rnd: random.Random):
        shift = data.draw(st.sampled_from(window_shifts(rate)))
        model = Policer(PolicerConfig(rate=rate, burst=0, algo=algo, window_shift=shift), chunk=chunk)
        full = 1514 * 8_000_000_000 // rate
        packets = random_packets(rnd, 1, max(1, full), lambda: rnd.choice((1514, rnd.randint(64, 1514))))
        dropped_on_line.extend(decided_as_with_nothing_kept(model, packets))

    check()
    assert sum(dropped_on_line) > len(dropped_on_line) // 100, "few packets dropped on a U: the rule was not tried"


def test_the_sliding_windows_u_is_its_first_time_with_room():
    """window_until's U for the sliding window, against its estimate ns by ns around it; none where
    the estimate has room from the window's start."""
    config = PolicerConfig(rate=8_000_000, burst=0, algo=Algo.SLIDING_WINDOW, window_shift=SHIFT)
    width = 1 << SHIFT
    for previous, count, size in ((900, 100, 400), (1_000, 0, 64), (1_048, 40, 1_000), (7, 1_000, 48)):
        model = Policer(config)
        model.algorithm.number, model.algorithm.count, model.algorithm.previous = 10, count, previous
        _, until = window_until(config, model.algorithm, size, 10 * width)
        fits = [copy.deepcopy(model.algorithm).decide(size, t) for t in (until - 1, until)]
        assert fits == [False, True] or (until == 11 * width and not fits[0]), (previous, count, size)
    # room from the window's start (a drop that was no count's: a lost compare-and-swap): nothing kept
    model = Policer(config)
    model.algorithm.number, model.algorithm.count, model.algorithm.previous = 10, 100, 7
    assert window_until(config, model.algorithm, 64, 10 * width) is None
