"""One trial: the generator sends the 16 flows at a rate for a while; the sinks and the NetApp's
own counters say where every frame went.

Sequence: read every counter, send (one live-frame run of rate x seconds frames), wait until the
sinks have counted every frame or their counts stop moving (queues drained), read again; the
differences are the trial's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.throughput import accounting
from bench.throughput.generator import Generator, Sent
from bench.throughput.search import Probe
from bench.throughput.sink import CpumapCounter, FlowCounts, Sink
from bench.throughput.systems import System, counter_delta
from netapp.testbed import netns, scenario
from netapp.testbed.decap import VXLAN_DEVICE
from netapp.testbed.topology import EdgeSite

DRAIN_POLL_S = 0.05
DRAIN_QUIET_S = 0.5  # the sinks' counts unmoving this long with frames unaccounted: those are lost
DRAIN_MAX_S = 3.0
PRIORITY = tuple(flow.priority for flow in scenario.flows())


@dataclass
class Bench:
    """Everything a trial touches."""

    site: EdgeSite
    generator: Generator
    core: Sink
    alt: Sink
    system: System
    pcap: Path
    trial_s: float
    drain_s: float
    tolerance: float  # how far below the asked rate the generator may stay
    cpumap: CpumapCounter | None = None


def softnet_drops() -> list[int]:
    """Per CPU, packets dropped because the CPU's backlog was full (/proc/net/softnet_stat,
    machine-wide: other namespaces' traffic counts too)."""
    lines = Path("/proc/net/softnet_stat").read_text().splitlines()
    return [int(line.split()[1], 16) for line in lines]


def _drops(bench: Bench) -> dict[str, Any]:
    """Drop counters along the path: where frames were lost, when they were."""
    site = bench.site
    links = [("node", site.n3.ifname), ("node", VXLAN_DEVICE), ("node", site.n6.ifname), ("node", site.alt.ifname),
             ("core", site.core0.ifname), ("alt", site.alt0.ifname)]  # fmt: skip
    drops: dict[str, Any] = {}
    for host, ifname in links:
        try:
            stats = netns.link_stats(site.ns(host), ifname)
        except netns.TestbedError:  # a link a fault test removed (an alternative node gone)
            continue
        drops[f"{ifname}_rx_dropped"] = stats["rx"]["dropped"]
        drops[f"{ifname}_tx_dropped"] = stats["tx"]["dropped"]
    drops["backlog_dropped_per_cpu"] = softnet_drops()
    if bench.cpumap is not None:
        drops["cpumap_dropped_per_cpu"] = bench.cpumap.read()["dropped"]
    return drops


def _snapshot(bench: Bench) -> tuple[FlowCounts, FlowCounts, dict[str, Any], dict[str, Any]]:
    return bench.core.read(), bench.alt.read(), bench.system.counters(), _drops(bench)


def _drain(bench: Bench, before: tuple, sent: int) -> float:
    """Wait at least drain_s, then until the sinks have counted every one of the `sent` frames
    since `before`, or their counts have not moved for DRAIN_QUIET_S (the rest taken as lost, as
    above the capacity they are); the time waited. Two reads one poll apart agreeing is not enough:
    a receiving CPU held up that long by other work would have its last frames read as lost."""
    start = time.monotonic()
    time.sleep(bench.drain_s)
    last, moved = None, time.monotonic()
    while time.monotonic() - start < DRAIN_MAX_S:
        now = (bench.core.read(), bench.alt.read())
        if _counted(now, before) >= sent:
            break
        if now != last:
            last, moved = now, time.monotonic()
        elif time.monotonic() - moved >= DRAIN_QUIET_S:
            break
        time.sleep(DRAIN_POLL_S)
    return time.monotonic() - start


def _counted(now: tuple[FlowCounts, FlowCounts], before: tuple) -> int:
    """The frames both sinks counted between `before` (a snapshot) and `now`."""
    core, alt = now[0] - before[0], now[1] - before[1]
    return sum(core.packets) + core.other + sum(alt.packets) + alt.other


def frames_for(rate: float, seconds: float) -> int:
    return max(int(rate * seconds), 16 * 64)


def send_timeout(bench: Bench, rate: float, frames: int) -> float:
    """How long a run may take before it counts as hung: four times what it should take, the
    trial or the frames at `rate` (a paced sender on a CPU it shares falls behind, it does not
    hang), and a minute's margin."""
    return 60 + 4 * max(bench.trial_s, frames / rate if rate > 0 else 0.0)


def run(bench: Bench, rate: float, frames: int | None = None) -> Probe:
    """A trial at `rate` pps (0: as fast as the generator can, `frames` frames)."""
    before = _snapshot(bench)
    count = frames if frames is not None else frames_for(rate, bench.trial_s)
    sent = bench.generator.send(bench.pcap, count, rate, timeout=send_timeout(bench, rate, count))
    drained_s = _drain(bench, before, sent.frames)
    after = _snapshot(bench)
    return _probe(bench, rate, sent, before, after, drained_s)


def _probe(bench: Bench, rate: float, sent: Sent, before: tuple, after: tuple, drained_s: float) -> Probe:
    core, alt = after[0] - before[0], after[1] - before[1]
    flows = accounting.flow_accounts(sent.per_flow, core.packets, alt.packets)
    classes = accounting.class_accounts(flows, PRIORITY)
    problems = accounting.anomalies(flows, core.other + alt.other)
    held = sent.held(bench.tolerance)
    verdict = accounting.verdict(classes[accounting.TOTAL], held, problems)
    seconds = sent.frames / sent.achieved_pps if sent.achieved_pps else sent.seconds
    record = {
        "target_pps": rate,
        "offered_pps": sent.achieved_pps,
        "frames": sent.frames,
        "send_s": seconds,
        "drain_s": round(drained_s, 3),
        "generator": {
            "held": held,
            "slips": sent.slips,
            "slipped_us": sent.slipped_us,
            "max_late_us": sent.max_late_us,
            "wall_s": sent.seconds,
            "batch": sent.batch,
        },
        "classes": {name: a.as_dict() for name, a in classes.items()},
        "rates_pps": {name: _rounded(a.rates(seconds)) for name, a in classes.items()},
        "per_flow": {"sent": list(sent.per_flow), "core": list(core.packets), "alt": list(alt.packets)},
        "problems": problems,
        "drops": _nonzero(counter_delta(_flatten(before[3]), _flatten(after[3]))),
        "netapp": _nonzero(counter_delta(before[2], after[2])),
        **verdict.as_dict(),
    }
    return Probe(rate, sent.achieved_pps, verdict.passed, verdict.limited_by, record)


def _flatten(drops: dict[str, Any]) -> dict[str, Any]:
    flat = {k: v for k, v in drops.items() if not isinstance(v, list)}
    for key, values in drops.items():
        if isinstance(values, list):
            flat[key] = {str(cpu): value for cpu, value in enumerate(values)}
    return flat


def _nonzero(counters: dict[str, Any]) -> dict[str, Any]:
    """The counters that moved (nested), so that a record names only what happened."""
    kept = {}
    for key, value in counters.items():
        value = _nonzero(value) if isinstance(value, dict) else value
        if value:
            kept[key] = value
    return kept


def _rounded(rates: dict[str, float]) -> dict[str, float]:
    return {name: round(value, 1) for name, value in rates.items()}
