"""What the layout of a policer's per-CPU counters (struct dpp_policer_stats) costs a cold policer:
xdp_police of several trees, each with its own header and police.h, timed in the same blocks over
1,000,000 policers (every repetition another), as bench/qos times one build against --before; and
where the kernel puts per-CPU values of each tree's size (bench/bpf/percpu_lines.bpf.c: the share
that crosses a cache line).

    python -m bench.qos.layouts --tree this=dataplane --tree before=/tmp/qos-before/dataplane \\
        [--tree NAME=OTHER/dataplane ...] --out bench/results/qos_layouts.json

Every tree's policers are written alike (its counters' slots with a chunk where its
dpp_policer_stats has a credit); the first tree's xdp_police_skip is the path without the policer.
Each case's result: every tree above that path and above the last tree's (the build compared
against), and every pair of trees, block by block, median [quartiles]. Trees are built and loaded in the order given, and
the order moves a cold figure by tens of ns (the maps made first are slower here): compare two
builds in both orders, or load one build twice for the noise. Methodology and results:
bench/README.md, "Cold: the counters' layout and the bench's load order".
"""

from __future__ import annotations

import argparse
import functools
import itertools
import random
import subprocess
import sys
from ctypes import c_uint32, c_uint64
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from bench.harness import (BUILD_DIR, Harness, Walk, build_harness, dataplane_bpf_cflags, interleaved_samples,
                           paired_differences, write_results)
from bench.libbpf import BpfObject, map_lookup, test_run
from bench.qos.run import (CASES, POLICER_AT, RESERVED_AT, XDP_DROP, XDP_PASS, LoadedTree, case_chunk, frame,
                           keeps_rows)
from netapp.qos.abi import Algo

LINES_SOURCE = Path(__file__).resolve().parents[1] / "bpf" / "percpu_lines.bpf.c"
LINE = 64
# The cold cases whose cost moved with the credit (bench/README.md): the credited ones, and the
# uncredited ones on the coarse clock.
DEFAULT_CASES = ("credit-token_bucket-pass", "credit-gcra-pass", "coarse-token_bucket-pass", "coarse-gcra-pass",
                 "coarse-fixed_window-pass", "coarse-token_bucket-drop", "credit-fixed_window-pass",
                 "credit-sliding_window-pass", "coarse-sliding_window-pass")
def case_name(key: tuple[str, Algo, str]) -> str:
    clock, algo, decision = key
    return f"{clock}-{algo.name.lower()}-{decision}"


@functools.lru_cache(maxsize=None)
def police_object(dataplane: Path, policers: int) -> Path:
    """xdp_police.bpf.c of a tree, with room for the policers (built once a run for each tree)."""
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    obj = BUILD_DIR / f"xdp_police_layout_{abs(hash(dataplane)):x}_{policers}.bpf.o"
    source = dataplane / "bpf" / "xdp_police.bpf.c"
    subprocess.run(["clang", *dataplane_bpf_cflags(), f"-DDPP_MAX_POLICERS={policers + 1}", "-c", str(source),
                    "-o", str(obj)], cwd=dataplane, check=True)
    return obj


@dataclass
class Tree:
    name: str
    loaded: LoadedTree

    @classmethod
    def build(cls, name: str, dataplane: Path, policers: int) -> "Tree":
        return cls(name, LoadedTree(dataplane, policers, police_object(dataplane, policers)))


def crossing_share(value_size: int, slots: int, rows: bool = False) -> dict[str, float]:
    """Of a fresh per-CPU array of `slots` values of `value_size` bytes (rows: a plain mmapable
    array, as dpp_policer_stats with a row per CPU), the share of this CPU's values that cross a
    cache line, and the share at each offset in a line."""
    obj_path = BUILD_DIR / f"percpu_lines_{value_size}{'_rows' if rows else ''}.bpf.o"
    subprocess.run(["clang", *dataplane_bpf_cflags(), f"-DVALUE_SIZE={value_size}", f"-DSLOTS={slots + 1}",
                    *(["-DROWS"] if rows else []), "-c", str(LINES_SOURCE), "-o", str(obj_path)], check=True)
    with BpfObject(obj_path) as obj:
        test_run(obj.program_fd("percpu_lines"), bytes(64), 1)
        counts = []
        for offset in range(LINE + 1):
            n = c_uint64()
            map_lookup(obj.map_fd("offsets"), c_uint32(offset), n)
            counts.append(n.value)
    return {"crossing": counts[LINE] / slots,
            "at_offset": {str(offset): n / slots for offset, n in enumerate(counts[:LINE]) if n}}


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.qos.layouts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=DATAPLANE",
                        type=lambda text: (text.split("=", 1)[0], Path(text.split("=", 1)[1]).resolve()),
                        help="a tree's dataplane/ (at least two; the last is the one the others are compared against)")
    parser.add_argument("--policers", type=int, default=1_000_000)
    parser.add_argument("--cases", type=lambda text: text.split(","), default=list(DEFAULT_CASES),
                        help="clock-algorithm-decision, comma-separated")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/results/qos_layouts.json"))
    return parser.parse_args(argv)


