"""The MEC 011 benchmark (bench/mec): a small run through a real `netapp serve` fills its rules,
checks sampled PUTs in dpp_rules (a PUT whose entry is not there stops the run) and finds the
installed entries those of the native intents."""

from __future__ import annotations

import json

import pytest

from bench.mec import __main__ as mec_main
from tests.utils.kernel import require_kernel

pytestmark = pytest.mark.slow


def test_a_small_run_checks_its_puts_in_the_maps_and_finds_the_native_entries(tmp_path):
    require_kernel()
    out = tmp_path / "mec.json"
    assert mec_main.main(["--rules", "130", "--puts", "40", "--warmup", "5", "--sample-every", "2",
                          "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["fill"]["applications"] == 3 and result["put"]["errors"] == 0
    assert result["put"]["checked_in_maps"] == 20
    assert result["equivalence"]["identical"] == result["equivalence"]["sampled"] > 0
