"""`python -m bench.throughput --upf`: zero-loss throughput of the UPF's uplink on the edge site,
against the kernel path on the same core (see bench/README.md, "The UPF's uplink").

The RAN side sends the experiment's 16 services (VXLAN / GTP-U, bench.throughput.frames); the
generator numbers each service's frames over `sessions / 16` TEIDs (the TEID's high 16 bits), so
every frame of a cycle is a different session. The two systems, on the same node core:

- upf: the NetApp with the UPF on n3 (native XDP), every session installed through the UPF's own
  applier (netapp.upf.runtime.bpf_applier, as `netapp serve` makes it): an uplink PDR on its TEID
  with outer header removal (VXLAN, GTP-U, UDP, IPv4 go), a FAR forwarding to the data network,
  a URR counting; the packet leaves by the FIB (bpf_fib_lookup, redirect to n6).
- kernel: the kernel's VXLAN device ends the tunnel and IPv4 forwarding routes the inner packet out
  of n6 (netapp.testbed.decap). This kernel has no GTP-U module (CONFIG_GTP), so the GTP-U header
  stays on and no session is looked up: the kernel does less per packet than a UPF must.

Both receive on n3 in a threaded NAPI context pinned to the node's core, so the whole node (XDP,
or the kernel's receive, decapsulation and forwarding) runs there; the generator has CPU 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench.throughput import frames, report, run
from bench.throughput.generator import DEFAULT_BATCH, DEFAULT_SLACK_US, GeneratorError
from bench.throughput.sink import Sink
from bench.throughput.systems import RECEIVE_CPU, KernelPath, NetAppPath
from bench.upf import workload
from netapp.core.config import (
    DataplaneSettings,
    DispatchSettings,
    InterfaceSetting,
    PfcpSettings,
    Settings,
    UpfSettings,
)
from netapp.dataplane import binding
from netapp.testbed import netns, scenario
from netapp.testbed.topology import EdgeSite
from netapp.upf.models import Session
from netapp.upf.nexthop import RouteWatch
from netapp.upf.runtime import bpf_applier

UPF, KERNEL, DISPATCH = "upf", "kernel", "dispatch"
SESSIONS = (1024, 100_000)
FLOWS = len(scenario.flows())
# The TEID's high 16 bits: the generator adds a frame's session number there (frames.py's layout:
# the GTP-U header is the last 16 bytes of the encapsulation, its TEID 4 bytes in).
TEID_AT = frames.ENCAPSULATION_BYTES - 16 + 4
MAX_SESSIONS = FLOWS << 16
DATA_NETWORK = "10.0.0.0/24"  # holds the UE packets' destination (scenario.frame)
NET_INSTANCE = "internet"
NODE_CPU = run.cpu_set(1)[0] if (os.cpu_count() or 1) > 1 else 0
METHOD = {
    **{key: report.METHOD[key] for key in ("size", "loss", "zero_loss")},
    "traffic": "the 16 GTP-U services of bench.throughput in VXLAN VNI 0x445; the generator gives service k's "
    "n-th frame of a cycle TEID 0x8894D0D0 + k + (n << 16): sessions / 16 TEIDs per service, every session "
    "visited once per `sessions` frames",
    "generator": "dpp-pktgen -m on CPU 0 in the RAN namespace (BPF_PROG_TEST_RUN live frames, XDP_TX into ran0)",
    "node": "n3's receive runs in threaded NAPI, its thread pinned to node_cpu at SCHED_FIFO napi_priority, for "
    "both systems: everything the node does runs there (the sinks' XDP too, on the CPU that sends to them)",
    "upf": "the NetApp's UPF natively on n3: per session an uplink PDR (TEID, outer header removal), a FAR "
    "forwarding to N6 and a URR, written by the UPF's applier (netapp.upf.runtime.bpf_applier); VXLAN, "
    "GTP-U, UDP and IPv4 removed in XDP, out of n6 by bpf_fib_lookup",
    "kernel": "no XDP; the kernel's VXLAN device (vx0) decapsulates, IPv4 forwarding routes the inner "
    "GTP-U packet out of n6 (netapp.testbed.decap). No GTP-U module in this kernel: the GTP-U header "
    "is not removed and no session is looked up",
    "sinks": "XDP counter on core0: a frame counts for its service by TEID & 0xffff (GTP-U, the kernel path) or "
    "by UE source address (decapsulated, the UPF), then XDP_DROP",
}


def session_teid(flow: int, number: int) -> int:
    """The TEID of service `flow`'s session `number`, as the generator writes it."""
    return scenario.TEID_BASE + flow + (number << 16)