def timed(harness: Harness, prog_fd: int, clock: str, policers: int, repeat: int, expected: int) -> int:
    harness.set_walk(Walk(policers, teid_base=1, src_base=0, teid_off=POLICER_AT, src_off=RESERVED_AT))
    result = harness.run_walk(prog_fd, frame(clock), repeat)
    if result.retval != expected:
        raise RuntimeError(f"verdict {result.retval}, expected {expected}: the case is not what it says")
    return result.duration_ns


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if len(args.tree) < 2:
        raise SystemExit("--tree: two at least (the last is the one compared against)")
    keys_by_name = {case_name(key): key for key in CASES}
    unknown = [name for name in args.cases if name not in keys_by_name]
    if unknown:
        raise SystemExit(f"--cases: unknown {unknown}; known: {sorted(keys_by_name)}")
    rng = random.Random(args.seed)
    base = args.tree[-1][0]
    trees = [Tree.build(name, path, args.policers) for name, path in args.tree]
    rows = []
    try:
        layouts = {tree.name: (tree.loaded.stats_size, keeps_rows(tree.loaded.dataplane)) for tree in trees}
        shares = {layout: crossing_share(layout[0], args.policers, layout[1]) for layout in set(layouts.values())}
        lines = {name: {"stats_bytes": layout[0], "rows": layout[1], **shares[layout]}
                 for name, layout in layouts.items()}
        for name, share in lines.items():
            kind = "a row per CPU" if share["rows"] else "per CPU"
            print(f"{name:<10} {share['stats_bytes']:>3}-byte counters ({kind}): {share['crossing']:.1%} cross a line",
                  flush=True)
        with Harness(build_harness()) as harness:
            skip_fd = trees[0].loaded.obj.program_fd("xdp_police_skip")
            for case in args.cases:
                key = keys_by_name[case]
                for tree in trees:
                    tree.loaded.write(CASES[key], case_chunk(key[0]))
                expected = XDP_PASS if key[2] == "pass" else XDP_DROP
                run = functools.partial(timed, harness, clock=key[0], policers=args.policers, repeat=args.repeat)
                subjects = {"floor": functools.partial(run, harness.empty_fd, expected=XDP_PASS),
                            "skip": functools.partial(run, skip_fd, expected=XDP_PASS)}
                subjects.update({tree.name: functools.partial(run, tree.loaded.obj.program_fd("xdp_police"),
                                                              expected=expected) for tree in trees})
                samples = interleaved_samples(subjects, args.runs, rng)
                row = {"case": case, "policers": args.policers,
                       "above_without_blocks_ns": {t.name: paired_differences(samples, t.name, "skip") for t in trees},
                       f"minus_{base}_blocks_ns": {t.name: paired_differences(samples, t.name, base) for t in trees[:-1]},
                       "pairs_blocks_ns": {f"{a.name}-{b.name}": paired_differences(samples, a.name, b.name)
                                           for a, b in itertools.combinations(trees, 2)},
                       "floor_ns": sorted(samples["floor"])[len(samples["floor"]) // 2]}
                rows.append(row)
                parts = [f"{t}: {q['median']:+.0f} [{q['q1']:+.0f}, {q['q3']:+.0f}]"
                         for t, q in row["above_without_blocks_ns"].items()]
                print(f"{case:<26} above without  " + "  ".join(parts), flush=True)
                parts = [f"{t}: {q['median']:+.0f} [{q['q1']:+.0f}, {q['q3']:+.0f}]"
                         for t, q in row[f"minus_{base}_blocks_ns"].items()]
                print(f"{'':<26} - {base:<12} " + "  ".join(parts) + f"  (floor {row['floor_ns']})",
                      flush=True)
                parts = [f"{pair}: {q['median']:+.0f} [{q['q1']:+.0f}, {q['q3']:+.0f}]"
                         for pair, q in row["pairs_blocks_ns"].items() if len(trees) > 2]
                if parts:
                    print(f"{'':<26} pairs          " + "  ".join(parts), flush=True)
            harness.release_target()
    finally:
        for tree in trees:
            tree.loaded.close()
    write_results(args.out, "qos_layouts", args.runs, args.repeat, rows, {"percpu_lines": lines})
    return 0


if __name__ == "__main__":
    sys.exit(main())
