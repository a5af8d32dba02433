"""The PFCP benchmark (bench/pfcp.py), small runs: every establishment accepted by a real endpoint in
a process of its own (a refusal stops the run), the endpoint holding each one, the fast path taking
every timed one (the warm-up taught it the shape); with the data path, its applier reconciled at
start as `netapp serve` reconciles it (no bucket of dpp_upf_dl4 left to read by a change)."""

from __future__ import annotations

import json
import subprocess

from bench import pfcp
from bench.harness import REPO
from tests.bench.conftest import BASELINE_TIMEOUT
from tests.utils.kernel import require_kernel


def _run(tmp_path, *args: str) -> dict:
    out = tmp_path / "pfcp.json"
    assert pfcp.main(["--out", str(out), "--sessions", "300", "--warmup", "20", *args]) == 0
    return json.loads(out.read_text())


def _check(result: dict) -> None:
    counters = result["endpoint"]["counters"]
    assert result["endpoint"]["sessions"] == 320 and counters["accepted"] == 320 + 1, "and the Association Setup"
    assert counters["accepted_from_template"] >= 300, "every timed one: the shape was learnt in the warm-up"
    assert result["latency"]["count"] == 300 and result["establishments_per_s"] > 0
    assert {target["name"] for target in result["targets"]} == {"establishments_per_s", "p99_ms"}


def test_a_small_run_without_a_data_path(tmp_path):
    result = _run(tmp_path, "--applier", "none", "--no-sdf")
    _check(result)
    assert not result["maps_in_figure"]


def test_a_small_run_with_the_maps(tmp_path):
    require_kernel()
    result = _run(tmp_path, "--applier", "dpp")
    _check(result)
    assert result["maps_in_figure"] and result["settings"]["sdf_filters"] is False


def test_the_applier_starts_reconciled_with_every_bucket_known():
    """A change reads the dpp_upf_dl4 buckets it does not know from the kernel; `netapp serve`'s
    reconcile at start reads the table whole, and the bench's applier must start the same way."""
    require_kernel()
    with pfcp.dpp_applier() as applier:
        assert applier._ways._known == set(range(1 << applier._ways.bits))


@BASELINE_TIMEOUT
def test_a_baseline_revision_is_timed_in_the_same_run_by_its_own_code(tmp_path, monkeypatch, shared_baselines):
    """--baseline: the revision's endpoint (its export's netapp, checked by the endpoint itself as it
    starts) answers the same requests; both sides' figures in one result, in pairs whose order
    alternates (the first pair the baseline first, the second HEAD first). Exported into the run's
    shared temporary directory (conftest.py), not bench/build/; without a data path, its data plane
    is not built here (the other --baseline tests build it)."""
    monkeypatch.setattr(pfcp, "prepare_baseline", shared_baselines)
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    result = _run(tmp_path, "--applier", "none", "--no-sdf", "--sessions", "100", "--baseline", "HEAD",
                  "--pairs", "2")
    revision = result["baseline"]
    assert (revision["rev"], revision["commit"]) == ("HEAD", commit)
    assert [pair["order"] for pair in result["pairs"]] == [pfcp.BASELINE_FIRST, pfcp.HEAD_FIRST]
    for pair in result["pairs"]:
        for side in ("baseline", "head"):
            assert pair[side]["endpoint"]["sessions"] == 120 and pair[side]["latency"]["count"] == 100
            assert pair[side]["endpoint"]["counters"]["accepted_from_template"] >= 100
    assert result["endpoint"] == result["pairs"][0]["head"]["endpoint"]
    assert {order: [len(runs) for runs in sides.values()] for order, sides in result["by_order"].items()} == {
        pfcp.BASELINE_FIRST: [1, 1], pfcp.HEAD_FIRST: [1, 1]}
    table = pfcp.format_table(result)
    assert f"baseline  HEAD ({commit[:12]})" in table
    assert "pair 1 (baseline first): baseline " in table and "pair 2 (head first): head " in table


def test_pairs_alternate_which_side_is_timed_first():
    assert [pfcp.pair_order(index) for index in range(4)] == [
        pfcp.BASELINE_FIRST, pfcp.HEAD_FIRST, pfcp.BASELINE_FIRST, pfcp.HEAD_FIRST]
