"""The flow-mix benchmark (bench/flows): a small run in the kernel checks its own paths (every flow of
the walk once per walk, exact verdict and rule counts), and the report's targets and README table."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench import baseline
from bench.flows import __main__ as flows_main
from bench.flows import report, workload
from bench.flows.run import max_rules_for
from tests.bench.conftest import BASELINE_TIMEOUT
from tests.utils.kernel import require_kernel

REPO = Path(__file__).resolve().parents[2]


def test_the_walk_visits_every_flow_once_per_walk():
    for flows in (1, 7, 10_000, 100_000):
        walk = workload.walk(flows)
        assert sorted(walk.flow_at(step) for step in range(flows)) == list(range(flows))


def test_the_walk_rewrites_the_tunnel_and_the_ue_source_of_the_packet():
    walk, packet = workload.walk(10), workload.packet()
    assert packet[walk.teid_off : walk.teid_off + 4] == workload.TEID_BASE.to_bytes(4, "big")
    assert packet[walk.src_off : walk.src_off + 4] == workload.SRC_BASE.to_bytes(4, "big")


def test_every_shape_count_shares_one_map_size_per_rule_count():
    assert {max_rules_for(1_000_000, shapes) for shapes in (1, 4, 16)} == {1 << 21}


def test_a_small_run_checks_its_paths_and_reports_every_case(tmp_path):
    require_kernel()
    out = tmp_path / "flows.json"
    argv = ["--out", str(out), "--flows", "1,300", "--rules", "1,200", "--shapes", "1,4"]
    assert flows_main.main(argv + ["--runs", "1", "--repeat", "600"]) == 0
    result = json.loads(out.read_text())
    points = {(c["flows"], c["rules"], c["shapes"], c["cache"]) for c in result["cases"]}
    assert points == {(f, r, s, c) for f in (1, 300) for r in (1, 200) for s in (1, 4) for c in (True, False)}
    assert all(case["repeat"] % case["flows"] == 0 for case in result["cases"])


def _case(flows, shapes, cache, above):
    return {"flows": flows, "rules": 1_000_000, "shapes": shapes, "cache": cache, "ns_above_floor": above}


def test_targets_judge_the_million_flow_cases_and_a_slower_cache():
    cases = [
        _case(1_000_000, 1, True, 280),
        _case(1_000_000, 1, False, 290),
        _case(1_000_000, 16, True, 500),
        _case(1_000_000, 16, False, 440),
        _case(1, 1, True, 30),
        _case(1, 1, False, 60),
    ]
    met = {target["name"]: target["met"] for target in report.evaluate_targets(cases)}
    assert met["1M flows, 1M rules, 1 shape(s), cache on"] is True
    assert met["1M flows, 1M rules, 16 shape(s), cache on"] is False
    assert met["one hot flow, cached, 1,000,000 rules, 1 shape(s)"] is True
    assert met["cache on not slower than off: 1,000,000 flows, 1,000,000 rules, 16 shape(s)"] is False
    assert met["cache on not slower than off: 1,000,000 flows, 1,000,000 rules, 1 shape(s)"] is True


def test_the_readme_table_is_the_one_the_result_document_gives():
    result = json.loads((REPO / "bench/results/flows.json").read_text())
    assert report.format_table(result) in (REPO / "README.md").read_text(), (
        "README's flow-mix table: run python -m bench.flows.report bench/results/flows.json"
    )


@BASELINE_TIMEOUT
def test_a_baseline_revision_is_measured_beside_head_and_paired_with_it(tmp_path, monkeypatch, shared_baselines):
    """--baseline with this checkout's own commit as the revision: its exported bench/flows and netapp
    open the baseline's instances in a process of their own, and both sides are timed in the same runs."""
    require_kernel()
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    monkeypatch.setattr(flows_main, "prepare_baseline", shared_baselines)
    out = tmp_path / "flows.json"
    argv = ["--out", str(out), "--flows", "1,50", "--rules", "20", "--shapes", "2", "--runs", "2", "--repeat", "100"]
    assert flows_main.main(argv + ["--baseline", "HEAD"]) == 0
    result = json.loads(out.read_text())
    revision = result["baseline"]
    assert (revision["rev"], revision["commit"]) == ("HEAD", commit)
    assert revision["netapp"] == f"baseline-{commit[:12]}/netapp"  # the export's, not this checkout's
    head = {(c["flows"], c["cache"]): c for c in result["cases"]}
    base = {(c["flows"], c["cache"]): c for c in revision["cases"]}
    assert set(head) == set(base) == {(f, c) for f in (1, 50) for c in (True, False)}
    for point, case in head.items():
        other = base[point]
        assert len(case["samples_ns"]) == len(other["samples_ns"]) == 2
        assert other["ns"] > 0 and other["installed_rules"] == case["installed_rules"] == 2 * 20
        assert case["baseline_ns_above_floor"] == other["ns_above_floor"]
        assert case["ratio_to_baseline"] == other["ratio_to_baseline"] == case["ns"] / other["ns"]
        if other["ns_above_floor"] > 0:
            assert case["above_floor_ratio_to_baseline"] == case["ns_above_floor"] / other["ns_above_floor"]
    assert f"({commit[:12]})" in report.format_table(result)


def test_the_baseline_table_shows_both_sides_and_their_ratio():
    head = [{"flows": 10, "rules": 1, "shapes": 1, "cache": True, "ns": 150, "ns_above_floor": 30}]
    base = [{"flows": 10, "rules": 1, "shapes": 1, "cache": True, "ns": 160, "ns_above_floor": 40}]
    for case in base:
        baseline.pair(head[0], case)
    result = {"cases": head, "floor_ns": {"10": 120}, "runs": 1, "baseline": {"rev": "v1", "commit": "0" * 40}}
    assert "| 1 | 1 | on | 30 / 40 (0.75) |" in report.format_table(result)
    assert head[0]["ratio_to_baseline"] == base[0]["ratio_to_baseline"] == 150 / 160
