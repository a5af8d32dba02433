"""The policers on a real link: xdp_police attached natively to a veth end, frames offered by
dpp-pktgen at twice the rate, the kernel's clock (as the pipeline reads it). Whatever the machine's
load does to the generator's pace, no stretch of time lets more through than the algorithm allows,
and every frame is either passed or dropped, counted. The link's policer is written as the service's
applier writes it (the bucket's share of the burst and each CPU's chunk), so the token bucket's and
GCRA's frames pass on the CPUs' credit. (How close the delivered rate comes to the configured one
depends on a steady generator: bench/qos/accuracy.py measures it.)"""

from __future__ import annotations

import time

import pytest

from bench.qos.accuracy import ALGORITHMS, BUCKETS, FRAME, POLICER, Case, Link, police_frame
from bench.throughput.frames import write_pcap
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.qos.applier import PolicerApplier
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
        shares = link.shares()

    assert passed + dropped == sent.frames, "every frame offered is policed and counted once"
    assert passed_bytes == passed * FRAME
    assert passed_bytes <= ceiling(case, window_ns, elapsed)
    if sent.frames * FRAME > ceiling(case, window_ns, elapsed):
        assert dropped > 0
    if algo in BUCKETS:  # a CPU that carved keeps what its last frames left of a chunk (never 0)
        assert any(cpu.credit for cpu in shares), "the frames passed on the CPUs' credit"


@pytest.mark.parametrize("algo", ALGORITHMS, ids=lambda algo: algo.name.lower())
def test_the_link_writes_its_policer_as_the_service_writes_it(algo):
    require_kernel()
    case = Case(algo, RATE, burst_ms=20)
    applier_maps = Dataplane(FakeDpp(map_sizes={"dpp_policers": 4}))
    PolicerApplier(applier_maps.table).apply({POLICER: case.spec})
    with Link(build_artifact("xdp_police.bpf.o")) as link:
        link.configure(case)
        written = bytes(link.policer()), [bytes(cpu) for cpu in link.shares()]

    service = applier_maps.table("dpp_policers").get(POLICER), applier_maps.table("dpp_policer_stats").get(POLICER)
    assert written == (bytes(service[0]), [bytes(cpu) for cpu in service[1]])
