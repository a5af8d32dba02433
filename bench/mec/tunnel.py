"""What MEC 011's tunnel actions cost a packet above the empty program (BPF_PROG_TEST_RUN through
bench/bpf/harness.bpf.c's harness_walk_head, which gives every repetition the original packet back,
the head moved back where the repetition before left it, the floor's too).

    python -m bench.mec.tunnel --out bench/results/mec_tunnel.json

One instance in the UPF benchmark's namespace (bench/upf/run.py make_site: N3, N6 with a router
behind it, N9 with the next node), a GTP-U T-PDU from the gNB on N3 (one flow: a walk of 1), one
intent per case, each on its own UE destination port, compiled as MEC 011 rules compile:

| case         | rule                                          | what the packet gets                    |
|--------------|-----------------------------------------------|-----------------------------------------|
| redirect     | FORWARD_ENCAPSULATED, MAC                     | out of N6 as it came (today's redirect) |
| decap_mac    | FORWARD_DECAPSULATED, MAC                     | GTP-U/UDP/IP removed, out of N6         |
| as_is_ip     | FORWARD_ENCAPSULATED, IP (the router)         | as it came, next hop from the FIB       |
| decap_ip     | FORWARD_DECAPSULATED, IP (the router)         | GTP-U/UDP/IP removed, next hop from FIB |
| encap_gtpu   | FORWARD_ENCAPSULATED, TUNNEL GTP_U (N9 peer)  | moved into GTP-U to the N9 peer         |
| encap_gre    | FORWARD_ENCAPSULATED, TUNNEL GRE (N9 peer)    | its UE packet in GRE (a key) to the peer |

Every case's output is checked byte for byte against the frame scapy builds before it is timed, and
its verdict on every timed run. The route cache is off (generation 0): each routed packet asks the
FIB. Needs root and `make -C dataplane`.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import GRE, Ether

from bench.dataplane import machine_info
from bench.flows.__main__ import write
from bench.harness import Harness, Walk, add_block_arguments, build_harness, interleaved_medians
from bench.measure import WrongPathError
from bench.upf import workload as w
from bench.upf.run import make_site
from netapp.dataplane.abi import MAX_RULES
from netapp.dataplane.binding import DppHandle, Verdict, load_libdpp
from netapp.dataplane.facade import Dataplane, host_interfaces, interface_index
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.testbed import netns

DEFAULT_OUT = Path("bench/results/mec_tunnel.json")
TEID = 0x1234
SOURCE = "10.9.0.1"  # the new tunnel's source: N9's address
GRE_KEY = 0x445
CASES = {  # name -> (UE destination port, intent action)
    "redirect": (5001, {"type": "redirect", "interface": w.N6_IF}),
    "decap_mac": (5002, {"type": "tunnel", "decapsulate": True, "interface": w.N6_IF}),
    "as_is_ip": (5003, {"type": "tunnel", "towards": w.ROUTER}),
    "decap_ip": (5004, {"type": "tunnel", "decapsulate": True, "towards": w.ROUTER}),
    "encap_gtpu": (5005, {"type": "tunnel", "encapsulate": {"peer": w.N9_PEER, "source": SOURCE}}),
    "encap_gre": (5006, {"type": "tunnel", "encapsulate": {"protocol": "gre", "peer": w.N9_PEER, "source": SOURCE,
                                                           "key": GRE_KEY}}),
}


def ue(port: int):
    return IP(src=w.ue_address(0), dst=w.SERVER) / UDP(sport=40000, dport=port, chksum=0) / w.UE_PAYLOAD


def tunnelled(port: int) -> bytes:
    """The gNB's T-PDU: GTP-U with an uplink PDU Session Container of QFI 9."""
    gtp = GTP_U_Header(teid=TEID, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=1, QFI=w.QFI)
    return bytes(Ether(src=w.GNB_MAC, dst=w.N3_MAC) / IP(src=w.GNB, dst=w.N3_IP) / UDP(sport=2152, dport=2152)
                 / gtp / ue(port))


def expected(case: str) -> bytes:
    """What each case's rule must make of its packet."""
    port = CASES[case][0]
    frame = Ether(tunnelled(port))
    routed = Ether(src=w.N6_MAC, dst=w.ROUTER_MAC)
    if case == "redirect":
        return bytes(frame)
    if case == "decap_mac":
        return bytes(Ether(src=w.GNB_MAC, dst=w.N3_MAC) / ue(port))
    if case == "as_is_ip":
        return bytes(routed / frame[IP])
    if case == "decap_ip":
        return bytes(routed / ue(port))
    to_peer = Ether(src=w.N9_MAC, dst=w.N9_PEER_MAC) / IP(src=SOURCE, dst=w.N9_PEER, id=0, ttl=64)
    if case == "encap_gre":
        return bytes(to_peer / GRE(key_present=1, key=GRE_KEY, proto=0x0800) / ue(port))
    gtp = GTP_U_Header(teid=TEID, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=1, QFI=w.QFI)
    return bytes(to_peer / UDP(sport=2152, dport=2152, chksum=0) / gtp / ue(port))


