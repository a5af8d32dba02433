"""A bucket seen short in ns (dataplane/bpf/nf/qos/stamp.h): a token bucket's or GCRA's drop where no
jiffies stamp is made (no tick: the precise clock, or the coarse one at realistic rates) keeps in its
CPU's line the time U from which the bucket may hold the packet, in ns, and the room below the
packet; a packet its credit does not cover, bigger than the room, on a reading before U, is dropped
from the line alone (no lock, no shared word, in a rule no call). In the kernel (xdp_police and a
rule's policers, xdp_police_rule, the time given in the frame): every decision, each CPU's credit,
U and room the reference model's at 1, 100 and 400 Gb/s; a drop's U to the ns (a packet at U - 1
dropped on the line, the bucket not asked; one at U passed by the bucket); a U further ahead than
UNTIL_AHEAD, or jiffies left in the field, none. On the model: every packet dropped on the line is
one the bucket itself drops."""

from __future__ import annotations

import copy
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netapp.qos.abi import Algo, Clock, PolicerStats
from netapp.qos.model import (
    BUCKETS,
    UNTIL_AHEAD,
    UNTIL_TAG,
    WORD,
    Policer,
    PolicerConfig,
    until_holds,
    until_stamp,
)
from tests.qos.police import on_cpu
from tests.qos.strategies import RATES
from tests.qos.test_credit import POLICER, cpus, on_cpus, trains  # noqa: F401 - cpus: the fixture
from tests.qos.test_credit_jiffies import EXAMPLES, assert_the_models, random_packets

CLOCKS = (Clock.PRECISE, Clock.COARSE)
SLOT = 5  # a rule's slot in dpp_rule_policers, naming POLICER as its own
US = 1_000


def unticked_bucket(rate: int, algo: Algo, burst: int, clock: Clock = Clock.PRECISE) -> PolicerConfig:
    """A bucket with no tick written: on the precise clock, or the coarse one above bucket_tick_for's
    rates (the case this tests)."""
    return PolicerConfig(rate=rate, burst=burst, algo=algo, clock=clock)


def on_line(model: Policer, size: int, now: int, cpu: int) -> bool:
    """Whether the model drops the packet on its CPU's U and room, not asking the bucket."""
    short = model.credits.get(cpu, 0) < size
    return short and size > model.rooms.get(cpu, WORD) and until_holds(model.stamps.get(cpu, 0), now)


def replayed(police, cpus: list[int], config: PolicerConfig, chunk: int, sent: list[tuple[int, int, int]]
             ) -> list[bool]:
    """`sent` (size, time, cpu) through the kernel's POLICER and the model's, both written afresh:
    their decisions, counters and each CPU's credit, U and room the same (assert_the_models);
    whether each packet was dropped on its line."""
    police.configure(POLICER, config, chunk=chunk)
    model = Policer(config, chunk=chunk)
    dropped_on_line, expected = [], []
    for size, now, cpu in sent:
        dropped_on_line.append(on_line(model, size, now, cpu))
        expected.append(model.decide(size, now, cpu))
    assert_the_models(police, model, cpus, police.decisions_on(POLICER, sent), expected)
    return dropped_on_line


def decided_as_with_nothing_kept(model: Policer, packets: list[tuple[int, int]]) -> list[bool]:
    """`packets` decided on CPU 0, each as the same policer decides it with nothing in its line (its
    U and room cleared before it); whether each was dropped on its line."""
    dropped_on_line = []
    for size, now in packets:
        exact = copy.deepcopy(model)
        exact.rooms.clear()
        exact.stamps.clear()
        dropped_on_line.append(on_line(model, size, now, 0))
        assert model.decide(size, now, 0) == exact.decide(size, now, 0), f"{size} at {now}"
    return dropped_on_line


