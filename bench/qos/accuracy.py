"""The policers' accuracy on a veth link: xdp_police (dataplane/bpf/xdp_police.bpf.c) attached
natively to the receiving end of a veth pair between two namespaces, dpp-pktgen offering twice the
configured rate of frames that name the policer and leave the time to the kernel's clock (as the
pipeline reads it), and the delivered rate read from the policer's own counters over a measured
stretch (after a warm-up that empties the token bucket's initial burst).

    python -m bench.qos.accuracy --out bench/results/qos_accuracy.json

Each case is checked against its algorithm's bound:
  token bucket    within 1% of the rate (the issue's bound), GCRA too;
  windows         a window of W ns lets A = R W / 8e9 bytes through and at least A - (L - 1) - N C
                  of frames of L bytes that keep coming (N C: what the CPUs' credits, a chunk C
                  each, may hold unspent when it ends); a stretch of T s cuts at most a window's
                  worth at each end: delivered / R within [1 - (L - 1 + N C) / A - 2 W / T,
                  1 + 2 W / T].
  sliding window  the same, less G / W: its room grows through a window at the rate the window
                  before passed, and what grows after a window's last arrival is gone at the next
                  window's start (G: the longest gap between arrivals; here a generator batch's
                  period, batch x L x 8 / offered rate).

Methodology and results: bench/README.md, "bench/qos: accuracy on a veth link".
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from ctypes import c_uint32
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from bench.dataplane import machine_info
from bench.libbpf import BpfObject, map_lookup, map_update
from bench.qos.run import read_shares, start_clock, write_share
from bench.throughput.frames import write_pcap
from bench.throughput.generator import Generator, parse_output
from bench.throughput.sink import attach_native
from netapp.core import netns as namespaces
from netapp.dataplane import binding
from netapp.dataplane.abi import CONSTANTS
from netapp.dataplane.handle import possible_cpus
from netapp.qos.abi import Algo, Policer, PolicerStats
from netapp.qos.applier import PolicerSpec, cpu_share, policer_value
from netapp.testbed import netns

DEFAULT_OUT = Path("bench/results/qos_accuracy.json")
POLICER = 1
SLOTS = CONSTANTS["DPP_MAX_POLICERS"]  # a CPU's row of dpp_policer_stats: the built object's dpp_policers
FRAME = 1000  # bytes on the wire (no FCS): what the policer counts
ETHERTYPE = b"\x88\xb5"  # local experimental: no stack reads these frames
SENDER, RECEIVER = "gen0", "pol0"
SENDER_CPU = 0
ALGORITHMS = (Algo.TOKEN_BUCKET, Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW, Algo.GCRA)
BUCKETS = (Algo.TOKEN_BUCKET, Algo.GCRA)  # a bucket's bound, no window


def police_frame(size: int) -> bytes:
    """A frame policed by POLICER at the kernel's clock and jiffies (struct police_test_hdr: id, 0, 0)."""
    head = b"\x02" * 12 + ETHERTYPE + POLICER.to_bytes(4, "big") + bytes(12)
    return head + bytes(size - len(head))


@dataclass(frozen=True)
class Case:
    algo: Algo
    rate: int  # bit/s
    burst_ms: float

    @property
    def burst(self) -> int:
        return max(int(self.rate * self.burst_ms / 8000), 2 * FRAME)

    @property
    def spec(self) -> PolicerSpec:
        """The policer asked for, as the service would take it."""
        return PolicerSpec(rate=self.rate, burst=self.burst, algo=self.algo)


def bound(case: Case, window_ns: int, seconds: float, gap_ns: float) -> tuple[float, float]:
    """The delivered/configured ratio the algorithm guarantees for frames of FRAME bytes that
    arrive at most gap_ns apart."""
    if case.algo in BUCKETS:
        return 0.99, 1.01
    allowance = case.rate * window_ns / 8e9
    edges = 2 * window_ns / (seconds * 1e9)
    held = possible_cpus() * (cpu_share(case.spec) or PolicerStats()).chunk  # the CPUs' credits, unspent
    low = 1 - (FRAME - 1 + held) / allowance - edges
    if case.algo == Algo.SLIDING_WINDOW:
        low -= gap_ns / window_ns
    return low, 1 + edges


