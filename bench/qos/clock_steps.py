"""Whether the COARSE policers' clock goes back (dataplane/bpf/nf/qos/clock.h): readings of a coarse
token bucket's clock (its last_ns, a fresh bucket decided on one frame at a time) made one after
another from one thread for a while, the clock timer running as libdpp runs it; every reading below
the one before is a step back.

    python -m bench.qos.clock_steps --seconds 3 [--out bench/results/qos_clock_steps.json]

Methodology and results: bench/README.md, "The coarse clock after review".
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Optional, Sequence

from bench.qos.run import start_clock
from netapp.qos.abi import Algo, Clock
from netapp.qos.model import PolicerConfig
from tests.qos.police import PoliceProgram

POLICER = 7
BUCKET = PolicerConfig(rate=10**9, burst=1 << 20, algo=Algo.TOKEN_BUCKET)


def coarse_readings(seconds: float) -> list[int]:
    """The coarse clock as a fresh token bucket decided on it, read for `seconds`."""
    police = PoliceProgram()
    try:
        start_clock(police.obj)
        readings = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            police.configure(POLICER, BUCKET, clock=Clock.COARSE)
            police.passes(POLICER, 64, 0)
            readings.append(police.state(POLICER).last_ns)
        return readings
    finally:
        police.close()


def steps_back(readings: Sequence[int]) -> dict[str, object]:
    backs = [before - after for before, after in zip(readings, readings[1:]) if after < before]
    return {
        "readings": len(readings),
        "steps_back": len(backs),
        "largest_ns": max(backs, default=0),
        "median_ns": statistics.median(backs) if backs else 0,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = steps_back(coarse_readings(args.seconds))
    print(json.dumps(result))
    if args.out:
        args.out.write_text(json.dumps({"seconds": args.seconds, **result}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
