"""What a session in dpp_atsss_sessions costs a packet against one in the index: round-robin's
downlink (bench.atsss's case) over two objects of this build, one with every session in a way of
the index (dpp_atsss_index4 -> dpp_atsss_slots), the other with every one in the hash, where a
session whose bucket was full lives until a way of its bucket frees and it is moved in
(netapp/atsss/index.py, 5.); one session (hot: the best case) and 10,000 (every repetition
another UE), timed in the same blocks as the floor. The hash less the index, block by block with
quartiles, is what a move saves each of the UE's packets.

    python -m bench.atsss.placement --out bench/results/atsss_placement.json [--runs 21]

Root; dataplane/build built."""

from __future__ import annotations

import argparse
import contextlib
import functools
import random
import statistics
import sys
from pathlib import Path
from typing import Optional, Sequence

from bench.atsss.__main__ import (FIRST_UE, MODES, PAYLOAD_AT, SESSIONS, UE_AT, XDP_PASS, XDP_TX, AtsssBench,
                                  path_instructions, timed, ue_frame)
from bench.harness import (Harness, Walk, add_block_arguments, build_harness, interleaved_samples, paired_differences,
                           write_results)
from netapp.dataplane import binding

DEFAULT_OUT = Path("bench/results/atsss_placement.json")
SCHEDULER = "round-robin"
PLACES = ("index", "hash")


def placement_row(samples: dict[str, list[int]], sessions: int, counts: dict[str, Optional[int]]) -> dict:
    """Each place above the floor, and the hash above the index, block by block; printed."""
    row: dict = {"scheduler": SCHEDULER, "sessions": sessions, "floor_ns": statistics.median(samples["floor"]),
                 "instructions": counts if sessions == 1 else None}  # fmt: skip
    for place in PLACES:
        row[f"{place}_above_floor_ns"] = paired_differences(samples, place, "floor")
    row["hash_minus_index_ns"] = paired_differences(samples, "hash", "index")
    shown = {name: row[key] for name, key in (("index - floor", "index_above_floor_ns"),
                                              ("hash - floor", "hash_above_floor_ns"),
                                              ("hash - index", "hash_minus_index_ns"))}  # fmt: skip
    print(f"{SCHEDULER}, {sessions:>6} sessions: " + "  ".join(
        f"{name} {q['median']:+6.1f} [{q['q1']:+.0f}, {q['q3']:+.0f}]" for name, q in shown.items())
          + (f"  instructions {counts}" if sessions == 1 else ""), flush=True)  # fmt: skip
    return row


def placement_rows(args: argparse.Namespace, harness: Harness, benches: dict[str, AtsssBench],
                   rng: random.Random) -> list[dict]:
    mode, weights, flags = MODES[SCHEDULER]
    for place, bench in benches.items():
        bench.configure(mode, weights, flags, hashed=place == "hash")
    frame = ue_frame()
    counts = {place: path_instructions(bench, frame, XDP_TX) for place, bench in benches.items()}
    rows = []
    for sessions in (1, SESSIONS):
        walk = Walk(sessions, teid_base=0, src_base=int(FIRST_UE), teid_off=PAYLOAD_AT, src_off=UE_AT)
        subjects = {"floor": functools.partial(timed, harness, harness.empty_fd, walk, XDP_PASS, args.repeat, frame)}
        for place, bench in benches.items():
            subjects[place] = functools.partial(timed, harness, bench.prog_fd, walk, XDP_TX, args.repeat, frame)
        rows.append(placement_row(interleaved_samples(subjects, args.runs, rng), sessions, counts))
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.atsss.placement", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    add_block_arguments(parser)
    args = parser.parse_args(argv)
    build = Path(binding.find_libdpp()).parent
    with contextlib.ExitStack() as held:
        benches = {place: held.enter_context(contextlib.closing(AtsssBench(build))) for place in PLACES}
        harness = held.enter_context(Harness(build_harness()))
        held.callback(harness.release_target)
        rows = placement_rows(args, harness, benches, random.Random(args.seed))
    write_results(args.out, "atsss_placement", args.runs, args.repeat, rows, {"places": list(PLACES)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
