"""`python -m bench.throughput`: zero-loss throughput and offered-load sweeps of the edge node with
the NetApp and with the kernel path alone, per packet size and CPU count (see bench/README.md).

Per size: the kernel path first (its zero-loss rate on one CPU is that CPU's calibrated capacity),
then the NetApp with those capacities. Per (size, CPUs, system): the generator's own maximum
against that system (an unpaced run), the RFC 2544 search below it, then the sweep.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.throughput import frames, report, trial
from bench.throughput.frames import UE_SOURCE_PORT_AT
from bench.throughput.generator import DEFAULT_BATCH, DEFAULT_SLACK_US, Generator, GeneratorError
from bench.throughput.search import binary_search, sweep_rates
from bench.throughput.sink import CpumapCounter, Sink
from bench.throughput.systems import KERNEL, NETAPP, RECEIVE_CPU, KernelPath, NetAppPath, System
from netapp.dataplane import binding
from netapp.testbed import decap, netns, scenario
from netapp.testbed.topology import EdgeSite

SIZES = (64, 128, 256, 512, 1024, 1500)
MTU = 1700  # every link: the largest frame, 1608 bytes, fits; so do 1544-byte inner packets on n6
KNEE_FACTORS = (0.5, 0.8, 1.0, 1.2, 1.5, 2.0)  # extra sweep points around the zero-loss rate
PROBE_FRAMES = 200_000  # the unpaced run that estimates how long the generator's maximum run takes
QUICK = {"sizes": (64, 1500), "trial_s": 0.5, "resolution": 0.05, "sweep_points": 5}


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def _capacities(text: str) -> dict[int, int]:
    pairs = (part.split(":") for part in text.split(",") if part)
    return {int(cpu): int(float(pps)) for cpu, pps in pairs}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("bench/results/throughput.json"))
    p.add_argument("--sizes", type=_ints, default=SIZES, help="UE packet sizes in bytes (64,...,1500)")
    p.add_argument("--cpus", type=_ints, default=(1, 2), help="CPU counts of the node (1,2)")
    p.add_argument("--systems", default=f"{KERNEL},{NETAPP}", help="kernel, netapp or both")
    p.add_argument("--trial-s", type=float, default=2.0, help="seconds of traffic per trial")
    p.add_argument("--resolution", type=float, default=0.01, help="search resolution, of the start rate")
    p.add_argument("--sweep-points", type=int, default=10, help="evenly spaced offered loads per sweep")
    p.add_argument("--no-sweep", action="store_true", help="zero-loss searches only")
    p.add_argument("--tolerance", type=float, default=0.01, help="generator may fall this far short")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="live-frame batch = burst size")
    p.add_argument("--slack-us", type=int, default=DEFAULT_SLACK_US, help="generator catch-up limit")
    p.add_argument("--drain-s", type=float, default=0.2, help="least wait after sending")
    p.add_argument("--capacity-margin", type=float, default=0.7, help="capacity_pps = margin x calibrated")
    p.add_argument(
        "--capacity-pps", type=_capacities, default=None, help="CPU:PPS,... instead of calibrating"
    )
    p.add_argument(
        "--queue-size", type=int, default=8192, help="CPUMAP queue per CPU (0: libdpp's 2048)"
    )  # 8192: ~19 ms at 0.43 Mpps steered, longer than the VM's stalls of the CPUMAP thread
    p.add_argument(
        "--cpumap-priority", type=int, default=10, help="SCHED_FIFO priority of the CPUMAP threads (0: normal)"
    )
    p.add_argument(
        "--ue-flows", type=int, default=16, help="active UE flows in all (the 16 services' UE source ports vary)"
    )
    p.add_argument("--quick", action="store_true", help="sizes 64,1500; 0.5 s trials; 5 %%; 5 sweep points")
    args = p.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            if getattr(args, name) == p.get_default(name):
                setattr(args, name, value)
    args.systems = tuple(s for s in args.systems.split(",") if s)
    unknown = set(args.systems) - {KERNEL, NETAPP}
    if unknown or min(args.sizes) < frames.MIN_SIZE:
        p.error(f"systems are {KERNEL} and {NETAPP}; sizes at least {frames.MIN_SIZE} (got {args})")
    services = len(scenario.flows())
    if not services <= args.ue_flows <= services * 25_000:
        p.error(f"--ue-flows: {services} (one per service) to {services * 25_000} (UE source ports 40000 and up, per service)")
    if not 0 <= args.cpumap_priority <= 99:
        p.error(f"--cpumap-priority: 0 (normal) or a SCHED_FIFO priority 1-99, not {args.cpumap_priority}")
    return args


def cpu_set(count: int, total: int | None = None) -> tuple[int, ...]:
    """The node's CPUs for a count: the highest-numbered ones. CPU 0 receives and generates, so it
    only joins when every CPU is asked for (both, on a 2-CPU machine)."""
    total = total or os.cpu_count() or 1
    if not 1 <= count <= total:
        raise ValueError(f"{count} CPUs asked for, {total} present")
    return tuple(range(total - count, total))


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Runner:
    """The site, sinks and generator of one run, and the results as they come."""

    def __init__(self, site: EdgeSite, args: argparse.Namespace, workdir: Path):
        build = Path(binding.find_libdpp()).parent
        self.site, self.args, self.workdir = site, args, workdir
        self.core = self.core_sink(build)
        self.alt = Sink(build / "xdp_count.bpf.o", site.ns("alt"), site.alt0.ifname, scenario.TEID_BASE, 16)
        self.generator = self.make_generator(build)
        self.cpumap = CpumapCounter(build / "cpumap_drops.bpf.o", os.cpu_count() or 1)
        self.results: list[dict[str, Any]] = []
        self.calibration: list[dict[str, Any]] = []

    def core_sink(self, build: Path) -> Sink:
        site = self.site
        return Sink(build / "xdp_count.bpf.o", site.ns("core"), site.core0.ifname, scenario.TEID_BASE, 16)

    def make_generator(self, build: Path, spread: int = 0, spread_offset: int = UE_SOURCE_PORT_AT) -> Generator:
        """dpp-pktgen from the RAN side on the receiving CPU; `spread` flows per service at
        `spread_offset` (0: as many as --ue-flows asks for, at the UE source port)."""
        return Generator(
            build / "dpp-pktgen",
            self.site.ns("ran"),
            self.site.ran0.ifname,
            RECEIVE_CPU,
            self.args.batch,
            self.args.slack_us,
            spread=spread or -(-self.args.ue_flows // len(scenario.flows())),
            spread_offset=spread_offset,
        )

    def close(self) -> None:
        self.core.close()
        self.alt.close()
        self.cpumap.close()

    def bench(self, system: System, pcap: Path) -> trial.Bench:
        a = self.args
        return trial.Bench(
            self.site,
            self.generator,
            self.core,
            self.alt,
            system,
            pcap,
            a.trial_s,
            a.drain_s,
            a.tolerance,
            self.cpumap,
        )

    def generator_max(self, bench: trial.Bench) -> trial.Probe:
        """An unpaced run as long as a trial: the most this generator offers against this system."""
        estimate = trial.run(bench, 0, frames=PROBE_FRAMES).offered_pps
        return trial.run(bench, 0, frames=trial.frames_for(estimate, bench.trial_s))

    def measure(self, system: System, pcap: Path, sweep: bool) -> dict[str, Any]:
        bench = self.bench(system, pcap)
        top = self.generator_max(bench)
        note(f"    generator maximum {top.offered_pps / 1e6:.3f} Mpps")
        search = binary_search(lambda rate: self._trial(bench, rate), top.offered_pps, self.args.resolution)
        found = f"{search.zero_loss_pps / 1e6:.3f} Mpps ({search.limited_by} above)"
        note(f"    zero loss {found} after {len(search.trials)} trials")
        result: dict[str, Any] = {"generator_max": top.record, "zero_loss": search.as_dict()}
        if sweep:
            rates = sweep_rates(top.offered_pps, self.args.sweep_points, search.zero_loss_pps, KNEE_FACTORS)
            result["sweep"] = [self._trial(bench, rate).record for rate in rates]
        return result

    def _trial(self, bench: trial.Bench, rate: float) -> trial.Probe:
        probe = trial.run(bench, rate)
        lost = probe.record["classes"]["total"]["lost"]
        note(f"      {rate / 1e6:7.3f} Mpps asked, {probe.offered_pps / 1e6:7.3f} offered, lost {lost}")
        return probe

    def run_system(
        self, system: System, size: int, pcap: Path, capacity: dict[int, int], sweep: bool
    ) -> dict:
        note(f"  size {size}, {system.name}, CPUs {','.join(map(str, system.cpus))}")
        system.start()
        try:
            system.set_capacity(capacity)
            measured = self.measure(system, pcap, sweep)
        finally:
            system.stop()
        return {"size": size, "system": system.name, "cpus": list(system.cpus), **measured}

    def kernel(self, cpus: tuple[int, ...]) -> KernelPath:
        return KernelPath(self.site, cpus)

    def netapp(self, cpus: tuple[int, ...]) -> NetAppPath:
        state = Path(tempfile.mkdtemp(dir=self.workdir))
        priority = self.args.cpumap_priority or None
        return NetAppPath(self.site, cpus, state, queue_size=self.args.queue_size, cpumap_priority=priority)

    def run_size(self, size: int) -> None:
        a = self.args
        pcap = frames.write_pcap(self.workdir / f"flows-{size}.pcap", frames.flow_frames(self.site, size))
        sets = [cpu_set(n) for n in a.cpus]
        kernel_by_set: dict[tuple[int, ...], dict] = {}
        if KERNEL in a.systems:
            for cpus in sets:
                entry = self.run_system(self.kernel(cpus), size, pcap, {}, not a.no_sweep)
                kernel_by_set[cpus] = entry
                self.results.append(entry)
        if NETAPP in a.systems:
            capacity = self.capacities(size, pcap, sets, kernel_by_set)
            for cpus in sets:
                entry = self.run_system(self.netapp(cpus), size, pcap, capacity, not a.no_sweep)
                entry["capacity_pps"] = {str(cpu): capacity.get(cpu, 0) for cpu in cpus}
                self.results.append(entry)

    def capacities(
        self, size: int, pcap: Path, sets: list[tuple[int, ...]], kernel_by_set: dict
    ) -> dict[int, int]:
        """capacity_pps per CPU: given, or margin x what the CPU carried without loss on the path
        its packets take with the NetApp (calibrate)."""
        if self.args.capacity_pps is not None:
            return dict(self.args.capacity_pps)
        capacity = {}
        for cpu in sorted({cpu for cpus in sets for cpu in cpus}):
            pps, entry = self.calibrate(cpu, size, pcap, kernel_by_set)
            capacity[cpu] = int(self.args.capacity_margin * pps)
            self.calibration.append({**entry, "calibrated_cpu": cpu, "calibrated_pps": round(pps)})
        note(f"  capacity_pps {capacity}")
        return capacity

    def calibrate(self, cpu: int, size: int, pcap: Path, kernel_by_set: dict) -> tuple[float, dict]:
        """The zero-loss rate of one CPU's stack work, on the path the NetApp gives it:
        - a steering target gets its packets through CPUMAP (the skb is built on that CPU): the
          NetApp alone on that CPU, unmetered; its rate is the priority part of the zero-loss rate;
        - the receiving CPU processes best effort where XDP passed it, in line with its receive:
          the kernel path with RPS on that CPU alone is that path."""
        note(f"  calibrating CPU {cpu}")
        if cpu == RECEIVE_CPU:
            entry = kernel_by_set.get((cpu,)) or self.run_system(self.kernel((cpu,)), size, pcap, {}, False)
            return entry["zero_loss"]["pps"], entry
        entry = self.run_system(self.netapp((cpu,)), size, pcap, {cpu: 0}, sweep=False)
        return priority_rate(entry["zero_loss"]), entry


def priority_rate(zero_loss: dict[str, Any]) -> float:
    """The priority traffic's offered rate in the fastest passing trial of a search (0: none)."""
    passed = [t for t in zero_loss["trials"] if t["passed"] and t["offered_pps"] == zero_loss["pps"]]
    return passed[0]["rates_pps"]["priority"]["offered"] if passed else 0.0


