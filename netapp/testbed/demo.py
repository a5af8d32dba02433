"""The NetApp on an emulated edge site, start to finish: what `netapp demo` runs.

Builds the site, attaches the pipeline natively to the node's RAN-side interface, applies the
paper's intents (one of them in the paper's own message format), sends its traffic with the
live-frame generator in two phases (all CPUs healthy; then one CPU marked overloaded by the
control plane), and reports what the data plane did. Everything it created is removed at the end,
also on Ctrl-C or failure.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from scapy.utils import wrpcap

from netapp.dataplane import binding
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.testbed import netns, scenario
from netapp.testbed.topology import EdgeSite


@dataclass
class Phase:
    """Counter deltas of one traffic phase."""

    name: str
    sent: int
    pps: float
    intents: dict[str, int]
    actions: dict[str, int]
    reasons: dict[str, int]
    alternative_rx: int


def build_artifact(name: str) -> Path:
    return Path(binding.find_libdpp()).parent / name


def interface_rx_packets(ns: str, ifname: str) -> int:
    link = json.loads(netns.run(["ip", "-s", "-j", "link", "show", ifname], netns=ns))[0]
    return int(link["stats64"]["rx"]["packets"])


def send_with_pktgen(site: EdgeSite, pcap: Path, frames_per_flow: int) -> tuple[int, float]:
    """Live-frame generator on the RAN side; returns (frames sent, frames per second).

    One generator run per frame: each run costs tens of milliseconds of set-up in the kernel,
    whatever its length, so services are sent one after the other rather than interleaved.
    """
    out = netns.run(
        [str(build_artifact("dpp-pktgen")), "-i", site.ran0.ifname, "-r", str(pcap),
         "-n", str(frames_per_flow)],
        netns=site.ns("ran"),
    )
    report = json.loads(out)
    return int(report["frames"]), float(report["pps"])


def _snapshot(dp: Dataplane, site: EdgeSite) -> dict:
    return {
        "intents": {k: v[0] for k, v in dp.rule_stats().items()},
        "actions": {k: v[0] for k, v in dp.action_stats().items()},
        "reasons": {k: v[0] for k, v in dp.reason_stats().items()},
        "alt": interface_rx_packets(site.ns("alt"), site.alt0.ifname),
    }


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


def run_phase(name: str, dp: Dataplane, site: EdgeSite, pcap: Path, frames_per_flow: int) -> Phase:
    before = _snapshot(dp, site)
    sent, pps = send_with_pktgen(site, pcap, frames_per_flow)
    after = _snapshot(dp, site)
    return Phase(
        name, sent, pps,
        _delta(after["intents"], before["intents"]),
        _delta(after["actions"], before["actions"]),
        _delta(after["reasons"], before["reasons"]),
        after["alt"] - before["alt"],
    )


class Demo:
    """Owns everything the demo creates, so that close() can remove all of it."""

    def __init__(self, cpus: int | None = None):
        self.cpus = cpus or min(os.cpu_count() or 1, 2)
        self.site = EdgeSite()
        self.instance = f"demo-{secrets.token_hex(3)}"
        self.dp: Dataplane | None = None
        self.workdir = Path(tempfile.mkdtemp(prefix="dpp-demo-"))

    def start(self) -> dict:
        """Site up, pipeline attached, intents applied. Returns the applied intent document."""
        self.site.build()
        netns.attach_xdp_object(self.site.ns("alt"), self.site.alt0.ifname,
                                str(build_artifact("xdp_pass.bpf.o")))
        document = scenario.document(self.site, self.cpus)
        with netns.entered(self.site.ns("node")):
            self.dp = Dataplane.open(instance=self.instance)
            self.dp.attach(self.site.n3.ifname, "native")
            interfaces = {p.ifname: self.site.ifindex(p)
                          for p in (self.site.n3, self.site.n6, self.site.alt)}
            self.dp.apply_compiled(compile_document(parse_document(document), interfaces))
        wrpcap(str(self.pcap), [scenario.frame(self.site, flow) for flow in scenario.flows()],
               linktype=1)
        return document

    @property
    def pcap(self) -> Path:
        return self.workdir / "paper-traffic.pcap"

    def phases(self, frames_per_flow: int) -> list[Phase]:
        assert self.dp is not None
        healthy = run_phase("all CPUs healthy", self.dp, self.site, self.pcap, frames_per_flow)
        busy = self.cpus - 1
        self.dp.set_cpu_overloaded(busy, True)
        overloaded = run_phase(f"CPU {busy} overloaded", self.dp, self.site, self.pcap,
                               frames_per_flow)
        return [healthy, overloaded]

    def close(self) -> None:
        if self.dp is not None:
            self.dp.unpin()
            self.dp.close()
            self.dp = None
        self.site.destroy()
        for path in self.workdir.glob("*"):
            path.unlink()
        self.workdir.rmdir()
