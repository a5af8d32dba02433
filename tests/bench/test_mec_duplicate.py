"""The duplicate benchmark (bench/mec/duplicate.py): a small run with and without other groups on the
node, each run's copies checked (a port that got a copy not its group's stops the run), a row per
case."""

from __future__ import annotations

import json

from bench.mec import duplicate
from tests.utils.kernel import require_kernel


def test_a_small_run_checks_every_runs_copies_and_writes_a_row_per_case(tmp_path):
    require_kernel()
    out = tmp_path / "mec_duplicate.json"
    assert duplicate.main(["--others", "0", "2", "--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [row["other_groups"] for row in rows] == [0, 2]
    assert all(row["head_ns"] > row["live_floor_ns"] > 0 for row in rows)
