"""The routing benchmark (bench/routing): a small run in the kernel answers as every case says (a
lookup that misses where the case hits stops the run), and writes its rows."""

from __future__ import annotations

import json

from bench.routing import __main__ as routing_main
from tests.utils.kernel import require_kernel


def test_a_small_run_takes_every_case_and_writes_a_row_for_each(tmp_path):
    require_kernel()
    out = tmp_path / "routing.json"
    assert routing_main.main(["--routes", "10,20", "--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [row["case"] for row in rows] == [
        "private", "private", "private_cached", "fib", "fib_cached", "private", "private", "private_cached"
    ]
    assert all(row["with_lookup_ns"] > 0 for row in rows)
