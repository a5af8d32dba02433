"""What rewriting a parent policer from the coarse clock to the precise one costs the control plane:
its coarse children are rewritten precise in the same call (netapp/qos/applier.py, `_made_precise`),
found through the applier's index of children by parent (before it, in a read of the map's every
slot). An anonymous instance with dpp_policers of `--slots` slots, `--parents` coarse parents of
`--children` coarse children each; each run rewrites one parent precise and back coarse (the
children along, then left precise: a coarse parent keeps precise children), another parent every
run, after one untimed rewrite that makes the applier's index. Medians and quartiles of the
precise rewrites, ms.

    python -m bench.qos.precise --out bench/results/qos_precise.json [--slots 65536] [--children 8]

Methodology: bench/README.md, "bench/qos".
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from bench.harness import quartiles, write_results
from netapp.dataplane.facade import Dataplane
from netapp.qos.applier import PolicerApplier, policer_value
from netapp.qos.abi import Clock
from netapp.qos.spec import PolicerSpec

DEFAULT_OUT = Path("bench/results/qos_precise.json")
COARSE = PolicerSpec(rate=10**8, burst=125_000)  # a 10 ms burst: coarse at HZ 100 and above
PRECISE = PolicerSpec(rate=10**8, burst=3000)  # under two ticks' refill: precise


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.qos.precise", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--slots", type=int, default=65536, help="dpp_policers' size (the default's)")
    parser.add_argument("--parents", type=int, default=12, help="coarse parents, one rewritten a run")
    parser.add_argument("--children", type=int, default=8, help="coarse children of each parent")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if policer_value(COARSE).clock != Clock.COARSE:
        raise SystemExit("this kernel's tick makes no policer coarse: nothing to measure")
    sizes = {"dpp_policers": args.slots}
    parents = list(range(1, args.parents + 1))
    with Dataplane.open(map_sizes=sizes) as dp:
        applier = PolicerApplier(dp.table)
        applier.apply(dict.fromkeys(parents, COARSE))
        child = args.parents + 1
        for parent in parents:
            applier.apply({child + n: dataclasses.replace(COARSE, parent=parent) for n in range(args.children)})
            child += args.children
        ms = []
        for parent in parents:
            start = time.perf_counter()
            applier.apply({parent: PRECISE})
            ms.append((time.perf_counter() - start) * 1e3)
            applier.apply({parent: COARSE})
        if applier.state(args.parents + 1).clock != Clock.PRECISE:
            raise SystemExit("the first parent's child stayed coarse: the case is not what it says")
    spread = quartiles(ms[1:])  # the first made the index (or is the scan, as every one before it)
    row = {"slots": args.slots, "children": args.children, "first_ms": ms[0], **{f"{k}_ms": v for k, v in spread.items()}}
    print(f"{args.slots} slots, {args.children} children: first {ms[0]:.2f} ms, then median {spread['median']:.3f} ms "
          f"[{spread['q1']:.3f}, {spread['q3']:.3f}]")
    write_results(args.out, "qos_precise", len(ms) - 1, 1, [row])
    return 0


if __name__ == "__main__":
    sys.exit(main())
