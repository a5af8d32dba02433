"""The command line, CPU sets, calibration and summary of bench.throughput (no kernel needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.throughput import report, run, trial
from bench.throughput.systems import counter_delta

REPO = Path(__file__).resolve().parents[2]


def test_the_node_cpus_are_the_highest_numbered_so_cpu_0_joins_last():
    assert run.cpu_set(1, total=2) == (1,)
    assert run.cpu_set(2, total=2) == (0, 1)
    assert run.cpu_set(2, total=4) == (2, 3)
    with pytest.raises(ValueError):
        run.cpu_set(3, total=2)


def test_quick_shortens_the_run_but_explicit_options_win():
    args = run.parse_args(["--quick", "--trial-s", "1.5"])
    assert args.sizes == (64, 1500) and args.resolution == 0.05 and args.sweep_points == 5
    assert args.trial_s == 1.5
    full = run.parse_args([])
    assert full.sizes == run.SIZES and full.cpus == (1, 2) and full.systems == ("kernel", "netapp")


def test_capacities_and_lists_parse():
    args = run.parse_args(["--capacity-pps", "0:1e6,1:250000", "--sizes", "64,512", "--systems", "netapp"])
    assert args.capacity_pps == {0: 1_000_000, 1: 250_000}
    assert args.sizes == (64, 512) and args.systems == ("netapp",)


@pytest.mark.parametrize("argv", [["--systems", "dpdk"], ["--sizes", "20"]])
def test_nonsense_options_are_refused(argv):
    with pytest.raises(SystemExit):
        run.parse_args(argv)


def _trial(offered: float, passed: bool, priority: float) -> dict:
    return {"offered_pps": offered, "passed": passed, "rates_pps": {"priority": {"offered": priority}}}


def test_a_steering_cpu_is_calibrated_with_the_priority_part_of_the_fastest_passing_trial():
    zero_loss = {
        "pps": 900.0,
        "trials": [_trial(2000, False, 1000), _trial(900, True, 450), _trial(500, True, 250)],
    }
    assert run.priority_rate(zero_loss) == 450
    assert run.priority_rate({"pps": 0.0, "trials": [_trial(10, False, 5)]}) == 0.0


def _entry(size: int, cpus: list[int], system: str, pps: float, limited_by: str = "loss") -> dict:
    return {"size": size, "cpus": cpus, "system": system, "zero_loss": {"pps": pps, "limited_by": limited_by}}


def test_the_summary_pairs_the_systems_per_size_and_cpu_count():
    rows = report.summary(
        [_entry(64, [1], "kernel", 500_000), _entry(64, [1], "netapp", 2_500_000, "generator"),
         _entry(64, [0, 1], "kernel", 800_000), _entry(64, [0, 1], "netapp", 1_200_000)]
    )  # fmt: skip
    assert [(r["cpus"], r["ratio"]) for r in rows] == [(1, 5.0), (2, 1.5)]
    assert rows[0]["netapp_limited_by"] == "generator" and rows[0]["frame_bytes"] == 172
    assert ">=2.500" in report.format_table({"summary": rows})
    # CPU 0 runs the generator: the 2-CPU row is not the node's alone, so the target is not judged there.
    assert rows[0]["target_met"] is True and "target_met" not in rows[1]
    assert report.target(rows) | {"not_judged_because": ""} == {
        "ratio": 4.0, "rows_judged": 1, "met_where_judged": True, "rows_not_judged": 1, "not_judged_because": ""
    }  # fmt: skip
    assert "1.5x (gen)" in report.format_table({"summary": rows})
    # The NetApp's rate was the generator's ceiling, the kernel path's its own: the ratio is a lower bound.
    assert "| 64 | 1 | 0.50 | ≥2.50 | ≥5.0 |" in report.markdown_table({"summary": rows})


def test_the_target_is_missed_where_a_judged_row_falls_short():
    rows = report.summary([_entry(64, [1], "kernel", 500_000), _entry(64, [1], "netapp", 1_500_000)])
    assert rows[0]["target_met"] is False and report.target(rows)["met_where_judged"] is False


@pytest.mark.parametrize("result_file", ["throughput.json", "throughput-100k-flows.json"])
def test_the_readme_table_is_the_one_the_result_document_gives(result_file):
    result = json.loads((REPO / "bench/results" / result_file).read_text())
    table = report.markdown_table(result)
    assert table in (REPO / "README.md").read_text(), (
        f"README's throughput table: run python -m bench.throughput.report bench/results/{result_file}"
    )


def test_counter_deltas_are_nested_and_only_what_moved_is_kept():
    before = {"actions": {"steer": 5, "pass": 1}, "n3_rx_dropped": 2}
    after = {"actions": {"steer": 9, "pass": 1}, "n3_rx_dropped": 2}
    delta = counter_delta(before, after)
    assert delta == {"actions": {"steer": 4, "pass": 0}, "n3_rx_dropped": 0}
    assert trial._nonzero(delta) == {"actions": {"steer": 4}}


def test_the_summary_takes_the_traffic_of_the_trial_that_set_the_rate_and_marks_a_disturbed_generator():
    rates = {"priority": {"delivered": 400.0}, "total": {"forwarded": 600.0}}
    trials = [
        {"offered_pps": 2000.0, "target_pps": 3000.0, "passed": False, "rates_pps": rates},
        {"offered_pps": 1000.0, "target_pps": 1500.0, "passed": True, "rates_pps": rates},
    ]
    entry = {
        "size": 64,
        "cpus": [1],
        "system": "netapp",
        "zero_loss": {"pps": 1000.0, "limited_by": "loss", "trials": trials},
    }
    (row,) = report.summary([entry])
    assert row["netapp_offered_of_asked"] == 0.667
    assert (row["netapp_priority_delivered_pps"], row["netapp_forwarded_pps"]) == (400, 600)
    assert "0.001* (loss)" in report.format_table({"summary": [row]})  # Mpps


def test_the_document_is_json_with_a_trial_per_line():
    trial_record = {"offered_pps": 1.0, "classes": {"total": {"lost": 0}}, "per_flow": {"sent": [1, 2]}}
    document = {"results": [{"zero_loss": {"trials": [trial_record, trial_record]}, "cpus": [0, 1]}]}
    text = report.dumps(document)
    assert json.loads(text) == document
    assert sum('"offered_pps"' in line for line in text.splitlines()) == 2
    assert '"cpus": [0, 1]' in text


def test_a_zero_loss_rate_that_a_slower_sweep_trial_did_not_repeat_is_marked():
    def sweep_trial(offered: float, lost: int) -> dict:
        return {"offered_pps": offered, "valid": True, "zero_loss": lost == 0}

    entry = _entry(64, [1], "kernel", 500.0)
    entry["sweep"] = [sweep_trial(100, 0), sweep_trial(400, 3), sweep_trial(500, 0), sweep_trial(900, 50)]
    (row,) = report.summary([entry])
    assert (row["kernel_sweep_trials_at_or_below"], row["kernel_sweep_lossy_at_or_below"]) == (3, 1)
    assert "0.001! (loss)" in report.format_table({"summary": [row]})
