"""Chained policers in the kernel (xdp_police, BPF_PROG_TEST_RUN, times given by the test): a flow's
policer names its session's AMBR policer as its parent (struct dpp_policer.parent). Two flows each
under their own rate but together over the AMBR are held to the AMBR, decision by decision as the
reference model's chain (netapp.qos.model.Chain) decides; a packet the child drops takes nothing from
the parent; one the parent drops keeps what it took from the child; a parent's parent is not
followed."""

from __future__ import annotations

import pytest

from netapp.qos.abi import Algo, Gate
from netapp.qos.model import Chain, Policer, PolicerConfig
from tests.qos.police import counters_tuple

AMBR, FLOW_A, FLOW_B = 10, 11, 12
ALGOS = (Algo.TOKEN_BUCKET, Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW)
START = 10**12  # ns: every bucket full, every window fresh
SIZE = 1000  # bytes a packet
DURATION = 400_000  # ns of traffic


def two_flows(gap_a: int, gap_b: int) -> list[tuple[int, int]]:
    """(policer, time) of every packet: flow A one every gap_a ns, flow B every gap_b ns, merged in time."""
    packets = [(FLOW_A, START + t) for t in range(0, DURATION, gap_a)]
    packets += [(FLOW_B, START + 7 + t) for t in range(0, DURATION, gap_b)]
    return sorted(packets, key=lambda packet: packet[1])


@pytest.mark.parametrize("algo", ALGOS, ids=lambda a: a.name.lower())
def test_two_flows_under_their_mbrs_but_together_over_the_ambr_are_held_to_the_ambr(police, algo):
    """AMBR 8 Gb/s (1 byte/ns), each flow's MBR 6 Gb/s; each flow offers 4.8 Gb/s (a packet of 1000
    bytes every 1667 ns), 9.6 Gb/s together. Windows of 65.5 us, a few of them in the 400 us sent."""
    ambr = PolicerConfig(rate=8 * 10**9, burst=4000, algo=algo, window_shift=16)
    mbr = PolicerConfig(rate=6 * 10**9, burst=4000, algo=algo, window_shift=16)
    police.configure(AMBR, ambr)
    police.configure(FLOW_A, mbr, parent=AMBR)
    police.configure(FLOW_B, mbr, parent=AMBR)
    parent = Policer(ambr)
    models = {FLOW_A: Chain(Policer(mbr), parent), FLOW_B: Chain(Policer(mbr), parent)}
    packets = two_flows(1667, 1667)
    decisions = [police.passes(flow, SIZE, now) for flow, now in packets]
    assert decisions == [models[flow].decide(SIZE, now) for flow, now in packets]
    for flow in (FLOW_A, FLOW_B):
        assert counters_tuple(police.counters(flow)) == (len(packets) // 2, len(packets) // 2 * SIZE, 0, 0), (
            "each flow under its own MBR: its policer drops nothing")
    passed = police.counters(AMBR).passed_bytes
    assert passed == parent.passed_bytes and police.counters(AMBR).dropped_packets > 0
    if algo == Algo.TOKEN_BUCKET:  # the AMBR's rate over the stretch, its burst on top at most
        assert DURATION - SIZE <= passed <= DURATION + ambr.burst


def test_a_packet_the_child_drops_takes_nothing_from_the_parent(police):
    """The flow's bucket holds one packet; the AMBR's bucket two. Five packets at once: the flow's
    policer passes one and drops four, which the AMBR never sees: it still holds a packet after."""
    police.configure(AMBR, PolicerConfig(rate=8_000, burst=2 * SIZE, algo=Algo.TOKEN_BUCKET))
    police.configure(FLOW_A, PolicerConfig(rate=8_000, burst=SIZE, algo=Algo.TOKEN_BUCKET), parent=AMBR)
    assert [police.passes(FLOW_A, SIZE, START) for _ in range(5)] == [True, False, False, False, False]
    assert counters_tuple(police.counters(FLOW_A)) == (1, SIZE, 4, 4 * SIZE)
    assert counters_tuple(police.counters(AMBR)) == (1, SIZE, 0, 0)
    assert police.state(AMBR).credit == SIZE * 8 * 10**9, "one packet's room left in nanobits"
    assert police.passes(AMBR, SIZE, START), "the room is there for another flow"


@pytest.mark.parametrize("algo", (Algo.TOKEN_BUCKET, Algo.FIXED_WINDOW), ids=lambda a: a.name.lower())
def test_a_packet_the_parent_drops_keeps_what_it_took_from_the_child(police, algo):
    """The AMBR's gate closed: every packet is dropped there, after the flow's policer counted it
    passed and took its room (nf/qos/police.h says why nothing is given back)."""
    police.configure(AMBR, PolicerConfig(rate=8_000, burst=SIZE, algo=algo, gate=Gate.CLOSED))
    flow = PolicerConfig(rate=6 * 10**9, burst=3 * SIZE, algo=algo, window_shift=12)  # a window: 3072 bytes
    police.configure(FLOW_A, flow, parent=AMBR)
    assert [police.passes(FLOW_A, SIZE, START) for _ in range(4)] == [False] * 4
    assert counters_tuple(police.counters(FLOW_A)) == (3, 3 * SIZE, 1, SIZE), "3 fit its room, the 4th not"
    assert counters_tuple(police.counters(AMBR)) == (0, 0, 3, 3 * SIZE)


def test_a_parents_parent_is_not_followed(police):
    """A chain of three written anyway (the control plane refuses it): the third, a closed gate,
    is never reached."""
    police.configure(AMBR + 10, PolicerConfig(rate=8_000, burst=SIZE, algo=Algo.TOKEN_BUCKET, gate=Gate.CLOSED))
    police.configure(AMBR, PolicerConfig(rate=8 * 10**9, burst=4 * SIZE, algo=Algo.TOKEN_BUCKET), parent=AMBR + 10)
    police.configure(FLOW_A, PolicerConfig(rate=8 * 10**9, burst=4 * SIZE, algo=Algo.TOKEN_BUCKET), parent=AMBR)
    assert police.passes(FLOW_A, SIZE, START)
    assert counters_tuple(police.counters(AMBR)) == (1, SIZE, 0, 0)
    assert counters_tuple(police.counters(AMBR + 10)) == (0, 0, 0, 0)


def test_an_empty_parent_polices_nothing(police):
    police.configure(AMBR, None)
    police.configure(FLOW_A, PolicerConfig(rate=8_000, burst=SIZE, algo=Algo.TOKEN_BUCKET), parent=AMBR)
    assert [police.passes(FLOW_A, SIZE, START) for _ in range(2)] == [True, False]
    assert counters_tuple(police.counters(AMBR)) == (0, 0, 0, 0)
