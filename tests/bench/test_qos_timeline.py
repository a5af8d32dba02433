"""The policers' timeline (bench/qos/timeline.py): a small run on a veth link samples each algorithm's
delivered rate through an on, off, on pattern and writes a row of steps per algorithm."""

from __future__ import annotations

import json

from bench.qos import timeline
from netapp.qos.abi import Algo
from tests.utils.kernel import build_artifact, require_kernel


def test_a_small_run_samples_every_algorithm_through_on_and_off(tmp_path):
    require_kernel()
    build_artifact("dpp-pktgen")
    out = tmp_path / "timeline.json"
    assert timeline.main(["--rate", "1e7", "--on", "0.4", "--off", "0.4", "--step", "0.05", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    every = [algo.name.lower() for algo in Algo if algo is not Algo.NONE]  # the data plane's, not the bench's list
    assert [row["algorithm"] for row in rows] == every
    for row in rows:
        rates = [rate for _, rate in row["points"]]
        assert len(rates) >= 10
        assert max(rates) > 0  # the offered stretches got through
        assert min(rates) == 0  # and the silence between them delivered nothing
