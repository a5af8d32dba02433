"""The schedulers in the kernel against the reference model (netapp/atsss/model.py), packet by
packet: round-robin, smooth weighted round-robin (its split over many packets is the weights'),
active-standby with failover when a path is reported down and back, smallest delay as the RTTs
change, priority-based as paths are reported congested and down, redundant's one number per packet
(its copies: tests/atsss/test_redundant.py); 10,000 sessions at once."""

from __future__ import annotations

import ipaddress

import pytest

from netapp.atsss.abi import Mode
from netapp.atsss.model import SessionModel
from netapp.dataplane.abi import DevmapVal
from tests.atsss.atsss import XDP_DROP, XDP_REDIRECT, XDP_TX, PathSpec, decode, ethernet, ue_packet
from tests.utils.object_tables import ObjectTables

LOOPBACK = 1  # an interface every namespace has: the test run only says where the frame would go

UE = "10.45.0.2"
PEERS = ["10.0.1.2", "192.168.7.20", "10.0.2.2", "172.16.0.2"]
SPECS = [PathSpec(f"10.9.{i}.1", peer, sport=5000 + i, dport=6000 + i) for i, peer in enumerate(PEERS)]


@pytest.fixture
def session(atsss):
    def add(mode: Mode, n: int, weights: list[int] | None = None, priorities: list[int] | None = None) -> SessionModel:
        for i in range(n):
            atsss.add_path(i + 1, SPECS[i])
        atsss.add_session(UE, mode, list(range(1, n + 1)), weights, priorities=priorities)
        return SessionModel(mode, [True] * n, weights or (), priorities=list(priorities or []))

    yield add
    atsss.delete_session(UE)


def send(atsss, model: SessionModel) -> None:
    """One packet through the kernel and the model: the same path, the same numbers, or both drop."""
    verdict, out = atsss.run(ethernet(ue_packet(UE)))
    expected = model.send()
    if expected is None:
        assert verdict == XDP_DROP
        return
    assert verdict == XDP_TX
    sent = decode(out)
    assert (PEERS.index(sent.dst), sent.mp_seq, sent.seq) == expected


def set_up(atsss, model: SessionModel, position: int, up: bool) -> None:
    atsss.set_up(position + 1, up)
    model.up[position] = up


def counted_as_numbered(atsss, n: int) -> bool:
    """Each path's counters (read before the number is taken, for the path picked or guessed then)
    equal the DCCP numbers it sent: a packet counted on a path it did not leave by breaks it."""
    slots = range(1, n + 1)
    return [atsss.sent(slot)[0] for slot in slots] == [atsss.path(slot).dccp_seq for slot in slots]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_round_robin_takes_the_paths_that_are_up_in_turn(atsss, session, n):
    model = session(Mode.ROUND_ROBIN, n)
    for step in range(60):
        if step == 13:
            set_up(atsss, model, n - 1, False)
        if step == 27 and n == 4:  # two of four down: the numbers of a position down go by their cycle
            set_up(atsss, model, 1, False)
        if step == 41:
            for position in {n - 1, min(1, n - 1)}:
                set_up(atsss, model, position, True)
        send(atsss, model)
    # the packets a path down handed to another are the other's
    assert counted_as_numbered(atsss, n)


@pytest.mark.parametrize("weights", [[3, 1], [1, 1], [5, 2, 1], [7, 0, 3], [1, 2, 3, 4]])
def test_weighted_round_robin_follows_the_model_packet_by_packet(atsss, session, weights):
    model = session(Mode.WEIGHTED, len(weights), weights)
    for _ in range(3 * sum(weights) + 5):
        send(atsss, model)
    assert counted_as_numbered(atsss, len(weights))


def test_weighted_round_robin_splits_many_packets_as_the_weights_say(atsss, session):
    weights = [5, 3, 2]
    session(Mode.WEIGHTED, 3, weights)
    packets = 1000 * sum(weights)
    counts = [0, 0, 0]
    for _ in range(packets):
        verdict, out = atsss.run(ethernet(ue_packet(UE)))
        assert verdict == XDP_TX
        counts[PEERS.index(decode(out).dst)] += 1
    assert counts == [1000 * w for w in weights]
    assert [atsss.sent(slot)[0] for slot in (1, 2, 3)] == counts


def test_weighted_round_robin_shares_among_the_paths_left_when_one_goes_down(atsss, session):
    model = session(Mode.WEIGHTED, 3, [2, 1, 1])
    for _ in range(8):
        send(atsss, model)
    set_up(atsss, model, 0, False)
    for _ in range(20):
        send(atsss, model)
    assert atsss.sent(1)[0] == 4 and atsss.sent(2)[0] == atsss.sent(3)[0] == 12
    assert counted_as_numbered(atsss, 3)


