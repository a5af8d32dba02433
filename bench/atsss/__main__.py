"""python -m bench.atsss: see bench/atsss/__init__.py and bench/README.md."""

from __future__ import annotations

import argparse
import functools
import ipaddress
import random
import struct
import sys
from ctypes import c_uint32
from pathlib import Path
from typing import Optional, Sequence

from bench.harness import Harness, Walk, add_block_arguments, build_harness, interleaved_medians, write_results
from bench.libbpf import BpfObject, map_update
from netapp.atsss.abi import Mode, Path as PathValue, PathFlags, Session, SessionKey
from netapp.dataplane import binding

DEFAULT_OUT = Path("bench/results/atsss.json")
XDP_PASS, XDP_TX = 2, 3
SESSIONS = 10_000
FIRST_UE = ipaddress.IPv4Address("10.64.0.0")
FRAME = 128  # Ethernet frame of the UE packet
UE_AT = 14 + 16  # the UE packet's IPv4 destination: the walk writes the UE's address there
PAYLOAD_AT = 14 + 20 + 8  # the walk's other field, a word of the UDP payload
ROOM = 256
MODES = {"round-robin": (Mode.ROUND_ROBIN, [1, 1]), "weighted round-robin 3:1": (Mode.WEIGHTED, [3, 1]),
         "active-standby": (Mode.ACTIVE_STANDBY, [1, 1])}  # fmt: skip


def ue_frame() -> bytes:
    """Ethernet / IPv4 / UDP to the first UE, FRAME bytes."""
    udp_len = FRAME - 14 - 20
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0, 64, 17, 0, bytes(4), FIRST_UE.packed)
    udp = struct.pack("!HHHH", 443, 40000, udp_len, 0) + bytes(udp_len - 8)
    return bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + udp


def path(i: int) -> PathValue:
    value = PathValue(access=i & 1, family=4, flags=PathFlags.UP, sport=0x8913, dport=0x8A13)
    value.local[0] = int.from_bytes(bytes([10, 0, i & 1, 1]), "little")
    value.peer[0] = int.from_bytes(bytes([10, 100 + (i & 1), (i >> 8) & 0xFF, i & 0xFF]), "little")
    return value


class AtsssBench:
    def __init__(self, build: Path):
        self.obj = BpfObject(build / "xdp_atsss.bpf.o")
        self.prog_fd = self.obj.program_fd("xdp_atsss")
        self.sessions_fd = self.obj.map_fd("dpp_atsss_sessions")
        self.paths_fd = self.obj.map_fd("dpp_atsss_paths")
        for slot in range(1, 2 * SESSIONS + 1):
            map_update(self.paths_fd, c_uint32(slot), path(slot))

    def configure(self, mode: Mode, weights: list[int]) -> None:
        """SESSIONS sessions of two paths each, the scheduler's state afresh."""
        for i in range(SESSIONS):
            key = SessionKey(family=4)
            key.addr[0] = int.from_bytes((FIRST_UE + i).packed, "little")
            value = Session(mode=mode, n_paths=2)
            value.path[:2] = [2 * i + 1, 2 * i + 2]
            value.weight[:2] = weights
            map_update(self.sessions_fd, key, value)

    def close(self) -> None:
        self.obj.close()


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.atsss", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    add_block_arguments(parser)
    return parser.parse_args(argv)


def timed(harness: Harness, prog: int, walk: Walk, expected: int, repeat: int) -> int:
    harness.set_walk(walk)
    frame = ue_frame()
    result = harness.run_walk_head(prog, frame, repeat, 0, len(frame) + ROOM)
    if result.retval != expected:
        raise RuntimeError(f"verdict {result.retval}, expected {expected}: the case is not what it says")
    return result.duration_ns


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    build = Path(binding.find_libdpp()).parent
    ue = int(FIRST_UE)
    rows = []
    with Harness(build_harness()) as harness:
        bench = AtsssBench(build)
        try:
            for scheduler, (mode, weights) in MODES.items():
                bench.configure(mode, weights)
                for sessions in (1, SESSIONS):
                    walk = Walk(sessions, teid_base=0, src_base=ue, teid_off=PAYLOAD_AT, src_off=UE_AT)
                    subjects = {"floor": functools.partial(timed, harness, harness.empty_fd, walk, XDP_PASS, args.repeat),
                                "atsss": functools.partial(timed, harness, bench.prog_fd, walk, XDP_TX, args.repeat)}  # fmt: skip
                    medians = interleaved_medians(subjects, args.runs, rng)
                    row = {"scheduler": scheduler, "sessions": sessions, "floor_ns": medians["floor"],
                           "downlink_ns": medians["atsss"], "above_floor_ns": medians["atsss"] - medians["floor"]}  # fmt: skip
                    rows.append(row)
                    print(f"{scheduler:<26} {sessions:>6} sessions  floor {row['floor_ns']:6.1f}  "
                          f"downlink {row['downlink_ns']:6.1f}  above floor {row['above_floor_ns']:+6.1f} ns", flush=True)
        finally:
            harness.release_target()
            bench.close()
    write_results(args.out, "atsss", args.runs, args.repeat, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
