"""The private routing tables in the kernel (dataplane/bpf/nf/routing/, BPF_PROG_TEST_RUN): an uplink
T-PDU of a session whose network instance routes privately gets its next hop from the instance's
longest matching route and that route's neighbour, never from another instance's routes or the host's
FIB; no neighbour passes it to the kernel, no route drops it, each counted; the route cache keeps
private answers under its generation; and the neighbour watch copies the kernel's entry for a
gateway into the data path."""

from __future__ import annotations

import ipaddress
import subprocess

import pytest

from netapp.core.config import UpfSettings
from netapp.dataplane.facade import Dataplane, interface_index
from netapp.routing.models import Route
from netapp.routing.neighbours import NeighWatch
from netapp.routing.service import Routing
from netapp.routing.table import RoutingTable
from netapp.service.store import Store
from netapp.testbed import netns
from netapp.upf.abi import Output, RouteGen
from netapp.upf.compiler import Site, compile_session
from tests.upf.test_datapath import N3_IP, SERVER, session
from tests.upf.test_nexthop import N6_MAC, ROUTER_MAC, next_hop_mac, routed_namespace, uplink, wait_for
from tests.utils.kernel import one_cpu  # noqa: F401 - a fixture

INTERNET, VOICE = 1, 2  # network instance ids, in the order of their names; internet is the session's
GW_WIDE, GW_NARROW = ipaddress.ip_address("10.6.0.20"), ipaddress.ip_address("10.6.0.30")
MAC_WIDE, MAC_NARROW = "02:00:00:00:06:20", "02:00:00:00:06:30"


@pytest.fixture
def site(request):
    """test_nexthop's namespace (the host's FIB routes the data network via ROUTER, which a private
    instance must never use), its one session of the instance internet private (both instances
    are) unless the test's parameter names the private ones."""
    private = getattr(request, "param", frozenset({"internet", "voice"}))
    with routed_namespace(Site(net_instances={"internet": INTERNET, "voice": VOICE}, default_instance="internet",
                               n3_ipv4=N3_IP, output=Output.FIB, private_instances=private)) as routed:
        yield routed


def network(prefix: str):
    return ipaddress.ip_network(prefix)


def reasons(dp: Dataplane) -> dict[str, int]:
    return {name: packets for name, (packets, _) in dp.reason_stats().items()}


def test_the_longest_prefix_of_the_instance_wins(site):
    _, dp = site
    table = RoutingTable(dp.table)
    n6 = interface_index("n6")
    table.put_route(INTERNET, network("0.0.0.0/0"), GW_WIDE, n6)
    table.put_route(INTERNET, network("192.0.2.0/28"), GW_NARROW, n6)
    table.put_neigh(INTERNET, GW_WIDE, MAC_WIDE, N6_MAC, n6)
    table.put_neigh(INTERNET, GW_NARROW, MAC_NARROW, N6_MAC, n6)
    out = uplink(dp)  # to SERVER, 192.0.2.10: in the /28
    assert (out.verdict, out.route_path, next_hop_mac(out)) == ("REDIRECT", "private", MAC_NARROW)
    assert out.egress_ifindex == n6 and out.data[6:12] == bytes.fromhex(N6_MAC.replace(":", ""))
    table.delete_route(INTERNET, network("192.0.2.0/28"))
    out = uplink(dp)
    assert (out.verdict, out.route_path, next_hop_mac(out)) == ("REDIRECT", "private", MAC_WIDE)


def test_an_instance_never_uses_another_instances_routes_or_the_fib(site):
    _, dp = site
    table = RoutingTable(dp.table)
    n6 = interface_index("n6")
    table.put_route(VOICE, network("192.0.2.0/24"), GW_WIDE, n6)
    table.put_neigh(VOICE, GW_WIDE, MAC_WIDE, N6_MAC, n6)
    before = reasons(dp).get("routing_no_route", 0)
    out = uplink(dp)  # the host's FIB has a route (via ROUTER), voice has one: internet has none
    assert (out.verdict, out.reason, out.route_path) == ("DROP", "routing_no_route", "no-route")
    assert reasons(dp)["routing_no_route"] == before + 1
    table.put_route(INTERNET, network("192.0.2.0/24"), GW_WIDE, n6)
    out = uplink(dp)
    assert (out.verdict, out.reason, out.route_path) == ("PASS", "routing_no_neigh", "unresolved"), \
        "voice's neighbour of the same address is voice's alone"


