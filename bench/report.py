"""Turn per-run samples into the result document, a readable table, and a plot."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from bench.baseline import pair
from bench.instances import BASELINE
from bench.measure import EMPTY_DIRECT, FLOOR, subject_key
from bench.workload import CASE_VERDICT_NAMES, CASES

MODES = ("cached", "uncached")
# Targets, reported against and never asserted: ns above the floor with the flow cache on.
TARGET_ABOVE_FLOOR_NS = {"miss": 20.0, "steer": 40.0, "forward": 50.0}
TARGET_SCALING = 0.15  # the largest rule count within 15% of 1 rule, above the floor
SCALING_FROM, SCALING_TO = 1, 1_000_000


@dataclass
class LevelResult:
    """One rule count: every subject's per-run ns, and the shape count of each case's instance."""

    rules: int
    samples: dict[str, list[int]]
    shapes: dict[str, int]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def case_result(level: LevelResult, mode: str, case: str, cache_min_shapes: int) -> dict[str, Any]:
    """ns is the median of the runs; ns_above_floor the median of per-run differences to the floor
    measured in the same run (paired, so noise common to both cancels). cache_min_shapes: the
    pipeline's DPP_CACHE_MIN_SHAPES."""
    key = subject_key(mode, case)
    samples, floor = level.samples[key], level.samples[FLOOR]
    above = [sample - base for sample, base in zip(samples, floor, strict=True)]
    shapes = level.shapes[key]
    return {
        "name": case,
        "rules": level.rules,
        "ns": median(samples),
        "ns_above_floor": median(above),
        "min_ns": min(samples),
        "max_ns": max(samples),
        "min_above_floor": min(above),
        "max_above_floor": max(above),
        "floor_ns": median(floor),
        "shapes": shapes,
        "flow_cache": not mode.endswith("uncached"),
        # The pipeline consults the cache from DPP_CACHE_MIN_SHAPES shapes on (classify.h).
        "flow_cache_consulted": not mode.endswith("uncached") and shapes >= cache_min_shapes,
        "verdict": CASE_VERDICT_NAMES[case],
        "samples_ns": samples,
    }


def mode_results(levels: Iterable[LevelResult], mode: str, cache_min_shapes: int) -> list[dict[str, Any]]:
    return [case_result(level, mode, case, cache_min_shapes) for level in levels for case in CASES]


def _find(cases: Sequence[dict[str, Any]], name: str, rules: int) -> Optional[dict[str, Any]]:
    return next((case for case in cases if case["name"] == name and case["rules"] == rules), None)


def evaluate_targets(
    cases: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The targets, plus (not a target) the largest rule count against the smallest one that has
    every shape: growth there is due to rules alone, not to more shapes to search."""
    rows = []
    for name, limit in TARGET_ABOVE_FLOOR_NS.items():
        values = [case["ns_above_floor"] for case in cases if case["name"] == name]
        if values:
            rows.append(
                {
                    "target": f"{name} <= {limit:g} ns above floor (worst rule count)",
                    "value": max(values),
                    "limit": limit,
                    "unit": "ns",
                    "met": max(values) <= limit,
                }
            )
    for name in CASES:
        small, large = _find(cases, name, SCALING_FROM), _find(cases, name, SCALING_TO)
        if small and large and small["ns_above_floor"] > 0:
            growth = large["ns_above_floor"] / small["ns_above_floor"] - 1
            rows.append(
                {
                    "target": f"{name}: {SCALING_TO:,} rules within {TARGET_SCALING:.0%} of {SCALING_FROM} "
                    "(above floor)",
                    "value": growth,
                    "limit": TARGET_SCALING,
                    "unit": "fraction",
                    "met": growth <= TARGET_SCALING,
                }
            )
    for name in CASES:
        small, large = next((c for c in baseline if c["name"] == name), None), _find(cases, name, SCALING_TO)
        if small and large and small["ns_above_floor"] > 0:
            growth = large["ns_above_floor"] / small["ns_above_floor"] - 1
            rows.append(
                {
                    "target": f"{name}: {SCALING_TO:,} rules within {TARGET_SCALING:.0%} of {small['rules']} "
                    f"over the same four shapes (above floor)",
                    "value": growth,
                    "limit": TARGET_SCALING,
                    "unit": "fraction",
                    "met": growth <= TARGET_SCALING,
                }
            )
    return rows


def compare_to_baseline(head: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]]) -> None:
    """Add to every case (of both) the other's figures and the ratios HEAD / baseline: of ns (floor
    included, ratio_to_baseline) and of ns above the floor (above_floor_ratio_to_baseline)."""
    for case in head:
        other = _find(baseline, case["name"], case["rules"])
        if other is not None:
            pair(case, other)


def build_result(
    levels: Sequence[LevelResult],
    baseline: Optional[LevelResult],
    installs: dict[str, Any],
    meta: dict[str, Any],
    cache_min_shapes: dict[str, int],
    revision: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    """cache_min_shapes: DPP_CACHE_MIN_SHAPES per pipeline version ("" for HEAD, "baseline").
    revision: the --baseline revision's description, when one was measured beside HEAD."""
    floors = [ns for level in levels for ns in level.samples[FLOOR]]
    directs = [ns for level in levels for ns in level.samples[EMPTY_DIRECT]]
    min_shapes = cache_min_shapes[""]
    base = {mode: mode_results([baseline], mode, min_shapes) if baseline else [] for mode in MODES}
    cases, uncached = mode_results(levels, "cached", min_shapes), mode_results(levels, "uncached", min_shapes)
    result: dict[str, Any] = {
        "floor_ns": median(floors),
        "empty_direct_ns": median(directs),
        "cases": cases,
        "uncached": uncached,
        "install_rules_per_s": installs["rules_per_s"],
        "install": installs,
        "targets": evaluate_targets(cases, base["cached"]),
        "targets_uncached": evaluate_targets(uncached, base["uncached"]),
    }
    if baseline is not None:
        result["four_shape_baseline"] = {
            "rules": baseline.rules,
            "cases": base["cached"],
            "uncached": base["uncached"],
        }
    if revision is not None:
        result["baseline"] = revision_result(levels, baseline, revision, cache_min_shapes[BASELINE], result)
    result.update(meta)
    return result


