"""A path's loss estimate in the kernel (xdp_atsss under BPF_PROG_TEST_RUN): the UE's Acks and
DataAcks carry Ack Vectors (RFC 4340 11.4) built here from the set of the path's numbers the test's
UE received, run-length encoded from the acknowledgement number down; the uplink must count each
number once, delivered or lost, as the test's own reading of the window says (the numbers after the
previous Ack's horizon up to this one's: its acknowledgement number less DPP_ATSSS_LOSS_REORDER)."""

from __future__ import annotations

import random

import pytest

from netapp.atsss.abi import ACK_VECTOR_MAX, LOSS_MARKED, LOSS_REORDER, Mode
from tests.atsss.atsss import XDP_DROP, XDP_PASS, PathSpec, ue_packet
from tests.atsss.uplink import (ACK, DATAACK, ECN_MARKED, NOT_RECEIVED, RECEIVED, RESERVED, ack_vector, decapsulated,
                                mp_seq_option, uplink_frame)  # fmt: skip

UE = "10.45.0.9"
PATH = PathSpec("10.0.1.1", "10.0.1.2", sport=5101, dport=5102)
SLOT = 1
SEQ48 = 1 << 48


@pytest.fixture
def path(atsss):
    """The UE's session of one path with its uplink; the path's heard state zeroed."""
    atsss.set_config()
    atsss.add_path(SLOT, PATH, ue=UE)
    atsss.add_session(UE, Mode.ROUND_ROBIN, [SLOT])
    yield
    atsss.delete_session(UE)
    atsss.delete_uplink(PATH)


def send_ack(atsss, seq: int, ack: int, vector: bytes, kind: int = ACK) -> int:
    inner = ue_packet("192.0.2.1", b"up", src=UE) if kind == DATAACK else b""
    verdict, out = atsss.run(uplink_frame(PATH, inner, seq=seq, kind=kind, ack=ack,
                                          options=mp_seq_option(seq) + vector))  # fmt: skip
    if kind == DATAACK:
        assert verdict == XDP_PASS and out == decapsulated(inner)
    else:
        assert verdict in (XDP_PASS, XDP_DROP)
    return verdict


def judged(states: dict[int, int], after: int, upto: int, unknown: int | None = NOT_RECEIVED) -> tuple[int, int]:
    """(delivered, lost) of the numbers after `after` up to `upto`, as `states` says (mod 2^48); a
    number `states` lacks has the state `unknown` (None: counted neither way)."""
    delivered = lost = 0
    n = after
    while n != upto:
        n = (n + 1) % SEQ48
        state = states.get(n, unknown)
        delivered += state in (RECEIVED, ECN_MARKED)
        lost += state == NOT_RECEIVED
    return delivered, lost


def test_the_first_vector_only_marks_where_judging_starts(atsss, path):
    send_ack(atsss, seq=10, ack=500, vector=ack_vector(500, {n: RECEIVED for n in range(400, 501)}, 100))
    rx = atsss.path_rx(SLOT)
    assert (rx.loss_mark, rx.delivered, rx.lost) == (LOSS_MARKED | 500 - LOSS_REORDER, 0, 0)


@pytest.mark.parametrize("start", [1000, SEQ48 - 700], ids=["plain", "across 2^48"])
def test_each_number_is_counted_once_delivered_or_lost_as_the_ues_vectors_say(atsss, path, start):
    """A UE that lost a seeded tenth of 2,000 numbers, Acking every 1-7 numbers with a vector of the
    last 150 (ECN marks among the received ones, some Acks lost): what the uplink counts is exactly
    the test's own count over the numbers its Acks judged."""
    rng = random.Random(20)
    sent = [(start + i) % SEQ48 for i in range(2000)]
    states = {n: (ECN_MARKED if rng.random() < 0.05 else RECEIVED) for n in sent if rng.random() >= 0.1}
    acks = []
    i = 5
    while i < len(sent):
        acks.append(sent[i])
        i += rng.randint(1, 7)
    first = acks[0]
    for seq, ack in enumerate(acks, start=1):
        if seq > 1 and rng.random() < 0.05:
            continue  # lost on the way: the next vector still reports its numbers
        send_ack(atsss, seq=seq, ack=ack, vector=ack_vector(ack, states, 150))
        last = ack
    rx = atsss.path_rx(SLOT)
    expected = judged(states, (first - LOSS_REORDER) % SEQ48, (last - LOSS_REORDER) % SEQ48)
    assert (rx.delivered, rx.lost) == expected
    assert rx.loss_mark == LOSS_MARKED | (last - LOSS_REORDER) % SEQ48
    assert 0.07 < expected[1] / sum(expected) < 0.13  # the seeded tenth, within its spread


def test_old_and_repeated_acks_count_nothing_again(atsss, path):
    states = {n: RECEIVED for n in range(100, 200) if n % 4}
    send_ack(atsss, seq=1, ack=120, vector=ack_vector(120, states, 30))
    send_ack(atsss, seq=2, ack=150, vector=ack_vector(150, states, 60))
    after = atsss.path_rx(SLOT)
    assert (after.delivered, after.lost) == judged(states, 117, 147)
    send_ack(atsss, seq=3, ack=150, vector=ack_vector(150, states, 60))  # repeated
    send_ack(atsss, seq=4, ack=140, vector=ack_vector(140, states, 60))  # overtaken, reordered
    again = atsss.path_rx(SLOT)
    assert (again.delivered, again.lost, again.loss_mark) == (after.delivered, after.lost, after.loss_mark)


