"""The policer benchmarks (bench/qos, bench/qos/rule.py, bench/qos/rule_cold.py, bench/qos/precise.py,
bench/qos/upf_cost.py):
a small run in the kernel decides as every case says (a case whose policer passed when it should
drop, or the reverse, stops the run), and writes its rows with their spread."""

from __future__ import annotations

import json
import os

import pytest

from bench.qos import __main__ as qos_main
from bench.qos import clock_steps, precise
from bench.qos import rule as rule_bench
from bench.qos import rule_cold, upf_cost
from bench.harness import DATAPLANE
from bench.qos.run import CASES, start_clock
from netapp.qos.abi import Clock
from netapp.qos.applier import policer_value
from tests.qos.police import PoliceProgram
from tests.utils.kernel import require_kernel


def test_a_small_run_takes_every_case_and_writes_a_row_for_each(tmp_path):
    require_kernel()
    out = tmp_path / "qos.json"
    assert qos_main.main(["--policers", "1,3", "--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert len(rows) == 2 * len(CASES)
    assert all(row["with_policer_ns"] > 0 for row in rows)


def test_a_small_run_with_another_build_times_it_in_the_same_blocks(tmp_path):
    """--before with this tree's own dataplane/ (any tree's will do): a before_ns for every case, its
    verdicts checked as this build's."""
    require_kernel()
    out = tmp_path / "qos.json"
    argv = ["--policers", "1", "--runs", "1", "--repeat", "1000", "--before", str(DATAPLANE), "--out", str(out)]
    assert qos_main.main(argv) == 0
    rows = json.loads(out.read_text())["results"]
    assert len(rows) == len(CASES) and all(row["before_ns"] > 0 for row in rows)
    spread = rows[0]["minus_before_blocks_ns"]
    assert spread["min"] <= spread["q1"] <= spread["median"] <= spread["q3"] <= spread["max"]


def test_a_small_run_of_the_policed_rule_times_every_case_against_the_unpoliced_rule(tmp_path):
    """With --parts, the cases whose maps are altered after they are written too, each verdict checked
    (an alteration that left its rule deciding otherwise, e.g. no policer where it drops, stops it)."""
    require_kernel()
    out = tmp_path / "qos_rule.json"
    assert rule_bench.main(["--parts", "--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    rows = {row["case"]: row for row in json.loads(out.read_text())["results"]}
    assert set(rows) == set(rule_bench.CASES) | set(rule_bench.PARTS)
    assert all(row["ns"] > 0 and row["unpoliced_ns"] == rows["unpoliced"]["ns"] for row in rows.values())


def test_the_policed_rule_against_another_build_is_taken_block_by_block():
    """--before's rows: each build's case less its own unpoliced rule, and this build less the other's,
    taken within each block (the samples' i-th values ran in the same block)."""
    samples = {"floor": [10, 10, 10], "unpoliced": [100, 200, 100], "case": [130, 230, 140],
               "before unpoliced": [100, 210, 90], "before case": [150, 260, 150]}
    (row,) = rule_bench.rows(samples, ["case"], before=True)
    assert row["before_above_unpoliced_blocks_ns"]["median"] == 50
    assert row["minus_before_blocks_ns"]["median"] == -20
    assert row["above_unpoliced_blocks_ns"]["median"] == 30


def test_a_small_cold_run_of_policed_rules_times_every_kind_against_the_unpoliced_rules(tmp_path):
    require_kernel()
    out = tmp_path / "qos_rule_cold.json"
    assert rule_cold.main(["--rules", "16", "--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    rows = {row["case"]: row for row in json.loads(out.read_text())["results"]}
    assert set(rows) == set(rule_cold.KINDS)
    assert all(row["ns"] > 0 and row["unpoliced_ns"] == rows["unpoliced"]["ns"] for row in rows.values())


def test_a_small_cold_run_with_drops_drops_every_frame_of_the_drop_kinds(tmp_path):
    """The bench's own check stops the run when a drop kind's first or last rule passes its frame."""
    require_kernel()
    out = tmp_path / "qos_rule_cold.json"
    assert rule_cold.main(["--rules", "16", "--runs", "1", "--repeat", "1000", "--drops", "--out", str(out)]) == 0
    rows = {row["case"]: row for row in json.loads(out.read_text())["results"]}
    assert set(rows) == set(rule_cold.KINDS) | set(rule_cold.DROPS)


def upf_case(name: str, samples: list[int], installed: int = 1) -> dict:
    return {"case": name, "installed": installed, "active": installed, "samples_ns": samples}


def test_a_upf_policers_cost_is_its_case_less_its_unpoliced_path_run_by_run():
    result = {
        "cases": [upf_case("uplink", [100, 200, 100]), upf_case("uplink_policed_window", [150, 240, 160]),
                  upf_case("uplink", [300, 300, 300], 10), upf_case("uplink_policed", [390, 380, 310], 10)],
        "baseline": {"cases": [upf_case("uplink", [100, 100, 100]), upf_case("uplink_policed_window", [190, 170, 160])]},
    }
    window, cold = upf_cost.costs(result)
    assert (window["case"], window["cost_ns"]["median"]) == ("uplink_policed_window", 50)
    assert window["baseline_cost_ns"]["median"] == 70
    assert window["minus_baseline_ns"]["median"] == -30  # run by run: -40, -30, 0
    assert (cold["installed"], cold["cost_ns"]["median"]) == (10, 80)  # its own level's path: 90, 80, 10
    assert "baseline_cost_ns" not in cold


def test_a_small_run_of_a_parent_made_precise_times_its_rewrites(tmp_path):
    require_kernel()
    if policer_value(precise.COARSE).clock != Clock.COARSE:
        pytest.skip("this kernel's tick makes no policer coarse")
    out = tmp_path / "qos_precise.json"
    assert precise.main(["--slots", "256", "--parents", "3", "--children", "2", "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["results"]
    assert row["first_ms"] > 0 and row["q1_ms"] <= row["median_ms"] <= row["q3_ms"]


class OrphanStarter:
    """An object whose dpp_clock_start outlived its maps' user fds: the kernel refuses to start a
    timer in a map no user holds (bpf_timer_init: EPERM), so the program aborts."""

    def __init__(self) -> None:
        police = PoliceProgram()
        try:
            self.fd = os.dup(police.obj.program_fd("dpp_clock_start"))
        finally:
            police.close()

    def program_fd(self, name: str) -> int:
        assert name == "dpp_clock_start"
        return self.fd


def test_a_clock_timer_that_does_not_start_stops_the_run():
    require_kernel()
    orphan = OrphanStarter()
    try:
        with pytest.raises(RuntimeError, match="did not start the clock timer"):
            start_clock(orphan)
    finally:
        os.close(orphan.fd)


def test_the_clock_steps_bench_counts_what_goes_back():
    require_kernel()
    assert clock_steps.steps_back([5, 7, 6, 9, 3]) == {
        "readings": 5, "steps_back": 2, "largest_ns": 6, "median_ns": 3.5}
    readings = clock_steps.coarse_readings(0.2)
    assert len(readings) > 100 and clock_steps.steps_back(readings)["steps_back"] == 0