def walk_of(packet: bytes) -> Walk:
    """One flow: the harness writes the packet's own TEID and UE source back."""
    return Walk(1, TEID, w.UE_BASE, packet.index(TEID.to_bytes(4, "big"), 42), w.UE_OFF_UPLINK + 12)


def install(dp: Dataplane) -> None:
    intents = [{"id": name, "match": {"protocol": "udp", "dst_port": port}, "action": action}
               for name, (port, action) in CASES.items()]
    dp.apply_compiled(compile_document(parse_document({"intents": intents}), host_interfaces()))


def timed(harness: Harness, prog_fd: int, packet: bytes, repeat: int, verdict: int, key: str) -> tuple[int, bytes]:
    harness.set_walk(walk_of(packet))
    result = harness.run_walk_head(prog_fd, packet, repeat, interface_index(w.N3_IF), len(packet) + w.OUTPUT_ROOM)
    if result.retval != verdict:
        raise WrongPathError(f"{key}: verdict {result.retval}, expected {verdict}")
    return result.duration_ns, result.data


def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    with Harness(build_harness()) as harness, ExitStack() as stack:
        name = make_site(stack)
        stack.enter_context(netns.entered(name))
        handle = DppHandle.open(load_libdpp(), None, max_rules=MAX_RULES, default_verdict=Verdict.DROP)
        dp = Dataplane(handle)  # an anonymous instance: nothing pinned
        stack.callback(dp.close)
        install(dp)
        prog_fd = handle.prog_fd()
        for case in CASES:  # the path first: each case's frame as its rule says, byte for byte
            _, out = timed(harness, prog_fd, tunnelled(CASES[case][0]), 1, Verdict.REDIRECT, case)
            if out != expected(case):
                raise WrongPathError(f"{case}: came out as {out.hex()}, expected {expected(case).hex()}")
        subjects = {"floor": lambda: timed(harness, harness.empty_fd, tunnelled(5001), args.repeat, Verdict.PASS,
                                           "floor")[0]}
        for case in CASES:
            subjects[case] = (lambda case=case: timed(harness, prog_fd, tunnelled(CASES[case][0]), args.repeat,
                                                      Verdict.REDIRECT, case)[0])
        medians = interleaved_medians(subjects, args.runs, rng)
        harness.release_target()
    return report("mec_tunnel", args, medians, {
        "decapsulation (decap_mac - redirect)": ("decap_mac", "redirect"),
        "decapsulation, routed (decap_ip - as_is_ip)": ("decap_ip", "as_is_ip"),
        "re-tunnelling (encap_gtpu - as_is_ip)": ("encap_gtpu", "as_is_ip"),
        "into GRE (encap_gre - as_is_ip)": ("encap_gre", "as_is_ip"),
    })


def report(benchmark: str, args: argparse.Namespace, medians: dict[str, float],
           added: dict[str, tuple[str, str]], **fields: Any) -> dict[str, Any]:
    """The result: each case's median above the floor's, and what each (case, against) pair adds."""
    floor = medians.pop("floor")
    above = {case: round(ns - floor, 1) for case, ns in medians.items()}
    return {
        "benchmark": benchmark,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        **fields,
        "runs": args.runs,
        "repeat": args.repeat,
        "floor_ns": floor,
        "ns_above_floor": above,
        "added_ns": {label: round(above[case] - above[against], 1) for label, (case, against) in added.items()},
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mec.tunnel", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    add_block_arguments(parser)
    args = parser.parse_args(argv)
    status, result = measured("bench.mec.tunnel", measure, args)
    if result is not None:
        print(f"floor {result['floor_ns']} ns; above it: {result['ns_above_floor']}; added: {result['added_ns']}")
    return status


def measured(prog: str, measure: Callable[[argparse.Namespace], dict[str, Any]],
             args: argparse.Namespace) -> tuple[int, Optional[dict[str, Any]]]:
    """The exit status and the result written to args.out; 2 without root, 1 (said why) when a case
    took another path than its rule says."""
    if os.geteuid() != 0:
        print(f"{prog}: loading BPF programs needs root", file=sys.stderr)
        return 2, None
    try:
        result = measure(args)
    except WrongPathError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1, None
    write(result, args.out)
    return 0, result


if __name__ == "__main__":
    sys.exit(main())