def sessions(count: int) -> list[Session]:
    """`count` sessions, `count / 16` per service; session i = number i // 16 of service i % 16."""
    return [
        workload.session(i, teid=session_teid(i % FLOWS, i // FLOWS), n3=scenario.INNER_DST_IP).model_copy(
            update={"urr_slots": {1: workload.urr_slot(i)}}
        )
        for i in range(count)
    ]


def napi_threads(ifname: str) -> set[int]:
    """Pids of the threaded NAPI contexts of interfaces called `ifname` (any namespace)."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm.startswith(f"napi/{ifname}-"):
            found.add(int(pid))
    return found


def pin_napi(ns: str, ifname: str, cpu: int, priority: int) -> list[int]:
    """Threaded NAPI on the interface (off and on: the threads that appear are its), pinned to cpu,
    at SCHED_FIFO `priority` (0: normal), so that other tasks on the core do not hold it off while
    the veth's 256-frame ring overflows."""
    sysfs = f"/sys/class/net/{ifname}/threaded"
    netns.run(["sh", "-c", f"echo 0 > {sysfs}"], netns=ns)
    before = napi_threads(ifname)
    netns.run(["sh", "-c", f"echo 1 > {sysfs}"], netns=ns)
    threads = sorted(napi_threads(ifname) - before)
    if not threads:
        raise netns.TestbedError(f"{ifname} in {ns}: no threaded NAPI context appeared")
    for pid in threads:
        os.sched_setaffinity(pid, {cpu})
        if priority:
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
    return threads


@dataclass
class KernelDecap(KernelPath):
    """The kernel path with n3's receive in a NAPI thread on the node's core (no RPS)."""

    napi_priority: int = 0
    napi: list[int] = field(default_factory=list)

    def start(self) -> None:
        ns = self.site.ns("node")
        netns.set_gro(ns, self.site.n3.ifname, True)
        self.napi = pin_napi(ns, self.site.n3.ifname, self.cpus[0], self.napi_priority)


@dataclass
class UpfPath(NetAppPath):
    """The NetApp's UPF on n3 with `sessions` sessions; n3's receive pinned like the kernel's."""

    sessions: int = 0
    napi_priority: int = 0
    name: str = UPF
    napi: list[int] = field(default_factory=list)
    routes: RouteWatch | None = None
    install_s: float = 0.0

    def settings(self) -> Settings:
        site = self.site
        return Settings(
            state_dir=self.state_dir,
            instance=self.instance,
            netns=site.ns("node"),
            interfaces=[InterfaceSetting(name=site.n3.ifname, mode="native")],
            pfcp=PfcpSettings(n3_ipv4=scenario.INNER_DST_IP),
            upf=UpfSettings(n3_interfaces=[site.n3.ifname], n6_interfaces={site.n6.ifname: NET_INSTANCE}),
            # a URR slot for each session (the generator's TEIDs lie past dpp_upf_teids: the hash's)
            dataplane=DataplaneSettings(map_sizes={"dpp_upf_usage": workload.urr_slot(self.sessions - 1) + 1}),
            auth_disabled=True,
        )

    def start(self) -> None:
        super().start()
        self.napi = pin_napi(self.site.ns("node"), self.site.n3.ifname, self.cpus[0], self.napi_priority)

    def _configure(self) -> None:
        """The sessions through the UPF's applier, and its route cache kept as `netapp serve` does."""
        assert self.service is not None
        settings = self.service.settings
        started = time.monotonic()
        with netns.entered(self.site.ns("node")):
            applier = bpf_applier(self.service.dataplane, settings.upf, settings.pfcp)
            for session in sessions(self.sessions):
                applier.apply(None, session)
            self.routes = RouteWatch(self.service.dataplane.table("dpp_upf_route_gen")).start()
        self.install_s = time.monotonic() - started

    def set_capacity(self, capacity_pps: dict[int, int]) -> None:
        """The UPF has no capacity to set."""

    def stop(self) -> None:
        if self.routes is not None:
            self.routes.close()
            self.routes = None
        super().stop()


@dataclass
class DispatchPath(UpfPath):
    """The UPF behind the GTP-U dispatcher: n3's receiving core (the node's) spreads the tunnels over
    `workers` through CPUMAP, and the UPF runs there (netapp.qos.dispatch)."""

    workers: tuple[int, ...] = ()
    name: str = DISPATCH

    def settings(self) -> Settings:
        dispatch = DispatchSettings(interfaces=[self.site.n3.ifname], workers=list(self.workers))
        return super().settings().model_copy(update={"dispatch": dispatch})


class UpfRunner(run.Runner):
    """bench.throughput's runner with the core sink and generator of the UPF's traffic."""

    sessions = 0  # per run of a system: the generator's spread is set before each

    def core_sink(self, build: Path) -> Sink:
        site = self.site
        return Sink(build / "xdp_count.bpf.o", site.ns("core"), site.core0.ifname, scenario.TEID_BASE, FLOWS,
                    teid_mask=0xFFFF, ue_base=scenario.Flow(0).ue_ip)  # fmt: skip

    def for_sessions(self, count: int) -> None:
        build = Path(binding.find_libdpp()).parent
        self.generator = self.make_generator(build, spread=count // FLOWS, spread_offset=TEID_AT)

    def upf(self, cpus: tuple[int, ...], count: int) -> UpfPath:
        state = Path(tempfile.mkdtemp(dir=self.workdir))
        return UpfPath(self.site, cpus, state, sessions=count, napi_priority=self.args.napi_priority)

    def dispatch(self, cpus: tuple[int, ...], count: int) -> DispatchPath:
        state = Path(tempfile.mkdtemp(dir=self.workdir))
        return DispatchPath(self.site, cpus, state, sessions=count, napi_priority=self.args.napi_priority,
                            workers=tuple(self.args.workers))

    def run_size(self, size: int) -> None:
        a = self.args
        pcap = frames.write_pcap(self.workdir / f"flows-{size}.pcap", frames.flow_frames(self.site, size))
        cpus = (a.node_cpu,)
        for count in a.sessions:
            self.for_sessions(count)
            systems: list[Callable[[], Any]] = []
            if KERNEL in a.systems:
                systems.append(lambda: KernelDecap(self.site, cpus, napi_priority=a.napi_priority))
            if UPF in a.systems:
                systems.append(lambda: self.upf(cpus, count))
            if DISPATCH in a.systems:
                systems.append(lambda: self.dispatch(cpus, count))
            for make in systems:
                system = make()
                run.note(f"  {count:,} sessions")
                entry = self.run_system(system, size, pcap, {}, a.sweep)
                entry.update(sessions=count, napi_threads=len(system.napi))
                if isinstance(system, UpfPath):
                    entry["install_s"] = round(system.install_s, 2)
                self.results.append(entry)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.throughput --upf", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("bench/results/throughput-upf.json"))
    p.add_argument("--sizes", type=run._ints, default=(64,), help="UE packet sizes in bytes")
    p.add_argument("--sessions", type=run._ints, default=SESSIONS, help="installed sessions, multiples of 16")
    p.add_argument("--systems", default=f"{KERNEL},{UPF}", help="of kernel, upf, dispatch (the UPF behind the dispatcher)")
    p.add_argument("--workers", type=run._ints, default=(RECEIVE_CPU,), help="the dispatcher's worker CPUs")
    p.add_argument("--node-cpu", type=int, default=NODE_CPU, help="the node's core (the generator has CPU 0)")
    p.add_argument("--napi-priority", type=int, default=10, help="SCHED_FIFO priority of n3's NAPI thread (0: normal)")
    p.add_argument("--trial-s", type=float, default=1.0, help="seconds of traffic per trial")
    p.add_argument("--resolution", type=float, default=0.02, help="search resolution, of the start rate")
    p.add_argument("--sweep", action="store_true", help="also an offered-load sweep per system")
    p.add_argument("--sweep-points", type=int, default=5, help="evenly spaced offered loads per sweep")
    p.add_argument("--tolerance", type=float, default=0.01, help="generator may fall this far short")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="live-frame batch = burst size")
    p.add_argument("--slack-us", type=int, default=DEFAULT_SLACK_US, help="generator catch-up limit")
    p.add_argument("--drain-s", type=float, default=0.2, help="least wait after sending")
    args = p.parse_args(argv)
    args.systems = tuple(s for s in args.systems.split(",") if s)
    if set(args.systems) - {KERNEL, UPF, DISPATCH} or min(args.sizes) < frames.MIN_SIZE:
        p.error(f"--systems: of {KERNEL}, {UPF}, {DISPATCH}; --sizes: at least {frames.MIN_SIZE} bytes")
    if any(n % FLOWS or not FLOWS <= n <= MAX_SESSIONS for n in args.sessions):
        p.error(f"--sessions: multiples of {FLOWS} (the services) from {FLOWS} to {MAX_SESSIONS:,}, not {args.sessions}")
    args.ue_flows = FLOWS  # what run.Runner reads of bench.throughput's options
    return args


def summary(results: Sequence[dict]) -> list[dict[str, Any]]:
    """One row per (size, sessions): both systems' zero-loss rates (report's columns) and the ratio."""
    rows = []
    for size, count in sorted({(r["size"], r["sessions"]) for r in results}):
        row: dict[str, Any] = {"size": size, "frame_bytes": frames.frame_bytes(size), "sessions": count}
        for entry in results:
            if (entry["size"], entry["sessions"]) == (size, count):
                row.update(report._system_columns(entry["system"], entry["zero_loss"]))
                row["cpus"] = entry["cpus"]
        if row.get("kernel_pps") and "upf_pps" in row:
            row["ratio"] = round(row["upf_pps"] / row["kernel_pps"], 2)
        rows.append(row)
    return rows


def markdown_table(result: dict[str, Any]) -> str:
    """The summary as the README shows it."""
    lines = ["| UE packet (frame) | sessions | kernel path, Mpps | UPF, Mpps | UPF / kernel |", "|---|---|---|---|---|"]
    for row in result["summary"]:
        cells = [report._markdown_cell(row, system) for system in (KERNEL, UPF)]
        ratio = "-" if "ratio" not in row else f"{'≥' if row.get('upf_limited_by') == 'generator' else ''}{row['ratio']:.1f}"
        lines.append(f"| {row['size']} B ({row['frame_bytes']} B) | {row['sessions']:,} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines)


def document(runner: UpfRunner, args: argparse.Namespace, argv: list[str], started: float, load: Any) -> dict:
    rows = summary(runner.results)
    settings = {name: getattr(args, name) for name in ("sizes", "sessions", "systems", "node_cpu", "trial_s",
                "resolution", "sweep", "sweep_points", "tolerance", "batch", "slack_us", "drain_s", "napi_priority",
                "workers")}  # fmt: skip
    settings |= {"mtu": run.MTU, "generator_cpu": RECEIVE_CPU, "load_average_at_start": [round(x, 2) for x in load]}
    return {
        "benchmark": "throughput-upf",
        "command": " ".join(["python -m bench.throughput --upf", *argv]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "duration_s": round(time.monotonic() - started, 1),
        "machine": report.machine_info(),
        "settings": settings,
        "method": METHOD,
        "summary": rows,
        "results": runner.results,
    }


def measure(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    started, load = time.monotonic(), os.getloadavg()
    runner = run.run_sizes(UpfRunner, args, route_data_network)
    return document(runner, args, argv, started, load)  # type: ignore[arg-type]


def route_data_network(site: EdgeSite) -> None:
    """The UE packets' destination via the core, for the UPF's FIB lookups."""
    netns.run(["ip", "route", "replace", DATA_NETWORK, "via", site.core0.ip, "dev", site.n6.ifname],
              netns=site.ns("node"))  # fmt: skip


def write_outputs(result: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report.dumps(result) + "\n")
    print(markdown_table(result))
    print(f"\nwrote {out}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if os.geteuid() != 0:
        run.note("bench.throughput --upf: needs root (network namespaces, XDP, BPF_PROG_TEST_RUN)")
        return 2
    signal.signal(signal.SIGTERM, run._exit_on_sigterm)
    try:
        result = measure(args, argv)
    except (GeneratorError, netns.TestbedError, binding.LibraryNotFoundError) as exc:
        run.note(f"bench.throughput --upf: {exc}")
        return 1
    write_outputs(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
