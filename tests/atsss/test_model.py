"""The reference model of the schedulers on its own, against published sequences and definitions."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from netapp.atsss.abi import Mode
from netapp.atsss.model import SEQ_MASK, SessionModel


def picks(model: SessionModel, n: int) -> list:
    return [model.pick() for _ in range(n)]


def test_smooth_weighted_round_robin_spreads_as_nginx_documents_it():
    # nginx's upstream weights a=5, b=1, c=1: a a b a c a a (ngx_http_upstream_round_robin.c)
    assert picks(SessionModel(Mode.WEIGHTED, [True] * 3, [5, 1, 1]), 7) == [0, 0, 1, 0, 2, 0, 0]


def test_a_zero_weight_or_a_path_down_is_never_picked():
    model = SessionModel(Mode.WEIGHTED, [True, False, True], [1, 9, 0])
    assert set(picks(model, 20)) == {0}


def sent_on(model: SessionModel, n: int) -> list:
    """The positions of the next n packets sent (each takes its MP_SEQ number)."""
    return [model.send()[0] for _ in range(n)]  # type: ignore[index]


def test_round_robin_skips_paths_down_and_active_standby_takes_the_first_up():
    # a number whose position is down goes by its cycle (number // 3) among the paths up [0, 2]
    assert sent_on(SessionModel(Mode.ROUND_ROBIN, [True, False, True]), 6) == [0, 0, 2, 0, 2, 2]
    assert sent_on(SessionModel(Mode.ROUND_ROBIN, [False, True]), 3) == [1, 1, 1]


@pytest.mark.parametrize("up", [up for n in range(1, 5) for up in itertools.product([True, False], repeat=n) if any(up)])
def test_round_robin_gives_every_path_up_an_equal_share(up):
    """Over paths x paths up numbers, each path up is picked as often, whichever are down."""
    model = SessionModel(Mode.ROUND_ROBIN, list(up))
    shares = Counter(sent_on(model, len(up) * sum(up) * 3))
    assert sorted(shares) == [i for i, is_up in enumerate(up) if is_up] and len(set(shares.values())) == 1
    # the number's turn: its low 32 bits mod the paths up (with three, 2**32 - 1 and 2**32 both 0)
    assert sent_on(SessionModel(Mode.ROUND_ROBIN, [True] * 3, mp_seq=(1 << 32) - 2), 4) == [2, 0, 0, 1]
    assert picks(SessionModel(Mode.ACTIVE_STANDBY, [False, True, True]), 3) == [1, 1, 1]
    assert SessionModel(Mode.ACTIVE_STANDBY, [False, False]).send() is None


def test_smallest_delay_takes_the_known_smallest_rtt_of_the_paths_up():
    assert picks(SessionModel(Mode.SMALLEST_DELAY, [True, True, True], rtts=[0, 40, 20]), 2) == [2, 2]
    assert SessionModel(Mode.SMALLEST_DELAY, [True, True, False], rtts=[0, 0, 5]).pick() == 0


def test_numbers_wrap_at_48_bits():
    model = SessionModel(Mode.ROUND_ROBIN, [True], mp_seq=SEQ_MASK, dccp_seq=[SEQ_MASK])
    assert [model.send(), model.send()] == [(0, SEQ_MASK, SEQ_MASK), (0, 0, 0)]


def test_priority_takes_the_highest_priority_free_path_then_a_congested_one():
    model = SessionModel(Mode.PRIORITY, [True, True, True], priorities=[2, 0, 1])
    assert picks(model, 2) == [1, 1]
    model.congested[1] = True
    assert model.pick() == 2
    model.up[2] = False
    assert model.pick() == 0
    model.congested[0] = True
    assert model.pick() == 1, "every path up congested: the highest priority of them"


def test_redundant_sends_one_number_on_every_path_up():
    model = SessionModel(Mode.REDUNDANT, [True, False, True], mp_seq=7, dccp_seq=[3, 0, 9])
    assert model.copies() == [(0, 7, 3), (2, 7, 9)]
    assert model.copies() == [(0, 8, 4), (2, 8, 10)]
    assert SessionModel(Mode.REDUNDANT, [False, False]).copies() == []
