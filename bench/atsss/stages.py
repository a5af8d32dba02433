"""Where round-robin's downlink spends its time: the downlink cut short after each of its stages
(bench/bpf/atsss_stages.bpf.c: parse, session lookup, schedule, encapsulate with the header's
checksum, the DCCP checksum as the session asks, the path's counters), every program of one object
(one set of ATSSS's maps, the sessions written once), timed in the same blocks as the floor, one
session (hot: the best case) and 10,000 (every repetition another UE). Each stage's cost is its
program less the one before, taken block by block (harness.paired_differences) with quartiles; the
one-session instructions each program executes beside them (bench/insns.py).

    python -m bench.atsss.stages --out bench/results/atsss-stages.json [--runs 21] [--tree CHECKOUT]

Methodology: bench/README.md, "Round-robin's downlink by stage".
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import random
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Optional, Sequence

from bench.atsss.__main__ import (CHECKSUMMED, FIRST_UE, MODES, PAYLOAD_AT, SESSIONS, UE_AT, XDP_PASS, XDP_TX,
                                  AtsssBench, path_instructions, timed, ue_frame)
from bench.harness import (BUILD_DIR, REPO, Harness, Walk, add_block_arguments, build_harness,
                           dataplane_bpf_cflags, interleaved_samples, paired_differences, write_results)
from netapp.dataplane import binding

DEFAULT_OUT = Path("bench/results/atsss-stages.json")
# the programs, in the order the downlink runs their stages; each includes the ones before
STAGES = ("parse", "lookup", "schedule", "encap", "checksum", "full")
ROUND_ROBIN = [name for name in MODES if name.startswith("round-robin")]


def build_stages(tree: Path = REPO, build_dir: Path = BUILD_DIR) -> Path:
    """Compile the checkout `tree`'s atsss_stages.bpf.c against its own data plane, with this tree's
    flags; returns the object."""
    build_dir.mkdir(parents=True, exist_ok=True)
    obj = build_dir / f"atsss_stages_{hashlib.sha1(str(tree.resolve()).encode()).hexdigest()[:8]}.bpf.o"
    source = tree / "bench" / "bpf" / "atsss_stages.bpf.c"
    command = ["clang", *dataplane_bpf_cflags(), "-c", str(source.resolve()), "-o", str(obj)]
    result = subprocess.run(command, cwd=tree / "dataplane", capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"compiling the stages failed:\n{' '.join(command)}\n{result.stderr}")
    return obj


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.atsss.stages", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--tree", type=Path, default=REPO, metavar="CHECKOUT",
                        help="the checkout whose stages are timed (its bench/bpf/atsss_stages.bpf.c built against its "
                        "dataplane/, e.g. `git archive` of main), default this one")
    parser.add_argument("--schedulers", nargs="+", default=ROUND_ROBIN, choices=ROUND_ROBIN, metavar="NAME",
                        help=f"which of round-robin's cases, each name quoted (default: {', '.join(ROUND_ROBIN)})")
    add_block_arguments(parser)
    return parser.parse_args(argv)


def stage_row(samples: dict[str, list[int]], scheduler: str, sessions: int,
              counts: dict[str, Optional[int]]) -> dict:
    """Each stage above the floor and above the stage before, block by block, printed."""
    row: dict = {"scheduler": scheduler, "sessions": sessions, "stages": {}}
    before = "floor"
    print(f"{scheduler}, {sessions} session{'s' if sessions > 1 else ''}: "
          "median [quartiles] of the blocks' differences", flush=True)
    for stage in STAGES:
        above_floor = paired_differences(samples, stage, "floor")
        own = paired_differences(samples, stage, before)
        row["stages"][stage] = {"above_floor_ns": above_floor, "own_ns": own, "instructions": counts.get(stage)}
        print(f"    {stage:<9} above floor {above_floor['median']:+7.1f} [{above_floor['q1']:+.0f}, "
              f"{above_floor['q3']:+.0f}]  its own {own['median']:+7.1f} [{own['q1']:+.0f}, {own['q3']:+.0f}]"
              + (f"  instructions {counts[stage]}" if sessions == 1 and counts.get(stage) else ""), flush=True)
        before = stage
    row["floor_ns"] = statistics.median(samples["floor"])
    return row


def stage_rows(args: argparse.Namespace, harness: Harness, benches: dict[str, AtsssBench],
               rng: random.Random) -> list[dict]:
    """Each round-robin case of --schedulers, one session and SESSIONS: its stages' rows."""
    rows = []
    configure = benches["full"]  # every program shares the object's maps: one writes the sessions
    for scheduler in args.schedulers:
        mode, weights, flags = MODES[scheduler]
        configure.configure(mode, weights, flags)
        frame = ue_frame(udp_checksum=scheduler in CHECKSUMMED)
        counts = {stage: path_instructions(bench, frame, XDP_TX) for stage, bench in benches.items()}
        for sessions in (1, SESSIONS):
            walk = Walk(sessions, teid_base=0, src_base=int(FIRST_UE), teid_off=PAYLOAD_AT, src_off=UE_AT)
            floor = functools.partial(timed, harness, harness.empty_fd, walk, XDP_PASS, args.repeat, frame)
            subjects = {"floor": floor}
            for stage, bench in benches.items():
                subjects[stage] = functools.partial(timed, harness, bench.prog_fd, walk, XDP_TX, args.repeat, frame)
            samples = interleaved_samples(subjects, args.runs, rng)
            rows.append(stage_row(samples, scheduler, sessions, counts))
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    build = Path(binding.find_libdpp()).parent
    obj = build_stages(args.tree)
    full = AtsssBench(build, obj, "stage_full")
    benches = {stage: SimpleNamespace(obj=full.obj, prog_fd=full.obj.program_fd(f"stage_{stage}")) for stage in STAGES}
    benches["full"] = full
    try:
        with Harness(build_harness()) as harness:
            try:
                rows = stage_rows(args, harness, benches, rng)
            finally:
                harness.release_target()
    finally:
        full.close()
    write_results(args.out, "atsss_stages", args.runs, args.repeat, rows,
                  {"stages": list(STAGES), "tree": "this tree" if args.tree == REPO else args.tree.name})
    return 0


if __name__ == "__main__":
    sys.exit(main())
