"""The route cache of forwarded UPF packets (dataplane/bpf/nf/upf/route.h) and the watch that keeps
its generation (netapp.upf.nexthop), in a namespace whose routes and neighbours make the FIB answer:
a cached answer is what the FIB said, is reused only under its generation, ingress and for packets
no longer than one the FIB let through, and the watch moves the generation when the kernel's tables
change and keeps the cache off under policy routing."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import resource
import secrets
import time
from typing import Callable, Iterator

import pytest
from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from bench.libbpf import map_lookup, map_update
from netapp.dataplane.abi import DevmapVal
from netapp.dataplane.facade import Dataplane, interface_index
from netapp.testbed import netns
from netapp.dataplane.handle import possible_cpus
from netapp.upf.abi import Output, RouteGen, RouteTable, Role
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Port, Site
from netapp.core.netlink import NLMSG_HEADER
from netapp.upf.nexthop import RTM_DELRULE, RTM_NEWRULE, RouteWatch, message_types, policy_routing
from tests.upf.test_datapath import N3_IP, SERVER, TEID, UE, UE6, session
from tests.utils.kernel import one_cpu, require_kernel  # noqa: F401 - one_cpu: a fixture

N6_IP, ROUTER, ROUTER_MAC, N6_MAC = "10.6.0.1", "10.6.0.2", "02:00:00:00:06:02", "02:00:00:00:06:01"
OTHER_MAC = "02:00:00:00:06:99"
DATA_NETWORK = "192.0.2.0/24"
N6_IP6, ROUTER6, DATA_NETWORK6, SERVER6 = "2001:db8:6::1", "2001:db8:6::2", "2001:db8:99::/64", "2001:db8:99::1"
DEADLINE = 10.0  # seconds for the watch to see a change


@contextlib.contextmanager
def routed_namespace(site: Site, redirect: bool = False) -> Iterator[tuple[str, Dataplane]]:
    """A namespace of its own (each test changes its tables): N3 and N6 veths, the router as a
    permanent neighbour on N6, a route to the data network via it, forwarding on; inside it, an
    instance with one session, compiled for `site` (N6's network instance is 1) or, with `redirect`,
    for it with output REDIRECT, N3 and N6 the ports (N6's in dpp_ports)."""
    require_kernel()
    name = f"dpp-nh-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    try:
        for ifname, mac, cidr in (("n3", "02:00:00:00:03:01", f"{N3_IP}/24"), ("n6", N6_MAC, f"{N6_IP}/24")):
            netns.run(["ip", "link", "add", ifname, "type", "veth", "peer", "name", f"{ifname}p"], netns=name)
            netns.run(["ip", "link", "set", f"{ifname}p", "up"], netns=name)
            netns.configure(name, ifname, mac, cidr)
        netns.add_neighbour(name, "n6", ROUTER, ROUTER_MAC)
        netns.run(["ip", "route", "add", DATA_NETWORK, "via", ROUTER], netns=name)
        netns.sysctl(name, "net.ipv4.conf.all.forwarding", 1)
        with netns.entered(name), Dataplane.open(trace=True) as dp:
            roles = {interface_index("n3"): (Role.N3, 0), interface_index("n6"): (Role.N6, 1)}
            if redirect:
                n3, n6 = interface_index("n3"), interface_index("n6")
                ports = (Port(n3, Role.N3), Port(n6, Role.N6, "internet"))
                site = dataclasses.replace(site, output=Output.REDIRECT, ports=ports)
                dp.table("dpp_ports").update({n6: DevmapVal(ifindex=n6)})
            BpfApplier(dp.table, site, iface_entries(roles, N3_IP, None)).apply(None, session())
            yield name, dp
    finally:
        netns.delete_namespace(name)


@pytest.fixture
def site():
    """routed_namespace, its session's uplink routed by the FIB."""
    with routed_namespace(Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP,
                               output=Output.FIB)) as routed:
        yield routed


def uplink_frame(payload: int = 64, family: int = 4) -> bytes:
    """The session's uplink T-PDU (a UE datagram of payload bytes) as it arrives on N3."""
    ip = IP(src=UE, dst=SERVER) if family == 4 else IPv6(src=UE6, dst=SERVER6)
    ue = ip / UDP(sport=40000, dport=5004) / (b"u" * payload)
    gtp = GTP_U_Header(teid=TEID, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=1, QFI=9) / ue
    return bytes(Ether() / IP(src="10.3.0.9", dst=N3_IP) / UDP(sport=2152, dport=2152) / gtp)


def uplink(dp: Dataplane, payload: int = 64, family: int = 4):
    """The session's uplink T-PDU through the program on N3."""
    return dp.test_run(uplink_frame(payload, family), interface_index("n3"))


def next_hop_mac(out) -> str:
    return ":".join(f"{byte:02x}" for byte in out.data[:6])


def set_gen(dp: Dataplane, gen: int) -> None:
    dp.table("dpp_upf_route_gen").update({0: RouteGen(gen=gen)})


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_cached_answer_is_reused_under_its_generation_and_dropped_with_it(site, one_cpu):
    name, dp = site
    set_gen(dp, 1)
    assert next_hop_mac(uplink(dp)) == ROUTER_MAC  # the FIB's answer, now cached
    netns.run(["ip", "neigh", "replace", ROUTER, "lladdr", OTHER_MAC, "dev", "n6", "nud", "permanent"], netns=name)
    out = uplink(dp)
    assert (out.verdict, out.action, next_hop_mac(out)) == ("REDIRECT", "upf", ROUTER_MAC), "served from the cache"
    set_gen(dp, 2)
    assert next_hop_mac(uplink(dp)) == OTHER_MAC, "a new generation asks the FIB again"
    set_gen(dp, 0)
    netns.run(["ip", "neigh", "replace", ROUTER, "lladdr", ROUTER_MAC, "dev", "n6", "nud", "permanent"], netns=name)
    assert next_hop_mac(uplink(dp)) == ROUTER_MAC, "generation 0: every packet asks the FIB"


def test_a_packet_longer_than_any_the_fib_passed_asks_the_fib(site):
    name, dp = site
    netns.set_mtu(name, "n6", 1280)
    set_gen(dp, 1)
    assert uplink(dp).verdict == "REDIRECT"
    out = uplink(dp, payload=1300)  # beyond N6's MTU: the FIB says so, the cache must not hide it
    assert (out.verdict, out.reason) == ("PASS", "upf_no_route")


def cached_slot(dp: Dataplane) -> int:
    """The one slot of this CPU's route cache that holds an answer (one_cpu: the test runs' CPU)."""
    cpu = min(os.sched_getaffinity(0))
    slots = [key for key, values in dp.table("dpp_upf_routes").items() if values[cpu].gen]
    assert len(slots) == 1, f"one answer cached, not {slots}"
    return slots[0]


def edit_slot(dp: Dataplane, slot: int, **fields) -> None:
    """This CPU's value of the slot with `fields` changed (the other CPUs' as they are)."""
    routes = dp.table("dpp_upf_routes")
    values = routes.get(slot)
    for field, value in fields.items():
        setattr(values[min(os.sched_getaffinity(0))], field, value)
    routes.update({slot: values})


def route_ipv6(name: str) -> None:
    """The namespace's N6 given an IPv6 address and a route to the data network's IPv6 prefix."""
    netns.sysctl(name, "net.ipv6.conf.n6.disable_ipv6", 0)  # the namespace's default is off
    netns.run(["ip", "-6", "addr", "add", f"{N6_IP6}/64", "dev", "n6", "nodad"], netns=name)
    netns.add_neighbour(name, "n6", ROUTER6, ROUTER_MAC)
    netns.run(["ip", "-6", "route", "add", DATA_NETWORK6, "via", ROUTER6], netns=name)
    netns.sysctl(name, "net.ipv6.conf.all.forwarding", 1)


def flipped(dst, word: int):
    """The destination's words with `word`'s lowest bit flipped (an IPv4 one's words 1-3 made nonzero)."""
    words = (ctypes.c_uint32 * 4)(*dst)
    words[word] ^= 1
    return words


def answer_cached(site, family: int) -> tuple[Dataplane, int]:
    """The site's dataplane and the slot its uplink's next hop was cached in, asked of the FIB once."""
    name, dp = site
    if family == 6:
        route_ipv6(name)
    set_gen(dp, 1)
    assert next_hop_mac(uplink(dp, family=family)) == ROUTER_MAC
    return dp, cached_slot(dp)


def mac_bytes(mac: str):
    return (ctypes.c_uint8 * 6)(*bytes.fromhex(mac.replace(":", "")))


def ue_packet_length(payload: int, family: int) -> int:
    """The length of the UE's IP packet in uplink_frame(payload, family): what a slot's max_len bounds."""
    return (20 if family == 4 else 40) + 8 + payload


@pytest.mark.parametrize("family", [4, 6])
def test_a_cached_answer_holds_for_packets_no_longer_than_the_fib_passed_that_way(site, one_cpu, family):
    """A slot's max_len is the longest IP packet (IPv6: its header and payload) the FIB sent its
    way: a longer one asks the FIB again, whatever the slot says."""
    dp, slot = answer_cached(site, family)
    other = mac_bytes(OTHER_MAC)
    length = ue_packet_length(64, family)
    edit_slot(dp, slot, dmac=other, max_len=length)
    out = uplink(dp, family=family)
    assert (out.route_path, next_hop_mac(out)) == ("fib-cached", OTHER_MAC), "as long as the slot's longest"
    edit_slot(dp, slot, dmac=other, max_len=length - 1)
    out = uplink(dp, family=family)
    assert (out.route_path, next_hop_mac(out)) == ("fib", ROUTER_MAC), "one byte longer: the FIB asked"


@pytest.mark.parametrize("family", [4, 6])
def test_a_cached_answer_is_used_only_for_its_destination_table_ingress_and_family(site, one_cpu, family):
    """The slot a destination hashes to may hold another's answer: a hit compares every word of the
    destination (an IPv4 one's others 0) and what the answer was for with the packet's."""
    dp, slot = answer_cached(site, family)
    answer = dp.table("dpp_upf_routes").get(slot)[min(os.sched_getaffinity(0))]
    other = mac_bytes(OTHER_MAC)
    edit_slot(dp, slot, dmac=other)
    out = uplink(dp, family=family)
    assert (out.route_path, next_hop_mac(out)) == ("fib-cached", OTHER_MAC), "the slot's answer, as written"
    others = {f"another destination word {word}": {"dst": flipped(answer.dst, word)} for word in range(4)}
    others |= {"another ingress": {"within": answer.within + 1},
               "another table": {"table": RouteTable.PRIVATE},
               "another family": {"family": 10 if family == 4 else 2},
               "another generation": {"gen": 2}}
    for what, fields in others.items():
        edit_slot(dp, slot, dmac=other, **fields)
        out = uplink(dp, family=family)
        assert (out.route_path, next_hop_mac(out)) == ("fib", ROUTER_MAC), f"{what}: the FIB asked"


def test_a_redirected_pdrs_packet_leaves_by_its_port_with_the_next_hops_macs_asked_or_cached(one_cpu):
    """Output REDIRECT: the next hop gives the MACs, the PDR's port the egress, from the FIB and
    from the route cache alike; without the port the packet passes, counted."""
    with routed_namespace(Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP),
                          redirect=True) as (_, dp):
        set_gen(dp, 1)
        asked, cached = uplink(dp), uplink(dp)
        assert [(out.verdict, out.route_path, next_hop_mac(out)) for out in (asked, cached)] == [
            ("REDIRECT", "fib", ROUTER_MAC), ("REDIRECT", "fib-cached", ROUTER_MAC)]
        dp.table("dpp_ports").delete([interface_index("n6")])
        out = uplink(dp)
        assert (out.verdict, out.reason, out.route_path) == ("PASS", "port_unavailable", "fib-cached")


