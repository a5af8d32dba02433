"""What moving packets into a tunnel costs when its rule, its tunnel entry and its route are cold: N
MEC 011 rules per case, one per UE, each sending to a peer of its own among P (rule f to peer f mod P,
every peer behind the N9 router), frames walked over the N UEs (bench/harness.py's walk: every
repetition another TEID and UE source, so another rule, flow-cache line and tunnel entry, in an
order that defeats the prefetcher). Blocks interleave, in a shuffled order, the empty program (the
floor) and one instance of the real program (dpp.bpf.c) per case, each with its own N rules:

| case        | rule f                                           | what the packet gets                 |
|-------------|--------------------------------------------------|--------------------------------------|
| as_is_ip    | FORWARD_ENCAPSULATED, IP (towards peer f)        | as it came, next hop from the FIB    |
| encap_gtpu  | FORWARD_ENCAPSULATED, TUNNEL GTP_U (peer f)      | moved into GTP-U to peer f           |
| encap_gre   | FORWARD_ENCAPSULATED, TUNNEL GRE (peer f, a key) | its UE packet in GRE to peer f       |

as_is_ip is the same rules forwarding without a tunnel: the same lookups, the same FIB answer, no
headers built. Each instance is a map of 4,096 tunnel entries (DPP_MAX_TUNNELS), hence P <= 4,096.

    python -m bench.mec.tunnel_cold --out bench/results/mec_tunnel_cold.json [--rules 10000 --peers 4000]

The hot counterpart, one flow repeated, is bench/mec/tunnel.py. Every case's frame is checked byte
for byte against scapy's for the walk's first UE, its verdict and its peer for the last; every timed
run's verdict too. The route cache is off (generation 0): each packet asks the FIB. Needs root and
`make -C dataplane`.
"""

from __future__ import annotations

import argparse
import ipaddress
import random
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Optional, Sequence

from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import GRE, Ether

from bench.harness import Harness, Walk, add_block_arguments, build_harness, interleaved_medians
from bench.measure import WrongPathError
from bench.mec.tunnel import GRE_KEY, SOURCE, TEID, measured, report, tunnelled
from bench.upf import workload as w
from bench.upf.run import make_site
from netapp.dataplane.binding import DppHandle, Verdict, load_libdpp
from netapp.dataplane.facade import Dataplane, host_interfaces, interface_index
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.mec.tunnel_abi import MAX_TUNNELS
from netapp.testbed import netns

DEFAULT_OUT = Path("bench/results/mec_tunnel_cold.json")
PORT = 5000
PEERS = "10.99.0.0/16"  # the peers' network, routed via the N9 router
FIRST_PEER = int(ipaddress.IPv4Address("10.99.0.1"))
CASES = ("as_is_ip", "encap_gtpu", "encap_gre")


def peer(f: int, peers: int) -> str:
    return str(ipaddress.IPv4Address(FIRST_PEER + f % peers))


def action(case: str, to: str) -> dict[str, Any]:
    if case == "as_is_ip":
        return {"type": "tunnel", "towards": to}
    if case == "encap_gtpu":
        return {"type": "tunnel", "encapsulate": {"peer": to, "source": SOURCE}}
    return {"type": "tunnel", "encapsulate": {"protocol": "gre", "peer": to, "source": SOURCE, "key": GRE_KEY}}


def install(dp: Dataplane, case: str, rules: int, peers: int) -> None:
    """The case's rules as the site's reconcile installs them: UE f's UDP to PORT, to peer f."""
    intents = [{"id": f"{case}-{f}", "match": {"src": f"{w.ue_address(f)}/32", "protocol": "udp", "dst_port": PORT},
                "action": action(case, peer(f, peers))} for f in range(rules)]
    dp.apply_compiled(compile_document(parse_document({"intents": intents}), host_interfaces()))


def packet() -> bytes:
    """UE 0's T-PDU; the walk writes flow f's TEID (TEID + f) and UE source (UE f) into it."""
    return tunnelled(PORT)


def walk(rules: int) -> Walk:
    frame = packet()
    return Walk(rules, TEID, w.UE_BASE, frame.index(TEID.to_bytes(4, "big"), 42), w.UE_OFF_UPLINK + 12)


