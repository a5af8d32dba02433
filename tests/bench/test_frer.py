"""The FRER benchmarks (bench/frer): a small run of each in the kernel decides as every case says (a
verdict other than the case's stops the run) and writes its rows; the replication run carries the
broadcast out into real veth ports."""

from __future__ import annotations

import argparse
import csv
import ctypes
import json
import struct

import pytest

from bench.frer import __main__ as frer_main
from bench.frer import latency, replicate
from netapp.frer.abi import Recovery
from tests.utils.kernel import build_artifact, require_kernel


def test_a_small_elimination_run_takes_every_case_and_writes_a_row_for_each(tmp_path):
    require_kernel()
    out = tmp_path / "frer.json"
    assert frer_main.main(["--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["results"]
    assert [row["case"].split(",")[0] for row in rows] == ["in order", "in order", "duplicate", "duplicate"]
    assert all(row["with_recovery_ns"] > 0 for row in rows)


def test_a_small_replication_run_adds_its_row(tmp_path):
    require_kernel()
    out = tmp_path / "frer.json"
    assert frer_main.main(["--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    assert replicate.main(["--runs", "1", "--repeat", "1000", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["replicate"]
    assert [row["case"].split(",")[1].strip() for row in rows][:1] == ["1 stream (hot"]
    assert all(row["replicate_ns"] > 0 and row["broadcast_ns"] > 0 for row in rows)


def test_a_slot_is_written_in_the_layout_of_the_object_compared():
    """--compare times another build's object, whose struct dpp_frer_recovery may order its fields
    otherwise: each field lands at that object's offset, the ones it lacks are left out."""
    value = frer_main.recovery(seen=frer_main.SEEN)
    value.passed, value.lost = 5, 3
    other = (24, {"seq": (0, 2), "passed": (8, 8), "lost": (16, 8), "history": (2, 4)})
    raw = bytes(frer_main.in_layout(value, other))
    assert raw == struct.pack("<HIxxQQ", frer_main.SEEN, 1, 5, 3)


def test_this_trees_layout_is_read_from_its_object_as_the_mirror_has_it():
    require_kernel()
    size, members = frer_main.recovery_layout(build_artifact("xdp_frer.bpf.o"))
    value = frer_main.recovery(seen=frer_main.SEEN)
    assert size == ctypes.sizeof(Recovery)
    assert bytes(frer_main.in_layout(value, (size, members))) == bytes(value)


def test_the_latency_csv_holds_each_cases_cdf_and_a_bad_rate_is_refused(tmp_path):
    rows = [{"rate": rate, "sent_pps": 10, "load": load, "latencies_us": [float(k) for k in range(1, 1001)]}
            for rate in ("10000", latency.MAX) for load in ("idle", "every CPU busy")]  # fmt: skip
    latency.write_csv(rows, tmp_path / "frer_latency.csv")
    with (tmp_path / "frer_latency.csv").open() as written:
        lines = list(csv.DictReader(written))
    assert len(lines) == 4 * len(latency.CDF_POINTS)
    by_case = {(line["rate"], line["load"], float(line["percentile"])): float(line["latency_us"]) for line in lines}
    assert by_case[("max", "idle", 50.0)] == 501.0 and by_case[("10000", "every CPU busy", 99.9)] == 1000.0
    with pytest.raises(argparse.ArgumentTypeError, match="positive integer"):
        latency.rate("0")