def test_active_standby_fails_over_when_the_active_path_is_down_and_back(atsss, session):
    model = session(Mode.ACTIVE_STANDBY, 3)
    for step in range(30):
        if step == 10:
            set_up(atsss, model, 0, False)
        if step == 15:
            set_up(atsss, model, 1, False)
        if step == 20:
            set_up(atsss, model, 0, True)
        send(atsss, model)
    assert model.dccp_seq == [20, 5, 5]  # active 10 + 10, standby 5, second standby 5
    assert [atsss.sent(slot)[0] for slot in (1, 2, 3)] == [20, 5, 5]
    assert counted_as_numbered(atsss, 3)


def test_smallest_delay_follows_the_rtts_fed_and_the_paths_up(atsss, session):
    model = session(Mode.SMALLEST_DELAY, 3)
    steps = {0: (0, 30_000), 3: (1, 12_000), 6: (2, 12_000), 9: (1, 50_000), 12: (2, 0)}
    for step in range(18):
        if step in steps:
            position, rtt = steps[step]
            atsss.set_rtt(position + 1, rtt)
            model.rtts[position] = rtt
        if step == 15:
            set_up(atsss, model, 0, False)
        send(atsss, model)
    # 0 alone known; 1 faster; 1 and 2 equal (the first); 2 faster; 2 unknown again; 0 down
    assert [atsss.sent(slot)[0] for slot in (1, 2, 3)] == [6, 9, 3]
    assert counted_as_numbered(atsss, 3)


def set_congested(atsss, model: SessionModel, position: int, congested: bool) -> None:
    atsss.set_congested(position + 1, congested)
    model.congested[position] = congested


def test_priority_takes_the_highest_priority_path_until_it_is_congested_or_down(atsss, session):
    model = session(Mode.PRIORITY, 4, priorities=[3, 1, 2, 1])
    changes = {4: (set_congested, 1, True), 8: (set_congested, 3, True), 12: (set_up, 2, False),
               16: (set_congested, 0, True), 20: (set_congested, 3, False), 24: (set_up, 3, False),
               28: (set_congested, 1, False)}  # fmt: skip
    for step in range(32):
        if step in changes:
            change, position, value = changes[step]
            change(atsss, model, position, value)
        send(atsss, model)
    # by fours: 1 (the first of the highest); 3; 2; 0 (the only one free); 1 (the highest of the
    # congested); 3 (free again); 1 (3 down: the highest of the congested); 1 (free)
    assert [atsss.sent(slot)[0] for slot in (1, 2, 3, 4)] == [4, 4 * 4, 4, 2 * 4]
    assert counted_as_numbered(atsss, 4)


def test_redundant_takes_one_number_per_packet_and_broadcasts_it_to_its_group(atsss, session):
    session(Mode.REDUNDANT, 3)
    frame = ethernet(ue_packet(UE))
    assert atsss.run(frame)[0] == XDP_DROP, "its group (0) holds no ports yet"
    tx = ObjectTables(atsss.obj).table("dpp_atsss_tx")
    tx.set(0, {0: DevmapVal(LOOPBACK, atsss.obj.program_fd("dpp_atsss_copy_0"))})
    try:
        for n in range(5):
            verdict, _ = atsss.run(frame)
            assert verdict == XDP_REDIRECT
            assert atsss.session(UE).mp_seq == n + 2
        for slot in (1, 2, 3):
            atsss.set_up(slot, False)
        assert atsss.run(frame)[0] == XDP_DROP and atsss.session(UE).mp_seq == 6
    finally:
        tx.delete([0])


def test_a_session_with_every_path_down_drops_and_takes_no_number(atsss, session):
    model = session(Mode.ROUND_ROBIN, 2)
    send(atsss, model)
    set_up(atsss, model, 0, False)
    set_up(atsss, model, 1, False)
    for _ in range(3):
        send(atsss, model)
    assert atsss.session(UE).mp_seq == 1
    set_up(atsss, model, 1, True)
    send(atsss, model)


SESSIONS = 10_000


def test_ten_thousand_sessions_of_four_paths_each_are_installed_and_found(atsss):
    ues = [str(ipaddress.ip_address("10.64.0.0") + i) for i in range(SESSIONS)]
    for i, ue in enumerate(ues):
        slots = [4 * i + k + 1 for k in range(4)]
        for k, slot in enumerate(slots):
            atsss.add_path(slot, PathSpec(f"10.9.{k}.1", f"10.{100 + k}.{i >> 8}.{i & 0xFF}"))
        atsss.add_session(ue, Mode.ROUND_ROBIN, slots)
    try:
        for i in range(0, SESSIONS, 97):
            for k in range(4):
                sent = decode(atsss.run(ethernet(ue_packet(ues[i])))[1])
                assert sent.dst == f"10.{100 + k}.{i >> 8}.{i & 0xFF}", f"session {i}, packet {k}"
        last = decode(atsss.run(ethernet(ue_packet(ues[-1])))[1])
        assert last.dst == f"10.100.{(SESSIONS - 1) >> 8}.{(SESSIONS - 1) & 0xFF}"
    finally:
        for ue in ues:
            atsss.delete_session(ue)