def test_a_cached_answer_goes_from_its_slot_to_the_frame_without_the_room(site, one_cpu):
    """A hit needs no room for a lookup: this CPU's room (struct bpf_fib_lookup) is left as it was,
    neither zeroed nor filled."""
    _, dp = site
    set_gen(dp, 1)
    assert next_hop_mac(uplink(dp)) == ROUTER_MAC  # asked through the room, the answer cached
    room = dp.map_fd("dpp_upf_next_hop_room")
    marked = (ctypes.c_uint8 * (64 * possible_cpus()))(*([0xA5] * 64 * possible_cpus()))
    map_update(room, ctypes.c_uint32(0), marked)
    out = uplink(dp)
    assert (out.verdict, out.route_path, next_hop_mac(out)) == ("REDIRECT", "fib-cached", ROUTER_MAC)
    after = (ctypes.c_uint8 * len(marked))()
    assert map_lookup(room, ctypes.c_uint32(0), after)
    assert bytes(after) == bytes(marked), "the room untouched"


def test_the_watch_moves_the_generation_when_a_neighbour_changes(site):
    name, dp = site
    with RouteWatch(dp.table("dpp_upf_route_gen")) as watch:
        first = watch.generation
        assert first != 0, "on: no policy routing here"
        assert next_hop_mac(uplink(dp)) == ROUTER_MAC
        netns.run(["ip", "neigh", "replace", ROUTER, "lladdr", OTHER_MAC, "dev", "n6", "nud", "permanent"],
                  netns=name)
        wait_for(lambda: watch.generation != first, "a new generation")
        assert next_hop_mac(uplink(dp)) == OTHER_MAC
        second = watch.generation
        netns.run(["ip", "route", "del", DATA_NETWORK], netns=name)
        wait_for(lambda: watch.generation != second, "a new generation")
        out = uplink(dp)
        assert (out.verdict, out.reason) == ("PASS", "upf_no_route")
    assert dp.table("dpp_upf_route_gen").get(0).gen == 0, "closed: the cache is off"


