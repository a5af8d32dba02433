"""The policer benchmark's object, policers and timed runs: xdp_police.bpf.c compiled with room for
the policers asked, every policer written as the case says, then blocks of runs interleaving the
floor, the path without the policer and the case (and the case in another tree's build, --before),
each run checked to have decided as the case says."""

from __future__ import annotations

import ctypes
import functools
import itertools
import random
import statistics
import subprocess
import tempfile
from ctypes import c_uint32
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from bench.harness import (BUILD_DIR, DATAPLANE, Harness, Walk, dataplane_bpf_cflags, interleaved_samples,
                           paired_differences)
from bench.libbpf import BpfObject, map_lookup, map_update, map_update_batch, test_run
from netapp.dataplane.handle import possible_cpus
from netapp.qos.abi import CHUNK_MAX, Algo, Clock, Policer, PolicerStats
from netapp.qos.model import gcra_interval

SOURCE = DATAPLANE / "bpf" / "xdp_police.bpf.c"
XDP_DROP, XDP_PASS = 1, 2
FRAME = 64
POLICER_AT = 14  # struct police_test_hdr.policer, after the Ethernet header
RESERVED_AT = 18  # its jiffies word (0: the kernel's): the walk's second field, left 0

# (clock, algorithm, decision) -> the policer every repetition meets. "kernel": the frame's time is
# 0, the policer reads bpf_ktime_get_ns() as the pipeline would; passing: 400 Gb/s takes 50 bytes a
# ns, far more than a 64-byte frame every few tens of ns. "given": the frame carries a fixed time, so
# that what the clock read costs is apart (a pipeline reads it once for every function that needs
# it); passing: a bucket or window of 2^30 bytes, 16.7 million frames, more than a case's runs.
# Dropping, either clock: a bucket of 1 byte, or a window that lets 0.001 bytes through. "coarse":
# the kernel's cases with the policer on the coarse clock (bpf_ktime_get_coarse_ns), the frame's
# time 0 as "kernel"'s. "credit": the coarse cases of every algorithm passing, each CPU's
# credit carved in chunks of CHUNK_MAX (police.h, "The CPUs' credit"; what netapp/qos/applier.py
# writes for these policers): one repetition in 16,384 carves, the others pass on the credit.
GIVEN_NS = 10**12
CLOCKS = ("kernel", "coarse", "given")
CREDIT_CHUNK = CHUNK_MAX


def bucket(rate: int, burst: int, algo: Algo) -> Policer:
    """A token bucket or a GCRA (its interval written, as netapp.qos.applier does)."""
    return Policer(rate=rate, burst=burst, algo=algo, interval=gcra_interval(rate) if algo == Algo.GCRA else 0)


DROPPING = {
    Algo.TOKEN_BUCKET: bucket(8_000, 1, Algo.TOKEN_BUCKET),
    Algo.GCRA: bucket(8_000, 1, Algo.GCRA),
    Algo.FIXED_WINDOW: Policer(rate=8_000, algo=Algo.FIXED_WINDOW, window_shift=10),
    Algo.SLIDING_WINDOW: Policer(rate=8_000, algo=Algo.SLIDING_WINDOW, window_shift=10),
}
PASSING = {
    "kernel": {
        Algo.TOKEN_BUCKET: bucket(400 * 10**9, 1 << 30, Algo.TOKEN_BUCKET),
        Algo.GCRA: bucket(400 * 10**9, 1 << 30, Algo.GCRA),
        Algo.FIXED_WINDOW: Policer(rate=400 * 10**9, algo=Algo.FIXED_WINDOW, window_shift=24),
        Algo.SLIDING_WINDOW: Policer(rate=400 * 10**9, algo=Algo.SLIDING_WINDOW, window_shift=24),
    },
    "given": {
        Algo.TOKEN_BUCKET: bucket(8 * 10**9, 1 << 30, Algo.TOKEN_BUCKET),
        Algo.GCRA: bucket(8 * 10**9, 1 << 30, Algo.GCRA),
        Algo.FIXED_WINDOW: Policer(rate=8 * 10**9, algo=Algo.FIXED_WINDOW, window_shift=30),
        Algo.SLIDING_WINDOW: Policer(rate=8 * 10**9, algo=Algo.SLIDING_WINDOW, window_shift=30),
    },
}


def on_clock(policer: Policer, clock: Clock) -> Policer:
    value = Policer.from_buffer_copy(bytes(policer))
    value.clock = clock
    return value


PASSING["coarse"] = {algo: on_clock(policer, Clock.COARSE) for algo, policer in PASSING["kernel"].items()}


