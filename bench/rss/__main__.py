"""python -m bench.rss: see bench/rss/__init__.py and bench/README.md."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.dataplane import machine_info
from bench.harness import EMPTY_OBJECT
from bench.libbpf import BpfObject, test_run, test_run_live
from netapp.dataplane.facade import Dataplane, interface_index
from netapp.qos.dispatch import DispatchPlan, Dispatcher, worker_of
from netapp.core.netns import entered
from netapp.testbed import netns
from tests.utils.packets.gtp import gtpu

DEFAULT_OUT = Path("bench/results/rss.json")
SINK_OBJECT = EMPTY_OBJECT.with_name("xdp_count.bpf.o")  # counts and drops: a live run's own cost
TEID, QFI = 0x8894D0D4, 9
MODEL_WORKERS = (2, 4, 8, 16, 32)
XDP_PASS, XDP_REDIRECT = 2, 4


def t_pdu(teid: int = TEID) -> bytes:
    """N3 GTP-U (PDU Session Container, QFI 9) / UE IPv4 / UDP: 128 bytes."""
    ue = IP(src="10.45.0.7", dst="192.0.2.10") / UDP(sport=40000, dport=5004) / (b"u" * 36)
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.3.0.9", dst="10.3.0.1")
                 / UDP(sport=2152, dport=2152) / gtpu(teid, QFI, ul=True, inner=ue))


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.rss", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--runs", type=int, default=7, help="timed runs of every case; medians reported")
    parser.add_argument("--repeat", type=int, default=200_000, help="repetitions inside one test run")
    parser.add_argument("--tunnels", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def timed(cases: dict[str, Callable[[], Any]], floors: dict[str, str], runs: int,
          rng: random.Random) -> dict[str, dict[str, Any]]:
    """Every case once a run, in a fresh random order each run; per-run differences to its floor."""
    samples: dict[str, list[int]] = {name: [] for name in cases}
    for _ in range(runs):
        order = list(cases)
        rng.shuffle(order)
        for name in order:
            samples[name].append(cases[name]().duration_ns)
    return {
        name: {
            "ns": statistics.median(values),
            "min_ns": min(values),
            "max_ns": max(values),
            "floor": floors[name],
            "ns_above_floor": statistics.median(v - f for v, f in zip(values, samples[floors[name]])),
        }
        for name, values in samples.items()
    }


def check_paths(dp_fd: int, frame: bytes, dispatcher_if: int, plain_if: int) -> None:
    """Each case takes the path it is named after, or the benchmark says nothing."""
    got = (test_run(dp_fd, frame, 1, dispatcher_if).retval, test_run(dp_fd, frame, 1, plain_if).retval)
    if got != (XDP_REDIRECT, XDP_PASS):
        raise SystemExit(f"wrong paths: dispatched {got[0]}, not dispatching {got[1]} (want 4, 2)")


def costs(args: argparse.Namespace, dp: Dataplane, workers: tuple[int, ...], n3: int, other: int) -> dict[str, Any]:
    frame = t_pdu()
    dp_fd = dp.program_fd("dpp_xdp")
    check_paths(dp_fd, frame, n3, other)
    with BpfObject(EMPTY_OBJECT) as empty, BpfObject(SINK_OBJECT) as sink:
        empty_fd, sink_fd = empty.program_fd("xdp_pass"), sink.program_fd("xdp_count")
        cases = {
            "empty": lambda: test_run(empty_fd, frame, args.repeat, n3),
            "not_dispatching": lambda: test_run(dp_fd, frame, args.repeat, other),
            "dispatched": lambda: test_run(dp_fd, frame, args.repeat, n3),
            "sink_live": lambda: test_run_live(sink_fd, frame, args.repeat, n3),
            "dispatched_live": lambda: test_run_live(dp_fd, frame, args.repeat, n3),
        }
        floors = {name: "sink_live" if name.endswith("_live") else "empty" for name in cases}
        return timed(cases, floors, args.runs, random.Random(args.seed))


def spread(counts: dict[int, int]) -> float:
    return max(counts.values()) / max(min(counts.values()), 1)


def program_spread(dp: Dataplane, dispatcher: Dispatcher, teids: Sequence[int], n3: int) -> dict[str, Any]:
    """Each tunnel's T-PDU once through the program; dpp_rss_stats says where each went."""
    before = dispatcher.dispatched()
    fd = dp.program_fd("dpp_xdp")
    for teid in teids:
        test_run(fd, t_pdu(teid), 1, n3)
    after = dispatcher.dispatched()
    counts = {cpu: after.get(cpu, 0) - before.get(cpu, 0) for cpu in after}
    return {"per_worker": counts, "max_min": round(spread(counts), 4)}


def model_spread(teids: Sequence[int], workers: int) -> dict[str, Any]:
    counts = {cpu: 0 for cpu in range(workers)}
    for teid in teids:
        counts[worker_of(teid, QFI, range(workers))] += 1
    return {"max_min": round(spread(counts), 4), "max": max(counts.values()), "min": min(counts.values())}


def tunnel_sets(count: int, seed: int) -> dict[str, list[int]]:
    return {"sequential": list(range(0x1000, 0x1000 + count)),
            "random": random.Random(seed).sample(range(1 << 32), count)}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    workers = tuple(range(min(os.cpu_count() or 1, 2)))
    name = f"dpp-rss-bench-{os.getpid()}"
    netns.add_namespace(name)
    try:
        netns.run(["ip", "-n", name, "link", "add", "n3", "type", "veth", "peer", "name", "ot"])
        for end in ("n3", "ot"):
            netns.run(["ip", "-n", name, "link", "set", end, "up"])
        with entered(name), Dataplane.open() as dp:
            n3, other = interface_index("n3"), interface_index("ot")
            dispatcher = Dispatcher(dp)
            dispatcher.apply(DispatchPlan(workers, (n3,)))
            sets = tunnel_sets(args.tunnels, args.seed)
            return {
                "workers": list(workers),
                "cost": costs(args, dp, workers, n3, other),
                "spread_program": {kind: program_spread(dp, dispatcher, teids, n3) for kind, teids in sets.items()},
                "spread_model": {kind: {str(n): model_spread(teids, n) for n in MODEL_WORKERS}
                                 for kind, teids in sets.items()},
            }
    finally:
        netns.delete_namespace(name)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("bench.rss: needs root (BPF programs, a network namespace)", file=sys.stderr)
        return 2
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "params": {"runs": args.runs, "repeat": args.repeat, "tunnels": args.tunnels, "seed": args.seed},
        **measure(args),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("workers", "cost", "spread_program")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
