"""python -m bench.flows: see bench/flows/__init__.py and bench/README.md."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Optional, Sequence

from bench.dataplane import machine_info
from bench.flows import report, run, workload
from bench.harness import Harness, build_harness
from bench.measure import WrongPathError

DEFAULT_OUT = Path("bench/results/flows.json")


def _levels(text: str) -> list[int]:
    return sorted({int(value) for value in text.split(",")})


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.flows", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--flows", type=_levels, default=[1, 10_000, 100_000, 1_000_000], help="active flow counts")
    parser.add_argument("--rules", type=_levels, default=[1, 1_000_000], help="rules in the searched shape")
    parser.add_argument("--shapes", type=_levels, default=[1, 4, 16], help="shape counts (1 to 16)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per subject; medians are reported")
    parser.add_argument(
        "--repeat", type=int, default=200_000, help="minimum repetitions per run (a whole number of walks)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the per-run order of subjects")
    parser.add_argument(
        "--max-flows", type=int, default=0, help="flow cache slots per CPU (0: libdpp's default)"
    )
    args = parser.parse_args(argv)
    if any(not 1 <= shapes <= 16 for shapes in args.shapes):
        parser.error("--shapes: 1 to 16")
    if args.runs < 1 or args.repeat < 1 or min(args.flows) < 1 or min(args.rules) < 1:
        parser.error("--runs, --repeat, --flows and --rules must be positive")
    return args


def measure(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    rng = random.Random(args.seed)
    with Harness(build_harness()) as harness, ExitStack() as stack:
        instances = []
        stack.callback(lambda: [instance.close() for instance in instances])
        stack.callback(harness.release_target)
        for instance in run.open_all(args.rules, args.shapes, args.max_flows):
            instances.append(instance)
        levels = [
            run.measure_level(harness, instances, flows, args.runs, args.repeat, rng) for flows in args.flows
        ]
        cases = [report.case_result(level, instance) for level in levels for instance in instances]
        floors = {str(level.flows): report.statistics.median(level.samples[run.FLOOR]) for level in levels}
    return {
        "cases": cases,
        "floor_ns": floors,
        "targets": report.evaluate_targets(cases),
        "runs": args.runs,
        "min_repeat": args.repeat,
        "other_shape_rules": workload.OTHER_RULES,
        "packet_bytes": len(workload.packet()),
        "kernel": platform.release(),
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - started, 1),
    }


def write(result: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(out.suffix + ".tmp")
    partial.write_text(json.dumps(result, indent=1) + "\n")
    partial.replace(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("bench.flows: loading BPF programs needs root", file=sys.stderr)
        return 2
    try:
        result = measure(args)
    except WrongPathError as exc:
        print(f"bench.flows: measured the wrong path, no results written: {exc}", file=sys.stderr)
        return 1
    write(result, args.out)
    print(report.format_table(result))
    missed = [target["name"] for target in result["targets"] if not target["met"]]
    print(f"\nwrote {args.out}; targets missed: {len(missed)} of {len(result['targets'])}")
    for name in missed:
        print(f"  missed: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