def case_policer(clock: str, algo: Algo, decision: str) -> Policer:
    policer = PASSING[clock][algo] if decision == "pass" else DROPPING[algo]
    return on_clock(policer, Clock.COARSE if clock == "coarse" else Clock.PRECISE)


CASES = {
    (clock, algo, decision): case_policer(clock, algo, decision)
    for clock in CLOCKS
    for algo in DROPPING
    for decision in ("pass", "drop")
}
CASES.update({("credit", algo, "pass"): case_policer("coarse", algo, "pass") for algo in DROPPING})


def case_chunk(clock: str) -> int:
    """The chunk each CPU's slot is written with for a case (0: no credit)."""
    return CREDIT_CHUNK if clock == "credit" else 0


def share_slots(policer_id: int, slots: int) -> list[int]:
    """A policer's slots of dpp_policer_stats (`slots` a CPU's row): a CPU's each, its row then the id."""
    return [cpu * slots + policer_id for cpu in range(possible_cpus())]


def write_share(map_fd: int, policer_id: int, slots: int, share: PolicerStats) -> None:
    """Every CPU's slot of a policer written as `share`."""
    for slot in share_slots(policer_id, slots):
        map_update(map_fd, c_uint32(slot), share)


def read_shares(map_fd: int, policer_id: int, slots: int) -> list[PolicerStats]:
    """Every CPU's slot of a policer: its counters, its credit and its chunk (index: the CPU)."""
    shares = [PolicerStats() for _ in range(possible_cpus())]
    for share, slot in zip(shares, share_slots(policer_id, slots)):
        map_lookup(map_fd, c_uint32(slot), share)
    return shares


def keeps_rows(dataplane: Path) -> bool:
    """Whether a tree's dpp_policer_stats is a plain array with a row of policer slots per CPU (this
    tree's); before it, a per-CPU array."""
    return "cfg_policer_slots" in (dataplane / "bpf" / "nf" / "qos" / "maps.h").read_text()


def police_sizes(dataplane: Path, policers: int) -> dict[str, int]:
    """The maps of a tree's xdp_police sized before its load, as libdpp sizes them (build(): a row of
    policers + 1 slots per CPU)."""
    return {"dpp_policer_stats": possible_cpus() * (policers + 1)} if keeps_rows(dataplane) else {}


def write_shares(map_fd: int, dataplane: Path, ids: Sequence[int], slots: int, share: bytes) -> None:
    """Every CPU's share of each policer of `ids` (a tree's dpp_policer_stats of `slots` slots a row)
    written as `share`, one CPU's value, in one batch."""
    cpus = possible_cpus()
    if keeps_rows(dataplane):
        keys = [cpu * slots + policer_id for cpu in range(cpus) for policer_id in ids]
        values = bytearray(share * len(keys))
    else:
        keys, values = list(ids), bytearray(share * (cpus * len(ids)))
    map_update_batch(map_fd, (c_uint32 * len(keys))(*keys), (ctypes.c_char * len(values)).from_buffer(values),
                     len(keys))


def build(policers: int, build_dir: Path = BUILD_DIR, dataplane: Path = DATAPLANE) -> Path:
    """xdp_police.bpf.c of `dataplane` (this tree's, or another's: --before) with dpp_policers sized
    for ids 1..policers."""
    build_dir.mkdir(parents=True, exist_ok=True)
    suffix = "" if dataplane == DATAPLANE else "_before"
    obj = build_dir / f"xdp_police_{policers}{suffix}.bpf.o"
    source = dataplane / SOURCE.relative_to(DATAPLANE)
    command = ["clang", *dataplane_bpf_cflags(), f"-DDPP_MAX_POLICERS={policers + 1}", "-c", str(source), "-o", str(obj)]
    subprocess.run(command, cwd=dataplane, check=True)
    return obj


def knows_gcra(dataplane: Path) -> bool:
    """Whether another tree's data plane has GCRA (its ABI header names the algorithm)."""
    return "DPP_POLICE_ALGO_GCRA" in (dataplane / "include" / "dpp" / "nf" / "qos.h").read_text()


def knows_clock(dataplane: Path) -> bool:
    """Whether another tree's data plane has the coarse clock (struct dpp_policer.clock)."""
    return "DPP_POLICE_CLOCK_COARSE" in (dataplane / "include" / "dpp" / "nf" / "qos.h").read_text()


