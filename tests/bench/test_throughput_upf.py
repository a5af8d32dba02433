"""bench.throughput --upf's plumbing: one short, slow trial of each system on a real edge site, every
frame accounted for at the N6 sink in the shape that system must deliver it in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.throughput import frames, trial, upf
from bench.throughput.sink import FlowCounts
from netapp.testbed import decap, scenario
from netapp.testbed.topology import EdgeSite
from tests.utils.kernel import require_kernel

SIZE = 64
SESSIONS = 32  # two per service: consecutive cycles meet different TEIDs
RATE = 10_000  # a rate both paths carry with room on a shared core: CI runs lost 1 and 4 frames a flow at 20,000 (a CPU held up by other work)
FRAMES = 16 * SESSIONS * 4
UPF_FRAME = 14 + SIZE  # the UE packet behind the frame's Ethernet header, every outer header gone
KERNEL_FRAME = 14 + 20 + 8 + 16 + SIZE  # the inner IPv4 / UDP / GTP-U packet: only VXLAN removed


def test_options_and_the_sessions_the_generator_meets():
    args = upf.parse_args(["--sessions", "32,1024"])
    assert args.sessions == (32, 1024) and args.systems == ("kernel", "upf") and args.sizes == (64,)
    with pytest.raises(SystemExit):
        upf.parse_args(["--sessions", "1000"])  # not a multiple of the 16 services
    installed = upf.sessions(SESSIONS)
    teids = {s.pdrs[1].pdi.local_fteid.teid for s in installed}
    # what the generator writes: service k's frame n of a cycle, k + 16 n, TEID's high half + n
    sent = {scenario.TEID_BASE + k + (n << 16) for k in range(16) for n in range(SESSIONS // 16)}
    assert teids == sent and len(teids) == SESSIONS


@pytest.fixture
def runner(tmp_path: Path):
    require_kernel()
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs: the generator on CPU 0, the node on CPU 1")
    args = upf.parse_args(["--sessions", str(SESSIONS), "--trial-s", "0.1", "--drain-s", "0.05"])
    with EdgeSite(mtu=upf.run.MTU, queues=os.cpu_count() or 1) as site:
        decap.enable(site)
        upf.route_data_network(site)
        r = upf.UpfRunner(site, args, tmp_path)
        try:
            r.for_sessions(SESSIONS)
            yield r
        finally:
            r.close()


def _trial(runner: upf.UpfRunner, system) -> tuple[trial.Probe, FlowCounts]:
    pcap = frames.write_pcap(runner.workdir / "flows.pcap", frames.flow_frames(runner.site, SIZE))
    system.start()
    try:
        before = runner.core.read()
        probe = trial.run(runner.bench(system, pcap), RATE, frames=FRAMES)
        return probe, runner.core.read() - before
    finally:
        system.stop()


@pytest.mark.parametrize("name", ["upf", "kernel"])
def test_every_frame_arrives_at_n6_as_that_path_delivers_it(runner, name):
    cpus = (upf.NODE_CPU,)
    system = runner.upf(cpus, SESSIONS) if name == "upf" else upf.KernelDecap(runner.site, cpus)
    probe, core = _trial(runner, system)
    record = probe.record
    assert record["frames"] == FRAMES and record["problems"] == []
    assert record["per_flow"]["core"] == record["per_flow"]["sent"] == [FRAMES // 16] * 16, record
    assert probe.passed and core.other == 0
    assert system.napi, "n3's receive runs in a NAPI thread pinned to the node's core"
    frame = UPF_FRAME if name == "upf" else KERNEL_FRAME
    assert list(core.bytes) == [FRAMES // 16 * frame] * 16  # decapsulated (upf) or GTP-U (kernel)
    if name == "upf":
        assert record["netapp"]["actions"] == {"upf": FRAMES}, record["netapp"]
