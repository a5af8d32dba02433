"""The flow cache stops probing on a CPU where it does not pay, and comes back when it does
(classify.h, flow_cache_pays; the per-CPU state is dpp_flow_use), run in the kernel.

Each CPU keeps its own state, so the test pins itself to one CPU while it sends."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from netapp.dataplane.binding import FLOW_USE_SAMPLE, FLOW_USE_WINDOW, FlowUse
from tests.dataplane.test_fast_path import flow, flow_document
from tests.utils.dataplane import run, traced_dataplane
from tests.utils.maps import per_cpu_value


@contextlib.contextmanager
def on_one_cpu() -> Iterator[int]:
    """Run on the first CPU this process may use, so every packet meets the same per-CPU state."""
    allowed = os.sched_getaffinity(0)
    cpu = min(allowed)
    os.sched_setaffinity(0, {cpu})
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, allowed)


def flow_use(dataplane, cpu: int) -> FlowUse:
    return per_cpu_value(dataplane._dpp.map_fd("dpp_flow_use"), 0, FlowUse)[cpu]


def send(dataplane, frames: list[bytes], count: int) -> list[str]:
    """`count` packets cycling through `frames`; the intent each one matched."""
    return [run(dataplane, frames[i % len(frames)]).intent for i in range(count)]


def test_flows_that_keep_evicting_each_other_turn_probing_off_and_keep_their_rules():
    dataplane = traced_dataplane(flow_document(), max_flows=1)
    try:
        with on_one_cpu() as cpu:
            # Three flows, so that the sampled packets (every FLOW_USE_SAMPLE-th) are not one flow.
            frames = [flow("10.200.0.10"), flow("10.200.0.11"), flow("10.200.0.12")]
            got = send(dataplane, frames, 3 * FLOW_USE_WINDOW)
            use = flow_use(dataplane, cpu)
    finally:
        dataplane.close()
    assert got == ["to-a", "to-b", "tunnel"] * FLOW_USE_WINDOW
    assert use.bypass == 1
    # Off, only the sample probes: one packet in FLOW_USE_SAMPLE, and none of them hits.
    assert use.probes <= use.packets // FLOW_USE_SAMPLE + 1
    assert use.hits == 0


def test_a_repeated_flow_keeps_probing_and_hits():
    dataplane = traced_dataplane(flow_document(), max_flows=1)
    try:
        with on_one_cpu() as cpu:
            got = send(dataplane, [flow("10.200.0.10")], FLOW_USE_WINDOW + 10)
            use = flow_use(dataplane, cpu)
    finally:
        dataplane.close()
    assert set(got) == {"to-a"}
    assert use.bypass == 0
    assert use.probes == use.packets == 10
    assert use.hits == 10


def test_probing_comes_back_when_the_flows_fit_again():
    dataplane = traced_dataplane(flow_document(), max_flows=1)
    try:
        with on_one_cpu() as cpu:
            send(dataplane, [flow("10.200.0.10"), flow("10.200.0.11")], FLOW_USE_WINDOW + 1)
            off = flow_use(dataplane, cpu).bypass
            got = send(dataplane, [flow("10.200.0.11")], 2 * FLOW_USE_WINDOW)
            use = flow_use(dataplane, cpu)
    finally:
        dataplane.close()
    assert off == 1
    assert set(got) == {"to-b"}
    assert use.bypass == 0
    assert use.hits == use.probes > 0
