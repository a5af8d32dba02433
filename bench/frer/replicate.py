"""What replicating a frame costs: the talker side (dpp_frer_talker: stream identification, the next
number by atomic add, the R-tag pushed, the metadata, the DEVMAP broadcast and each copy's egress
program) run in live-frame mode (BPF_F_TEST_XDP_LIVE_FRAMES: every frame starts from the original
bytes, and the broadcast is carried out, into two veth ports whose peers drop what they receive),
against the same live frames through a program that drops them (the floor of a live run).

    python -m bench.frer.replicate [--runs 7] [--repeat 200000]

Printed and written into bench/results/frer.json beside the elimination figures
(bench/README.md, "bench/frer")."""

from __future__ import annotations

import argparse
import json
import secrets
import socket
import statistics
import struct
import sys
from ctypes import c_uint8, c_uint32
from pathlib import Path
from typing import Optional, Sequence

from bench.frer.__main__ import DEFAULT_OUT
from bench.libbpf import BpfObject, map_update, test_run_live
from bench.throughput.sink import attach_native
from netapp.core import netns as namespaces
from netapp.dataplane import binding
from netapp.frer.abi import Member, MemberKey, NullKey, Role, Stream
from netapp.testbed import netns

DMAC = bytes.fromhex("0200000000cc")
FRAME = DMAC + bytes(6) + struct.pack("!H", 0x88B5) + bytes(114)
PORTS = ("out1", "out2")
HANDLE = 1


class ReplicateBench:
    """A namespace with the ingress port and two FRER ports, the talker configured for one stream
    replicated to both."""

    def __init__(self, build: Path):
        self.ns = f"dppfrer-{secrets.token_hex(3)}"
        self.frer: Optional[BpfObject] = None
        self.drop: Optional[BpfObject] = None
        try:
            netns.add_namespace(self.ns)
            netns.add_ports(self.ns, ("in0", *PORTS))
            self.frer = BpfObject(build / "dpp_frer.bpf.o")
            self.drop = BpfObject(build / "xdp_drop.bpf.o")
            self._configure()
        except BaseException:
            self.close()
            raise

    def _configure(self) -> None:
        assert self.frer is not None and self.drop is not None
        fd = self.frer.map_fd
        map_update(fd("dpp_frer_null"), NullKey(dmac=(c_uint8 * 6)(*DMAC), vlan=0), c_uint32(HANDLE))
        map_update(fd("dpp_frer_streams"), c_uint32(HANDLE), Stream(role=Role.GENERATE))
        egress = self.frer.program_fd("dpp_frer_egress")
        with namespaces.entered(self.ns):
            for slot, port in enumerate(PORTS):
                ifindex = socket.if_nametoindex(port)
                map_update(fd("dpp_frer_tx"), c_uint32(slot), (c_uint32 * 2)(ifindex, egress))
                map_update(fd("dpp_frer_members"), MemberKey(HANDLE, ifindex), Member())
                attach_native(socket.if_nametoindex(f"{port}p"), self.drop.program_fd("xdp_drop"))
            self.ingress = socket.if_nametoindex("in0")

    def time(self, prog_fd: int, repeat: int) -> int:
        with namespaces.entered(self.ns):
            return test_run_live(prog_fd, FRAME, repeat, self.ingress).duration_ns

    def close(self) -> None:
        netns.delete_namespace(self.ns)
        for obj in (self.frer, self.drop):
            if obj is not None:
                obj.close()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frer.replicate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON to add the figures to")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=200_000)
    args = parser.parse_args(argv)
    bench = ReplicateBench(Path(binding.find_libdpp()).parent)
    try:
        assert bench.frer is not None and bench.drop is not None
        subjects = {"floor": bench.drop.program_fd("xdp_drop"), "replicate": bench.frer.program_fd("dpp_frer_talker")}
        samples: dict[str, list[int]] = {name: [] for name in subjects}
        for _ in range(args.runs):
            for name, prog in subjects.items():
                samples[name].append(bench.time(prog, args.repeat))
        medians = {name: statistics.median(values) for name, values in samples.items()}
    finally:
        bench.close()
    row = {
        "case": "replicate to 2 ports, 1 stream (live frames, broadcast carried out)",
        "live_floor_ns": medians["floor"],
        "replicate_ns": medians["replicate"],
        "above_floor_ns": medians["replicate"] - medians["floor"],
    }
    print(f"{row['case']}: floor {row['live_floor_ns']:.0f}  replicate {row['replicate_ns']:.0f}  "
          f"above floor {row['above_floor_ns']:+.0f} ns", flush=True)
    if args.out.exists():
        result = json.loads(args.out.read_text())
        result["replicate"] = row
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
