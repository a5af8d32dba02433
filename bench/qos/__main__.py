"""python -m bench.qos: see bench/qos/__init__.py and bench/README.md."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Optional, Sequence

from bench.harness import Harness, add_block_arguments, build_harness, write_results
from bench.qos.run import CASES, PoliceBench, blocks_line, case_chunk

DEFAULT_OUT = Path("bench/results/qos.json")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.qos", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--policers", type=lambda text: [int(v) for v in text.split(",")], default=[1, 1_000_000])
    parser.add_argument("--before", type=Path, metavar="DATAPLANE",
                        help="another tree's dataplane/ (e.g. the commit before a change), its xdp_police timed in "
                        "the same blocks (before_ns; GCRA's case runs its token bucket in a build without GCRA); "
                        "both builds loaded twice, this, before, before, this, the blocks alternating the pairs")
    add_block_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    rows = []
    with Harness(build_harness()) as harness:
        for policers in args.policers:
            bench = PoliceBench(harness, policers, args.before)
            try:
                for (clock, algo, decision), policer in CASES.items():
                    bench.configure(policer, case_chunk(clock))
                    timing = bench.time(clock, decision, args.runs, args.repeat, rng)
                    row = {
                        "policers": policers,
                        "walk": "hot (best case)" if policers == 1 else "cold: another policer every repetition",
                        "clock": clock,
                        "algorithm": algo.name.lower(),
                        "decision": decision,
                        "floor_ns": timing.floor_ns,
                        "without_policer_ns": timing.skip_ns,
                        "with_policer_ns": timing.police_ns,
                        "above_without_ns": timing.above_skip,
                        "above_floor_ns": timing.above_floor,
                        **timing.blocks(),
                    }
                    before = ""
                    if timing.before_ns is not None:
                        row.update(before_ns=timing.before_ns, before_above_without_ns=timing.before_ns - timing.skip_ns)
                        before = f"  (before: {row['before_above_without_ns']:+6.1f})"
                    rows.append(row)
                    print(
                        f"{policers:>9} {clock:<6} {row['algorithm']:<15} {decision:<5} floor {timing.floor_ns:6.1f}  "
                        f"without {timing.skip_ns:6.1f}  with {timing.police_ns:6.1f}  "
                        f"above without {timing.above_skip:+6.1f} ns{before}",
                        flush=True,
                    )
                    print(blocks_line(timing.blocks()), flush=True)
            finally:
                bench.close()
    write_results(args.out, "qos", args.runs, args.repeat, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
