"""What a chained policer costs beside a single one: the same frames through xdp_police with policers
1..N alone and with policers N+1..2N, each naming one shared parent (struct dpp_policer.parent: a
flow's MBR, then its session's AMBR), every policer passing (bench.qos.run's PASSING), each clock
("kernel", "given", "coarse", and "credit": the coarse token bucket and GCRA on each CPU's credit). Blocks that interleave the floor (the harness's empty program), the path
without a policer (xdp_police_skip), the single and the chained policer in a shuffled order, medians;
each run's verdict checked.

    python -m bench.qos.chain --out bench/results/qos_chain.json [--policers 1]

Methodology: bench/README.md, "bench/qos".
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
from ctypes import c_uint32
from pathlib import Path
from typing import Optional, Sequence

from bench.harness import (DATAPLANE, Harness, Walk, add_block_arguments, build_harness, interleaved_samples,
                           paired_differences, write_results)
from bench.libbpf import BpfObject, map_update
from bench.qos.rule import spread
from bench.qos.run import (PASSING, POLICER_AT, RESERVED_AT, XDP_PASS, build, case_chunk, frame, police_sizes,
                           write_share)
from netapp.qos.abi import Algo, Policer, PolicerStats

DEFAULT_OUT = Path("bench/results/qos_chain.json")
# bench.qos.run's passing policers by clock; "credit": its coarse token bucket and GCRA, each CPU's
# credit carved in chunks (run.case_chunk), the parent's too
CHAINED = {**PASSING, "credit": {algo: PASSING["coarse"][algo] for algo in (Algo.TOKEN_BUCKET, Algo.GCRA)}}


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.qos.chain", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--policers", type=int, default=1, help="N: 1 hot (the best case), more walked cold")
    add_block_arguments(parser)
    return parser.parse_args(argv)


def configure(obj: BpfObject, count: int, policer: Policer, chunk: int) -> None:
    """Ids 1..N as `policer`; N+1..2N as `policer` with parent 2N+1, itself `policer`; every CPU's
    slot of each with `chunk` (its credit's; 0: none)."""
    policers_fd, stats_fd = obj.map_fd("dpp_policers"), obj.map_fd("dpp_policer_stats")
    parent = 2 * count + 1
    chained = Policer.from_buffer_copy(bytes(policer))
    chained.parent = parent
    for policer_id in range(1, 2 * count + 2):
        map_update(policers_fd, c_uint32(policer_id), chained if count < policer_id < parent else policer)
        write_share(stats_fd, policer_id, 2 * count + 2, PolicerStats(chunk=chunk))


def timed(harness: Harness, count: int, base: int, prog_fd: int, clock: str, repeat: int) -> int:
    harness.set_walk(Walk(count, teid_base=base, src_base=0, teid_off=POLICER_AT, src_off=RESERVED_AT))
    result = harness.run_walk(prog_fd, frame(clock), repeat)
    if result.retval != XDP_PASS:
        raise RuntimeError(f"verdict {result.retval}, expected {XDP_PASS}: the case is not what it says")
    return result.duration_ns


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rng, count, rows = random.Random(args.seed), args.policers, []
    with Harness(build_harness()) as harness:
        obj = BpfObject(build(2 * count + 1), police_sizes(DATAPLANE, 2 * count + 1))
        try:
            police_fd, skip_fd = obj.program_fd("xdp_police"), obj.program_fd("xdp_police_skip")
            for clock, cases in CHAINED.items():
                for algo, policer in cases.items():
                    configure(obj, count, policer, case_chunk(clock))
                    run = functools.partial(timed, harness, count, repeat=args.repeat, clock=clock)
                    subjects = {"floor": functools.partial(run, 1, harness.empty_fd),
                                "skip": functools.partial(run, 1, skip_fd),
                                "single": functools.partial(run, 1, police_fd),
                                "chained": functools.partial(run, count + 1, police_fd)}
                    samples = interleaved_samples(subjects, args.runs, rng)
                    ns = {name: statistics.median(values) for name, values in samples.items()}
                    row = {"policers": count, "clock": clock, "algorithm": algo.name.lower(), "floor_ns": ns["floor"],
                           "without_policer_ns": ns["skip"], "single_ns": ns["single"], "chained_ns": ns["chained"],
                           "single_above_floor_ns": ns["single"] - ns["floor"],
                           "chained_above_floor_ns": ns["chained"] - ns["floor"],
                           "chained_above_single_ns": ns["chained"] - ns["single"],
                           "single_above_without_blocks_ns": paired_differences(samples, "single", "skip"),
                           "chained_above_single_blocks_ns": paired_differences(samples, "chained", "single")}
                    rows.append(row)
                    print(f"{count:>7} {clock:<6} {row['algorithm']:<15} floor {ns['floor']:6.1f}  single "
                          f"{ns['single']:6.1f}  chained {ns['chained']:6.1f}  (+{row['chained_above_single_ns']:.1f})  by block: "
                          f"single - without {spread(row['single_above_without_blocks_ns'])}, chained - single "
                          f"{spread(row['chained_above_single_blocks_ns'])}")
        finally:
            harness.release_target()
            obj.close()
    write_results(args.out, "qos_chain", args.runs, args.repeat, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
