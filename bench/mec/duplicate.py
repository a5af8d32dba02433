"""What the intent action `duplicate` (MEC 011 DUPLICATE_*) costs a packet while other intents
duplicate to other interfaces: one packet copied out of two veth ports, with `--others` more
groups of two ports each on the node, run in live-frame mode (BPF_F_TEST_XDP_LIVE_FRAMES: the
broadcast is carried out), against the same live frames through a program that drops them (the
floor of a live run).

    python -m bench.mec.duplicate [--others 0 7] [--runs 9] [--repeat 100000] [--baseline main]

The cost that matters is how it grows with the other groups: a DEVMAP broadcast copies the frame
to every entry of the map it is given. Each group being a DEVMAP of its own (dpp_dup_tx, a map of
DEVMAP groups) copies a packet to its group's two ports whatever the others are; a single map of
every duplicating interface (the layout before) copied it to all of them and each copy's egress
program dropped those of other groups.

One namespace: in0, where the frames arrive, and two ports per group (dup0, dup1 for the packet's
group, then two for each other), each peer running xdp_count (bench/throughput/sink.py). Before it
is timed, and after every run, each of the packet's two ports must have received one copy per
frame and the other groups' ports none: a run that did otherwise is an error, not a figure.

--baseline REV times REV's data plane in the same interleaved runs: its instance is opened and its
intents compiled by REV's own code (bench/baseline_side.py, server "duplicate"), in this
benchmark's namespace. Needs root and `make -C dataplane`. Results: bench/results/mec_duplicate.json,
method and figures in bench/README.md ("bench/mec/duplicate.py").
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import secrets
import socket
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.baseline import BaselineSide, prepare_baseline
from bench.dataplane import machine_info
from bench.flows.__main__ import write
from bench.harness import add_block_arguments, interleaved_medians
from bench.libbpf import BpfObject, test_run_live
from bench.throughput.sink import Sink
from netapp.core import netns as namespaces
from netapp.dataplane import binding
from netapp.dataplane.abi import MAX_RULES
from netapp.dataplane.binding import DppHandle, Verdict, load_libdpp
from netapp.dataplane.facade import Dataplane, host_interfaces
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.testbed import netns

DEFAULT_OUT = Path("bench/results/mec_duplicate.json")
DESTINATION = "10.0.0.1"  # the timed packet's; the other groups' intents take 10.0.1.n


def ports_of(group: int) -> tuple[str, str]:
    return f"dup{2 * group}", f"dup{2 * group + 1}"


def document(others: int) -> dict[str, Any]:
    """The packet's intent (group 0) and one intent per other group, each duplicating to its own two
    ports."""
    intents = [{"id": "timed", "match": {"dst": f"{DESTINATION}/32"},
                "action": {"type": "duplicate", "interfaces": list(ports_of(0))}}]
    intents += [{"id": f"other{group}", "match": {"dst": f"10.0.1.{group}/32"},
                 "action": {"type": "duplicate", "interfaces": list(ports_of(group))}}
                for group in range(1, others + 1)]
    return {"intents": intents}


def frame() -> bytes:
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.9.0.1", dst=DESTINATION)
                 / UDP(sport=40000, dport=5004) / bytes(64))


def open_instance(doc: dict[str, Any]) -> tuple[Dataplane, int]:
    """An instance (anonymous: nothing pinned) holding `doc`, in the caller's namespace, and its
    program's fd. The baseline's server calls the same with its revision's code."""
    handle = DppHandle.open(load_libdpp(), None, max_rules=MAX_RULES, default_verdict=Verdict.DROP)
    dp = Dataplane(handle)
    dp.apply_compiled(compile_document(parse_document(doc), host_interfaces()))
    return dp, handle.prog_fd()


