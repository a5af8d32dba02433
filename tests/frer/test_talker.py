"""The talker side in the kernel (dpp_frer_talker, BPF_PROG_TEST_RUN): a frame of a GENERATE stream
leaves with an R-tag behind its addresses and VLAN tags, numbered 0, 1, 2, ... per stream, and the
stream's handle in front of it for the egress programs; frames of no stream, of a stream this node
does not generate, and frames already tagged go on untouched; a generated stream with no group of
ports held is dropped untagged, without taking a number, and counted as its ingress port's."""

from __future__ import annotations

import struct
from ctypes import c_uint32
from typing import Iterator

import pytest

from bench.libbpf import BpfObject, inner_map_set, map_lookup, map_update
from bench.libbpf import test_run as run_once
from netapp.dataplane.abi import MapType
from netapp.dataplane.handle import possible_cpus
from netapp.frer.abi import MAX_PORTS, RTAG_ETHERTYPE, PortStats, Role, Stream
from bench.frer.testbed import null_key
from tests.utils.kernel import build_artifact, require_kernel

XDP_DROP, XDP_PASS, XDP_REDIRECT = 1, 2, 4
LOOPBACK = 1  # BPF_PROG_TEST_RUN's ingress port when the context names none
DMAC = "02:00:00:00:aa:01"
BODY = bytes(range(60))


@pytest.fixture(scope="module")
def talker() -> Iterator[BpfObject]:
    require_kernel()
    obj = BpfObject(build_artifact("dpp_frer.bpf.o"))
    try:
        yield obj
    finally:
        obj.close()


def configure(obj: BpfObject, handle: int, role: Role, vlan: int = 0) -> None:
    """The stream's identity and slot; a generated one replicates through a group of ports (entry 0 of
    dpp_frer_tx), none here: the frame comes back from BPF_PROG_TEST_RUN as the copies would leave."""
    if role == Role.GENERATE:
        inner_map_set(obj.map_fd("dpp_frer_tx"), 0, MapType.DEVMAP_HASH, MAX_PORTS, [], 4, 8)
    map_update(obj.map_fd("dpp_frer_null"), null_key(DMAC, vlan), c_uint32(handle))
    map_update(obj.map_fd("dpp_frer_streams"), c_uint32(handle), Stream(role=role, tx_group=0))


def frame(vlan: int | None = None, ethertype: int = 0x88B5) -> bytes:
    tag = struct.pack("!HH", 0x8100, vlan) if vlan is not None else b""
    return bytes.fromhex(DMAC.replace(":", "")) + bytes(6) + tag + struct.pack("!H", ethertype) + BODY


def port_counts(obj: BpfObject) -> PortStats:
    """The ingress port's counters summed over the CPUs (zero before its first count)."""
    per_cpu, total = (PortStats * possible_cpus())(), PortStats()
    if map_lookup(obj.map_fd("dpp_frer_port_stats"), c_uint32(LOOPBACK), per_cpu):
        total.encode_errors = sum(cpu.encode_errors for cpu in per_cpu)
        total.ungrouped = sum(cpu.ungrouped for cpu in per_cpu)
    return total


def run(obj: BpfObject, packet: bytes):  # noqa: ANN201
    return run_once(obj.program_fd("dpp_frer_talker"), packet, 1, out_size=len(packet) + 64)


@pytest.mark.parametrize("vlan", [None, 7], ids=["untagged", "vlan"])
def test_a_generated_stream_is_tagged_numbered_and_replicated(talker, vlan):
    handle = 21 if vlan is None else 22
    configure(talker, handle, Role.GENERATE, vlan or 0)
    sent = frame(vlan)
    head = 12 + (4 if vlan is not None else 0)
    for seq in range(3):
        result = run(talker, sent)
        assert result.retval == XDP_REDIRECT
        meta, out = result.data[:4], result.data[4:]
        assert struct.unpack("<I", meta)[0] == handle
        assert out[:head] == sent[:head]
        assert out[head : head + 6] == struct.pack("!HHH", RTAG_ETHERTYPE, 0, seq)
        assert out[head + 6 :] == sent[head:], "the frame's EtherType and body behind the tag"


def test_frames_of_no_generated_stream_and_tagged_frames_go_on_untouched(talker):
    configure(talker, 23, Role.RECOVER, vlan=9)
    for packet in (frame(vlan=9), frame(vlan=10), frame(ethertype=RTAG_ETHERTYPE)):
        result = run(talker, packet)
        assert (result.retval, result.data) == (XDP_PASS, packet)


def test_a_generated_stream_without_a_group_is_dropped_untagged_and_takes_no_number(talker):
    handle, group = 24, 9  # no entry 9 of dpp_frer_tx is written
    map_update(talker.map_fd("dpp_frer_null"), null_key(DMAC, 11), c_uint32(handle))
    map_update(talker.map_fd("dpp_frer_streams"), c_uint32(handle), Stream(role=Role.GENERATE, tx_group=group))
    sent = frame(vlan=11)
    before = port_counts(talker).ungrouped
    for _ in range(2):
        result = run(talker, sent)
        assert (result.retval, result.data) == (XDP_DROP, sent)
    assert port_counts(talker).ungrouped == before + 2, "each dropped frame counted at its port"
    stream = Stream()
    assert map_lookup(talker.map_fd("dpp_frer_streams"), c_uint32(handle), stream)
    assert stream.next_seq == 0, "no number taken: the listener sees no gap once the group is written"
    inner_map_set(talker.map_fd("dpp_frer_tx"), group, MapType.DEVMAP_HASH, MAX_PORTS, [], 4, 8)
    result = run(talker, sent)
    assert result.retval == XDP_REDIRECT
    assert result.data[4 + 16 : 4 + 22] == struct.pack("!HHH", RTAG_ETHERTYPE, 0, 0)
    counts = port_counts(talker)
    assert (counts.ungrouped, counts.encode_errors) == (before + 2, 0), "a replicated frame is not counted"
