"""The flow-mix benchmark's result document, its targets and its table."""

from __future__ import annotations

import statistics
from typing import Any, Callable, Optional, Sequence

from bench.baseline import pair
from bench.flows.run import FLOOR, Level, Subject

# The targets, at 1M active flows and 1M rules (ns above the floor).
TARGET_FLOWS = 1_000_000
TARGET_RULES = 1_000_000
TARGET_ABOVE_FLOOR = {1: 300, 16: 450}
HOT_FLOW_LIMIT_NS = 35  # the cached path of one repeated flow
# Cache on "never slower" than off: judged with this allowance for the shared machine's noise.
CACHE_NOISE_NS = 5


def case_result(level: Level, instance: Subject) -> dict[str, Any]:
    samples = level.samples[instance.key]
    floors = level.samples[FLOOR]
    above = [sample - floor for sample, floor in zip(samples, floors)]
    return {
        "flows": level.flows,
        "rules": instance.rules,
        "shapes": instance.shapes,
        "cache": instance.cache,
        "ns": statistics.median(samples),
        "ns_above_floor": statistics.median(above),
        "min_above_floor": min(above),
        "max_above_floor": max(above),
        "floor_ns": statistics.median(floors),
        "installed_rules": instance.installed,
        "repeat": level.repeat,
        "samples_ns": samples,
    }


def baseline_result(
    levels: Sequence[Level],
    instances: Sequence[Subject],
    head_cases: Sequence[dict[str, Any]],
    revision: dict[str, Any],
) -> dict[str, Any]:
    """The --baseline revision's cases, from the same runs and floor as HEAD's; each baseline case
    and its HEAD case get the other's figures and the ratios HEAD / baseline (bench.baseline.pair)."""
    # max_rules: the map size the revision's own code chose (HEAD's: run.max_rules_for).
    cases = [
        case_result(level, instance) | {"max_rules": getattr(instance, "max_rules", None)}
        for level in levels
        for instance in instances
    ]
    for case in cases:
        head = _find(head_cases, flows=case["flows"], rules=case["rules"], shapes=case["shapes"], cache=case["cache"])
        if head is not None:
            pair(head, case)
    return {
        **revision,
        "cases": cases,
        "note": "opened and filled by the revision's own bench/flows and netapp in a process of its own, "
        "timed through HEAD's harness in the same interleaved runs and against the same floor as HEAD's "
        "cases; ratio_to_baseline = HEAD ns / baseline ns (floor included), above_floor_ratio_to_baseline "
        "= the same above the floor",
    }


def _find(cases: Sequence[dict[str, Any]], **where: Any) -> Optional[dict[str, Any]]:
    return next((c for c in cases if all(c[k] == v for k, v in where.items())), None)


def _target(name: str, value: Optional[float], limit: float) -> dict[str, Any]:
    return {"name": name, "value": value, "limit": limit, "unit": "ns", "met": value is not None and value <= limit}


def evaluate_targets(cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    targets = []
    for shapes, limit in TARGET_ABOVE_FLOOR.items():
        for cache in (True, False):
            case = _find(cases, flows=TARGET_FLOWS, rules=TARGET_RULES, shapes=shapes, cache=cache)
            if case:
                name = f"1M flows, 1M rules, {shapes} shape(s), cache {'on' if cache else 'off'}"
                targets.append(_target(name, case["ns_above_floor"], limit))
    for case in cases:
        if case["flows"] == 1 and case["cache"]:
            name = f"one hot flow, cached, {case['rules']:,} rules, {case['shapes']} shape(s)"
            targets.append(_target(name, case["ns_above_floor"], HOT_FLOW_LIMIT_NS))
    for case in cases:
        if not case["cache"]:
            continue
        off = _find(cases, flows=case["flows"], rules=case["rules"], shapes=case["shapes"], cache=False)
        if off:
            name = f"cache on not slower than off: {case['flows']:,} flows, {case['rules']:,} rules, {case['shapes']} shape(s)"
            target = _target(name, case["ns_above_floor"] - off["ns_above_floor"], CACHE_NOISE_NS)
            targets.append(target)
    return targets


def _grid(cases: Sequence[dict[str, Any]], cell: Callable[[dict[str, Any]], str]) -> list[str]:
    """Markdown: one row per (rules, shapes, cache), one column per flow count."""
    flows = sorted({case["flows"] for case in cases})
    rows = sorted({(case["rules"], case["shapes"], case["cache"]) for case in cases}, key=lambda r: (r[0], r[1], not r[2]))
    header = "| rules | shapes | flow cache | " + " | ".join(f"{n:,} flows" for n in flows) + " |"
    lines = [header, "|" + "---|" * (3 + len(flows))]
    for rules, shapes, cache in rows:
        cells = []
        for n in flows:
            case = _find(cases, flows=n, rules=rules, shapes=shapes, cache=cache)
            cells.append(cell(case) if case else "")
        lines.append(f"| {rules:,} | {shapes} | {'on' if cache else 'off'} | " + " | ".join(cells) + " |")
    return lines


def _versus(case: dict[str, Any]) -> str:
    """HEAD / baseline ns above the floor (HEAD / baseline)."""
    if "baseline_ns_above_floor" not in case:
        return f"{case['ns_above_floor']:.0f} / -"
    ratio = case["above_floor_ratio_to_baseline"]
    shown = f"{ratio:.2f}" if ratio is not None else "-"
    return f"{case['ns_above_floor']:.0f} / {case['baseline_ns_above_floor']:.0f} ({shown})"


def format_table(result: dict[str, Any]) -> str:
    """Markdown: ns above the floor per (rules, shapes, cache) and flow count; with a --baseline
    revision, a second table of HEAD / baseline and their ratio."""
    cases = result["cases"]
    flows = sorted({case["flows"] for case in cases})
    lines = _grid(cases, lambda case: f"{case['ns_above_floor']:.0f}")
    floors = ", ".join(f"{n:,} flows {result['floor_ns'][str(n)]:.0f}" for n in flows)
    lines.append("")
    lines.append(f"ns per packet above the floor (median of {result['runs']} runs); floor: {floors} ns.")
    revision = result.get("baseline")
    if revision:
        lines += ["", *_grid(cases, _versus), ""]
        lines.append(
            f"HEAD / baseline {revision['rev']} ({revision['commit'][:12]}): ns per packet above the floor and "
            "their ratio, from the same interleaved runs and floor. 1 flow: one flow repeated, hot in the CPU "
            "caches; more flows: every repetition another flow, cold."
        )
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m bench.flows.report RESULT.json`: the README's table of a result document."""
    import argparse
    import json
    from pathlib import Path

    parser = argparse.ArgumentParser(prog="python -m bench.flows.report", description=main.__doc__)
    parser.add_argument("result", type=Path)
    args = parser.parse_args(argv)
    print(format_table(json.loads(args.result.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
