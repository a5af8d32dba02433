"""The throughput benchmark's testbed at a low rate (bench.throughput): the paced generator, the
node as the kernel path and with the NetApp, and the counting sinks account for every frame.

At a rate far below any capacity nothing may be lost: per flow, the frames sent equal those counted
at the core plus those counted at the alternative node, and the generator sends exactly the frames
asked for, round robin over the 16 flows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.throughput import frames, trial
from bench.throughput.generator import Generator
from bench.throughput.sink import CpumapCounter, Sink
from bench.throughput.systems import KernelPath, NetAppPath
from netapp.testbed import decap, scenario
from netapp.testbed.topology import EdgeSite
from tests.utils.kernel import build_artifact, require_kernel

RATE = 20_000
FRAMES_PER_FLOW = 500
FRAMES = FRAMES_PER_FLOW * scenario.FLOWS
SIZE = 64
NODE_CPU = (1,)
PRIORITY = [flow.priority for flow in scenario.flows()]


@pytest.fixture(scope="module")
def bed(tmp_path_factory) -> Iterator[trial.Bench]:
    """Site with the node's kernel path, sinks on core0 and alt0, the generator; no system yet."""
    require_kernel()
    workdir = tmp_path_factory.mktemp("throughput")
    with EdgeSite(mtu=1700, queues=2) as site:
        decap.enable(site)
        sinks: list = []
        try:
            core = Sink(build_artifact("xdp_count.bpf.o"), site.ns("core"), "core0", scenario.TEID_BASE, 16)
            sinks.append(core)
            alt = Sink(build_artifact("xdp_count.bpf.o"), site.ns("alt"), "alt0", scenario.TEID_BASE, 16)
            sinks.append(alt)
            cpumap = CpumapCounter(build_artifact("cpumap_drops.bpf.o"), 2)
            sinks.append(cpumap)
            pcap = frames.write_pcap(workdir / "flows.pcap", frames.flow_frames(site, SIZE))
            generator = Generator(build_artifact("dpp-pktgen"), site.ns("ran"), site.ran0.ifname, cpu=0)
            yield trial.Bench(site, generator, core, alt, None, pcap, 1.0, 0.2, 0.05, cpumap)  # type: ignore[arg-type]
        finally:
            for sink in sinks:
                sink.close()


def run_trial(bed: trial.Bench, system, capacity: dict[int, int]) -> dict:
    system.start()
    try:
        system.set_capacity(capacity)
        bed.system = system
        probe = trial.run(bed, RATE, frames=FRAMES)
    finally:
        system.stop()
    return probe.record


def assert_generator_sent_what_was_asked(record: dict) -> None:
    assert record["per_flow"]["sent"] == [FRAMES_PER_FLOW] * scenario.FLOWS
    assert record["frames"] == FRAMES
    # Paced: never faster than asked (a busy machine may make it slower, which slips, not bursts).
    assert record["offered_pps"] <= RATE * 1.01
    assert record["send_s"] >= (FRAMES - 1) / RATE * 0.99


def assert_every_frame_accounted(record: dict) -> None:
    flows = record["per_flow"]
    for sent, core, alt in zip(flows["sent"], flows["core"], flows["alt"]):
        assert sent == core + alt
    assert record["classes"]["total"]["lost"] == 0
    assert record["problems"] == [] and record["passed"]


def test_the_kernel_path_delivers_every_flow_to_the_core(bed):
    record = run_trial(bed, KernelPath(bed.site, NODE_CPU), {})
    assert_generator_sent_what_was_asked(record)
    assert_every_frame_accounted(record)
    assert record["per_flow"]["core"] == record["per_flow"]["sent"]
    assert record["classes"]["total"]["forwarded"] == 0
    assert record["netapp"] == {}


def test_the_netapp_steers_priority_flows_to_the_core_and_forwards_best_effort(bed, tmp_path):
    record = run_trial(bed, NetAppPath(bed.site, NODE_CPU, tmp_path / "state"), {1: 0})
    assert_generator_sent_what_was_asked(record)
    assert_every_frame_accounted(record)
    flows = record["per_flow"]
    for priority, sent, core, alt in zip(PRIORITY, flows["sent"], flows["core"], flows["alt"]):
        assert (core, alt) == ((sent, 0) if priority else (0, sent))
    actions = record["netapp"]["actions"]
    assert actions["steer"] == FRAMES // 2 and actions["forward"] == FRAMES // 2
    assert record["netapp"]["steered"]["1"] == FRAMES // 2


def test_the_netapp_forwards_the_priority_overflow_of_a_cpu_at_capacity(bed, tmp_path):
    capacity = 2_000  # pps, a fifth of the priority traffic: the meter sends the rest on
    record = run_trial(bed, NetAppPath(bed.site, NODE_CPU, tmp_path / "state"), {1: capacity})
    assert_every_frame_accounted(record)
    priority = record["classes"]["priority"]
    assert priority["delivered"] > 0 and priority["forwarded"] > priority["delivered"]
    assert record["netapp"]["reasons"]["cpu_overloaded"] == record["classes"]["total"]["forwarded"]
