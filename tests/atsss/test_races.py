"""One session on two CPUs at once: the downlink run from two threads, each pinned to its CPU,
through the benchmark harness (bench/bpf/harness.bpf.c), which puts the original packet back before
every repetition, so that both CPUs schedule packets of the same UE in the same microseconds. With
the scheduler's state under the session's lock and the paths' numbers taken by atomic adds, no
MP_SEQ number or DCCP sequence number is lost or taken twice and the weighted split stays exact
(without the lock two CPUs read the same current weights and pick the same path)."""

from __future__ import annotations

import pytest

from bench.harness import Harness, Walk, build_harness
from netapp.atsss.abi import Mode
from tests.atsss.atsss import XDP_TX, PathSpec, ethernet, ue_packet
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


def test_two_cpus_on_one_session_lose_and_repeat_no_number(atsss, harness, cpus):
    atsss.add_path(1, PathSpec("10.0.1.1", "10.0.1.2"))
    atsss.add_path(2, PathSpec("10.0.2.1", "10.0.2.2"))
    atsss.add_session(UE, Mode.WEIGHTED, [1, 2], WEIGHTS, mp_seq=0)
    frame = ethernet(ue_packet(UE, bytes(64)))
    ue = int.from_bytes(bytes(map(int, UE.split("."))), "big")
    harness.set_walk(Walk(1, teid_base=0, src_base=ue, teid_off=PAYLOAD_AT, src_off=UE_AT))
    harness.set_target(atsss.prog)
    harness.set_packet(frame)
    try:
        verdicts = run_on_cpus(harness.walk_head_fd, frame, PACKETS, cpus, out_size=len(frame) + 256)
        assert set(verdicts.values()) == {XDP_TX}
        total = 2 * PACKETS
        assert atsss.session(UE).mp_seq == total
        sent = [atsss.sent(1)[0], atsss.sent(2)[0]]
        assert sent == [total * w // sum(WEIGHTS) for w in WEIGHTS]
        assert [atsss.path(1).dccp_seq, atsss.path(2).dccp_seq] == sent
    finally:
        atsss.delete_session(UE)
