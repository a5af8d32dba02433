"""The routing benchmark's object, tables, namespace and timed runs: xdp_route.bpf.c loaded, the
private table filled with N /24 routes of one instance via one gateway, a namespace whose FIB routes
the test destination, then blocks of runs interleaving the floor, the path without a lookup and the
case, each run's verdict checked (a lookup that misses where the case hits stops the benchmark)."""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import random
import secrets
from ctypes import c_uint32
from dataclasses import dataclass
from typing import Iterator

from bench.harness import DATAPLANE, Harness, Walk, interleaved_medians
from bench.libbpf import BpfObject, map_update
from netapp.core.netns import entered
from netapp.routing.abi import Neigh, RouteValue
from netapp.routing.table import mac_bytes, neigh_key, route_key, words
from netapp.testbed import netns
from netapp.upf.abi import RouteGen

OBJECT = DATAPLANE / "build" / "xdp_route.bpf.o"
XDP_DROP, XDP_PASS = 1, 2
INSTANCE = 1
FIRST_NET = 0x0A0000  # routes (FIRST_NET + i) << 8 /24: 10.0.0.0/24, 10.0.1.0/24, ...
DST_AT = 13  # the walk writes FIRST_NET + f big-endian here: the destination's first 3 bytes (its /24)
UNUSED_AT = 22  # past the header: where the walk writes its second field, unread

GATEWAY, GATEWAY_MAC, N6_MAC = ipaddress.ip_address("10.6.0.2"), "02:00:00:00:06:02", "02:00:00:00:06:01"
FIB_NET = 0xC00002  # 192.0.2.0/24, routed by the namespace's FIB via GATEWAY


def frame() -> bytes:
    """Ethernet / struct route_test_hdr (destination x.x.x.10, instance 1, network order), 64 bytes."""
    return b"\x02" * 12 + b"\x08\x00" + bytes([10, 0, 0, 10]) + INSTANCE.to_bytes(4, "little") + bytes(42)


@dataclass
class Timing:
    floor_ns: float
    skip_ns: float
    case_ns: float

    @property
    def above_skip(self) -> float:
        return self.case_ns - self.skip_ns


@contextlib.contextmanager
def fib_namespace() -> Iterator[int]:
    """Entered: a namespace with a veth n6 (peer up), the gateway a permanent neighbour, 192.0.2.0/24
    routed via it, forwarding on; yields n6's ifindex (the test runs' ingress)."""
    name = f"dpp-bench-rt-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    try:
        netns.run(["ip", "link", "add", "n6", "type", "veth", "peer", "name", "n6p"], netns=name)
        netns.run(["ip", "link", "set", "n6p", "up"], netns=name)
        netns.configure(name, "n6", N6_MAC, "10.6.0.1/24")
        netns.add_neighbour(name, "n6", str(GATEWAY), GATEWAY_MAC)
        netns.run(["ip", "route", "add", "192.0.2.0/24", "via", str(GATEWAY)], netns=name)
        netns.sysctl(name, "net.ipv4.conf.all.forwarding", 1)
        with entered(name):
            yield netns.ifindex(name, "n6")
    finally:
        netns.delete_namespace(name)


class RouteBench:
    def __init__(self, harness: Harness, ifindex: int):
        self.harness = harness
        self.ifindex = ifindex
        self.obj = BpfObject(OBJECT)
        self.fds = {name: self.obj.program_fd(f"xdp_route_{name}")
                    for name in ("skip", "private", "fib", "private_cached", "fib_cached")}
        self._routes = self.obj.map_fd("dpp_routes")
        self.routes = 0
        neigh = Neigh(ifindex=ifindex)
        neigh.dmac[:], neigh.smac[:] = mac_bytes(GATEWAY_MAC), mac_bytes(N6_MAC)
        map_update(self.obj.map_fd("dpp_neighs"), neigh_key(INSTANCE, GATEWAY), neigh)
        map_update(self.obj.map_fd("dpp_upf_route_gen"), c_uint32(0), RouteGen(gen=1))

    def close(self) -> None:
        self.harness.release_target()
        self.obj.close()

    def fill(self, routes: int) -> None:
        """Routes FIRST_NET.. as /24s up to `routes` (added to those already there)."""
        value = RouteValue(ifindex=self.ifindex)
        value.gateway[:] = words(GATEWAY)
        for index in range(self.routes, routes):
            network = ipaddress.ip_network(((FIRST_NET + index) << 8, 24))
            map_update(self._routes, route_key(INSTANCE, network), value)
        self.routes = routes

    def _run(self, prog_fd: int, flows: int, base: int, repeat: int, expected: int) -> int:
        self.harness.set_walk(Walk(flows, teid_base=base, src_base=0, teid_off=DST_AT, src_off=UNUSED_AT))
        result = self.harness.run_walk(prog_fd, frame(), repeat, self.ifindex)
        if result.retval != expected:
            raise RuntimeError(f"verdict {result.retval}, expected {expected}: the case is not what it says")
        return result.duration_ns

    def time(self, case: str, flows: int, base: int, runs: int, repeat: int, rng: random.Random) -> Timing:
        fds = {"floor": self.harness.empty_fd, "skip": self.fds["skip"], "case": self.fds[case]}
        subjects = {name: functools.partial(self._run, fd, flows, base, repeat, XDP_PASS) for name, fd in fds.items()}
        medians = interleaved_medians(subjects, runs, rng)
        return Timing(medians["floor"], medians["skip"], medians["case"])