def run_sizes(
    runner_class: type[Runner], args: argparse.Namespace, prepare: Callable[[EdgeSite], None] | None = None
) -> Runner:
    """Every size of `args` on a new edge site (its kernel path on; then `prepare`), by a runner of
    `runner_class`; the runner, with its results, once the site is gone."""
    site = EdgeSite(mtu=MTU, queues=os.cpu_count() or 1)
    with tempfile.TemporaryDirectory(prefix="dpp-throughput-") as tmp, site:
        decap.enable(site)
        if prepare is not None:
            prepare(site)
        runner = runner_class(site, args, Path(tmp))
        try:
            for size in args.sizes:
                runner.run_size(size)
        finally:
            runner.close()
    return runner


def run(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    started = time.monotonic()
    load_at_start = os.getloadavg()
    runner = run_sizes(Runner, args)
    settings = {name: getattr(args, name) for name in report.SETTINGS}
    settings |= {
        "mtu": MTU,
        "cpu_sets": {str(n): list(cpu_set(n)) for n in args.cpus},
        "receive_cpu": RECEIVE_CPU,
        "load_average_at_start": [round(load, 2) for load in load_at_start],
    }
    return report.document(
        runner.results, runner.calibration, settings, list(argv), time.monotonic() - started
    )


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    """SIGTERM unwinds like Ctrl-C, so the site, the NetApp's pins and the sinks are removed."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--upf" in argv:  # the UPF's uplink against the kernel path (bench.throughput.upf)
        from bench.throughput import upf

        return upf.main([arg for arg in argv if arg != "--upf"])
    args = parse_args(argv)
    if os.geteuid() != 0:
        note("bench.throughput: needs root (network namespaces, XDP, BPF_PROG_TEST_RUN)")
        return 2
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        result = run(args, argv)
    except (GeneratorError, netns.TestbedError, binding.LibraryNotFoundError) as exc:
        note(f"bench.throughput: {exc}")
        return 1
    report.write_outputs(result, args.out)
    return 0