def before_value(policer: Policer, gcra: bool, clock: bool = False) -> Policer:
    """What another build runs for `policer`: in a build from before GCRA (`gcra` false), GCRA's rate
    and burst as its token bucket (the algorithm the lock-free one replaces); the others as they are.
    A build from before the clock's choice (`clock` false) has a reserved byte where the clock is: 0,
    precise. No build before has the CPUs' credit: its counters' slots stay as they are."""
    value = Policer.from_buffer_copy(bytes(policer))
    if not clock:
        value.clock = Clock.PRECISE
    if value.algo == Algo.GCRA and not gcra:
        value.algo, value.interval = Algo.TOKEN_BUCKET, 0
    return value


def frame(clock: str) -> bytes:
    """A 64-byte frame; its time GIVEN_NS with the "given" clock, else 0 (the kernel's)."""
    now = GIVEN_NS if clock == "given" else 0
    return b"\x02" * 12 + b"\x88\xb5" + bytes(8) + now.to_bytes(8, "little") + bytes(FRAME - 30)


@dataclass
class Timing:
    samples: dict[str, list[int]]  # by subject, a run a block: floor, skip, police (and before)

    def median(self, subject: str) -> float:
        return statistics.median(self.samples[subject])

    @property
    def floor_ns(self) -> float:  # harness_walk -> the empty program
        return self.median("floor")

    @property
    def skip_ns(self) -> float:  # -> xdp_police_skip: the path without the policer
        return self.median("skip")

    @property
    def police_ns(self) -> float:  # -> xdp_police
        return self.median("police")

    @property
    def before_ns(self) -> float | None:  # -> xdp_police of the --before build
        return self.median("before") if "before" in self.samples else None

    @property
    def above_skip(self) -> float:
        return self.police_ns - self.skip_ns

    @property
    def above_floor(self) -> float:
        return self.police_ns - self.floor_ns

    def blocks(self) -> dict[str, dict[str, float]]:
        """The differences taken block by block (harness.paired_differences: a drift of the machine
        that moves both subjects of a block cancels out), with their spread: the policer above the
        path without it and above the floor; with --before, its policer above the path without it
        and this build's less its."""
        result = {"above_without_blocks_ns": paired_differences(self.samples, "police", "skip"),
                  "above_floor_blocks_ns": paired_differences(self.samples, "police", "floor")}
        if "before" in self.samples:
            result["before_above_without_blocks_ns"] = paired_differences(self.samples, "before", "skip")
            result["minus_before_blocks_ns"] = paired_differences(self.samples, "police", "before")
        return result


def blocks_line(blocks: dict[str, dict[str, float]]) -> str:
    """Timing.blocks() as one line: each difference's median [first, third quartile]."""
    names = {"above_without_blocks_ns": "- without", "above_floor_blocks_ns": "- floor",
             "before_above_without_blocks_ns": "before - without", "minus_before_blocks_ns": "- before"}
    parts = [f"{names[key]} {q['median']:+6.1f} [{q['q1']:+.0f}, {q['q3']:+.0f}]" for key, q in blocks.items()]
    return "    by block, median [quartiles]: " + "  ".join(parts)


CREDIT_OFFSET = """#include <stddef.h>
#include <stdio.h>
#include "dpp/nf/qos.h"
int main(void) { printf("%zu\\n", offsetof(struct dpp_policer_stats, chunk)); return 0; }
"""


@functools.lru_cache(maxsize=None)
def chunk_offset(dataplane: Path) -> int | None:
    """Where a tree's struct dpp_policer_stats holds the chunk (None: a tree without the credit)."""
    if "chunk" not in (dataplane / "include" / "dpp" / "nf" / "qos.h").read_text():
        return None
    with tempfile.TemporaryDirectory() as work:
        exe = Path(work) / "offset"
        subprocess.run(["clang", "-x", "c", "-", "-I", str(dataplane / "include"), "-o", str(exe)],
                       input=CREDIT_OFFSET, text=True, check=True)
        return int(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout)


def start_clock(obj: BpfObject) -> None:
    """The coarse clock's timer started, as libdpp starts the pipeline's at load (nf/qos/clock.h),
    where the object has one (a tree from before it reads the helper). A timer that does not start
    stops the run: its coarse cases would time the helper instead of the word."""
    try:
        fd = obj.program_fd("dpp_clock_start")
    except OSError:
        return
    verdict = test_run(fd, bytes(FRAME), 1).retval
    if verdict != XDP_PASS:
        raise RuntimeError(f"dpp_clock_start did not start the clock timer (verdict {verdict}, not XDP_PASS)")


