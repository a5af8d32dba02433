"""python -m bench.upf: see bench/upf/__init__.py and bench/README.md."""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import sys
import time
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any, Optional, Sequence

from netapp.testbed import netns

from bench.baseline import BaselineError, BaselineSide, prepare_baseline
from bench.dataplane import machine_info
from bench.flows.__main__ import write
from bench.harness import Harness, build_harness
from bench.measure import WrongPathError
from bench.upf import report, run, workload

DEFAULT_OUT = Path("bench/results/upf.json")


def _levels(text: str) -> list[int]:
    return sorted({int(value) for value in text.split(",")})


def _cases(text: str) -> list[str]:
    names = [name for name in text.split(",") if name]
    unknown = [name for name in names if name not in workload.CASES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown cases {unknown}; known: {', '.join(workload.CASES)}")
    return names


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.upf", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--sessions", type=_levels, default=[1, 1_000_000], help="sessions installed")
    parser.add_argument("--active", type=_levels, default=[1, 10_000, 1_000_000], help="sessions active")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per subject; medians are reported")
    parser.add_argument(
        "--repeat", type=int, default=200_000, help="minimum repetitions per run (a whole number of walks)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the run order and the sampled flows")
    parser.add_argument("--cases", type=_cases, default=list(workload.CASES), help="cases to measure (default: all)")
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also build git revision REV (into bench/build/baseline-<commit>) and measure its data plane, "
        "its sessions installed by its own code, in the same runs (the cases it has)",
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.repeat < 1 or min(args.sessions) < 1 or min(args.active) < 1:
        parser.error("--runs, --repeat, --sessions and --active must be positive")
    if max(args.sessions) > workload.MAX_SESSIONS:
        parser.error(f"--sessions: at most {workload.MAX_SESSIONS:,} (the UPF's tables)")
    return args


def _twins(side: BaselineSide, cases: Sequence[str], sessions: int) -> dict[str, run.Twin]:
    """The baseline revision's instance of each case it has (opened in this process's namespace)."""
    theirs = side.request({"op": "cases"})[0]["instances"]
    opened: dict[str, run.Twin] = {}
    for case in (case for case in cases if case in theirs):
        if theirs[case] not in opened:
            opened[theirs[case]] = run.open_twin(side, theirs[case], sessions)
    return {case: opened[theirs[case]] for case in cases if case in theirs}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    rng = random.Random(args.seed)
    levels: list[run.Level] = []
    base = prepare_baseline(args.baseline)
    with Harness(build_harness()) as harness, ExitStack() as stack:
        site = run.make_site(stack)
        stack.enter_context(netns.entered(site))
        instances: dict[str, run.Instance] = {}
        stack.callback(lambda: [instance.close() for instance in instances.values()])
        stack.callback(harness.release_target)
        side = stack.enter_context(closing(BaselineSide(base, "upf"))) if base else None  # started in the namespace
        for name in workload.INSTANCES:
            if any(workload.CASES[case].instance == name for case in args.cases):
                instances[name] = run.open_instance(name, max(args.sessions))
        twins = _twins(side, args.cases, max(args.sessions)) if side else {}
        for sessions in args.sessions:
            for instance in [*instances.values(), *{id(twin): twin for twin in twins.values()}.values()]:
                instance.grow(sessions)
            for active in (active for active in args.active if active <= sessions):
                levels.append(
                    run.measure_level(harness, instances, active, args.runs, args.repeat, rng, args.cases, twins)
                )
        usage = run.usage_memory(next(iter(instances.values())))
        installs = [
            vars(install) | {"instance": instance.name, "entries_per_s": install.entries / install.seconds}
            for instance in instances.values()
            for install in instance.installs
        ]
    cases = [case for level in levels for case in report.case_results(level)]
    revision = report.baseline_result(levels, cases, base.describe() | {"netapp": side.netapp()}) if side else None
    return {
        "cases": cases,
        **({"baseline": revision} if revision else {}),
        "floor_ns": [
            {"installed": level.installed, "active": level.active}
            | {name: report.statistics.median(level.samples[f"floor/{name}"]) for name in workload.FLOOR_PACKETS}
            for level in levels
        ],
        "targets": report.evaluate_targets(cases),
        "eupf_quoted": report.EUPF_QUOTED,
        "output": "fib (instances n6, n9): bpf_fib_lookup in a namespace with the routes and permanent "
        "neighbours the cases need, XDP_REDIRECT returned, not carried out; tx (instance tx): MACs swapped, "
        "XDP_TX, no FIB lookup",
        "install": installs,
        "urr_usage": usage | {"instances": len(instances)},
        "runs": args.runs,
        "min_repeat": args.repeat,
        "packet_bytes": {name: len(packet()) for name, (packet, _, _) in workload.FLOOR_PACKETS.items()},
        "kernel": platform.release(),
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - started, 1),
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("bench.upf: loading BPF programs and building a namespace need root", file=sys.stderr)
        return 2
    try:
        result = measure(args)
    except WrongPathError as exc:
        print(f"bench.upf: measured the wrong path, no results written: {exc}", file=sys.stderr)
        return 1
    except BaselineError as exc:
        print(f"bench.upf: --baseline {args.baseline}: {exc}", file=sys.stderr)
        return 3
    write(result, args.out)
    print(report.format_table(result))
    if "baseline" in result:
        print("\n" + report.format_baseline(result))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
