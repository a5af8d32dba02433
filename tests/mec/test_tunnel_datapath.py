"""The tunnel action in the kernel (BPF_PROG_TEST_RUN): what MEC 011's FORWARD_DECAPSULATED and
FORWARD_ENCAPSULATED compile to (netapp.mec.tunnels) does to real frames, compared byte for byte with
the frames scapy builds for what the rule asks; the GRE frames are also read by tshark, which must
find nothing wrong in them.

The module runs in a network namespace of its own: the packets arrive on `n3`; `n6` leads to a router
(a permanent neighbour) through which the kernel's FIB reaches the tunnels' far ends and the IP
interfaces' addresses. Rules are installed as a compiled document, the way the site's reconcile does,
so their dpp_tunnels entries and ports are written by the control plane's own code.
"""

from __future__ import annotations

import secrets
import subprocess
import tempfile

import pytest
from scapy.contrib.geneve import GENEVE
from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import GRE, Ether
from scapy.layers.vxlan import VXLAN

from netapp.dataplane.facade import Dataplane, host_interfaces, interface_index
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.testbed import netns
from tests.atsss.tshark import pcap, require_tshark
from tests.utils.kernel import require_kernel

OUR_MAC, GNB_MAC = "02:00:00:00:03:01", "02:00:00:00:03:02"
N6_MAC, ROUTER_MAC = "02:00:00:00:06:01", "02:00:00:00:06:02"
N3_IP, GNB_IP, N3_IP6, GNB_IP6 = "10.3.0.1", "10.3.0.9", "2001:db8:3::1", "2001:db8:3::9"
ROUTER, ROUTER6 = "10.6.0.2", "2001:db8:6::2"
PEER, PEER6 = "198.51.100.7", "2001:db8:99::7"  # the new tunnels' far ends, behind the router
TEID, QFI = 0x8894D0D4, 9
MATCH = {"dst": "192.0.2.0/24", "protocol": "udp", "dst_port": 5000}


@pytest.fixture(scope="module")
def dp():
    require_kernel()
    name = f"dpp-tun-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    try:
        for ifname, mac, cidr in (("n3", OUR_MAC, f"{N3_IP}/24"), ("n6", N6_MAC, "10.6.0.1/24")):
            netns.run(["ip", "link", "add", ifname, "type", "veth", "peer", "name", f"{ifname}p"], netns=name)
            netns.run(["ip", "link", "set", f"{ifname}p", "up"], netns=name)
            netns.configure(name, ifname, mac, cidr)
        netns.sysctl(name, "net.ipv6.conf.n6.disable_ipv6", 0)  # the namespace's default is off
        netns.run(["ip", "-6", "addr", "add", "2001:db8:6::1/64", "dev", "n6", "nodad"], netns=name)
        netns.add_neighbour(name, "n6", ROUTER, ROUTER_MAC)
        netns.add_neighbour(name, "n6", ROUTER6, ROUTER_MAC)
        netns.run(["ip", "route", "add", "198.51.100.0/24", "via", ROUTER], netns=name)
        netns.run(["ip", "-6", "route", "add", "2001:db8:99::/48", "via", ROUTER6], netns=name)
        netns.sysctl(name, "net.ipv4.conf.all.forwarding", 1)
        netns.sysctl(name, "net.ipv6.conf.all.forwarding", 1)
        with netns.entered(name), Dataplane.open(trace=True) as opened:
            yield opened
    finally:
        netns.delete_namespace(name)


def install(dp: Dataplane, action: dict) -> None:
    """One intent with `action` on UDP to 192.0.2.0/24 port 5000, as the site's reconcile installs it."""
    document = {"intents": [{"id": "mec", "match": MATCH, "action": action}]}
    dp.apply_compiled(compile_document(parse_document(document), host_interfaces()))


def run(dp: Dataplane, frame):
    return dp.test_run(bytes(frame), interface_index("n3"))


