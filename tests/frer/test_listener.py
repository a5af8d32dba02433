"""The listener side in the kernel (dpp_frer_listener, BPF_PROG_TEST_RUN, received on loopback):
bad frames are counted by what is wrong with them and disturb nothing else. An R-tag cut short is
an encode error of the port it came in on; a frame of no stream passes untouched; a number far
outside the history is a rogue frame, discarded, the stream going on as before."""

from __future__ import annotations

import struct
from ctypes import c_uint32
from typing import Iterator

import pytest

from bench.libbpf import BpfObject, map_lookup, map_update
from bench.libbpf import test_run as run_once
from netapp.dataplane.handle import possible_cpus
from netapp.frer.abi import RTAG_ETHERTYPE, PortStats, Recovery, Role, Stream
from netapp.frer.model import RecoveryConfig
from netapp.frer.slots import recovery_value
from bench.frer.testbed import null_key, read_recovery
from tests.utils.kernel import build_artifact, require_kernel

XDP_DROP, XDP_PASS = 1, 2
LOOPBACK = 1
DMAC = "02:00:00:00:bb:01"
HANDLE = 31
BODY = bytes(range(46))


@pytest.fixture
def listener() -> Iterator[BpfObject]:
    require_kernel()
    obj = BpfObject(build_artifact("dpp_frer.bpf.o"))
    try:
        map_update(obj.map_fd("dpp_frer_null"), null_key(DMAC), c_uint32(HANDLE))
        map_update(obj.map_fd("dpp_frer_streams"), c_uint32(HANDLE), Stream(role=Role.RECOVER))
        map_update(obj.map_fd("dpp_frer_recovery"), c_uint32(HANDLE), recovery_value(RecoveryConfig(history_len=8)))
        yield obj
    finally:
        obj.close()


def tagged(seq: int, dmac: str = DMAC) -> bytes:
    return bytes.fromhex(dmac.replace(":", "")) + bytes(6) + struct.pack("!HHHH", RTAG_ETHERTYPE, 0, seq, 0x88B5) + BODY


def run(obj: BpfObject, packet: bytes) -> int:
    return run_once(obj.program_fd("dpp_frer_listener"), packet, 1, ifindex=LOOPBACK).retval


def encode_errors(obj: BpfObject) -> int:
    per_cpu = (PortStats * possible_cpus())()
    if not map_lookup(obj.map_fd("dpp_frer_port_stats"), c_uint32(LOOPBACK), per_cpu):
        return 0
    return sum(cpu.encode_errors for cpu in per_cpu)


def recovery(obj: BpfObject) -> Recovery:
    return read_recovery(obj, HANDLE)


def test_an_r_tag_cut_short_is_an_encode_error_of_its_port(listener):
    assert run(listener, tagged(1)[:16]) == XDP_DROP
    assert encode_errors(listener) == 1
    assert recovery(listener).passed == 0, "the stream saw nothing"


def test_a_frame_of_no_stream_passes_untouched(listener):
    assert run(listener, tagged(1, dmac="02:00:00:00:bb:02")) == XDP_PASS
    assert recovery(listener).passed == 0 and encode_errors(listener) == 0


def test_a_rogue_number_is_discarded_and_the_stream_goes_on(listener):
    assert [run(listener, tagged(seq)) for seq in (100, 101, 30_000, 102)] == [XDP_PASS, XDP_PASS, XDP_DROP, XDP_PASS]
    state = recovery(listener)
    assert (state.passed, state.rogue, state.discarded, state.seq) == (3, 1, 1, 102)
