"""The policer benchmark's object, policers and timed runs: xdp_police.bpf.c compiled with room for
the policers asked, every policer written as the case says, then blocks of runs interleaving the
floor, the path without the policer and the case, each run checked to have decided as the case
says."""

from __future__ import annotations

import functools
import random
import subprocess
from ctypes import c_uint32
from dataclasses import dataclass
from pathlib import Path

from bench.harness import BUILD_DIR, DATAPLANE, Harness, Walk, dataplane_bpf_cflags, interleaved_medians
from bench.libbpf import BpfObject, map_update
from netapp.qos.abi import Algo, Policer

SOURCE = DATAPLANE / "bpf" / "xdp_police.bpf.c"
XDP_DROP, XDP_PASS = 1, 2
FRAME = 64
POLICER_AT = 14  # struct police_test_hdr.policer, after the Ethernet header
RESERVED_AT = 18  # its reserved word: the walk's second field, left 0

# (clock, algorithm, decision) -> the policer every repetition meets. "kernel": the frame's time is
# 0, the policer reads bpf_ktime_get_ns() as the pipeline would; passing: 400 Gb/s takes 50 bytes a
# ns, far more than a 64-byte frame every few tens of ns. "given": the frame carries a fixed time, so
# that what the clock read costs is apart (a pipeline reads it once for every function that needs
# it); passing: a bucket or window of 2^30 bytes, 16.7 million frames, more than a case's runs.
# Dropping, either clock: a bucket of 1 byte, or a window that lets 0.001 bytes through.
GIVEN_NS = 10**12
DROPPING = {
    Algo.TOKEN_BUCKET: Policer(rate=8_000, burst=1, algo=Algo.TOKEN_BUCKET),
    Algo.FIXED_WINDOW: Policer(rate=8_000, algo=Algo.FIXED_WINDOW, window_shift=10),
    Algo.SLIDING_WINDOW: Policer(rate=8_000, algo=Algo.SLIDING_WINDOW, window_shift=10),
}
PASSING = {
    "kernel": {
        Algo.TOKEN_BUCKET: Policer(rate=400 * 10**9, burst=1 << 30, algo=Algo.TOKEN_BUCKET),
        Algo.FIXED_WINDOW: Policer(rate=400 * 10**9, algo=Algo.FIXED_WINDOW, window_shift=24),
        Algo.SLIDING_WINDOW: Policer(rate=400 * 10**9, algo=Algo.SLIDING_WINDOW, window_shift=24),
    },
    "given": {
        Algo.TOKEN_BUCKET: Policer(rate=8 * 10**9, burst=1 << 30, algo=Algo.TOKEN_BUCKET),
        Algo.FIXED_WINDOW: Policer(rate=8 * 10**9, algo=Algo.FIXED_WINDOW, window_shift=30),
        Algo.SLIDING_WINDOW: Policer(rate=8 * 10**9, algo=Algo.SLIDING_WINDOW, window_shift=30),
    },
}
CASES = {
    (clock, algo, decision): PASSING[clock][algo] if decision == "pass" else DROPPING[algo]
    for clock in ("kernel", "given")
    for algo in DROPPING
    for decision in ("pass", "drop")
}


def build(policers: int, build_dir: Path = BUILD_DIR) -> Path:
    """xdp_police.bpf.c with dpp_policers sized for ids 1..policers."""
    build_dir.mkdir(parents=True, exist_ok=True)
    obj = build_dir / f"xdp_police_{policers}.bpf.o"
    command = ["clang", *dataplane_bpf_cflags(), f"-DDPP_MAX_POLICERS={policers + 1}", "-c", str(SOURCE), "-o", str(obj)]
    subprocess.run(command, cwd=DATAPLANE, check=True)
    return obj


def frame(clock: str) -> bytes:
    """A 64-byte frame; its time GIVEN_NS with the "given" clock, else 0 (the kernel's)."""
    now = GIVEN_NS if clock == "given" else 0
    return b"\x02" * 12 + b"\x88\xb5" + bytes(8) + now.to_bytes(8, "little") + bytes(FRAME - 30)


@dataclass
class Timing:
    floor_ns: float  # harness_walk -> the empty program
    skip_ns: float  # -> xdp_police_skip: the path without the policer
    police_ns: float  # -> xdp_police

    @property
    def above_skip(self) -> float:
        return self.police_ns - self.skip_ns

    @property
    def above_floor(self) -> float:
        return self.police_ns - self.floor_ns


class PoliceBench:
    def __init__(self, harness: Harness, policers: int):
        self.harness = harness
        self.policers = policers
        self.obj = BpfObject(build(policers))
        self.police_fd = self.obj.program_fd("xdp_police")
        self.skip_fd = self.obj.program_fd("xdp_police_skip")
        self._policers_fd = self.obj.map_fd("dpp_policers")

    def close(self) -> None:
        self.harness.release_target()
        self.obj.close()

    def configure(self, policer: Policer) -> None:
        """Every policer 1..N as `policer`, its state zeroed."""
        for policer_id in range(1, self.policers + 1):
            map_update(self._policers_fd, c_uint32(policer_id), policer)

    def _run(self, prog_fd: int, clock: str, repeat: int, expected: int) -> int:
        self.harness.set_walk(Walk(self.policers, teid_base=1, src_base=0, teid_off=POLICER_AT, src_off=RESERVED_AT))
        result = self.harness.run_walk(prog_fd, frame(clock), repeat)
        if result.retval != expected:
            raise RuntimeError(f"verdict {result.retval}, expected {expected}: the case is not what it says")
        return result.duration_ns

    def time(self, clock: str, decision: str, runs: int, repeat: int, rng: random.Random) -> Timing:
        """Blocks of the three subjects in a shuffled order, `runs` times; medians."""
        programs = {
            "floor": (self.harness.empty_fd, XDP_PASS),
            "skip": (self.skip_fd, XDP_PASS),
            "police": (self.police_fd, XDP_PASS if decision == "pass" else XDP_DROP),
        }
        subjects = {
            name: functools.partial(self._run, prog_fd, clock, repeat, expected)
            for name, (prog_fd, expected) in programs.items()
        }
        medians = interleaved_medians(subjects, runs, rng)
        return Timing(medians["floor"], medians["skip"], medians["police"])
