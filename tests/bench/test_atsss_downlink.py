"""The ATSSS downlink benchmark's views that its machine's load does not move (bench/atsss,
bench/harness.py, bench/libbpf.py, bench/insns.py): differences taken block by block with their
spread, the programs' sizes and the instructions a path executes beside the timings."""

from __future__ import annotations

import json

import pytest

from bench.atsss import __main__ as atsss_main
from bench.harness import DATAPLANE, EMPTY_OBJECT, paired_differences, quartiles
from bench.insns import count_instructions
from bench.libbpf import BpfObject, program_size
from netapp.atsss.abi import Mode, SessionFlags
from tests.utils.kernel import require_kernel


def test_differences_are_taken_block_by_block_not_between_medians():
    # the load moved both subjects of the second block by 90 ns: each block's difference is 9 or 10
    samples = {"floor": [10, 100, 11, 12], "atsss": [19, 109, 21, 22]}
    stats = paired_differences(samples, "atsss", "floor")
    assert stats == {"median": 9.5, "q1": 9.0, "q3": 10.0, "min": 9.0, "max": 10.0}


def test_blocks_of_two_subjects_must_pair_up():
    with pytest.raises(ValueError):
        paired_differences({"floor": [1, 2, 3], "atsss": [1, 2]}, "atsss", "floor")


def test_quartiles_of_one_run_are_that_run():
    assert quartiles([7]) == {"median": 7.0, "q1": 7.0, "q3": 7.0, "min": 7.0, "max": 7.0}


def test_a_program_size_is_the_kernels_count_of_its_instructions():
    require_kernel()
    with BpfObject(EMPTY_OBJECT) as empty:
        size = program_size(empty.program_fd("xdp_pass"))
    assert size.xlated_insns == 2  # r0 = XDP_PASS; exit
    assert size.jited_bytes > 0


def test_a_small_downlink_run_against_a_build_gives_each_row_its_blocks_and_each_build_its_size(tmp_path):
    """--before this tree's own build (an identical one: the A/A run that states the noise)."""
    require_kernel()
    out = tmp_path / "atsss.json"
    argv = ["--cases", "downlink", "--schedulers", "round-robin", "--runs", "3", "--repeat", "1000",
            "--before", str(DATAPLANE / "build"), "--out", str(out)]  # fmt: skip
    assert atsss_main.main(argv) == 0
    result = json.loads(out.read_text())
    assert result["programs"]["atsss"] == result["programs"]["before"]
    assert result["programs"]["atsss"]["xlated_insns"] > 100
    rows = result["results"]
    assert [row["sessions"] for row in rows] == [1, atsss_main.SESSIONS]
    for row in rows:
        for key in ("above_floor_blocks_ns", "before_above_floor_blocks_ns", "minus_before_blocks_ns"):
            stats = row[key]
            assert stats["min"] <= stats["q1"] <= stats["median"] <= stats["q3"] <= stats["max"]


def test_a_small_uplink_run_against_a_build_times_both_builds_in_the_same_blocks(tmp_path):
    """Each build's Acks into its own ring, none lost; every row with its blocks' differences."""
    require_kernel()
    out = tmp_path / "atsss.json"
    argv = ["--cases", "uplink", "--runs", "3", "--repeat", "4000", "--before", str(DATAPLANE / "build"),
            "--out", str(out)]  # fmt: skip
    assert atsss_main.main(argv) == 0
    rows = json.loads(out.read_text())["results"]
    assert [(row["case"], row["sessions"]) for row in rows] == [
        (case, sessions) for case in atsss_main.UPLINK_CASES for sessions in (1, atsss_main.SESSIONS)]
    for row in rows:
        assert row["uplink_before_ns"] > 0
        stats = row["minus_before_blocks_ns"]
        assert stats["min"] <= stats["q1"] <= stats["median"] <= stats["q3"] <= stats["max"]


def test_the_empty_program_runs_two_instructions_in_python():
    require_kernel()
    frame = atsss_main.ue_frame()
    with BpfObject(EMPTY_OBJECT) as empty:
        counted = count_instructions(empty.program_fd("xdp_pass"), frame)
    assert (counted.verdict, counted.instructions, counted.packet) == (2, 2, frame)


def test_the_downlinks_instructions_are_counted_on_the_kernels_path_and_fewer_without_the_ue_packets_sum():
    """path_instructions checks the Python run against the kernel's (verdict and packet out); the
    header-only checksum skips the UE packet's sum, so its path is shorter by that much."""
    require_kernel()
    bench = atsss_main.AtsssBench(DATAPLANE / "build")
    try:
        counts = {}
        for flags in (0, SessionFlags.HEADER_CHECKSUM):
            bench.configure(Mode.ROUND_ROBIN, [1, 1], flags)
            counts[flags] = atsss_main.path_instructions(bench, atsss_main.ue_frame(), atsss_main.XDP_TX)
    finally:
        bench.close()
    assert 100 < counts[SessionFlags.HEADER_CHECKSUM] < counts[0]
