"""What a QER's policer costs the UPF's path, from a result of bench/upf (its policed cases and the
same paths unpoliced, timed in the same runs): each policed case less its unpoliced path, run by
run, median [quartiles]; with the --baseline revision's cases in the result, the same for its build
and this build's cost less the baseline's, run by run. A policed case's path is its name up to
"_policed" (uplink_policed_window: uplink).

    python -m bench.upf --sessions 1 --active 1 --runs 11 --cases uplink,uplink_policed,... --out R.json
    python -m bench.qos.upf_cost R.json

Methodology: bench/README.md, "The UPF's QER policers measured".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from bench.harness import quartiles
from bench.qos.rule import spread

POLICED = "_policed"


def run_by_run(cases: Sequence[dict[str, Any]], case: dict[str, Any]) -> Optional[list[int]]:
    """The policed `case` less its unpoliced path at its level, run by run (None: not measured)."""
    path = case["case"].split(POLICED)[0]
    level = (case["installed"], case["active"])
    unpoliced = next((c for c in cases if c["case"] == path and (c["installed"], c["active"]) == level), None)
    if unpoliced is None:
        return None
    return [mine - theirs for mine, theirs in zip(case["samples_ns"], unpoliced["samples_ns"])]


def costs(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A row per policed case and level: its cost (and the baseline's, and the difference)."""
    baseline = result.get("baseline", {}).get("cases", [])
    rows = []
    for case in (c for c in result["cases"] if POLICED in c["case"]):
        cost = run_by_run(result["cases"], case)
        if cost is None:
            continue
        row = {"case": case["case"], "installed": case["installed"], "active": case["active"], "cost_ns": quartiles(cost)}
        theirs = next((c for c in baseline if (c["case"], c["installed"], c["active"]) ==
                       (case["case"], case["installed"], case["active"])), None)
        their_cost = run_by_run(baseline, theirs) if theirs else None
        if their_cost is not None:
            row["baseline_cost_ns"] = quartiles(their_cost)
            row["minus_baseline_ns"] = quartiles([mine - base for mine, base in zip(cost, their_cost)])
        rows.append(row)
    return rows


def line(row: dict[str, Any]) -> str:
    text = f"{row['case']:<30} {row['installed']:>9,} {row['active']:>9,}  cost {spread(row['cost_ns'])}"
    if "baseline_cost_ns" in row:
        text += f"  baseline's {spread(row['baseline_cost_ns'])}  this - baseline {spread(row['minus_baseline_ns'])}"
    return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.qos.upf_cost", description=__doc__)
    parser.add_argument("result", type=Path, help="a result JSON of python -m bench.upf")
    args = parser.parse_args(argv)
    rows = costs(json.loads(args.result.read_text()))
    if not rows:
        print(f"{args.result}: no policed case with its unpoliced path", file=sys.stderr)
        return 1
    print("ns, the policed case less its unpoliced path, run by run: median [quartiles]")
    for row in rows:
        print(line(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
