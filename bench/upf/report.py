"""The UPF benchmark's result document, its targets (reported, not asserted) and its table."""

from __future__ import annotations

import statistics
from typing import Any, Optional, Sequence

from bench.baseline import pair
from bench.upf.run import Level
from bench.upf.workload import CASES

# Issue 17's targets, ns above the floor.
HOT_TARGETS = {"uplink": 55, "downlink": 60, "downlink_pool": 60, "miss": 20}  # one hot session
MANY_ACTIVE = 1_000_000
MANY_ACTIVE_TARGETS = {"uplink": 300}  # a million active sessions
EUPF_QUOTED = {
    "source": "issue 17, quoted: not measured here",
    "uplink_1_session_ns": 76,
    "uplink_1m_active_ns": 773,
}


def case_results(level: Level, version: str = "") -> list[dict[str, Any]]:
    """The level's results of HEAD's cases, or with `version` ("baseline") of the --baseline
    revision's (its subjects "baseline/<case>"), each against the same floor."""
    results = []
    for name, case in CASES.items():
        key = f"{version}/{name}" if version else name
        if key not in level.samples:
            continue
        samples = level.samples[key]
        floors = level.samples[f"floor/{case.floor}"]
        above = [sample - floor for sample, floor in zip(samples, floors)]
        results.append(
            {
                "case": name,
                "title": case.title,
                "installed": level.installed,
                "active": level.active,
                "hot": level.active == 1,
                "ns": statistics.median(samples),
                "ns_above_floor": statistics.median(above),
                "min_above_floor": min(above),
                "max_above_floor": max(above),
                "floor_ns": statistics.median(floors),
                "verdict": case.verdict,
                "repeat": level.repeat,
                "samples_ns": samples,
                "floor_samples_ns": floors,
            }
        )
    return results


def baseline_result(levels: Sequence[Level], head_cases: Sequence[dict[str, Any]],
                    revision: dict[str, Any]) -> dict[str, Any]:
    """The --baseline revision's cases, from the same runs and floors as HEAD's; each and its HEAD
    case get the other's figures and the ratios HEAD / baseline (bench.baseline.pair)."""
    cases = [case for level in levels for case in case_results(level, "baseline")]
    for case in cases:
        head = _find(head_cases, case=case["case"], installed=case["installed"], active=case["active"])
        if head is not None:
            pair(head, case)
            # both timed in each run: their difference run by run cancels what the run shares
            differences = [mine - theirs for mine, theirs in zip(head["samples_ns"], case["samples_ns"])]
            case["head_minus_baseline_ns"] = head["minus_baseline_ns"] = statistics.median(differences)
            quartiles = statistics.quantiles(differences, n=4) if len(differences) > 1 else differences * 3
            case["head_minus_baseline_iqr_ns"] = head["minus_baseline_iqr_ns"] = [quartiles[0], quartiles[2]]
    return {
        **revision,
        "cases": cases,
        "note": "opened and filled by the revision's own bench/upf and netapp in a process of its own (in "
        "the same namespace), timed through HEAD's harness in the same interleaved runs and against the same "
        "floors as HEAD's cases; ratio_to_baseline = HEAD ns / baseline ns (floor included)",
    }


def format_baseline(result: dict[str, Any]) -> str:
    """Markdown: each case the baseline has, ns above the floor, baseline -> HEAD, per (installed, active)."""
    revision = result["baseline"]
    lines = [f"Against {revision['rev']} ({revision['commit'][:12]}), same runs: ns above the floor (medians), "
             "and HEAD - baseline, the median of its run-by-run differences (interquartile range)", "",
             "| case | installed | active | baseline | HEAD | HEAD - baseline |", "|---|---|---|---|---|---|"]
    for case in revision["cases"]:
        low, high = case["head_minus_baseline_iqr_ns"]
        lines.append(f"| {CASES[case['case']].title} | {case['installed']:,} | {case['active']:,} | "
                     f"{case['ns_above_floor']:.0f} | {case['head_ns_above_floor']:.0f} | "
                     f"{case['head_minus_baseline_ns']:+.0f} ({low:+.0f} to {high:+.0f}) |")
    return "\n".join(lines)


