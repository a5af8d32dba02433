"""The load-cost benchmark (bench/load_cost.py): the verifier's statistics are read from its log, and
a load of a real object reports every program's, with the same counts for the same object loaded
twice (the verifier's walk does not depend on the machine's load, its time does)."""

from __future__ import annotations

import json

from bench import load_cost
from tests.utils.kernel import require_kernel

STATS_LOG = """func#0 @0
verification time 1532 usec
stack depth 280+8
processed 4321 insns (limit 1000000) max_states_per_insn 3 total_states 210 peak_states 99 mark_read 0
"""


def test_the_statistics_are_read_from_the_verifiers_log():
    assert load_cost.parse_stats(STATS_LOG) == {
        "usec": 1532,
        "insns": 4321,
        "total_states": 210,
        "peak_states": 99,
        "max_states_per_insn": 3,
    }


def test_a_log_without_statistics_gives_none():
    assert load_cost.parse_stats("0: (b7) r0 = 2\n1: (95) exit\n") == {}


def test_a_load_reports_every_program_and_the_other_builds_beside_it(tmp_path):
    require_kernel()
    police = load_cost.REPO / "dataplane" / "build" / "xdp_police.bpf.o"
    out = tmp_path / "load.json"
    assert load_cost.main(["--object", str(police), "--before", str(police), "--runs", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    this, before = result["this"], result["baseline"]
    assert this["programs"], "the object's programs were loaded with their statistics"
    for name, program in this["programs"].items():
        assert program["insns"] > 0 and program["total_states"] > 0, name
        assert (program["insns"], program["total_states"]) == (
            before["programs"][name]["insns"],
            before["programs"][name]["total_states"],
        )
    assert this["insns"] == sum(p["insns"] for p in this["programs"].values())
    assert this["load_s"] > 0
