"""The hot-path benchmark (bench/dataplane.py) with --baseline: this checkout's own commit as the
revision, whose exported bench/ and netapp open and grow the baseline's instances in a process of
their own; both sides are checked and timed in the same runs and paired case by case."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench import dataplane, workload
from bench.report import format_table
from tests.bench.conftest import BASELINE_TIMEOUT
from tests.utils.kernel import require_kernel

REPO = Path(__file__).resolve().parents[2]
SMALL = ["--levels", "1,20", "--runs", "2", "--repeat", "50"]


@pytest.fixture
def own_build(shared_baselines, monkeypatch):
    require_kernel()
    monkeypatch.setattr(dataplane, "prepare_baseline", shared_baselines)


@BASELINE_TIMEOUT
def test_a_baseline_revision_is_measured_beside_head_and_paired_with_it(own_build, tmp_path):
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    out = tmp_path / "dataplane.json"
    assert dataplane.main(["--out", str(out), *SMALL, "--baseline", "HEAD"]) == 0
    result = json.loads(out.read_text())
    revision = result["baseline"]
    assert (revision["rev"], revision["commit"]) == ("HEAD", commit)
    assert revision["netapp"] == f"baseline-{commit[:12]}/netapp"  # the export's, not this checkout's
    for mode in ("cases", "uncached"):
        head = {(c["name"], c["rules"]): c for c in result[mode]}
        base = {(c["name"], c["rules"]): c for c in revision[mode]}
        assert set(head) == set(base) == {(case, rules) for case in workload.CASES for rules in (1, 20)}
        for point, case in head.items():
            other = base[point]
            assert len(case["samples_ns"]) == len(other["samples_ns"]) == 2
            assert other["ns"] > 0 and (other["shapes"], other["verdict"]) == (case["shapes"], case["verdict"])
            assert case["baseline_ns_above_floor"] == other["ns_above_floor"]
            assert case["ratio_to_baseline"] == other["ratio_to_baseline"] == case["ns"] / other["ns"]
    # Both sides grew their shared instances from 6 to 20 rules, each mode in one batch.
    assert revision["install"]["rules"] == result["install"]["rules"] == 2 * (20 - 6)
    assert f"HEAD against baseline HEAD ({commit[:12]})" in format_table(result)


@BASELINE_TIMEOUT
def test_a_baseline_that_expects_another_path_stops_the_run_before_timing(own_build, tmp_path, monkeypatch, capsys):
    """The baseline's own workload says what each case must do; HEAD's saying otherwise (as a
    revision whose cases changed would) stops the run with exit 3 and writes nothing."""
    monkeypatch.setattr(workload, "CASE_PIPELINE_ACTIONS", workload.CASE_PIPELINE_ACTIONS | {"drop": "pass"})
    out = tmp_path / "dataplane.json"
    assert dataplane.main(["--out", str(out), *SMALL, "--baseline", "HEAD"]) == 3
    assert not out.exists()
    assert "the baseline's dataplane workload differs from HEAD's (actions:" in capsys.readouterr().err