def revision_result(
    levels: Sequence[LevelResult],
    four_shapes: Optional[LevelResult],
    revision: dict[str, Any],
    cache_min_shapes: int,
    head: dict[str, Any],
) -> dict[str, Any]:
    """The --baseline revision's cases, from the same runs as HEAD's, each paired with HEAD's."""
    modes = {mode: f"{BASELINE}:{mode}" for mode in MODES}
    cases = {mode: mode_results(levels, modes[mode], cache_min_shapes) for mode in MODES}
    four = {
        mode: mode_results([four_shapes], modes[mode], cache_min_shapes) if four_shapes else []
        for mode in MODES
    }
    compare_to_baseline(head["cases"], cases["cached"])
    compare_to_baseline(head["uncached"], cases["uncached"])
    if four_shapes is not None:
        compare_to_baseline(head["four_shape_baseline"]["cases"], four["cached"])
        compare_to_baseline(head["four_shape_baseline"]["uncached"], four["uncached"])
    return {
        **revision,
        "cache_min_shapes": cache_min_shapes,
        "cases": cases["cached"],
        "uncached": cases["uncached"],
        "four_shape_baseline": {"rules": four_shapes.rules if four_shapes else None, **four},
        "note": "measured in the same interleaved runs as HEAD, against the same floor; ratio_to_baseline "
        "= HEAD ns / baseline ns (floor included), above_floor_ratio_to_baseline = the same above the floor",
    }


# --- table ---------------------------------------------------------------------------------------

_HALF = "{ns:>7} {above:>8} {spread:>10}"  # one cache mode's columns
_ROW = "{name:<8} {rules:>9} {shapes:>6}   {cached}   {uncached}"


def _half(case: Optional[dict[str, Any]]) -> str:
    if case is None:
        return _HALF.format(ns="", above="", spread="")
    spread = f"{case['min_ns']}-{case['max_ns']}"
    return _HALF.format(ns=f"{case['ns']:.1f}", above=f"{case['ns_above_floor']:.1f}", spread=spread)


def _section(cases: Sequence[dict[str, Any]], uncached: Sequence[dict[str, Any]]) -> list[str]:
    lines = []
    for case in sorted(cases, key=lambda c: (CASES.index(c["name"]), c["rules"])):
        other = _find(uncached, case["name"], case["rules"])
        lines.append(
            _ROW.format(
                name=case["name"],
                rules=f"{case['rules']:,}",
                shapes=case["shapes"],
                cached=_half(case),
                uncached=_half(other),
            )
        )
    return lines


def _header() -> list[str]:
    width = len(_HALF.format(ns="", above="", spread=""))
    columns = _HALF.format(ns="ns", above="-floor", spread="min-max")
    return [
        _ROW.format(
            name="",
            rules="",
            shapes="",
            cached=f"{'flow cache on':^{width}}",
            uncached=f"{'flow cache off':^{width}}",
        ),
        _ROW.format(name="case", rules="rules", shapes="shapes", cached=columns, uncached=columns),
    ]


_VS_HALF = "{ns:>6} {base:>6} {ratio:>6}   {above:>6} {base_above:>6} {ratio_above:>6}"
_VS_ROW = "{name:<8} {rules:>9} {shapes:>6}   {cached}   {uncached}"


