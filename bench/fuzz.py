"""Differential fuzz of the data plane at scale: random nested frames and intents through the real
XDP program, against the reference parser and classifier of the test suite.

    python -m bench.fuzz --packets 100000 [--seed N] [--out FILE]

Prints every disagreement as it is found (the frame in hex, the program's and the reference's
answers), then the counts of agreement and disagreement and what the parser made of the frames.
Writes nothing unless --out names a file (a JSON summary with the disagreements). The generator,
the reference and the comparison are tests/utils/fuzz.py, refparser.py and refclassify.py; the test
suite runs the same fuzz on a few thousand frames (tests/dataplane/test_fuzz.py). Needs root and
`make -C dataplane`; run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from tests.utils import fuzz
from tests.utils.dataplane import reference_key, traced_dataplane


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=100_000, help="frames to run (default 100000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of frames and intents (default 1)")
    parser.add_argument("--per-ruleset", type=int, default=400, help="frames per random intent document")
    parser.add_argument("--out", type=Path, help="write a JSON summary here (default: write nothing)")
    return parser.parse_args(argv)


def show(disagreement: fuzz.Disagreement) -> None:
    print(disagreement.describe(), flush=True)


def summary_document(args: argparse.Namespace, report: fuzz.Report) -> dict:
    return {
        "packets": report.packets,
        "seed": args.seed,
        "agree": report.agreed,
        "disagree": len(report.disagreements),
        "matched": report.matched,
        "fast_path": report.fast,
        "parser_outcomes": dict(sorted(report.outcomes.items())),
        "disagreements": [
            {"frame": d.frame.hex(), "program": repr(d.program), "reference": repr(d.reference)}
            for d in report.disagreements
        ],
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("bench.fuzz: BPF_PROG_TEST_RUN needs root", file=sys.stderr)
        return 2
    report = fuzz.run(args.packets, args.seed, traced_dataplane, reference_key, args.per_ruleset, show)
    print(report.summary())
    if args.out is not None:
        args.out.write_text(json.dumps(summary_document(args, report), indent=2) + "\n")
    return 1 if report.disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
