"""A session in the hash against one in the index (bench/atsss/placement.py): both objects send the
UE's packet (the case checks the verdict), and the hash's way executes more instructions: the
index's bucket read and missed, then the hash's lookup."""

from __future__ import annotations

import json

from bench.atsss import __main__ as atsss_main
from bench.atsss import placement
from tests.utils.kernel import require_kernel


def test_a_session_in_the_hash_is_found_after_the_index_misses(tmp_path, monkeypatch):
    require_kernel()
    for module in (atsss_main, placement):  # 100 sessions for the cold rows: the bench's shape, less to write
        monkeypatch.setattr(module, "SESSIONS", 100)
    out = tmp_path / "placement.json"
    assert placement.main(["--runs", "2", "--repeat", "200", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [row["sessions"] for row in rows] == [1, 100]
    # Both places sent the UE's packet (path_instructions holds each to XDP_TX and the kernel's frame:
    # the hash's object has no session in the index, so its session was found after the index missed).
    # Their instruction counts are not compared: the index's way requests its paired paths' lines
    # (atsss_touch_paths), which the hash's does not, and runs more instructions for it.
    counts = rows[0]["instructions"]
    assert set(counts) == {"index", "hash"} and all(counts.values()), counts