def ue(family: int = 4):
    """The UE's packet the rule matches (its IPv6 twin for family 6, matched by no rule)."""
    ip = IP(src="10.45.0.7", dst="192.0.2.10") if family == 4 else IPv6(src="2001:db8:45::7", dst="2001:db8:2::10")
    return ip / UDP(sport=40000, dport=5000) / (b"m" * 40)


def gtpu(inner, container: bool = True):
    """A T-PDU of TEID, with an uplink PDU Session Container of QFI (or no extension header)."""
    if not container:
        return GTP_U_Header(teid=TEID) / inner
    return GTP_U_Header(teid=TEID, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=1, QFI=QFI) / inner


def outer(payload, family: int = 4):
    """To our N3 address from the gNB, GTP-U's port."""
    ip = IP(src=GNB_IP, dst=N3_IP) if family == 4 else IPv6(src=GNB_IP6, dst=N3_IP6)
    return Ether(dst=OUR_MAC, src=GNB_MAC) / ip / UDP(sport=2152, dport=2152) / payload


def in_overlay(kind: str):
    """GTP-U carried by an overlay between the gNB and us."""
    inner = IP(src=GNB_IP, dst=N3_IP) / UDP(sport=2152, dport=2152) / gtpu(ue())
    if kind == "vxlan":
        carried = UDP(sport=4789, dport=4789) / VXLAN(vni=0x445) / Ether(src=GNB_MAC, dst=OUR_MAC) / inner
    elif kind == "geneve":
        carried = UDP(sport=6081, dport=6081) / GENEVE(vni=0x445, proto=0x0800) / inner
    else:
        carried = GRE(proto=0x0800) / inner
    return Ether(dst=OUR_MAC, src=GNB_MAC) / IP(src="10.3.1.9", dst="10.3.1.1") / carried


@pytest.mark.parametrize(
    ("frame", "family"),
    [
        (lambda: outer(gtpu(ue())), 4),
        (lambda: outer(gtpu(ue()), family=6), 4),
        (lambda: outer(gtpu(ue(), container=False)), 4),
        (lambda: in_overlay("vxlan"), 4),
        (lambda: in_overlay("geneve"), 4),
        (lambda: in_overlay("gre"), 4),
    ],
    ids=["gtpu", "gtpu-over-ipv6", "no-extension", "vxlan", "geneve", "gre"],
)
def test_forward_decapsulated_sends_the_ue_packet_alone_out_of_the_mac_interface(dp, frame, family):
    install(dp, {"type": "tunnel", "decapsulate": True, "interface": "n6"})
    out = run(dp, frame())
    assert (out.verdict, out.action, out.egress_ifindex) == ("REDIRECT", "tunnel", interface_index("n6"))
    assert out.data == bytes(Ether(dst=OUR_MAC, src=GNB_MAC) / ue(family))


def test_forward_decapsulated_sends_a_packet_without_a_tunnel_as_it_came(dp):
    install(dp, {"type": "tunnel", "decapsulate": True, "interface": "n6"})
    frame = bytes(Ether(dst=OUR_MAC, src=GNB_MAC) / ue())
    out = run(dp, frame)
    assert (out.verdict, out.action, out.data) == ("REDIRECT", "tunnel", frame)


def test_forward_decapsulated_towards_an_ip_address_takes_the_fibs_next_hop(dp):
    install(dp, {"type": "tunnel", "decapsulate": True, "towards": PEER})
    out = run(dp, outer(gtpu(ue())))
    assert (out.verdict, out.action, out.egress_ifindex) == ("REDIRECT", "tunnel", interface_index("n6"))
    assert out.data == bytes(Ether(dst=ROUTER_MAC, src=N6_MAC) / ue())


def test_forward_encapsulated_towards_an_ip_address_keeps_the_tunnel(dp):
    install(dp, {"type": "tunnel", "towards": PEER6})
    frame = outer(gtpu(ue()))
    out = run(dp, frame)
    assert out.verdict == "REDIRECT"
    assert out.data == bytes(Ether(dst=ROUTER_MAC, src=N6_MAC) / frame[IP])