class LoadedTree:
    """A tree's xdp_police (this one's, or another's: --before, bench/qos/layouts.py) built for ids
    1..policers and loaded, its maps written in that tree's layout."""

    def __init__(self, dataplane: Path, policers: int, obj_path: Path):
        self.dataplane, self.policers = dataplane, policers
        self.obj = BpfObject(obj_path, police_sizes(dataplane, policers))
        start_clock(self.obj)
        self.stats_size = self.obj.map_shape("dpp_policer_stats")[2]
        self.chunk_at = chunk_offset(dataplane)
        self.gcra, self.clock = knows_gcra(dataplane), knows_clock(dataplane)

    def write(self, policer: Policer, chunk: int) -> None:
        """Every policer 1..N as `policer` (before_value's for a tree from before GCRA or the clock), its
        state zeroed; every CPU's counters zeroed, with `chunk` where the tree has a credit."""
        ids = (c_uint32 * self.policers)(*range(1, self.policers + 1))
        values = bytearray(bytes(before_value(policer, self.gcra, self.clock)) * self.policers)
        map_update_batch(self.obj.map_fd("dpp_policers"), ids, (ctypes.c_char * len(values)).from_buffer(values),
                         self.policers)
        share = bytearray(self.stats_size)
        if self.chunk_at is not None:
            share[self.chunk_at:self.chunk_at + 4] = chunk.to_bytes(4, "little")
        write_shares(self.obj.map_fd("dpp_policer_stats"), self.dataplane, range(1, self.policers + 1),
                     self.policers + 1, bytes(share))

    def close(self) -> None:
        self.obj.close()


class PoliceBench:
    """This build's xdp_police, and with --before another tree's, loaded twice each in the order
    this, before, before, this (A B B A): block i times the pair loaded i-th and (4 - i)-th in turn,
    so that "this - before" holds as many blocks of either load order. The maps a run makes first
    are slower here by tens of ns on a million policers (bench/README.md, "Cold: the counters'
    layout and the bench's load order"): without both orders that would be in the difference."""

    def __init__(self, harness: Harness, policers: int, before: Path | None = None):
        self.harness = harness
        self.policers = policers
        this = functools.partial(LoadedTree, DATAPLANE, policers, build(policers))
        if before is None:
            self.pairs = [(this(), None)]
        else:
            first_this = this()
            first_before = LoadedTree(before, policers, build(policers, dataplane=before))
            second_before = LoadedTree(before, policers, build(policers, dataplane=before))
            self.pairs = [(first_this, first_before), (this(), second_before)]
        self.skip_fd = self.pairs[0][0].obj.program_fd("xdp_police_skip")
        self.before = before

    @property
    def trees(self) -> list[LoadedTree]:
        return [tree for pair in self.pairs for tree in pair if tree is not None]

    def close(self) -> None:
        self.harness.release_target()
        for tree in self.trees:
            tree.close()

    def configure(self, policer: Policer, chunk: int = 0) -> None:
        """Every policer 1..N as `policer`, its state zeroed, each CPU's slot with `chunk` (in every
        loaded build: one from before the credit has none)."""
        for tree in self.trees:
            tree.write(policer, chunk)

    def _run(self, prog_fd: int, clock: str, repeat: int, expected: int) -> int:
        self.harness.set_walk(Walk(self.policers, teid_base=1, src_base=0, teid_off=POLICER_AT, src_off=RESERVED_AT))
        result = self.harness.run_walk(prog_fd, frame(clock), repeat)
        if result.retval != expected:
            raise RuntimeError(f"verdict {result.retval}, expected {expected}: the case is not what it says")
        return result.duration_ns

    def _alternating(self, side: int, clock: str, repeat: int, expected: int) -> Callable[[], int]:
        """A subject timing side `side` (0: this, 1: before) of the pairs in turn, a pair a call: each
        block calls it once, so blocks alternate the pairs."""
        calls = itertools.count()

        def timed() -> int:
            tree = self.pairs[next(calls) % len(self.pairs)][side]
            return self._run(tree.obj.program_fd("xdp_police"), clock, repeat, expected)

        return timed

    def time(self, clock: str, decision: str, runs: int, repeat: int, rng: random.Random) -> Timing:
        """Blocks of the three subjects (four with --before) in a shuffled order, `runs` times (with
        --before, an even number keeps the two load orders even)."""
        expected = XDP_PASS if decision == "pass" else XDP_DROP
        subjects = {
            "floor": functools.partial(self._run, self.harness.empty_fd, clock, repeat, XDP_PASS),
            "skip": functools.partial(self._run, self.skip_fd, clock, repeat, XDP_PASS),
            "police": self._alternating(0, clock, repeat, expected),
        }
        if self.before:
            subjects["before"] = self._alternating(1, clock, repeat, expected)
        return Timing(interleaved_samples(subjects, runs, rng))
