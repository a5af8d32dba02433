"""Sequence recovery in the kernel, alone: dataplane/build/xdp_frer.bpf.o loaded with libbpf, a
recovery function written into its dpp_frer_recovery, frames run through xdp_frer
(BPF_PROG_TEST_RUN), the function's state and counters read back under its lock."""

from __future__ import annotations

import struct
from ctypes import c_uint32
from typing import Optional

from bench.libbpf import BpfObject, map_update, test_run
from netapp.dataplane.handle import possible_cpus
from bench.frer.testbed import read_recovery
from netapp.frer.abi import RTAG_ETHERTYPE, CpuCounts, Decision, Recovery
from netapp.frer.model import RecoveryConfig
from netapp.frer.slots import recovery_value
from tests.utils.kernel import build_artifact, require_kernel

XDP_ABORTED, XDP_DROP, XDP_PASS = 0, 1, 2
MACS = bytes.fromhex("020000000002" "020000000001")
TEST_ETHERTYPE = 0x88B5
TEST_HEADER = struct.Struct("<4sBBHQ")  # stream (network order), auto_seq, decision, reserved, now_ns
VLAN = struct.Struct("!HH")


def frame(stream: int, seq: Optional[int], now_ns: int, vlan: Optional[int] = None, auto_seq: bool = False,
          payload: bytes = b"") -> bytes:
    """A frame of `stream` with R-tag sequence number `seq` (None: untagged) at `now_ns` (0: the
    kernel's clock), behind a VLAN tag if `vlan` is given."""
    head = MACS + (VLAN.pack(0x8100, vlan) if vlan is not None else b"")
    tag = struct.pack("!HHHH", RTAG_ETHERTYPE, 0, seq, TEST_ETHERTYPE) if seq is not None else struct.pack("!H", TEST_ETHERTYPE)
    return head + tag + TEST_HEADER.pack(stream.to_bytes(4, "big"), int(auto_seq), 0, 0, now_ns) + payload


def decision_of(output: bytes) -> Decision:
    """The decision xdp_frer wrote into an output frame's test header (after its EtherType)."""
    at = output.index(TEST_ETHERTYPE.to_bytes(2, "big"), 12) + 2
    return Decision(TEST_HEADER.unpack_from(output, at)[2])


class FrerProgram:
    """xdp_frer.bpf.o, loaded; closed with the object."""

    def __init__(self) -> None:
        require_kernel()
        self.obj = BpfObject(build_artifact("xdp_frer.bpf.o"))
        self.prog = self.obj.program_fd("xdp_frer")
        self.recovery = self.obj.map_fd("dpp_frer_recovery")
        self._cpu_counts = self.obj.map_fd("dpp_frer_cpu_counts")
        self._seq = self.obj.map_fd("frer_test_seq")

    def close(self) -> None:
        self.obj.close()

    def configure(self, stream: int, config: Optional[RecoveryConfig], pop: bool = False) -> None:
        map_update(self._cpu_counts, c_uint32(stream), (CpuCounts * possible_cpus())())
        map_update(self.recovery, c_uint32(stream), recovery_value(config, pop) if config else Recovery())
        map_update(self._seq, c_uint32(0), (c_uint32 * possible_cpus())())

    def state(self, stream: int) -> Recovery:
        return read_recovery(self.obj, stream)

    def run(self, packet: bytes) -> tuple[int, Decision, bytes]:
        """One frame: the verdict, the function's decision, the frame as it leaves."""
        result = test_run(self.prog, packet, 1)
        assert result.retval in (XDP_PASS, XDP_DROP), f"verdict {result.retval}"
        return result.retval, decision_of(result.data), result.data

    def decide(self, stream: int, seq: Optional[int], now_ns: int) -> Decision:
        verdict, decision, _ = self.run(frame(stream, seq, now_ns))
        assert (verdict == XDP_PASS) == decision.passes, f"{decision.name} with verdict {verdict}"
        return decision
