"""The counters' layout benchmark (bench/qos/layouts.py): a small run of two trees (this one twice)
decides as every case says and writes each tree's figures; the line probe finds every value of a
fresh per-CPU array and says which of them cross a cache line."""

from __future__ import annotations

import json

from bench.harness import DATAPLANE
from bench.qos import layouts
from netapp.qos.abi import POLICER_STATS_SIZE
from tests.utils.kernel import require_kernel


def test_a_small_run_of_two_trees_takes_every_case_and_compares_them(tmp_path):
    require_kernel()
    out = tmp_path / "layouts.json"
    argv = ["--tree", f"a={DATAPLANE}", "--tree", f"b={DATAPLANE}", "--policers", "50", "--runs", "1",
            "--repeat", "500", "--out", str(out)]
    assert layouts.main(argv) == 0
    result = json.loads(out.read_text())
    assert [row["case"] for row in result["results"]] == list(layouts.DEFAULT_CASES)
    assert all(set(row["above_without_blocks_ns"]) == {"a", "b"} and set(row["minus_b_blocks_ns"]) == {"a"}
               for row in result["results"])
    assert result["percpu_lines"]["a"]["stats_bytes"] == POLICER_STATS_SIZE


def test_the_line_probe_counts_every_value_once_and_those_past_a_lines_end_as_crossing():
    require_kernel()
    size = 40
    found = layouts.crossing_share(size, 3000)
    shares = {int(offset): share for offset, share in found["at_offset"].items()}
    assert abs(sum(shares.values()) - 1) < 1e-9
    assert all(offset % 8 == 0 for offset in shares), "the kernel aligns per-CPU values to 8 bytes"
    crossing = sum(share for offset, share in shares.items() if offset + size > layouts.LINE)
    assert abs(found["crossing"] - crossing) < 1e-9
