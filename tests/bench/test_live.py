"""The live-frame benchmark (bench/live.py): a short run carries out every frame (the pipeline's
counters say so, or it raises), the forwarded frames reach the peer veth, and its namespace goes."""

from __future__ import annotations

import json
import os
import subprocess

from bench import live
from tests.utils.kernel import require_kernel


def namespaces() -> set[str]:
    return set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


def test_a_short_run_carries_out_every_frame_and_leaves_no_namespace(tmp_path):
    require_kernel()
    before, cpus = namespaces(), os.sched_getaffinity(0)
    out = tmp_path / "live.json"
    assert live.main(["--out", str(out), "--runs", "1", "--repeat", "2000"]) == 0
    result = json.loads(out.read_text())
    assert {case["name"] for case in result["cases"]} == {"floor", "xdp_tx", "drop", "forward", "steer"}
    # The peer's ring may overflow on a loaded machine: what matters is that frames left the veth.
    assert 0 < result["received_by_peer"] <= result["sent_to_peer"] == 2 * 2000
    assert result["cpumap"]["queued"] >= 2000  # the tracepoint counts every CPUMAP of the machine
    assert not {name for name in namespaces() - before if name.startswith("dpp-live-")}
    assert os.sched_getaffinity(0) == cpus, "the benchmark gives its caller its CPUs back"
