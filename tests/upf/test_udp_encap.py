"""Outer header creation UDP/IPv4 and UDP/IPv6 (29.244 8.2.56, without GTP-U) in the kernel
(BPF_PROG_TEST_RUN): the UE packet put in UDP/IP to the peer's address and port, every output frame
compared byte for byte with the frame scapy builds; and the FAR taken over PFCP (pycrate) into the
data path."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from netapp.upf.abi import FarAction, Output, PdrFlag, QFI_ANY
from netapp.upf.compiler import compile_session
from netapp.upf.models import Far, ForwardingParameters, OuterHeaderCreation
from netapp.upf.pfcp.ies import Interface
from tests.upf.smf import create_far, create_urr, ie
from tests.upf.test_compiler import SITE
from tests.upf.test_datapath import (  # noqa: F401 - dp: the module's data plane fixture
    GNB,
    GNB6,
    MACS,
    N3_IP,
    N3_IP6,
    N9_PEER,
    SERVER,
    TEID,
    UE,
    UE6,
    applier,
    dp,
    session,
    ue_packet,
    uplink_frame,
)
from tests.upf import test_datapath as datapath
from tests.upf.test_usage import site

PORT = 5555


def udp_far(far_id: int, destination: Interface, kind: str, address: str) -> Far:
    return Far(id=far_id, apply_action=frozenset({"FORW"}), forwarding=ForwardingParameters(
        destination_interface=destination,
        outer_header_creation=OuterHeaderCreation(kind=kind, address=address, port=PORT)))


def downlink_in_udp(kind: str, address: str):
    base = session()
    return base.model_copy(update={"fars": {**base.fars, 2: udp_far(2, Interface.ACCESS, kind, address)}})


def test_the_compiler_marks_the_entry_udp_with_the_port_where_the_teid_was():
    entries = compile_session(downlink_in_udp("udp-ipv4", GNB), SITE, {})
    down = next(iter(entries.downlink.values()))
    assert (down.flags, down.far, down.family, down.teid) == (PdrFlag.ENCAP | PdrFlag.UDP, FarAction.FORWARD, 4, PORT)
    assert compile_session(session(), SITE, {}).uplink[(TEID, QFI_ANY)].flags & PdrFlag.UDP == 0


@pytest.mark.parametrize("family", [4, 6])
def test_downlink_is_put_in_udp_to_the_peers_address_and_port(dp, family):
    upf = applier(dp)
    udp = downlink_in_udp("udp-ipv4", GNB) if family == 4 else downlink_in_udp("udp-ipv6", GNB6)
    upf.apply(None, udp)
    try:
        ue = IP(src=SERVER, dst=UE) if family == 4 else IPv6(src="2001:db8:99::1", dst=UE6)
        sent = Ether(**MACS) / ue / UDP(sport=5004, dport=40000) / (b"d" * 301)
        out = dp.test_run(bytes(sent), datapath.N6_IF)
        if family == 4:
            outer = IP(src=N3_IP, dst=GNB, id=0, ttl=64) / UDP(sport=PORT, dport=PORT, chksum=0)
        else:
            outer = IPv6(src=N3_IP6, dst=GNB6, hlim=64) / UDP(sport=PORT, dport=PORT)  # checksum computed
        assert (out.verdict, out.action) == ("PASS", "upf")
        assert out.data == bytes(Ether(**MACS) / outer / sent[IP if family == 4 else IPv6])
    finally:
        upf.apply(udp, None)


def test_uplink_is_decapsulated_and_put_in_udp_to_the_n9_peer(dp):
    upf = applier(dp, Output.TX)
    n9 = session(uplink_far=udp_far(1, Interface.CORE, "udp-ipv4", N9_PEER))
    upf.apply(None, n9)
    try:
        out = dp.test_run(uplink_frame(), datapath.N3_IF)
        swapped = {"src": MACS["dst"], "dst": MACS["src"]}
        expected = (Ether(**swapped) / IP(src=N3_IP, dst=N9_PEER, id=0, ttl=64)
                    / UDP(sport=PORT, dport=PORT, chksum=0) / ue_packet())
        assert (out.verdict, out.action) == ("TX", "upf")
        assert out.data == bytes(expected)
    finally:
        upf.apply(n9, None)


def test_a_udp_far_established_over_pfcp_tunnels_the_downlink(dp, tmp_path):
    to_gnb = create_far(2, core=False, gnb=None)
    to_gnb["Data"][-1]["Data"].append(ie(84, {"UDP_IPv4": 1, "IPv4Addr": GNB, "Port": PORT}))
    with site(dp, tmp_path, create_urr(), downlink_far=to_gnb):
        sent = Ether(**MACS) / IP(src=SERVER, dst=UE) / UDP(sport=5004, dport=40000) / (b"d" * 64)
        out = dp.test_run(bytes(sent), datapath.N6_IF)
        expected = (Ether(**MACS) / IP(src=N3_IP, dst=GNB, id=0, ttl=64) / UDP(sport=PORT, dport=PORT, chksum=0)
                    / sent[IP])
        assert out.data == bytes(expected)