def outer_ip(source: str, peer: str):
    """The new tunnel's IP header as the encapsulations build it: TTL 64, id 0."""
    return IP(src=source, dst=peer, id=0, ttl=64) if ":" not in peer else IPv6(src=source, dst=peer, hlim=64)


def moved(source: str, peer: str, inner, container: bool = True):
    """What the UPF's encapsulation builds: UDP checksum 0 over IPv4 (computed over IPv6), the
    packet's TEID, an uplink container with its QFI (or none, as the packet came)."""
    udp = UDP(sport=2152, dport=2152, chksum=0 if ":" not in peer else None)
    return bytes(Ether(dst=ROUTER_MAC, src=N6_MAC) / outer_ip(source, peer) / udp / gtpu(inner, container))


@pytest.mark.parametrize(
    ("tunnel", "frame", "expected"),
    [
        ({"peer": PEER, "source": "10.6.0.1"}, lambda: outer(gtpu(ue())), lambda: moved("10.6.0.1", PEER, ue())),
        ({"peer": PEER}, lambda: outer(gtpu(ue())), lambda: moved(N3_IP, PEER, ue())),
        ({"peer": PEER}, lambda: in_overlay("vxlan"), lambda: moved("10.3.0.1", PEER, ue())),
        ({"peer": PEER6}, lambda: outer(gtpu(ue()), family=6), lambda: moved(N3_IP6, PEER6, ue())),
    ],
    ids=["source-given", "source-of-the-old-tunnel", "from-vxlan", "ipv6"],
)
def test_forward_encapsulated_into_gtpu_keeps_the_packets_teid_and_qfi(dp, tunnel, frame, expected):
    install(dp, {"type": "tunnel", "encapsulate": tunnel})
    out = run(dp, frame())
    assert (out.verdict, out.action, out.reason) == ("REDIRECT", "tunnel", None)
    assert out.data == expected()


def test_forward_encapsulated_into_gtpu_adds_no_container_to_a_packet_that_had_none(dp):
    install(dp, {"type": "tunnel", "encapsulate": {"peer": PEER}})
    out = run(dp, outer(gtpu(ue(), container=False)))
    assert (out.verdict, out.action, out.reason) == ("REDIRECT", "tunnel", None)
    assert out.data == moved(N3_IP, PEER, ue(), container=False)


def in_gre(source: str, peer: str, inner, key=None) -> bytes:
    """What the GRE encapsulation builds: RFC 2784's header (RFC 2890's key if any), no checksum."""
    gre = GRE(proto=0x0800) if key is None else GRE(key_present=1, key=key, proto=0x0800)
    return bytes(Ether(dst=ROUTER_MAC, src=N6_MAC) / outer_ip(source, peer) / gre / inner)


@pytest.mark.parametrize(
    ("tunnel", "frame", "expected"),
    [
        ({"peer": PEER}, lambda: outer(gtpu(ue())), lambda: in_gre(N3_IP, PEER, ue())),
        ({"peer": PEER, "key": 0x8894D0D4}, lambda: outer(gtpu(ue(), container=False)),
         lambda: in_gre(N3_IP, PEER, ue(), key=0x8894D0D4)),
        ({"peer": PEER6, "key": 7}, lambda: outer(gtpu(ue()), family=6), lambda: in_gre(N3_IP6, PEER6, ue(), key=7)),
        ({"peer": PEER, "source": "10.6.0.1"}, lambda: in_overlay("vxlan"), lambda: in_gre("10.6.0.1", PEER, ue())),
        ({"peer": PEER, "source": "10.6.0.1"}, lambda: bytes(Ether(dst=OUR_MAC, src=GNB_MAC) / ue()) + bytes(6),
         lambda: in_gre("10.6.0.1", PEER, ue())),
    ],
    ids=["gtpu", "keyed-no-extension", "ipv6", "from-vxlan", "plain-padded"],
)
def test_forward_encapsulated_into_gre_carries_the_ip_packet_to_the_peer(dp, tunnel, frame, expected):
    install(dp, {"type": "tunnel", "encapsulate": {"protocol": "gre", **tunnel}})
    out = run(dp, frame())
    assert (out.verdict, out.action, out.reason, out.egress_ifindex) == ("REDIRECT", "tunnel", None,
                                                                          interface_index("n6"))
    assert out.data == expected()
    assert tshark_problems(out.data) == ""


