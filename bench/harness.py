"""Build and drive the test-run harness (bench/bpf/harness.bpf.c).

The harness is compiled here, with the BPF_CFLAGS of dataplane/Makefile (asked from make itself, so
the flags cannot drift), into bench/build/. `Harness` loads it next to the empty XDP program, puts
a program into its tail-call slot, stores the original packet and runs BPF_PROG_TEST_RUN.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import random
import shutil
import statistics
import subprocess
from ctypes import c_uint8, c_uint16, c_uint32
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from bench.libbpf import BpfObject, TestRun, map_update, test_run

REPO = Path(__file__).resolve().parents[1]
DATAPLANE = REPO / "dataplane"
EMPTY_OBJECT = DATAPLANE / "build" / "xdp_pass.bpf.o"
HARNESS_SOURCE = Path(__file__).resolve().parent / "bpf" / "harness.bpf.c"
BUILD_DIR = Path(__file__).resolve().parent / "build"

HARNESS_MAX_PACKET = 512  # harness.bpf.c's HARNESS_MAX_PACKET
_PRINT_CFLAGS = "bench-print-bpf-cflags"


class HarnessPacket(ctypes.Structure):
    """struct harness_packet of harness.bpf.c."""

    _fields_ = [("len", c_uint32), ("bytes", c_uint8 * HARNESS_MAX_PACKET)]


class HarnessWalk(ctypes.Structure):
    """struct harness_walk of harness.bpf.c."""

    _fields_ = [
        ("flows", c_uint32),
        ("stride", c_uint32),
        ("position", c_uint32),
        ("teid_base", c_uint32),
        ("src_base", c_uint32),
        ("teid_off", c_uint16),
        ("src_off", c_uint16),
        ("csum_off", c_uint16),
        ("reserved", c_uint16),
    ]


@dataclass(frozen=True)
class Walk:
    """Flow f of `flows` gets TEID teid_base + f and UE source src_base + f (bytes at teid_off and
    src_off of the packet); f steps by `stride`, coprime with `flows`. csum_off: a checksum over
    both fields the walk keeps right (0: none)."""

    flows: int
    teid_base: int
    src_base: int
    teid_off: int
    src_off: int
    csum_off: int = 0

    @property
    def stride(self) -> int:
        """About flows / golden ratio, moved to the nearest number coprime with flows."""
        if self.flows == 1:
            return 0
        stride = int(self.flows * 0.6180339887)
        while math.gcd(stride, self.flows) != 1:
            stride += 1
        return stride

    def flow_at(self, step: int) -> int:
        return step * self.stride % self.flows


def dataplane_bpf_cflags() -> list[str]:
    """BPF_CFLAGS exactly as dataplane/Makefile expands them (relative to dataplane/)."""
    rule = f"{_PRINT_CFLAGS}: ; @echo $(BPF_CFLAGS)"
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(DATAPLANE), f"--eval={rule}", _PRINT_CFLAGS],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.split()


def build_harness(build_dir: Path = BUILD_DIR) -> Path:
    """Compile harness.bpf.c; returns the object. clang runs in dataplane/ so its -I paths hold."""
    clang = shutil.which("clang")
    if clang is None:
        raise RuntimeError("clang not found: install clang (see the top-level Makefile's system-deps)")
    build_dir.mkdir(parents=True, exist_ok=True)
    obj = build_dir / "harness.bpf.o"
    command = [clang, *dataplane_bpf_cflags(), "-c", str(HARNESS_SOURCE), "-o", str(obj)]
    result = subprocess.run(command, cwd=DATAPLANE, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"compiling the harness failed:\n{' '.join(command)}\n{result.stderr}")
    return obj


class Harness:
    """harness -> slot 0 (the program under test), and the empty program for the floor."""

    def __init__(self, harness_object: Path, empty_object: Path = EMPTY_OBJECT):
        if not empty_object.is_file():
            raise RuntimeError(f"{empty_object} is missing: run `make -C dataplane` first")
        self._harness = BpfObject(harness_object)
        self._empty = BpfObject(empty_object)
        self.harness_fd = self._harness.program_fd("harness")
        self.walk_fd = self._harness.program_fd("harness_walk")
        self.walk_head_fd = self._harness.program_fd("harness_walk_head")
        self._walk_state_fd = self._harness.map_fd("harness_walk_state")
        self.empty_fd = self._empty.program_fd("xdp_pass")
        self._target_fd = self._harness.map_fd("harness_target")
        self._packet_fd = self._harness.map_fd("harness_packet")
        self._target = -1
        self._packet = b""

    def set_target(self, prog_fd: int) -> None:
        """Tail-call `prog_fd` from now on (the slot holds a reference to the program)."""
        if prog_fd != self._target:
            map_update(self._target_fd, c_uint32(0), c_uint32(prog_fd))
            self._target = prog_fd

    def set_packet(self, packet: bytes) -> None:
        """The bytes every repetition starts from."""
        if len(packet) > HARNESS_MAX_PACKET:
            raise ValueError(
                f"packet of {len(packet)} bytes, the harness restores at most {HARNESS_MAX_PACKET}"
            )
        if packet != self._packet:
            value = HarnessPacket(len=len(packet))
            ctypes.memmove(value.bytes, packet, len(packet))
            map_update(self._packet_fd, c_uint32(0), value)
            self._packet = packet

    def run(self, prog_fd: int, packet: bytes, repeat: int) -> TestRun:
        """harness -> prog_fd on `packet`, `repeat` times, each from the original bytes."""
        self.set_target(prog_fd)
        self.set_packet(packet)
        return test_run(self.harness_fd, packet, repeat)

    def set_walk(self, walk: Walk, position: int = 0) -> None:
        """The walk harness_walk follows from now on, starting at flow `position`."""
        value = HarnessWalk(
            flows=walk.flows,
            stride=walk.stride,
            position=position,
            teid_base=walk.teid_base,
            src_base=walk.src_base,
            teid_off=walk.teid_off,
            src_off=walk.src_off,
            csum_off=walk.csum_off,
        )
        map_update(self._walk_state_fd, c_uint32(0), value)

    def run_walk(self, prog_fd: int, packet: bytes, repeat: int, ifindex: int = 0) -> TestRun:
        """harness_walk -> prog_fd: every repetition the original packet as the walk's next flow
        (received on `ifindex`, of the calling thread's namespace; 0: its loopback)."""
        self.set_target(prog_fd)
        self.set_packet(packet)
        return test_run(self.walk_fd, packet, repeat, ifindex)

    def run_walk_head(self, prog_fd: int, packet: bytes, repeat: int, ifindex: int, out_size: int) -> TestRun:
        """harness_walk_head -> prog_fd, received on `ifindex`: as run_walk, for a program that moves
        the packet's head (up to `out_size` bytes come out)."""
        self.set_target(prog_fd)
        self.set_packet(packet)
        return test_run(self.walk_head_fd, packet, repeat, ifindex, out_size)

    def run_empty_direct(self, packet: bytes, repeat: int) -> TestRun:
        """The empty program on its own: what the harness itself adds is floor - this."""
        return test_run(self.empty_fd, packet, repeat)

    def release_target(self) -> None:
        """Point the slot at the empty program, so a closed pipeline instance can be freed."""
        self.set_target(self.empty_fd)

    def close(self) -> None:
        self._harness.close()
        self._empty.close()

    def __enter__(self) -> "Harness":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


def add_block_arguments(parser: argparse.ArgumentParser) -> None:
    """--runs, --repeat and --seed of a blocks-of-runs benchmark."""
    parser.add_argument("--runs", type=int, default=7, help="timed runs per subject; medians are reported")
    parser.add_argument("--repeat", type=int, default=200_000, help="repetitions per run")
    parser.add_argument("--seed", type=int, default=1, help="seed of the run order")


def interleaved_samples(subjects: Mapping[str, Callable[[], int]], runs: int, rng: random.Random) -> dict[str, list[int]]:
    """Each subject (a timed run giving ns) `runs` times, in blocks that run every subject once in a
    shuffled order, so that drifts of a shared machine fall on all alike; each subject's runs, by
    block (the i-th of every list ran in the same block)."""
    samples: dict[str, list[int]] = {name: [] for name in subjects}
    for _ in range(runs):
        order = list(subjects)
        rng.shuffle(order)
        for name in order:
            samples[name].append(subjects[name]())
    return samples


def interleaved_medians(subjects: Mapping[str, Callable[[], int]], runs: int, rng: random.Random) -> dict[str, float]:
    """interleaved_samples' medians, by subject."""
    return {name: statistics.median(values) for name, values in interleaved_samples(subjects, runs, rng).items()}


def quartiles(values: list[float]) -> dict[str, float]:
    """The median and the spread of `values`: first and third quartiles, least and greatest."""
    if len(values) < 2:
        only = float(values[0])
        return {"median": only, "q1": only, "q3": only, "min": only, "max": only}
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {"median": median, "q1": q1, "q3": q3, "min": float(min(values)), "max": float(max(values))}


def paired_differences(samples: Mapping[str, list[int]], minuend: str, subtrahend: str) -> dict[str, float]:
    """quartiles of minuend - subtrahend taken block by block: two subjects of one block ran within
    a second of each other, so a drift of the machine's load that moves both cancels out of the
    difference, which the difference of the two medians keeps."""
    return quartiles([a - b for a, b in zip(samples[minuend], samples[subtrahend], strict=True)])


def write_results(out: Path, benchmark: str, runs: int, repeat: int, rows: list[dict[str, Any]],
                  extra: Optional[Mapping[str, Any]] = None) -> None:
    """A blocks-of-runs benchmark's result JSON (bench/qos, bench/routing, bench/frer): what ran, where, and
    its rows (and `extra`'s keys: what else the benchmark found of what it measured)."""
    from bench.dataplane import machine_info  # bench.dataplane imports this module

    result = {
        "benchmark": benchmark,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "runs": runs,
        "repeat": repeat,
        **(extra or {}),
        "results": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
