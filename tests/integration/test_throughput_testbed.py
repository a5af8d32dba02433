"""The throughput benchmark's testbed at a low rate (bench.throughput): the paced generator, the
node as the kernel path and with the NetApp, and the counting sinks account for every frame.

At a rate far below any capacity nothing may be lost: per flow, the frames sent equal those counted
at the core plus those counted at the alternative node, and the generator sends exactly the frames
asked for, round robin over the 16 flows.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.throughput import trial
from bench.throughput.systems import KernelPath, NetAppPath
from netapp.testbed import scenario
from tests.utils.kernel import require_kernel
from tests.utils.testbed import assert_every_frame_accounted, throughput_bed

RATE = 20_000
FRAMES_PER_FLOW = 500
FRAMES = FRAMES_PER_FLOW * scenario.FLOWS
NODE_CPU = (1,)
PRIORITY = [flow.priority for flow in scenario.flows()]


@pytest.fixture(scope="module")
def bed(tmp_path_factory) -> Iterator[trial.Bench]:
    """Site with the node's kernel path, sinks on core0 and alt0, the generator; no system yet."""
    require_kernel()
    with throughput_bed(tmp_path_factory.mktemp("throughput")) as bench:
        yield bench


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


def assert_clean(record: dict) -> None:
    assert_every_frame_accounted(record)
    assert record["problems"] == [] and record["passed"]


def test_the_kernel_path_delivers_every_flow_to_the_core(bed):
    record = run_trial(bed, KernelPath(bed.site, NODE_CPU), {})
    assert_generator_sent_what_was_asked(record)
    assert_clean(record)
    assert record["per_flow"]["core"] == record["per_flow"]["sent"]
    assert record["classes"]["total"]["forwarded"] == 0
    assert record["netapp"] == {}


def test_the_netapp_steers_priority_flows_to_the_core_and_forwards_best_effort(bed, tmp_path):
    record = run_trial(bed, NetAppPath(bed.site, NODE_CPU, tmp_path / "state"), {1: 0})
    assert_generator_sent_what_was_asked(record)
    assert_clean(record)
    flows = record["per_flow"]
    for priority, sent, core, alt in zip(PRIORITY, flows["sent"], flows["core"], flows["alt"]):
        assert (core, alt) == ((sent, 0) if priority else (0, sent))
    actions = record["netapp"]["actions"]
    assert actions["steer"] == FRAMES // 2 and actions["forward"] == FRAMES // 2
    assert record["netapp"]["steered"]["1"] == FRAMES // 2


def test_the_netapp_forwards_the_priority_overflow_of_a_cpu_at_capacity(bed, tmp_path):
    capacity = 2_000  # pps, a fifth of the priority traffic: the meter sends the rest on
    record = run_trial(bed, NetAppPath(bed.site, NODE_CPU, tmp_path / "state"), {1: capacity})
    assert_clean(record)
    priority = record["classes"]["priority"]
    assert priority["delivered"] > 0 and priority["forwarded"] > priority["delivered"]
    assert record["netapp"]["reasons"]["cpu_overloaded"] == record["classes"]["total"]["forwarded"]
    # Every priority flow overflows, the paper's legacy message too: it names no group, so the
    # service's default_alternative takes it (without one it would fall back to the stack).
    flows = record["per_flow"]
    assert all(alt > 0 for priority, alt in zip(PRIORITY, flows["alt"]) if priority)
    assert flows["alt"][scenario.LEGACY_FLOW] > 0
    assert "no_alternative" not in record["netapp"]["reasons"]
