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
from typing import Callable, Optional, Sequence

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
        chosen.cursor = (teids.cursor,) * len(chosen.cursor)  # a revision's pair (URR, policer) or more
        teids.choose_new(1, 1)
        chosen.begin()
        chosen.choose_new_urr_slots(1, (1,))
        chosen.choose_new_policers(1, 2)
    return (time.thread_time() - started) / count * 1e9


def sides(rev: str, paths: Sequence[str]) -> tuple[str, dict[str, list[ModuleType]]]:
    """REV's commit, and the modules at `paths` (files of netapp/) as REV has them ("baseline") and
    as this checkout does ("head"), each loaded as a module of its own."""
    commit = baseline.resolve(rev)
    root = BUILD_DIR / f"baseline-{commit[:12]}"
    baseline.export(commit, root, ("netapp",))
    return commit, {name: [_module(tree / path, f"{Path(path).stem}_{name}") for path in paths]
                    for name, tree in (("baseline", root), ("head", REPO))}


def alternated(rounds: int, modules: dict[str, list[ModuleType]],
               timed: Callable[[list[ModuleType]], float]) -> list[str]:
    """`timed` of each side's modules, the sides alternating round by round (the baseline first):
    the lines that report each side's figures, their median and head / baseline by round."""
    times: dict[str, list[float]] = {name: [] for name in modules}
    for round_ in range(rounds):
        for name in sorted(modules) if round_ % 2 == 0 else sorted(modules, reverse=True):
            times[name].append(timed(modules[name]))
    lines = [f"  {name}: {[round(value, 2) for value in each]}, median {statistics.median(each):.2f}"
             for name, each in times.items()]
    ratios = [round(h / b, 3) for h, b in zip(times["head"], times["baseline"])]
    return [*lines, f"  head / baseline by round: {ratios}"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pfcp_numbers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REV", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=7, help="runs of each side, alternating")
    parser.add_argument("--count", type=int, default=20000, help="establishments a run")
    args = parser.parse_args(argv)
    commit, modules = sides(args.baseline, ["netapp/upf/slots.py"])
    print(f"a new session's numbers ({HOLDERS} holders), ns of CPU an establishment; baseline {commit[:12]}")
    print("\n".join(alternated(args.rounds, modules, lambda side: per_establishment(side[0], args.count))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
