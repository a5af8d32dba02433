"""What choosing a new session's numbers costs the fast path of establishments (netapp.upf.slots:
a TEID, a URR slot, two policers, as `Upf.establish_prepared` asks them of `Teids.choose_new` and
`Slots`), among 6,000 sessions' holders, each establishment taking the numbers after the last given:
this checkout's slots.py against REV's, alternated in one process, the thread's CPU an establishment.

    python -m bench.pfcp_numbers --baseline main --rounds 7

A piece of `bench.pfcp_process`'s figure, timed alone: that bench's rounds move by more than the
piece weighs. Results: bench/README.md ("bench/pfcp.py").
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path
from types import ModuleType
from typing import Optional, Sequence

from bench import baseline
from bench.harness import BUILD_DIR, REPO

HOLDERS = 6000


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def per_establishment(slots: ModuleType, count: int) -> float:
    """ns of thread CPU an establishment's numbers, `count` establishments."""
    held = {number: number for number in range(1, HOLDERS + 1)}
    teids = slots.Teids(1 << 20, "192.0.2.1", None)
    chosen = slots.Slots(1 << 20, 0, 1 << 20)
    teids.held, chosen._urr_holders, chosen._policer_holders = dict(held), dict(held), dict(held)
    started = time.thread_time()
    for each in range(count):
        teids.cursor = HOLDERS + 3 * each
        chosen.cursor = (teids.cursor, teids.cursor)
        teids.choose_new(1, 1)
        chosen.begin()
        chosen.choose_new_urr_slots(1, (1,))
        chosen.choose_new_policers(1, 2)
    return (time.thread_time() - started) / count * 1e9


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pfcp_numbers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REV", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=7, help="runs of each side, alternating")
    parser.add_argument("--count", type=int, default=20000, help="establishments a run")
    args = parser.parse_args(argv)
    commit = baseline.resolve(args.baseline)
    root = BUILD_DIR / f"baseline-{commit[:12]}"
    baseline.export(commit, root, ("netapp",))
    sides = {"baseline": _module(root / "netapp/upf/slots.py", "slots_baseline"),
             "head": _module(REPO / "netapp/upf/slots.py", "slots_head")}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(args.rounds):
        for name in sorted(sides) if round_ % 2 == 0 else sorted(sides, reverse=True):
            times[name].append(per_establishment(sides[name], args.count))
    print(f"a new session's numbers ({HOLDERS} holders), ns of CPU an establishment; baseline {commit[:12]}")
    for name, each in times.items():
        print(f"  {name}: {[round(value) for value in each]}, median {statistics.median(each):.0f}")
    print(f"  head / baseline by round: {[round(h / b, 3) for h, b in zip(times['head'], times['baseline'])]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