def _find(cases: Sequence[dict[str, Any]], **where: Any) -> Optional[dict[str, Any]]:
    return next((c for c in cases if all(c[k] == v for k, v in where.items())), None)


def _target(name: str, case: dict[str, Any], limit: int) -> dict[str, Any]:
    value = case["ns_above_floor"]
    return {"name": name, "value": value, "limit": limit, "unit": "ns above the floor", "met": value <= limit}


def evaluate_targets(cases: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every hot (one active session) case with a target at every session count, and the million
    active sessions' uplink; met or missed, reported, never asserted."""
    targets = []
    for name, limit in HOT_TARGETS.items():
        for case in cases:
            if case["case"] == name and case["active"] == 1:
                title = f"one hot session, {CASES[name].title}, {case['installed']:,} installed"
                targets.append(_target(title, case, limit))
    for name, limit in MANY_ACTIVE_TARGETS.items():
        case = _find(cases, case=name, active=MANY_ACTIVE)
        if case:
            title = f"{MANY_ACTIVE:,} active sessions, {CASES[name].title}, {case['installed']:,} installed"
            targets.append(_target(title, case, limit))
    return targets


def _column(installed: int, active: int) -> str:
    hot = " (hot: best case)" if active == 1 else ""
    return f"{installed:,} installed, {active:,} active{hot}"


def format_table(result: dict[str, Any]) -> str:
    """Markdown: ns above the floor (and the total) per case and (installed, active)."""
    cases = result["cases"]
    columns = sorted({(case["installed"], case["active"]) for case in cases})
    limits = {name: f"≤ {limit}" for name, limit in HOT_TARGETS.items()}
    for name, limit in MANY_ACTIVE_TARGETS.items():
        limits[name] = f"{limits[name]} hot, ≤ {limit} at {MANY_ACTIVE:,} active"
    lines = ["| case | " + " | ".join(_column(*column) for column in columns) + " | target |"]
    lines.append("|" + "---|" * (len(columns) + 2))
    measured = {case["case"] for case in cases}
    for name, case in CASES.items():
        if name not in measured:  # a case the result predates
            continue
        cells = []
        for installed, active in columns:
            found = _find(cases, case=name, installed=installed, active=active)
            cells.append(f"{found['ns_above_floor']:.0f} ({found['ns']:.0f})" if found else "")
        lines.append(f"| {case.title} | " + " | ".join(cells) + f" | {limits.get(name, '')} |")
    floors = ", ".join(
        f"{level['installed']:,}/{level['active']:,}: {level['uplink']:.0f} / {level['downlink']:.0f}"
        for level in result["floor_ns"]
    )
    lines.append("")
    lines.append(
        f"ns per packet above the floor (total in brackets), median of {result['runs']} runs; floor "
        f"(installed/active: uplink / downlink packet) {floors} ns."
    )
    met = sum(target["met"] for target in result["targets"])
    lines.append(f"Targets met: {met} of {len(result['targets'])}.")
    for target in result["targets"]:
        verdict = "met" if target["met"] else "MISSED"
        lines.append(f"- {target['name']}: {target['value']:.0f} ns, target ≤ {target['limit']}: {verdict}")
    usage = result.get("urr_usage")
    if usage:
        lines.append(
            f"URR slots: {usage['slots']:,} per instance, one per session (dpp_upf_usage, sized at load, "
            f"shared by the CPUs): {usage['bytes'] / 2**20:.0f} MiB per instance."
        )
    eupf = result["eupf_quoted"]
    lines.append(
        f"eUPF's uplink, {eupf['source']}: {eupf['uplink_1_session_ns']} ns with one session, "
        f"{eupf['uplink_1m_active_ns']} ns with 1M active."
    )
    return "\n".join(lines)


if __name__ == "__main__":  # python -m bench.upf.report RESULT.json: the README's table of a result
    import json
    import sys
    from pathlib import Path

    print(format_table(json.loads(Path(sys.argv[1]).read_text())))