class Link:
    """A namespace of its own holding a veth pair, xdp_police on its receiving end; removed (with
    everything attached to the pair) on close."""

    def __init__(self, obj_path: Path):
        self.ns = f"dppqos-{secrets.token_hex(3)}"
        self.obj: Optional[BpfObject] = None
        try:
            netns.add_namespace(self.ns)
            netns.run(["ip", "-n", self.ns, "link", "add", SENDER, "type", "veth", "peer", "name", RECEIVER])
            for end in (SENDER, RECEIVER):
                netns.run(["ip", "-n", self.ns, "link", "set", end, "up"])
            self.obj = BpfObject(obj_path, {"dpp_policer_stats": possible_cpus() * SLOTS})
            start_clock(self.obj)  # the coarse policers read their timer's word, as the pipeline's do
            with namespaces.entered(self.ns):
                attach_native(socket.if_nametoindex(RECEIVER), self.obj.program_fd("xdp_police"))
            self.policers = self.obj.map_fd("dpp_policers")
            self.stats = self.obj.map_fd("dpp_policer_stats")
        except BaseException:
            self.close()
            raise

    def configure(self, case: Case) -> int:
        """The policer as the case says, written as netapp/qos/applier.py writes it in service: its
        state zeroed, the bucket's share of the burst (policer_value) and each CPU's slot with its
        counters zeroed and its chunk (cpu_share: the CPUs' credit, police.h); its window length (ns)."""
        value = policer_value(case.spec)
        share = cpu_share(case.spec) or PolicerStats()
        map_update(self.policers, c_uint32(POLICER), value)
        write_share(self.stats, POLICER, SLOTS, share)
        return 1 << value.window_shift

    def policer(self) -> Policer:
        """The policer's slot: its configuration and state."""
        value = Policer()
        map_lookup(self.policers, c_uint32(POLICER), value)
        return value

    def shares(self) -> list[PolicerStats]:
        """Each CPU's slot: its counters, its credit and its chunk."""
        return read_shares(self.stats, POLICER, SLOTS)

    def counters(self) -> tuple[int, int, int]:
        """(passed bytes, passed frames, dropped frames), every CPU's added up."""
        per_cpu = self.shares()
        return (
            sum(cpu.passed_bytes for cpu in per_cpu),
            sum(cpu.passed_packets for cpu in per_cpu),
            sum(cpu.dropped_packets for cpu in per_cpu),
        )

    def close(self) -> None:
        netns.delete_namespace(self.ns)
        if self.obj is not None:
            self.obj.close()
            self.obj = None

    def __enter__(self) -> "Link":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def generator(self, pktgen: Path) -> Generator:
        """dpp-pktgen sending out of the pair's other end."""
        return Generator(pktgen, self.ns, SENDER, cpu=SENDER_CPU)


@contextlib.contextmanager
def policed_link() -> Iterator[tuple[Link, Generator, Path]]:
    """The link, its generator and the pcap of the policer's frame, all removed on exit."""
    build = Path(binding.find_libdpp()).parent
    with Link(build / "xdp_police.bpf.o") as link, tempfile.TemporaryDirectory() as workdir:
        yield link, link.generator(build / "dpp-pktgen"), write_pcap(Path(workdir) / "police.pcap", [police_frame(FRAME)])


def measure(link: Link, generator: Generator, pcap: Path, case: Case, warmup: float, seconds: float) -> dict:
    """One case: 2x its rate offered for warmup + seconds (+ a tail), the counters read at the
    stretch's ends."""
    window_ns = link.configure(case)
    pps = 2 * case.rate / (8 * FRAME)
    frames = int(pps * (warmup + seconds + 0.5))
    proc = subprocess.Popen(generator.command(pcap, frames, pps), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(warmup)  # a measurement stretch, not synchronisation: the counters say what passed
        start, before = time.monotonic(), link.counters()
        time.sleep(seconds)
        end, after = time.monotonic(), link.counters()
        out, err = proc.communicate(timeout=warmup + seconds + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"dpp-pktgen: {err.strip()}")
    sent = parse_output(out)
    shares = link.shares()
    elapsed = end - start
    delivered = (after[0] - before[0]) * 8 / elapsed
    gap_ns = sent.batch * 1e9 / sent.achieved_pps  # the period of the generator's batches
    low, high = bound(case, window_ns, elapsed, gap_ns)
    ratio = delivered / case.rate
    return {
        "algorithm": case.algo.name.lower(),
        "rate_bps": case.rate,
        "burst_bytes": case.burst,
        "bucket_bytes": policer_value(case.spec).burst,  # the burst less the CPUs' chunks
        "chunk_bytes": [cpu.chunk for cpu in shares],  # each CPU's, as the applier writes it
        "credit_bytes_at_end": [cpu.credit for cpu in shares],
        "window_ns": window_ns if case.algo not in BUCKETS else None,
        "arrival_gap_ns": gap_ns,
        "frame_bytes": FRAME,
        "offered_bps": sent.achieved_pps * 8 * FRAME,
        "offered_over_rate": sent.achieved_pps * 8 * FRAME / case.rate,
        "generator_slips": sent.slips,
        "seconds": elapsed,
        "delivered_bps": delivered,
        "delivered_over_rate": ratio,
        "bound": [low, high],
        "within_bound": low <= ratio <= high,
        "passed_frames": after[1] - before[1],
        "dropped_frames": after[2] - before[2],
    }


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.qos.accuracy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--rates", type=lambda text: [int(float(v)) for v in text.split(",")],
                        default=[10**7, 10**8, 10**9], help="configured rates, bit/s (comma-separated)")
    parser.add_argument("--burst-ms", type=float, default=20.0, help="burst: this many ms at the rate")
    parser.add_argument("--seconds", type=float, default=10.0, help="the measured stretch of each case")
    parser.add_argument("--warmup", type=float, default=1.0, help="offered before the stretch starts")
    parser.add_argument("--algorithms", type=lambda text: [Algo[name.upper()] for name in text.split(",")],
                        default=list(ALGORITHMS), help="the algorithms measured (comma-separated names)")
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rows = []
    with policed_link() as (link, generator, pcap):
        for rate in args.rates:
            for algo in args.algorithms:
                row = measure(link, generator, pcap, Case(algo, rate, args.burst_ms), args.warmup, args.seconds)
                rows.append(row)
                print(
                    f"{rate / 1e6:>8.0f} Mb/s {row['algorithm']:<15} offered x{row['offered_over_rate']:.3f}  "
                    f"delivered x{row['delivered_over_rate']:.5f}  bound [{row['bound'][0]:.4f}, "
                    f"{row['bound'][1]:.4f}] {'ok' if row['within_bound'] else 'OUTSIDE'}  "
                    f"chunk {row['chunk_bytes'][0]}",
                    flush=True,
                )
    result = {
        "benchmark": "qos_accuracy",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if all(row["within_bound"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