def expected(case: str, peers: int) -> bytes:
    """What the case makes of UE 0's packet."""
    frame, to = Ether(packet()), peer(0, peers)
    out = Ether(src=w.N9_MAC, dst=w.N9_PEER_MAC)
    if case == "as_is_ip":
        return bytes(out / frame[IP])
    inner = frame[GTPPDUSessionContainer].payload
    outer = out / IP(src=SOURCE, dst=to, id=0, ttl=64)
    if case == "encap_gre":
        return bytes(outer / GRE(key_present=1, key=GRE_KEY, proto=0x0800) / inner)
    gtp = GTP_U_Header(teid=TEID, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=1, QFI=w.QFI)
    return bytes(outer / UDP(sport=2152, dport=2152, chksum=0) / gtp / inner)


def timed(harness: Harness, prog_fd: int, rules: int, repeat: int, verdict: int, key: str,
          position: int = 0) -> tuple[int, bytes]:
    harness.set_walk(walk(rules), position)
    frame = packet()
    result = harness.run_walk_head(prog_fd, frame, repeat, interface_index(w.N3_IF), len(frame) + w.OUTPUT_ROOM)
    if result.retval != verdict:
        raise WrongPathError(f"{key}: verdict {result.retval}, expected {verdict}")
    return result.duration_ns, result.data


def check(harness: Harness, prog_fd: int, case: str, rules: int, peers: int) -> None:
    """The first UE's frame byte for byte; the last UE's sent to its own peer."""
    _, out = timed(harness, prog_fd, rules, 1, Verdict.REDIRECT, case)
    if out != expected(case, peers):
        raise WrongPathError(f"{case}: came out as {out.hex()}, expected {expected(case, peers).hex()}")
    _, out = timed(harness, prog_fd, rules, 1, Verdict.REDIRECT, case, position=rules - 1)
    to = Ether(out)[IP].dst
    wanted = peer(rules - 1, peers) if case != "as_is_ip" else Ether(packet())[IP].dst
    if to != wanted:
        raise WrongPathError(f"{case}: the last UE's packet went to {to}, expected {wanted}")


def open_case(stack: ExitStack, case: str, rules: int, peers: int) -> Dataplane:
    handle = DppHandle.open(load_libdpp(), None, max_rules=rules + 1, default_verdict=Verdict.DROP)
    dp = Dataplane(handle, max_rules=rules + 1)  # an anonymous instance: nothing pinned
    stack.callback(dp.close)
    install(dp, case, rules, peers)
    return dp


def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    with Harness(build_harness()) as harness, ExitStack() as stack:
        name = make_site(stack)
        netns.run(["ip", "route", "add", PEERS, "via", w.N9_PEER], netns=name)
        stack.enter_context(netns.entered(name))
        stack.callback(harness.release_target)
        fds = {case: open_case(stack, case, args.rules, args.peers).program_fd("dpp_xdp") for case in CASES}
        for case, fd in fds.items():
            check(harness, fd, case, args.rules, args.peers)
        subjects = {"floor": lambda: timed(harness, harness.empty_fd, args.rules, args.repeat, Verdict.PASS,
                                           "floor")[0]}
        for case, fd in fds.items():
            subjects[case] = (lambda fd=fd, case=case: timed(harness, fd, args.rules, args.repeat, Verdict.REDIRECT,
                                                             case)[0])
        medians = interleaved_medians(subjects, args.runs, rng)
    return report("mec_tunnel_cold", args, medians, {
        "into GTP-U (encap_gtpu - as_is_ip)": ("encap_gtpu", "as_is_ip"),
        "into GRE (encap_gre - as_is_ip)": ("encap_gre", "as_is_ip"),
    }, rules=args.rules, peers=args.peers)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mec.tunnel_cold", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--rules", type=int, default=10_000, help="rules per case, one per UE, walked cold")
    parser.add_argument("--peers", type=int, default=4_000, help=f"peers the rules send to (at most {MAX_TUNNELS})")
    add_block_arguments(parser)
    args = parser.parse_args(argv)
    if not 1 <= args.peers <= MAX_TUNNELS:
        parser.error(f"--peers {args.peers}: 1 to {MAX_TUNNELS} (a tunnel entry per peer in a map of {MAX_TUNNELS})")
    status, result = measured("bench.mec.tunnel_cold", measure, args)
    if result is not None:
        print(f"{args.rules} rules, {args.peers} peers: floor {result['floor_ns']} ns; above it: "
              f"{result['ns_above_floor']}; added: {result['added_ns']}")
    return status

if __name__ == "__main__":
    sys.exit(main())
