"""One session on two CPUs at once: the downlink run from two threads, each pinned to its CPU,
through the benchmark harness (bench/bpf/harness.bpf.c), which puts the original packet back before
every repetition, so that both CPUs schedule packets of the same UE in the same microseconds. With
weighted round-robin's state under the session's lock and the MP_SEQ and paths' numbers taken by
atomic adds, no MP_SEQ number or DCCP sequence number is lost or taken twice and the weighted split
stays exact (without the lock two CPUs read the same current weights and pick the same path); with
round-robin, which takes no lock (the number picks the path), the split is exactly even. The uplink the
same way: one path's Data from both CPUs, every packet counted for the Ack ratio by atomic add, every
Ack numbered once."""

from __future__ import annotations

import pytest

from bench.atsss.ring import AckRing
from bench.harness import Harness, Walk, build_harness
from netapp.atsss.abi import Mode, UplinkReason
from tests.atsss.atsss import XDP_PASS, XDP_TX, PathSpec, ethernet, ue_packet
from tests.atsss.uplink import uplink_frame
from tests.utils.dataplane import run_on_cpus, two_cpus

UE = "10.45.0.2"
WEIGHTS = [3, 1]
PACKETS = 40_000  # per CPU, a multiple of sum(WEIGHTS)
UE_AT = 14 + 16  # the inner IPv4 destination: the walk writes the UE's address there
PAYLOAD_AT = 14 + 20 + 8


@pytest.fixture(scope="module")
def cpus() -> list[int]:
    return two_cpus()


@pytest.fixture(scope="module")
def harness():
    with Harness(build_harness()) as h:
        yield h
        h.release_target()


def downlink_on_two_cpus(atsss, harness, cpus, mode: Mode, weights: list[int]) -> list[int]:
    """PACKETS of one session's downlink from each CPU at once: every verdict XDP_TX and every MP_SEQ
    number taken once; the packets each path sent, which its DCCP numbers must count exactly."""
    atsss.add_path(1, PathSpec("10.0.1.1", "10.0.1.2"))
    atsss.add_path(2, PathSpec("10.0.2.1", "10.0.2.2"))
    atsss.add_session(UE, mode, [1, 2], weights, mp_seq=0)
    frame = ethernet(ue_packet(UE, bytes(64)))
    ue = int.from_bytes(bytes(map(int, UE.split("."))), "big")
    harness.set_walk(Walk(1, teid_base=0, src_base=ue, teid_off=PAYLOAD_AT, src_off=UE_AT))
    harness.set_target(atsss.prog)
    harness.set_packet(frame)
    try:
        verdicts = run_on_cpus(harness.walk_head_fd, frame, PACKETS, cpus, out_size=len(frame) + 256)
        assert set(verdicts.values()) == {XDP_TX}
        assert atsss.session(UE).mp_seq == 2 * PACKETS
        sent = [atsss.sent(1)[0], atsss.sent(2)[0]]
        assert [atsss.path(1).dccp_seq, atsss.path(2).dccp_seq] == sent
        return sent
    finally:
        atsss.delete_session(UE)


def test_two_cpus_on_one_session_lose_and_repeat_no_number(atsss, harness, cpus):
    sent = downlink_on_two_cpus(atsss, harness, cpus, Mode.WEIGHTED, WEIGHTS)
    assert sent == [2 * PACKETS * w // sum(WEIGHTS) for w in WEIGHTS]


def test_two_cpus_round_robin_without_a_lock_split_evenly_and_repeat_no_number(atsss, harness, cpus):
    # each number taken once: the even ones went on the first path, the odd ones on the second
    assert downlink_on_two_cpus(atsss, harness, cpus, Mode.ROUND_ROBIN, [1, 1]) == [PACKETS, PACKETS]


ACK_RATIO = 20
UPLINK_PACKETS = 20_000  # per CPU: 2,000 Acks in all, within the ring's room
SEQ_AT = 14 + 20 + 12  # the DCCP sequence number's low 32 bits (outer IPv4)
MP_SEQ_AT = 14 + 20 + 16 + 4  # four bytes of the MP_SEQ number
CHECK_AT = 14 + 20 + 6
ACK_DCCP = 14 + 20  # an Ack's DCCP header: its sequence number at 10, its acknowledgement number at 18


def test_two_cpus_on_one_path_count_every_packet_and_number_every_ack_once(atsss, harness, cpus):
    """The uplink's shared state from two CPUs at once: Data packets of one path, another sequence
    number each repetition (the walk writes it, and the MP_SEQ number, keeping the checksum right)."""
    spec = PathSpec("10.0.1.1", "10.0.1.2", sport=5001, dport=5002)
    atsss.add_path(1, spec, ue=UE)
    atsss.add_session(UE, Mode.ROUND_ROBIN, [1])
    atsss.set_config(ack_ratio=ACK_RATIO)
    ring = AckRing(atsss.acks)
    ring.drain()
    before = atsss.uplink_counts()
    frame = uplink_frame(spec, ue_packet("198.51.100.7", bytes(64), src=UE), seq=1 << 40)
    flows = 9973  # prime: the walk visits every sequence number 1 << 40 + f
    harness.set_walk(Walk(flows, teid_base=0, src_base=7, teid_off=SEQ_AT, src_off=MP_SEQ_AT, csum_off=CHECK_AT))
    harness.set_target(atsss.prog)
    harness.set_packet(frame)
    try:
        verdicts = run_on_cpus(harness.walk_head_fd, frame, UPLINK_PACKETS, cpus, out_size=len(frame))
        assert set(verdicts.values()) == {XDP_PASS}
        total = 2 * UPLINK_PACKETS
        assert atsss.uplink_counts()[UplinkReason.DECAPSULATED] - before[UplinkReason.DECAPSULATED] == total
        assert atsss.received(1)[0] == total and atsss.path_rx(1).unacked == total
        acks = ring.drain()
        assert len(acks) == total // ACK_RATIO
        numbers = sorted(int.from_bytes(frame[ACK_DCCP + 10 : ACK_DCCP + 16], "big") for _, frame in acks)
        assert numbers == list(range(total // ACK_RATIO)), "every Ack its own sequence number, none skipped"
        acked = max(int.from_bytes(frame[ACK_DCCP + 18 : ACK_DCCP + 24], "big") for _, frame in acks)
        gsr = atsss.path_rx(1).gsr
        assert (1 << 40) <= acked <= gsr < (1 << 40) + flows
    finally:
        ring.close()
        atsss.delete_session(UE)
        atsss.delete_uplink(spec)
        atsss.set_config()
