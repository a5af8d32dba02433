"""python -m bench.routing: see bench/routing/__init__.py and bench/README.md."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Optional, Sequence

from bench.harness import Harness, add_block_arguments, build_harness, write_results
from bench.routing.run import FIB_NET, FIRST_NET, RouteBench, fib_namespace

DEFAULT_OUT = Path("bench/results/routing.json")
HOT = "one destination (best case)"


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.routing", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--routes", type=lambda text: [int(v) for v in text.split(",")], default=[1000, 1_000_000])
    add_block_arguments(parser)
    return parser.parse_args(argv)


def cases(routes: int, first: bool) -> list[tuple[str, str, int, int]]:
    """(case, walk, flows, walk base) at `routes` routes; the FIB's once (they do not depend on them)."""
    rows = [
        ("private", HOT, 1, FIRST_NET),
        ("private", "cold: another route every repetition", routes, FIRST_NET),
        ("private_cached", HOT, 1, FIRST_NET),
    ]
    if first:
        rows += [("fib", HOT, 1, FIB_NET), ("fib_cached", HOT, 1, FIB_NET)]
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    rows = []
    with Harness(build_harness()) as harness, fib_namespace() as ifindex:
        bench = RouteBench(harness, ifindex)
        try:
            for index, routes in enumerate(args.routes):
                bench.fill(routes)
                for case, walk, flows, base in cases(routes, index == 0):
                    timing = bench.time(case, flows, base, args.runs, args.repeat, rng)
                    row = {
                        "routes": routes if case.startswith("private") else None,
                        "case": case,
                        "walk": walk,
                        "floor_ns": timing.floor_ns,
                        "without_lookup_ns": timing.skip_ns,
                        "with_lookup_ns": timing.case_ns,
                        "above_without_ns": timing.above_skip,
                    }
                    rows.append(row)
                    print(f"{routes:>9} {case:<15} {walk:<38} floor {timing.floor_ns:6.1f}  without "
                          f"{timing.skip_ns:6.1f}  with {timing.case_ns:6.1f}  above {timing.above_skip:+6.1f} ns",
                          flush=True)
        finally:
            bench.close()
    write_results(args.out, "routing", args.runs, args.repeat, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
