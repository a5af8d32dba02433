"""Round-robin's downlink by stage (bench/atsss/stages.py, bench/bpf/atsss_stages.bpf.c): every
stage runs the ones before it and more, and the last is the downlink whole, as xdp_atsss runs it."""

from __future__ import annotations

import json

from bench.atsss import __main__ as atsss_main
from bench.atsss import stages
from bench.harness import DATAPLANE
from tests.utils.kernel import require_kernel

CASE = "round-robin, header checksum (CsCov 1)"


def test_each_stage_executes_more_than_the_one_before_and_the_last_is_xdp_atsss(tmp_path, monkeypatch):
    require_kernel()
    for module in (atsss_main, stages):  # 100 sessions for the cold rows: the bench's shape, less to write
        monkeypatch.setattr(module, "SESSIONS", 100)
    out = tmp_path / "stages.json"
    assert stages.main(["--schedulers", CASE, "--runs", "2", "--repeat", "200", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [row["sessions"] for row in rows] == [1, atsss_main.SESSIONS]
    counts = [rows[0]["stages"][stage]["instructions"] for stage in stages.STAGES]
    assert all(a < b for a, b in zip(counts, counts[1:])), counts
    bench = atsss_main.AtsssBench(DATAPLANE / "build")
    try:
        mode, weights, flags = atsss_main.MODES[CASE]
        bench.configure(mode, weights, flags)
        whole = atsss_main.path_instructions(bench, atsss_main.ue_frame(), atsss_main.XDP_TX)
    finally:
        bench.close()
    assert counts[-1] == whole
