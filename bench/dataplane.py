"""Per-packet cost of the DPP XDP pipeline through BPF_PROG_TEST_RUN.

    python -m bench.dataplane --out bench/results/dataplane.json

Cases miss / steer / forward / drop, each at 1, 1000, 100000 and 1000000 installed rules, with the
flow cache on ("cases") and off ("uncached"), against the floor of the same harness tail-calling an
empty program. With --baseline REV, the data plane as of git revision REV is built and measured in
the same interleaved runs ("baseline"). Methodology: bench/README.md. Needs root and
`make -C dataplane`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import time
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Union

from bench.baseline import BaselineError, cache_min_shapes, prepare_baseline
from bench.harness import DATAPLANE, Harness, build_harness
from bench.instances import BASELINE, Instance, close_all, open_shared, open_single_rule
from bench.measure import Tested, WrongPathError, case_subject, floor_subjects, measure, verify_case
from bench.remote import DataplaneSide, RemoteInstance
from bench.report import LevelResult, build_result, format_table, plot
from bench.workload import CASES, SHAPES, case_packets

DEFAULT_LEVELS = (1, 1_000, 100_000, 1_000_000)
DEFAULT_OUT = Path("bench/results/dataplane.json")
SHARED_MIN_RULES = len(SHAPES) + 2  # the three case rules plus one filler per other shape
HEAD = ""  # the version of this checkout's instances; the baseline's is BASELINE
Either = Union[Instance, RemoteInstance]


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.dataplane", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="result JSON (the plot goes next to it, .png)"
    )
    parser.add_argument("--runs", type=int, default=7, help="timed runs per subject; the median is reported")
    parser.add_argument("--repeat", type=int, default=200_000, help="BPF_PROG_TEST_RUN repetitions per run")
    parser.add_argument(
        "--levels",
        default=",".join(str(level) for level in DEFAULT_LEVELS),
        help=f"installed rule counts, comma-separated (1, or at least {SHARED_MIN_RULES})",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the per-run order of subjects")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also build dataplane/ as of git revision REV (into bench/build/baseline-<commit>) and "
        "measure it in the same runs",
    )
    args = parser.parse_args(argv)
    args.levels = sorted({int(level) for level in args.levels.split(",")})
    if any(1 < level < SHARED_MIN_RULES for level in args.levels):
        parser.error(f"--levels: a rule count is 1 or at least {SHARED_MIN_RULES}")
    if args.runs < 1 or args.repeat < 1:
        parser.error("--runs and --repeat must be positive")
    return args


def bench_level(
    harness: Harness,
    packets: Mapping[str, bytes],
    instances: Mapping[tuple[str, str], Tested],
    rules: int,
    args: argparse.Namespace,
    rng: random.Random,
) -> LevelResult:
    """Verify every (mode, case), then time them all interleaved with the floor."""
    subjects = floor_subjects(harness, packets["miss"])
    shapes = {}
    for (_, case), instance in instances.items():
        verify_case(harness, instance, case, packets[case])
        subject = case_subject(instance, case, packets[case])
        subjects.append(subject)
        shapes[subject.key] = instance.shapes
    started = time.monotonic()
    samples = measure(harness, subjects, args.runs, args.repeat, rng)
    print(f"  {rules:>9,} rules: measured in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return LevelResult(rules, samples, shapes)


def bench_single_rule(
    harness: Harness,
    packets: Mapping[str, bytes],
    side: Optional[DataplaneSide],
    args: argparse.Namespace,
    rng: random.Random,
) -> LevelResult:
    """One instance per (mode, case), each holding only that case's rule (a non-matching one for
    miss); with a baseline, its twin opened by the baseline's own code."""
    with ExitStack() as stack:
        instances: dict[tuple[str, str], Either] = {}
        stack.callback(close_all, instances.values())
        # Callbacks run last-in first-out: the slot lets go of the pipeline before it is closed.
        stack.callback(harness.release_target)
        for flow_cache in (True, False):
            for case in CASES:
                instance = open_single_rule(flow_cache, case)
                instances[(instance.mode, case)] = instance
                if side:
                    twin = side.open_like(instance, case)
                    instances[(twin.mode, case)] = twin
        return bench_level(harness, packets, instances, 1, args, rng)


