"""The policers on a real link: xdp_police attached natively to a veth end, frames offered by
dpp-pktgen at twice the rate, the kernel's clock (as the pipeline reads it). Whatever the machine's
load does to the generator's pace, no stretch of time lets more through than the algorithm allows,
and every frame is either passed or dropped, counted. (How close the delivered rate comes to the
configured one depends on a steady generator: bench/qos/accuracy.py measures it.)"""

from __future__ import annotations

import time

import pytest

from bench.qos.accuracy import ALGORITHMS, BUCKETS, FRAME, Case, Link, police_frame
from bench.throughput.frames import write_pcap
from tests.utils.kernel import build_artifact, require_kernel

RATE = 10**8  # bit/s: 12,500 frames/s of 1,000 bytes at 2x, well within the generator's reach
SECONDS = 1.0


def ceiling(case: Case, window_ns: int, elapsed_ns: int) -> float:
    """The most the policer may let through in elapsed_ns (from its first frame on)."""
    if case.algo in BUCKETS:
        return case.burst + case.rate * elapsed_ns / 8e9
    allowance = case.rate * window_ns / 8e9  # a window's, whichever way it is counted
    return allowance * (elapsed_ns // window_ns + 2)  # every window the stretch touches, full


@pytest.mark.parametrize("algo", ALGORITHMS, ids=lambda algo: algo.name.lower())
def test_a_policer_on_a_link_passes_no_more_than_its_rate_and_burst(algo, tmp_path):
    require_kernel()
    case = Case(algo, RATE, burst_ms=20)
    pps = 2 * RATE / (8 * FRAME)
    pcap = write_pcap(tmp_path / "police.pcap", [police_frame(FRAME)])
    with Link(build_artifact("xdp_police.bpf.o")) as link:
        window_ns = link.configure(case)
        start = time.monotonic_ns()  # bpf_ktime_get_ns() is CLOCK_MONOTONIC too
        sent = link.generator(build_artifact("dpp-pktgen")).send(pcap, int(pps * SECONDS), pps, timeout=120)
        elapsed = time.monotonic_ns() - start
        passed_bytes, passed, dropped = link.counters()

    assert passed + dropped == sent.frames, "every frame offered is policed and counted once"
    assert passed_bytes == passed * FRAME
    assert passed_bytes <= ceiling(case, window_ns, elapsed)
    if sent.frames * FRAME > ceiling(case, window_ns, elapsed):
        assert dropped > 0
