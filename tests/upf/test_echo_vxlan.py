"""GTP-U Echo Requests to our N3 address carried inside VXLAN, answered in XDP (BPF_PROG_TEST_RUN):
the response compared byte for byte with the frame scapy builds, outer VXLAN/UDP/IP/Ethernet headers
swapped as well as the inner ones, over IPv4 and IPv6 each side; near misses left to the pipeline."""

from __future__ import annotations

import pytest
from scapy.contrib.gtp import GTP_U_Header
from scapy.layers.inet import IP, UDP, IPOption_NOP
from scapy.layers.inet6 import IPv6, IPv6ExtHdrDestOpt
from scapy.layers.l2 import Ether
from scapy.layers.vxlan import VXLAN

from tests.upf import test_datapath as datapath
from tests.upf.test_datapath import GNB, MACS, N3_IP, N3_IP6, dp, installed  # noqa: F401 - fixtures
from tests.utils.packets.gtp import gtp_echo_request

VTEP, PEER_VTEP, VTEP6, PEER_VTEP6 = "10.1.0.2", "10.1.0.1", "2001:db8:1::2", "2001:db8:1::1"
GNB6 = "2001:db8:3::9"
INNER_MACS = {"src": "02:00:00:00:01:01", "dst": "02:00:00:00:01:02"}
SEQ = 0x1234


def swapped(macs: dict[str, str]) -> dict[str, str]:
    return {"src": macs["dst"], "dst": macs["src"]}


def outer_ip(family: int, reply: bool):
    src, dst = (PEER_VTEP, VTEP) if family == 4 else (PEER_VTEP6, VTEP6)
    if reply:
        src, dst = dst, src
    return IP(src=src, dst=dst) if family == 4 else IPv6(src=src, dst=dst)


def inner_ip(family: int, reply: bool):
    src, dst = (GNB, N3_IP) if family == 4 else (GNB6, N3_IP6)
    if reply:
        src, dst = dst, src
    return IP(src=src, dst=dst) if family == 4 else IPv6(src=src, dst=dst)


def in_vxlan(family: int, inner: Ether, dport: int = 4789):
    return Ether(**MACS) / outer_ip(family, reply=False) / UDP(sport=49152, dport=dport) / VXLAN(vni=0x445) / inner


@pytest.mark.parametrize(("outer", "inner"), [(4, 4), (6, 4), (4, 6), (6, 6)])
def test_an_echo_request_inside_vxlan_is_answered_with_every_header_swapped(dp, installed, outer, inner):
    request = in_vxlan(outer, Ether(**INNER_MACS) / inner_ip(inner, reply=False) / UDP(sport=2152, dport=2152)
                       / gtp_echo_request(seq=SEQ))
    out = dp.test_run(bytes(request), datapath.N3_IF)
    response = Ether(**swapped(INNER_MACS)) / inner_ip(inner, reply=True) / UDP(
        sport=2152, dport=2152, **({"chksum": 0} if inner == 4 else {})) / GTP_U_Header(
        gtp_type=2, S=1, seq=SEQ, teid=0) / b"\x0e\x00"
    expected = (Ether(**swapped(MACS)) / outer_ip(outer, reply=True)
                / UDP(sport=49152, dport=4789, **({"chksum": 0} if outer == 4 else {})) / VXLAN(vni=0x445) / response)
    assert (out.verdict, out.reason) == ("TX", "upf_echo")
    assert out.data == bytes(expected)


@pytest.mark.parametrize("change", ["not-ours", "geneve-port", "echo-response"])
def test_near_misses_inside_vxlan_are_left_to_the_pipeline(dp, installed, change):
    inner_dst = "10.3.0.2" if change == "not-ours" else N3_IP
    message = gtp_echo_request(seq=SEQ)
    if change == "echo-response":
        message = GTP_U_Header(gtp_type=2, S=1, seq=SEQ, teid=0) / b"\x0e\x00"
    inner = Ether(**INNER_MACS) / IP(src=GNB, dst=inner_dst) / UDP(sport=2152, dport=2152) / message
    request = bytes(in_vxlan(4, inner, dport=6081 if change == "geneve-port" else 4789))
    out = dp.test_run(request, datapath.N3_IF)
    assert out.reason != "upf_echo" and out.verdict != "TX" and out.data == request


@pytest.mark.parametrize("outer", ["ipv4-options", "ipv6-extension-header"])
def test_an_echo_request_inside_vxlan_whose_outer_header_is_longer_is_left_whole_to_the_pipeline(
        dp, installed, outer):  # noqa: F811
    """The response's outer lengths are written for an outer IP header without options or extension
    headers: another is checked before anything is changed, not answered and not mangled."""
    if outer == "ipv4-options":
        ip = IP(src=PEER_VTEP, dst=VTEP, options=[IPOption_NOP()] * 4)
    else:
        ip = IPv6(src=PEER_VTEP6, dst=VTEP6) / IPv6ExtHdrDestOpt()
    inner = Ether(**INNER_MACS) / IP(src=GNB, dst=N3_IP) / UDP(sport=2152, dport=2152) / gtp_echo_request(seq=SEQ)
    request = bytes(Ether(**MACS) / ip / UDP(sport=49152, dport=4789) / VXLAN(vni=0x445) / inner)
    out = dp.test_run(request, datapath.N3_IF)
    assert (out.verdict, out.reason) != ("TX", "upf_echo")
    assert out.data == request


def test_an_echo_request_whose_ip_header_has_options_is_left_whole_to_the_pipeline(dp, installed):  # noqa: F811
    request = bytes(Ether(**MACS) / IP(src=GNB, dst=N3_IP, options=[IPOption_NOP()] * 4)
                    / UDP(sport=2152, dport=2152) / gtp_echo_request(seq=SEQ))
    out = dp.test_run(request, datapath.N3_IF)
    assert out.reason != "upf_echo" and out.data == request