@pytest.mark.parametrize("clock", CLOCKS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
@pytest.mark.parametrize("rate", RATES.values(), ids=RATES.keys())
def test_every_decision_each_cpus_credit_u_and_room_are_the_models(police, cpus, rate, algo, clock):
    dropped_on_line = []

    @EXAMPLES
    @given(chunk=st.one_of(st.just(0), st.integers(min_value=64, max_value=6000)),
           burst=st.integers(min_value=1514, max_value=16 * 1514), packets=trains(rate),
           picks=st.lists(st.integers(0, 1), min_size=300, max_size=300))
    def check(chunk, burst, packets, picks):
        config = unticked_bucket(rate, algo, burst, clock)
        dropped_on_line.extend(replayed(police, cpus, config, chunk, on_cpus(cpus, packets, picks)))

    check()
    assert any(dropped_on_line), "no packet dropped on a U: the rule was not tried"


def emptied(police, algo: Algo, cpu: int) -> tuple[Policer, int]:
    """A bucket of 1,000 bytes at 8 Mb/s (a byte a us), no chunk, emptied at 1,000 us, then a packet
    of 600 bytes dropped at 1,100 us: the model, and the U it keeps (some 1,600 us)."""
    config = unticked_bucket(8_000_000, algo, 1_000)
    police.configure(POLICER, config, chunk=0)
    model = Policer(config)
    sent = [(1_000, 1_000 * US, cpu), (600, 1_100 * US, cpu)]
    assert police.decisions_on(POLICER, sent) == [model.decide(size, now, cpu) for size, now, _ in sent] == \
        [True, False]
    return model, model.algorithm.fills_at(600)


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_a_drop_keeps_the_time_the_bucket_may_hold_the_packet_to_the_ns(police, cpus, algo):
    """The line keeps U and the room 599 after the drop; at U - 1 a packet of 700 bytes is dropped on
    the line (the bucket not asked: its last update and the line's room, which its drop would make
    699, as they were); at U a packet of 600 bytes is the bucket's, and passes. A U one ns late drops
    the last; one ns early asks the bucket at U - 1."""
    cpu = cpus[0]
    model, until = emptied(police, algo, cpu)
    assert until - 1_100 * US > 400 * US
    share, state = police.per_cpu(POLICER)[cpu], police.state(POLICER)
    assert (share.stamp, share.short_credit) == (until_stamp(1_100 * US, until), ~599 & WORD)
    assert police.decisions_on(POLICER, [(700, until - 1, cpu)]) == [False]
    after = police.state(POLICER)
    assert (after.last_ns, after.window, after.credit) == (state.last_ns, state.window, state.credit), \
        "the bucket was asked"
    assert police.per_cpu(POLICER)[cpu].short_credit == ~599 & WORD, "the bucket's drop made a room of its own"
    assert police.decisions_on(POLICER, [(600, until, cpu)]) == [True]
    assert model.decide(700, until - 1, cpu) is False and model.decide(600, until, cpu) is True


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_a_rules_own_bucket_drops_on_its_line_without_the_call(police, cpus, algo):
    """The same drop through a rule's policers (xdp_police_rule: the line asked inline, before the
    call of dpp_police_rule): at U - 1 dropped on the line, counted, the bucket not asked; at U the
    bucket's, and passed."""
    cpu = cpus[0]
    police.name_rule_policers(SLOT, POLICER, 0)
    _, until = emptied(police, algo, cpu)
    state = police.state(POLICER)
    dropped = police.counters(POLICER).dropped_packets
    with on_cpu(cpu):
        assert not police.rule_passes(SLOT, 700, until - 1)
        after = police.state(POLICER)
        assert (after.last_ns, after.window, after.credit) == (state.last_ns, state.window, state.credit), \
            "the bucket was asked"
        assert police.per_cpu(POLICER)[cpu].short_credit == ~599 & WORD, "the bucket's drop made a room of its own"
        assert police.counters(POLICER).dropped_packets == dropped + 1
        assert police.rule_passes(SLOT, 600, until)
    police.name_rule_policers(SLOT, 0, 0)


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_a_u_further_ahead_than_until_ahead_or_jiffies_in_its_place_is_none(police, cpus, algo):
    """A full bucket (1,000 bytes, a ms idle) with a room of 0 in the line: a U UNTIL_AHEAD ahead of
    the packet's time drops it, and one a ns ahead; one ns further, one at the packet's time, the same
    without the tag (a jiffies stamp's field), jiffies ahead of the time (the first seconds after
    boot) or a pending window's word (2^63 | j) do not: the bucket passes it. A U of never is kept
    UNTIL_AHEAD out."""
    cpu, now = cpus[0], 10**12
    config = unticked_bucket(8_000_000, algo, 1_000)
    for stamp, passes in ((now + UNTIL_AHEAD | UNTIL_TAG, False), (now + 1 | UNTIL_TAG, False),
                          (now + UNTIL_AHEAD + 1 | UNTIL_TAG, True), (now | UNTIL_TAG, True), (now + 1, True),
                          (now + 5_000, True), ((1 << 63) | 5_000, True)):
        police.configure(POLICER, config, chunk=0)
        police.write_share_of(POLICER, cpu, PolicerStats(stamp=stamp, short_credit=WORD))
        assert police.decisions_on(POLICER, [(64, now, cpu)]) == [passes], f"stamp {stamp}"
    assert until_stamp(now, model_never()) == now + UNTIL_AHEAD | UNTIL_TAG


def model_never() -> int:
    return Policer(unticked_bucket(8_000, Algo.TOKEN_BUCKET, 1)).algorithm.fills_at(64)


@pytest.mark.parametrize("algo", BUCKETS, ids=lambda a: a.name.lower())
def test_every_packet_dropped_on_the_line_is_one_the_bucket_drops(algo):
    """The model (whose every decision is the kernel's: above) at some twice the rate on one CPU,
    packets of mixed sizes, gaps up to a full-size packet's time: each decision is that of the same
    policer with nothing in its line (the line's U and room cleared before each)."""
    dropped_on_line = []

    @settings(max_examples=40, deadline=None)
    @given(rate=st.sampled_from((8_000, 10**7, 10**9, 4 * 10**11)),
           burst=st.integers(min_value=1514, max_value=8 * 1514), chunk=st.sampled_from((0, 1514)),
           rnd=st.randoms(use_true_random=False))
    def check(rate, burst, chunk, rnd: random.Random):
        model = Policer(unticked_bucket(rate, algo, burst), chunk=chunk)
        full = 1514 * 8_000_000_000 // rate
        packets = random_packets(rnd, 1, max(1, full), lambda: rnd.choice((1514, rnd.randint(64, 1514))))
        dropped_on_line.extend(decided_as_with_nothing_kept(model, packets))

    check()
    assert sum(dropped_on_line) > len(dropped_on_line) // 100, "few packets dropped on a U: the rule was not tried"
