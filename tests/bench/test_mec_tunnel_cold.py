"""The cold tunnel benchmark (bench/mec/tunnel_cold.py): a small run checks each case's frame against
scapy's and the last UE's peer before timing (a wrong path stops it: the run's exit status), and
reports every case above the floor."""

from __future__ import annotations

import json

import pytest

from bench.mec import tunnel_cold
from tests.utils.kernel import require_kernel

pytestmark = pytest.mark.slow


def test_a_small_run_checks_the_path_and_reports_each_case(tmp_path):
    require_kernel()
    out = tmp_path / "cold.json"
    assert tunnel_cold.main(["--rules", "40", "--peers", "7", "--runs", "1", "--repeat", "200", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["ns_above_floor"]) == set(tunnel_cold.CASES) and (result["rules"], result["peers"]) == (40, 7)