def bench_shared(
    harness: Harness,
    packets: Mapping[str, bytes],
    side: Optional[DataplaneSide],
    levels: Sequence[int],
    args: argparse.Namespace,
    rng: random.Random,
) -> tuple[LevelResult, list[LevelResult], dict[str, dict[str, Any]]]:
    """One instance per mode (and its baseline twin), grown level by level; returns the smallest
    (all four shapes) level, the requested levels, and what installing the rules cost, per version."""
    with ExitStack() as stack:
        shared: dict[str, Either] = {}
        stack.callback(close_all, shared.values())
        stack.callback(harness.release_target)
        for flow_cache in (True, False):
            instance = open_shared(flow_cache)
            shared[instance.mode] = instance
            if side:
                twin = side.open_like(instance)
                shared[twin.mode] = twin
        by_case = {(mode, case): instance for mode, instance in shared.items() for case in CASES}
        baseline = bench_level(harness, packets, by_case, shared["cached"].rules, args, rng)
        results = []
        for rules in levels:
            for instance in shared.values():
                instance.grow_to(rules)
                _report_install(instance)
            results.append(bench_level(harness, packets, by_case, rules, args, rng))
        versions = {instance.version for instance in shared.values()}
        installs = {
            version: install_summary({mode: i for mode, i in shared.items() if i.version == version})
            for version in versions
        }
        return baseline, results, installs


def _report_install(instance: Either) -> None:
    if instance.installs:
        batch = instance.installs[-1]
        done = f"{instance.rules:,} rules installed ({batch.rules:,} in {batch.seconds:.2f} s)"
        print(f"  {instance.mode}: {done}", file=sys.stderr, flush=True)


def install_summary(shared: Mapping[str, Either]) -> dict[str, Any]:
    """Bulk install rate over every libdpp batch call, and each call's own figures."""
    calls = {
        mode: [vars(batch) | {"rules_per_s": batch.rules_per_s} for batch in instance.installs]
        for mode, instance in shared.items()
    }
    rules = sum(batch.rules for instance in shared.values() for batch in instance.installs)
    seconds = sum(batch.seconds for instance in shared.values() for batch in instance.installs)
    return {
        "rules_per_s": rules / seconds if seconds else 0.0,
        "rules": rules,
        "seconds": seconds,
        "calls": calls,
        "note": "dpp_rules_upsert time only (libdpp chunks into BPF_MAP_UPDATE_BATCH calls); "
        "key generation in Python excluded",
    }


def machine_info() -> dict[str, Any]:
    model = ""
    try:
        model = next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            "",
        )
    except OSError:
        pass
    clang = subprocess.run(["clang", "--version"], capture_output=True, text=True).stdout.splitlines()
    return {
        "cpu": model,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "clang": clang[0] if clang else "",
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    rng = random.Random(args.seed)
    packets = case_packets()
    harness_object = build_harness()
    base = prepare_baseline(args.baseline)
    min_shapes = {HEAD: cache_min_shapes(DATAPLANE)}
    if base:
        min_shapes[BASELINE] = cache_min_shapes(base.dataplane)
    levels: list[LevelResult] = []
    with Harness(harness_object) as harness, ExitStack() as stack:
        side = stack.enter_context(closing(DataplaneSide(base))) if base else None
        if 1 in args.levels:
            levels.append(bench_single_rule(harness, packets, side, args, rng))
        shared_levels = [level for level in args.levels if level >= SHARED_MIN_RULES]
        four_shapes, grown, installs = bench_shared(harness, packets, side, shared_levels, args, rng)
        levels += grown
        baseline_meta = None
        if base and side:
            baseline_meta = base.describe() | {"netapp": side.netapp(), "install": installs[BASELINE]}
    meta = {
        "runs": args.runs,
        "repeat": args.repeat,
        "levels": args.levels,
        "packet_bytes": len(packets["miss"]),
        "kernel": platform.release(),
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - started, 1),
    }
    return build_result(levels, four_shapes, installs[HEAD], meta, min_shapes, baseline_meta)


def write_outputs(result: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(out.suffix + ".tmp")
    partial.write_text(json.dumps(result, indent=2) + "\n")
    partial.replace(out)
    print(format_table(result))
    png = out.with_suffix(".png")
    print(
        f"\nwrote {out}" + (f" and {png}" if plot(result, png) else " (no plot: matplotlib not importable)")
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("bench.dataplane: loading BPF programs needs root", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except WrongPathError as exc:
        print(f"bench.dataplane: measured the wrong path, no results written: {exc}", file=sys.stderr)
        return 1
    except BaselineError as exc:
        print(f"bench.dataplane: --baseline {args.baseline}: {exc}", file=sys.stderr)
        return 3
    write_outputs(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