def test_numbers_no_vector_reaches_are_counted_neither_way(atsss, path):
    """Acks lost for 100 numbers, then a vector of the last 20 only: the 80 before it are unknown."""
    states = {n: RECEIVED for n in range(0, 400) if n % 10}
    send_ack(atsss, seq=1, ack=103, vector=ack_vector(103, states, 10))
    send_ack(atsss, seq=2, ack=203, vector=ack_vector(203, states, 20))
    rx = atsss.path_rx(SLOT)
    assert (rx.delivered, rx.lost) == judged(states, 203 - 20, 200)
    assert rx.delivered + rx.lost == 20 - LOSS_REORDER


def test_a_data_ack_with_a_vector_counts_too_and_acks_without_one_count_nothing(atsss, path):
    states = {n: RECEIVED for n in range(0, 100) if n % 5}
    send_ack(atsss, seq=1, ack=40, vector=b"", kind=ACK)  # no vector: not even the mark
    assert atsss.path_rx(SLOT).loss_mark == 0
    send_ack(atsss, seq=2, ack=40, vector=ack_vector(40, states, 40, option=39), kind=DATAACK)
    send_ack(atsss, seq=3, ack=80, vector=ack_vector(80, states, 60, option=39), kind=DATAACK)
    send_ack(atsss, seq=4, ack=95, vector=b"", kind=ACK)
    rx = atsss.path_rx(SLOT)
    assert (rx.delivered, rx.lost) == judged(states, 37, 77) == (32, 8)


def test_reserved_states_count_neither_way(atsss, path):
    states = {n: (RESERVED if n % 3 == 0 else RECEIVED) for n in range(0, 100)}
    send_ack(atsss, seq=1, ack=20, vector=ack_vector(20, states, 20))
    send_ack(atsss, seq=2, ack=50, vector=ack_vector(50, states, 40))
    rx = atsss.path_rx(SLOT)
    assert (rx.delivered, rx.lost) == (sum(1 for n in range(18, 48) if n % 3), 0)


def vector_of(state_bytes: bytes) -> bytes:
    """An Ack Vector option (RFC 4340 11.4) of these state bytes: state << 6 | run length."""
    return bytes([38, 2 + len(state_bytes)]) + state_bytes


def reported(ack: int, state_bytes: bytes) -> dict[int, int]:
    """Each number's state as the state bytes report it from `ack` down, each byte's run covering
    run length + 1 numbers."""
    states, n = {}, ack
    for byte in state_bytes:
        for _ in range((byte & 0x3F) + 1):
            states[n % SEQ48] = byte >> 6
            n -= 1
    return states


def judged_after_a_mark(atsss, state_bytes: bytes, mark_ack: int, ack: int) -> tuple[int, int]:
    """A first Ack at `mark_ack` sets the mark, one at `ack` carries the vector: the path's counts."""
    send_ack(atsss, seq=1, ack=mark_ack, vector=vector_of(bytes([RECEIVED << 6])))
    send_ack(atsss, seq=2, ack=ack, vector=vector_of(state_bytes))
    rx = atsss.path_rx(SLOT)
    return rx.delivered, rx.lost


def test_a_vector_of_one_state_byte_counts_its_run(atsss, path):
    """The vector's only byte: 21 numbers not received from the Ack down, 18 of them in the window."""
    state_bytes = bytes([NOT_RECEIVED << 6 | 20])
    counted = judged_after_a_mark(atsss, state_bytes, 100, 150)
    assert counted == judged(reported(150, state_bytes), 100 - LOSS_REORDER, 150 - LOSS_REORDER, unknown=None)
    assert counted == (0, 18)


@pytest.mark.parametrize("length", [ACK_VECTOR_MAX + 1, 200])
def test_a_vector_longer_than_the_bytes_read_counts_only_the_first_ones_runs(atsss, path, length):
    """Seeded runs of every state, their numbers all in the window, the last byte read a run of lost
    numbers and the next one of received ones: the numbers the bytes past ACK_VECTOR_MAX report are
    counted neither way."""
    rng = random.Random(length)
    state_bytes = bytearray(rng.randrange(4) << 6 | rng.randrange(8) for _ in range(length))
    state_bytes[ACK_VECTOR_MAX - 1: ACK_VECTOR_MAX + 1] = bytes([NOT_RECEIVED << 6 | 5, RECEIVED << 6 | 5])
    ack = 1000 + len(reported(1000, state_bytes)) + 10  # the whole vector's reach in the window

    def counted_from(first_bytes: int) -> tuple[int, int]:
        window = (1000 - LOSS_REORDER, ack - LOSS_REORDER)
        return judged(reported(ack, state_bytes[:first_bytes]), *window, unknown=None)

    expected = counted_from(ACK_VECTOR_MAX)
    assert counted_from(ACK_VECTOR_MAX - 1) != expected != counted_from(length), "each side of the limit counts"
    assert judged_after_a_mark(atsss, bytes(state_bytes), 1000, ack) == expected