def test_the_watch_follows_changes_when_its_socket_is_numbered_past_1024(site):
    """A serve holding many sockets and maps gets descriptors from 1024 up, which select() refuses:
    the watch's thread must still wait on its socket."""
    name, dp = site
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"the descriptor limit ({hard}) does not reach past 1024")
    resource.setrlimit(resource.RLIMIT_NOFILE, (2048, hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        with RouteWatch(dp.table("dpp_upf_route_gen")) as watch:
            first = watch.generation
            netns.run(["ip", "neigh", "replace", ROUTER, "lladdr", OTHER_MAC, "dev", "n6", "nud", "permanent"],
                      netns=name)
            wait_for(lambda: watch.generation != first, "a new generation")
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_watch_keeps_the_cache_off_under_policy_routing(site):
    name, dp = site
    with RouteWatch(dp.table("dpp_upf_route_gen")) as watch:
        assert not policy_routing() and watch.generation != 0
        netns.run(["ip", "rule", "add", "from", "10.45.0.0/16", "table", "100"], netns=name)
        wait_for(lambda: watch.generation == 0, "the cache off")
        assert policy_routing()
        netns.run(["ip", "rule", "del", "from", "10.45.0.0/16", "table", "100"], netns=name)
        wait_for(lambda: watch.generation != 0, "the cache on again")


def test_a_watch_never_reuses_an_earlier_watchs_generation(site):
    _, dp = site
    with RouteWatch(dp.table("dpp_upf_route_gen")) as watch:
        earlier = watch.generation
    with RouteWatch(dp.table("dpp_upf_route_gen")) as watch:
        assert watch.generation > earlier


def test_message_types_reads_every_header_of_a_datagram():
    def message(kind: int, body: bytes) -> bytes:
        length = NLMSG_HEADER.size + len(body)
        return NLMSG_HEADER.pack(length, kind, 0, 0, 0) + body + bytes(-length % 4)

    buffer = message(RTM_NEWRULE, b"\1\2\3") + message(16, b"") + message(RTM_DELRULE, bytes(8))
    assert message_types(buffer) == [RTM_NEWRULE, 16, RTM_DELRULE]
    assert message_types(NLMSG_HEADER.pack(0, 1, 0, 0, 0)) == []
