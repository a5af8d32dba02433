"""The FRER benchmarks (bench/frer): a small run of each in the kernel decides as every case says (a
verdict other than the case's stops the run) and writes its rows; the replication run carries the
broadcast out into real veth ports."""

from __future__ import annotations

import json

from bench.frer import __main__ as frer_main
from bench.frer import replicate
from tests.utils.kernel import require_kernel


def test_a_small_elimination_run_takes_every_case_and_writes_a_row_for_each(tmp_path):
    require_kernel()
    out = tmp_path / "frer.json"
    assert frer_main.main(["--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [row["case"].split(",")[0] for row in rows] == ["in order", "in order", "duplicate", "duplicate"]
    assert all(row["with_recovery_ns"] > 0 for row in rows)


def test_a_small_replication_run_adds_its_row(tmp_path):
    require_kernel()
    out = tmp_path / "frer.json"
    assert frer_main.main(["--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    assert replicate.main(["--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["replicate"]
    assert [row["case"].split(",")[1].strip() for row in rows][:1] == ["1 stream (hot"]
    assert all(row["replicate_ns"] > 0 and row["broadcast_ns"] > 0 for row in rows)
