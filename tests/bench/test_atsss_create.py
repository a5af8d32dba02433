"""The ATSSS create benchmark (bench/atsss/create.py): a small run over the kernel's maps times every
create, each checked in dpp_atsss_paths by the run itself (a slot missing stops it), and writes a
row per count."""

from __future__ import annotations

import json

from bench.atsss import create
from tests.utils.kernel import require_kernel


def test_a_small_run_times_every_create_and_writes_a_row_per_count(tmp_path):
    require_kernel()
    out = tmp_path / "atsss_create.json"
    assert create.main(["--sessions", "30", "--creates", "6", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(row["sessions"], row["side"], row["creates"]) for row in rows] == [(30, "HEAD", 6)]
    assert all(row["p50_ms"] > 0 for row in rows)
