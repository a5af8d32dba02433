"""The throughput testbed for tests: an edge site whose node routes the experiment's traffic to the
core through the kernel (netapp.testbed.decap), counting sinks on core0 and alt0, and the paced
generator on the RAN side. No system is attached: a test starts the one it needs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from bench.throughput import frames, trial
from bench.throughput.generator import Generator
from bench.throughput.sink import CpumapCounter, Sink
from netapp.testbed import decap, scenario
from netapp.testbed.topology import EdgeSite
from tests.utils.kernel import build_artifact

SIZE = 64  # the UE packet's size: the smallest, so a rate costs the most packets


@contextlib.contextmanager
def throughput_bed(workdir: Path, trial_s: float = 1.0, drain_s: float = 0.2) -> Iterator[trial.Bench]:
    """A built site with sinks and generator; everything goes when the block ends."""
    with EdgeSite(mtu=1700, queues=2) as site, contextlib.ExitStack() as closing:
        decap.enable(site)
        sink = build_artifact("xdp_count.bpf.o")
        core = Sink(sink, site.ns("core"), site.core0.ifname, scenario.TEID_BASE, scenario.FLOWS)
        closing.callback(core.close)
        alt = Sink(sink, site.ns("alt"), site.alt0.ifname, scenario.TEID_BASE, scenario.FLOWS)
        closing.callback(alt.close)
        cpumap = CpumapCounter(build_artifact("cpumap_drops.bpf.o"), 2)
        closing.callback(cpumap.close)
        pcap = frames.write_pcap(workdir / "flows.pcap", frames.flow_frames(site, SIZE))
        generator = Generator(build_artifact("dpp-pktgen"), site.ns("ran"), site.ran0.ifname, cpu=0)
        yield trial.Bench(site, generator, core, alt, None, pcap, trial_s, drain_s, 0.05, cpumap)  # type: ignore[arg-type]


def assert_every_frame_accounted(record: dict) -> None:
    """Per flow, the frames sent arrived at the core or at the alternative node: none lost."""
    flows = record["per_flow"]
    for flow, (sent, core, alt) in enumerate(zip(flows["sent"], flows["core"], flows["alt"])):
        assert sent == core + alt, (
            f"flow {flow}: sent {sent}, core {core}, alternative {alt}; "
            f"drops {record['drops']}, netapp {record['netapp']}, offered {record['offered_pps']:.0f} pps, "
            f"drained in {record['drain_s']} s"
        )
    assert record["classes"]["total"]["lost"] == 0
