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
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any, Optional, Sequence

from bench.baseline import BaselineError, prepare_baseline
from bench.dataplane import machine_info
from bench.flows import report, run, workload
from bench.flows.remote import FlowsSide
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
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also build git revision REV (into bench/build/baseline-<commit>) and measure its data plane, "
        "its rules installed by its own code, in the same runs",
    )
    parser.add_argument(
        "--tunnel-rule",
        action="store_true",
        help="this checkout's instances also hold a rule on a GTP-U tunnel source no flow has (the baseline's do not)",
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
    base = prepare_baseline(args.baseline)
    with Harness(build_harness()) as harness, ExitStack() as stack:
        side = stack.enter_context(closing(FlowsSide(base))) if base else None
        instances: list[run.Subject] = []
        stack.callback(lambda: [instance.close() for instance in instances])
        stack.callback(harness.release_target)
        for instance in run.open_all(args.rules, args.shapes, args.max_flows, args.tunnel_rule):
            instances.append(instance)
            if side:
                twin = side.open_like(instance, args.max_flows)
                print(f"  {twin.key}: installed in {twin.install_s:.2f} s", file=sys.stderr, flush=True)
                instances.append(twin)
        levels = [
            run.measure_level(harness, instances, flows, args.runs, args.repeat, rng) for flows in args.flows
        ]
        head = [instance for instance in instances if not instance.version]
        cases = [report.case_result(level, instance) for level in levels for instance in head]
        floors = {str(level.flows): report.statistics.median(level.samples[run.FLOOR]) for level in levels}
        revision = None
        if base:
            twins = [instance for instance in instances if instance.version]
            where = {"netapp": side.netapp()}  # the revision's Python ran from
            revision = report.baseline_result(levels, twins, cases, base.describe() | where)
    return {
        "cases": cases,
        **({"baseline": revision} if revision else {}),
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
    except BaselineError as exc:
        print(f"bench.flows: --baseline {args.baseline}: {exc}", file=sys.stderr)
        return 3
    write(result, args.out)
    print(report.format_table(result))
    missed = [target["name"] for target in result["targets"] if not target["met"]]
    print(f"\nwrote {args.out}; targets missed: {len(missed)} of {len(result['targets'])}")
    for name in missed:
        print(f"  missed: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