def _vs_half(case: Optional[dict[str, Any]]) -> str:
    if case is None or "ratio_to_baseline" not in case:
        return _VS_HALF.format(ns="", base="", ratio="", above="", base_above="", ratio_above="")
    above_ratio = case["above_floor_ratio_to_baseline"]
    return _VS_HALF.format(
        ns=f"{case['ns']:.1f}",
        base=f"{case['baseline_ns']:.1f}",
        ratio=f"{case['ratio_to_baseline']:.2f}",
        above=f"{case['ns_above_floor']:.1f}",
        base_above=f"{case['baseline_ns_above_floor']:.1f}",
        ratio_above=f"{above_ratio:.2f}" if above_ratio is not None else "-",
    )


def _baseline_section(result: dict[str, Any]) -> list[str]:
    """HEAD against the --baseline revision, case by case, both from the same runs."""
    revision = result["baseline"]
    width = len(_VS_HALF.format(ns="", base="", ratio="", above="", base_above="", ratio_above=""))
    columns = _VS_HALF.format(
        ns="ns", base="base", ratio="ratio", above="-floor", base_above="base", ratio_above="ratio"
    )
    lines = [
        f"HEAD against baseline {revision['rev']} ({revision['commit'][:12]}), measured in the same runs; "
        "ratio = HEAD / baseline",
        _VS_ROW.format(
            name="",
            rules="",
            shapes="",
            cached=f"{'flow cache on':^{width}}",
            uncached=f"{'flow cache off':^{width}}",
        ),
        _VS_ROW.format(name="case", rules="rules", shapes="shapes", cached=columns, uncached=columns),
    ]
    four = result.get("four_shape_baseline", {"cases": [], "uncached": []})
    cases = [*result["cases"], *four["cases"]]
    uncached = [*result["uncached"], *four["uncached"]]
    for case in sorted(cases, key=lambda c: (CASES.index(c["name"]), c["rules"])):
        lines.append(
            _VS_ROW.format(
                name=case["name"],
                rules=f"{case['rules']:,}",
                shapes=case["shapes"],
                cached=_vs_half(case),
                uncached=_vs_half(_find(uncached, case["name"], case["rules"])),
            )
        )
    return lines


def _target_line(row: dict[str, Any]) -> str:
    value = f"{row['value']:+.0%}" if row["unit"] == "fraction" else f"{row['value']:.1f} ns"
    return f"  {'met   ' if row['met'] else 'MISSED'}  {row['target']}: {value}"


def format_table(result: dict[str, Any]) -> str:
    lines = [
        f"DPP data plane: ns/packet through BPF_PROG_TEST_RUN, median of {result['runs']} runs x "
        f"{result['repeat']:,} repetitions, kernel {result['kernel']}",
        f"floor (harness -> empty program): {result['floor_ns']:.1f} ns; "
        f"empty program without harness: {result['empty_direct_ns']:.1f} ns; "
        f"-floor: median of per-run differences to the floor",
        "",
        *_header(),
        *_section(result["cases"], result["uncached"]),
    ]
    baseline = result.get("four_shape_baseline")
    if baseline:
        lines += ["", f"reference: {baseline['rules']} rules, one or more in each of the four shapes"]
        lines += _section(baseline["cases"], baseline["uncached"])
    if "baseline" in result:
        lines += ["", *_baseline_section(result)]
    lines += ["", f"rule install through libdpp batches: {result['install_rules_per_s']:,.0f} rules/s"]
    lines += ["", "targets, flow cache on (reported, not asserted):"]
    lines += [_target_line(row) for row in result["targets"]]
    lines += ["", "flow cache off (for reference):"]
    lines += [_target_line(row) for row in result["targets_uncached"]]
    return "\n".join(lines)


# --- plot ----------------------------------------------------------------------------------------


def plot(result: dict[str, Any], path: Path) -> bool:
    """ns above the floor per case against installed rules (log x); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(8, 5))
    for index, name in enumerate(CASES):
        color = f"C{index}"
        for key, style, label in (("cases", "-o", "cache on"), ("uncached", "--s", "cache off")):
            baseline = result.get("four_shape_baseline", {}).get(key, [])
            points = sorted(
                (c["rules"], c["ns_above_floor"]) for c in [*result[key], *baseline] if c["name"] == name
            )
            if points:
                axes.plot(*zip(*points, strict=True), style, color=color, label=f"{name} ({label})")
        if name in TARGET_ABOVE_FLOOR_NS:
            axes.axhline(TARGET_ABOVE_FLOOR_NS[name], color=color, linestyle=":", linewidth=0.8)
    axes.set_xscale("log")
    axes.set_xlabel("installed rules")
    axes.set_ylabel("ns per packet above the floor")
    axes.set_title(f"DPP XDP pipeline cost (floor {result['floor_ns']:.0f} ns; dotted: targets)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small", ncol=2)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True
