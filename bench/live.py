"""Steer and forward with the redirect and the transmit carried out: live-frame test runs.

    python -m bench.live --out bench/results/live.json

BPF_PROG_TEST_RUN without live frames returns XDP_REDIRECT and XDP_TX but never carries them out,
so bench/dataplane.py leaves out the CPUMAP enqueue and the transmit. Here the frames run with
BPF_F_TEST_XDP_LIVE_FRAMES as if received on a veth in a namespace of the benchmark's own: a
forwarded frame is sent out of that veth to its peer (where an XDP sink counts and drops it), a
steered one is queued to another CPU's CPUMAP thread, which builds its skb there. The kernel's
time per frame, on the receiving CPU, gives the packets per second that one core sustains. One
flow repeated: the best case of the classifier, here to measure what acting costs.

Subjects, each run on CPU 0, several runs in a random order per run, medians reported:
  floor      the sink program (count, drop) run on the ingress veth: the live run's own cost
  xdp_tx     an empty XDP_TX program: the bare transmit to the peer
  drop       the pipeline, a matched drop rule
  forward    the pipeline, a matched forward rule (MAC + outer IPv4 rewrite, XDP_TX)
  steer      the pipeline, a matched steer rule to the last CPU, metered (CPUMAP enqueue)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import secrets
import socket
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Optional, Sequence

from netapp.core import netns as core_netns
from netapp.intents.models import Intent
from netapp.testbed import netns

from bench.dataplane import machine_info
from bench.harness import DATAPLANE
from bench.instances import open_instance
from bench.libbpf import BpfObject, test_run_live
from bench.throughput.sink import CpumapCounter, Sink
from bench.workload import CASE_PIPELINE_ACTIONS, TEID, case_intent, case_packets

BUILD = DATAPLANE / "build"
INGRESS, PEER = "lv0", "lv1"
CASES = ("drop", "forward", "steer")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.live", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/live.json"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=1_000_000, help="frames per run")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def make_site(stack: ExitStack) -> str:
    """A namespace with the veth pair the frames arrive on and leave through."""
    name = f"dpp-live-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    stack.callback(netns.delete_namespace, name)
    netns.run(["ip", "link", "add", INGRESS, "type", "veth", "peer", "name", PEER], netns=name)
    for ifname in (INGRESS, PEER):
        netns.run(["ip", "link", "set", ifname, "up"], netns=name)
    return name


def steer_intent(cpu: int) -> Intent:
    """The workload's steer rule, to `cpu`: not the CPU that receives here (CPU 0)."""
    fields = case_intent("steer").model_dump(exclude_none=True)
    fields["action"] = {"type": "steer", "cpu": cpu}
    return Intent.model_validate(fields)


def pipeline_instances(stack: ExitStack, steer_cpu: int) -> dict[str, Any]:
    """One pipeline per case, flow cache on, the steer target metered at a capacity no run reaches."""
    instances = {}
    for case in CASES:
        intent = steer_intent(steer_cpu) if case == "steer" else case_intent(case)
        instance = open_instance(True, [intent], next_filler=0)
        stack.callback(instance.close)
        if case == "steer":
            instance.dataplane.enable_cpu(steer_cpu, capacity_pps=10**12)
        instances[case] = instance
    return instances


def run_once(prog_fd: int, packet: bytes, repeat: int, ifindex: int) -> int:
    """One live run; its ns per frame. A live run reports no verdict: the counters check the path."""
    return test_run_live(prog_fd, packet, repeat, ifindex).duration_ns


def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    cpus = sorted(os.sched_getaffinity(0))
    steer_cpu = cpus[-1]
    packets = case_packets()
    with ExitStack() as stack:
        # Every live run receives on the first CPU; the caller gets its CPUs back afterwards.
        os.sched_setaffinity(0, {cpus[0]})
        stack.callback(os.sched_setaffinity, 0, set(cpus))
        site = make_site(stack)
        sink = Sink(BUILD / "xdp_count.bpf.o", site, PEER, TEID, 1)
        stack.callback(sink.close)
        cpumap = CpumapCounter(BUILD / "cpumap_drops.bpf.o", max(cpus) + 1)
        stack.callback(cpumap.close)
        floor = BpfObject(BUILD / "xdp_count.bpf.o")
        stack.callback(floor.close)
        bare_tx = BpfObject(BUILD / "xdp_tx.bpf.o")
        stack.callback(bare_tx.close)
        with core_netns.entered(site):
            ifindex = socket.if_nametoindex(INGRESS)
            instances = pipeline_instances(stack, steer_cpu)
            subjects = {
                "floor": (floor.program_fd("xdp_count"), packets["drop"]),
                "xdp_tx": (bare_tx.program_fd("xdp_tx"), packets["forward"]),
                **{case: (instances[case].prog_fd, packets[case]) for case in CASES},
            }
            before = {case: instances[case].dataplane.action_stats() for case in CASES}
            sink_before, cpumap_before = sink.read(), cpumap.read()
            samples: dict[str, list[int]] = {name: [] for name in subjects}
            for _ in range(args.runs):
                for name in rng.sample(sorted(subjects), len(subjects)):
                    prog_fd, packet = subjects[name]
                    samples[name].append(run_once(prog_fd, packet, args.repeat, ifindex))
            after = {case: instances[case].dataplane.action_stats() for case in CASES}
            sink_after, cpumap_after = sink.read(), cpumap.read()
    frames = args.runs * args.repeat
    acted = {
        case: after[case][CASE_PIPELINE_ACTIONS[case]][0] - before[case][CASE_PIPELINE_ACTIONS[case]][0]
        for case in CASES
    }
    for case, count in acted.items():
        if count != frames:
            raise RuntimeError(f"{case}: the pipeline carried out {count} of {frames} frames")
    floor_ns = statistics.median(samples["floor"])
    results = []
    for name, values in samples.items():
        ns = statistics.median(values)
        above = [value - base for value, base in zip(values, samples["floor"])]
        results.append(
            {
                "name": name,
                "ns": ns,
                "ns_above_floor": statistics.median(above),
                "mpps_per_core": round(1000 / ns, 3) if ns else None,
                "samples_ns": values,
            }
        )
    return {
        "cases": results,
        "floor_ns": floor_ns,
        "frames_per_subject": frames,
        "received_by_peer": sum((sink_after - sink_before).packets) + (sink_after - sink_before).other,
        "sent_to_peer": 2 * frames,  # forward and xdp_tx
        "cpumap": {
            "target_cpu": steer_cpu,
            "queued": cpumap_after["processed"][steer_cpu] - cpumap_before["processed"][steer_cpu],
            "dropped": cpumap_after["dropped"][steer_cpu] - cpumap_before["dropped"][steer_cpu],
        },
        "receiving_cpu": cpus[0],
        "runs": args.runs,
        "repeat": args.repeat,
        "kernel": platform.release(),
        "machine": machine_info(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def format_table(result: dict[str, Any]) -> str:
    lines = ["| subject | ns per frame | above the floor | Mpps per core |", "|---|---|---|---|"]
    for case in result["cases"]:
        lines.append(f"| {case['name']} | {case['ns']:.0f} | {case['ns_above_floor']:.0f} | {case['mpps_per_core']:.2f} |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("bench.live: needs root (namespaces, XDP, live-frame test runs)", file=sys.stderr)
        return 2
    result = measure(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(format_table(result))
    print(f"\npeer received {result['received_by_peer']:,} of {result['sent_to_peer']:,}; "
          f"CPUMAP {result['cpumap']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