def tshark_problems(frame: bytes) -> str:
    """What tshark's expert finds in a frame (malformed, bad checksum, ...): '' when nothing."""
    with tempfile.NamedTemporaryFile(suffix=".pcap") as f:
        f.write(pcap([frame]))
        f.flush()
        command = [require_tshark(), "-n", "-r", f.name, "-o", "ip.check_checksum:TRUE", "-T", "fields",
                   "-e", "_ws.expert.message", "-e", "gre.proto"]
        fields = subprocess.run(command, check=True, capture_output=True, text=True).stdout.rstrip("\n").split("\t")
    assert fields[-1] in ("0x0800", "0x86dd"), f"tshark read no GRE: {fields}"
    return fields[0]


def test_a_packet_without_a_tunnel_or_a_source_is_not_carried_in_gre_but_counted(dp):
    install(dp, {"type": "tunnel", "encapsulate": {"protocol": "gre", "peer": PEER}})
    frame = bytes(Ether(dst=OUR_MAC, src=GNB_MAC) / ue())  # no tunnel of its own to take a source from
    out = run(dp, frame)
    assert (out.verdict, out.action, out.reason, out.data) == ("PASS", "default", "tunnel_no_source", frame)


def test_a_packet_without_gtpu_is_not_moved_into_a_tunnel_but_counted(dp):
    install(dp, {"type": "tunnel", "encapsulate": {"peer": PEER}})
    frame = bytes(Ether(dst=OUR_MAC, src=GNB_MAC) / ue())
    out = run(dp, frame)
    assert (out.verdict, out.action, out.reason, out.data) == ("PASS", "default", "tunnel_not_gtpu", frame)


def test_a_tunnel_of_the_other_family_without_a_source_is_left_to_the_default_and_counted(dp):
    install(dp, {"type": "tunnel", "encapsulate": {"peer": PEER6}})
    frame = bytes(outer(gtpu(ue())))  # arrived over IPv4: no IPv6 address of ours to leave from
    out = run(dp, frame)
    assert (out.verdict, out.action, out.reason, out.data) == ("PASS", "default", "tunnel_no_source", frame)


def test_a_t_pdu_that_carries_no_ip_packet_is_not_put_into_gre_but_counted(dp):
    """An Ethernet or unstructured PDU session's T-PDU is classified on its tunnel alone (its UE fields
    empty), so a rule on the TEID reaches the tunnel action with no IP packet for GRE to carry."""
    document = {"intents": [{"id": "mec", "match": {"teid": TEID},
                             "action": {"type": "tunnel", "encapsulate": {"protocol": "gre", "peer": PEER}}}]}
    dp.apply_compiled(compile_document(parse_document(document), host_interfaces()))
    ethernet_pdu = Ether(src="02:00:00:00:45:07", dst="02:00:00:00:02:10", type=0x88B5) / (b"e" * 46)
    frame = bytes(outer(GTP_U_Header(teid=TEID, gtp_type=255) / ethernet_pdu))  # a T-PDU, said outright
    out = run(dp, frame)
    assert (out.verdict, out.action, out.reason, out.data) == ("PASS", "default", "tunnel_not_ip", frame)
    assert run(dp, outer(gtpu(ue(), container=False))).reason is None, "the same tunnel's IP packets are carried"