class Copies:
    """The copies each port's peer received (xdp_count: the frame is no flow of its, so `other`)."""

    def __init__(self, stack: ExitStack, ns: str, names: Sequence[str]):
        count = Path(binding.find_libdpp()).parent / "xdp_count.bpf.o"
        self.sinks = {name: Sink(count, ns, f"{name}p", teid_base=0, flows=0) for name in names}
        for sink in self.sinks.values():
            stack.callback(sink.close)

    def read(self) -> dict[str, int]:
        return {name: sink.read().other for name, sink in self.sinks.items()}


def checked(run: Callable[[], int], copies: Copies, repeat: int, hot: Sequence[str], who: str) -> Callable[[], int]:
    """`run`, refused unless each of `hot` got one copy of every frame and no other port any."""

    def timed() -> int:
        before = copies.read()
        duration = run()
        got = {name: count - before[name] for name, count in copies.read().items()}
        wanted = {name: repeat if name in hot else 0 for name in got}
        if got != wanted:
            wrong = {name: count for name, count in got.items() if count != wanted[name]}
            raise RuntimeError(f"{who}: {repeat} frames made copies {wrong}, not one per frame on {list(hot)} only")
        return duration

    return timed


def measure_case(args: argparse.Namespace, others: int, baseline: Any, rng: random.Random) -> dict[str, Any]:
    names = [name for group in range(others + 1) for name in ports_of(group)]
    ns = f"dpp-dupb-{secrets.token_hex(3)}"
    with ExitStack() as stack:
        netns.add_namespace(ns)
        stack.callback(netns.delete_namespace, ns)
        netns.add_ports(ns, ("in0", *names))
        copies = Copies(stack, ns, names)
        drop = stack.enter_context(BpfObject(Path(binding.find_libdpp()).parent / "xdp_drop.bpf.o"))
        stack.enter_context(namespaces.entered(ns))
        ingress = socket.if_nametoindex("in0")
        head, head_fd = open_instance(document(others))
        stack.callback(head.close)
        programs = {"head": head_fd}
        if baseline is not None:
            side = BaselineSide(baseline, "duplicate")  # started here: it opens its instance in this namespace
            stack.callback(side.close)
            _, fds = side.request({"op": "open", "document": document(others)})
            programs["baseline"] = fds[0]
        packet = frame()

        def live(prog: int) -> int:
            return test_run_live(prog, packet, args.repeat, ingress).duration_ns

        subjects = {"floor": lambda: live(drop.program_fd("xdp_drop"))}
        for who, prog in programs.items():
            subjects[who] = checked(lambda p=prog: live(p), copies, args.repeat, ports_of(0), who)
            subjects[who]()  # the path first: one run checked, not timed
        medians = interleaved_medians(subjects, args.runs, rng)
    row: dict[str, Any] = {"case": f"duplicate to 2 ports, {others} other groups of 2 ports on the node",
                           "other_groups": others, "live_floor_ns": medians["floor"]}
    for who in programs:
        row[f"{who}_ns"] = medians[who]
        row[f"{who}_above_floor_ns"] = round(medians[who] - medians["floor"], 1)
    if baseline is not None:
        row["baseline"] = baseline.describe()
    return row


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mec.duplicate", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--others", type=int, nargs="+", default=[0, 7], help="other groups on the node, per case")
    parser.add_argument("--baseline", metavar="REV", help="also time REV's data plane, in the same runs")
    add_block_arguments(parser)
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench.mec.duplicate: loading BPF programs needs root", file=sys.stderr)
        return 2
    baseline = prepare_baseline(args.baseline)
    rng = random.Random(args.seed)
    rows = []
    for others in args.others:
        row = measure_case(args, others, baseline, rng)
        rows.append(row)
        shown = "  ".join(f"{key[:-3]} {value:.0f}" for key, value in row.items() if key.endswith("_ns"))
        print(f"{row['case']}: {shown} ns", flush=True)
    write({"benchmark": "mec_duplicate", "runs": args.runs, "repeat": args.repeat, "machine": machine_info(),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "rows": rows}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