def test_an_unresolved_next_hop_passes_to_the_kernel_then_forwards_once_resolved(site):
    _, dp = site
    table = RoutingTable(dp.table)
    n6 = interface_index("n6")
    table.put_route(INTERNET, network("192.0.2.0/24"), GW_WIDE, n6)
    out = uplink(dp)
    assert (out.verdict, out.reason, out.route_path) == ("PASS", "routing_no_neigh", "unresolved")
    assert reasons(dp)["routing_no_neigh"] >= 1
    table.put_neigh(INTERNET, GW_WIDE, MAC_WIDE, N6_MAC, n6)
    out = uplink(dp)
    assert (out.verdict, out.reason, next_hop_mac(out)) == ("REDIRECT", None, MAC_WIDE)
    assert out.data[6:12] == bytes.fromhex(N6_MAC.replace(":", ""))


def test_an_on_link_route_resolves_the_destination_itself(site):
    _, dp = site
    table = RoutingTable(dp.table)
    n6 = interface_index("n6")
    table.put_route(INTERNET, network("192.0.2.0/24"), None, n6)
    table.put_neigh(INTERNET, ipaddress.ip_address(SERVER), MAC_NARROW, N6_MAC, n6)
    assert next_hop_mac(uplink(dp)) == MAC_NARROW


def test_the_cache_keeps_private_answers_under_its_generation(site, one_cpu):
    _, dp = site
    gen = [1]

    def bump() -> None:
        gen[0] += 1
        dp.table("dpp_upf_route_gen").update({0: RouteGen(gen=gen[0])})

    bump()
    table = RoutingTable(dp.table, bump)
    n6 = interface_index("n6")
    table.put_route(INTERNET, network("192.0.2.0/24"), GW_WIDE, n6)
    table.put_neigh(INTERNET, GW_WIDE, MAC_WIDE, N6_MAC, n6)
    assert uplink(dp).route_path == "private"
    out = uplink(dp)
    assert (out.route_path, next_hop_mac(out)) == ("private-cached", MAC_WIDE)
    table.put_neigh(INTERNET, GW_WIDE, MAC_NARROW, N6_MAC, n6)  # a write bumps: the cache asks again
    out = uplink(dp)
    assert (out.route_path, next_hop_mac(out)) == ("private", MAC_NARROW)
    table.delete_route(INTERNET, network("192.0.2.0/24"))
    assert uplink(dp).reason == "routing_no_route"


@pytest.mark.parametrize("site", [frozenset()], indirect=True)
def test_the_fib_path_says_so(site, one_cpu):
    _, dp = site
    dp.table("dpp_upf_route_gen").update({0: RouteGen(gen=7)})
    assert (uplink(dp).route_path, uplink(dp).route_path) == ("fib", "fib-cached")
    assert next_hop_mac(uplink(dp)) == ROUTER_MAC


def test_the_neighbour_watch_copies_the_kernels_answer_for_a_gateway(site, tmp_path):
    name, dp = site
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    upf = UpfSettings(n6_interfaces={"n6": "internet", "n6p": "voice"}, routing={"internet": "private"})
    table = RoutingTable(dp.table)
    watch = NeighWatch(table)
    routing = Routing(store, upf, table, watch)
    try:
        watch.start()
        routing.add_route(Route(instance="internet", prefix="192.0.2.0/24", gateway=str(GW_WIDE), device="n6"))
        shown = subprocess.run(["ip", "neigh", "show", str(GW_WIDE), "dev", "n6"], capture_output=True, text=True)
        assert str(GW_WIDE) in shown.stdout, "the kernel was asked to resolve the gateway"
        out = uplink(dp)
        assert (out.verdict, out.reason) == ("PASS", "routing_no_neigh")
        assert routing.list_routes()[0].resolved is False
        netns.run(["ip", "neigh", "replace", str(GW_WIDE), "lladdr", MAC_WIDE, "dev", "n6", "nud", "permanent"],
                  netns=name)
        wait_for(lambda: routing.list_routes()[0].resolved, "the neighbour in the data path")
        out = uplink(dp)
        assert (out.verdict, next_hop_mac(out)) == ("REDIRECT", MAC_WIDE)
        netns.run(["ip", "neigh", "del", str(GW_WIDE), "dev", "n6"], netns=name)
        wait_for(lambda: uplink(dp).reason == "routing_no_neigh", "the neighbour out of the data path")
        routing.delete_route("internet", "192.0.2.0/24")
        assert uplink(dp).reason == "routing_no_route"
    finally:
        routing.close()
        store.close()


@pytest.mark.parametrize(("private", "output", "ifindex"), [
    (frozenset({"internet"}), Output.PRIVATE, INTERNET),
    (frozenset({"voice"}), Output.FIB, 0),
    (frozenset(), Output.FIB, 0),
])
def test_the_compiler_routes_privately_the_pdrs_of_a_private_instance(private, output, ifindex):
    site = Site(net_instances={"internet": INTERNET, "voice": VOICE}, default_instance="internet", n3_ipv4=N3_IP,
                private_instances=private)
    entries = compile_session(session(), site, {1: 0})
    [action] = entries.uplink.values()
    assert (action.output, action.ifindex) == (output, ifindex)
