"""CASES, the table of named cases: ``{name: (frame_bytes, expected)}``, joined from the groups
of cases_ip.py, cases_overlays.py and cases_gtpu.py, and the groups that cross them here."""

from __future__ import annotations

import struct

from scapy.layers.inet6 import IPv6ExtHdrHopByHop

from .cases_gtpu import _gtpu_cases, _gtpu_in_overlay_cases, _gtpu_signalling_cases
from .cases_ip import _fragment_cases, _ipv4_cases, _ipv6_cases, _plain_cases, _vlan_cases
from .cases_overlays import _geneve_cases, _gre_cases, _vxlan_cases
from .common import FLAG_VNI, INNER4, OUTER4, OUTER6, OVERLAY_VXLAN, UE4, VXLAN_PORT, patched
from .ethernet import arp_frame, ether
from .expect import Cases, _ue, expect_ok, expect_reason
from .frames import outer_gtpu, outer_udp, ue_udp
from .gtp import gtpu
from .ip4 import ipv4
from .ip6 import ipv6
from .l4 import tcp, udp
from .overlays import vxlan


def _datagram_end_cases() -> Cases:
    """Bytes after a datagram's end (Ethernet padding, or a lying length) are never headers."""
    v4, v6 = OUTER4, OUTER6
    tcp_80 = bytes(tcp(sport=1, dport=80))
    hop_by_hop = bytes(IPv6ExtHdrHopByHop(nh=59))
    vxlan_frame = bytes(outer_udp(vxlan(5, ether(ue_udp(*INNER4, 1, 2))), dport=VXLAN_PORT))
    ue_ip_only = bytes(ipv4(b"", src=UE4[0], dst=UE4[1], proto=6))
    return {
        "ipv4_tcp_in_padding": (bytes(ether(ipv4(b"", proto=6))) + tcp_80, expect_reason("trunc_l4")),
        "ipv6_tcp_in_padding": (bytes(ether(ipv6(b"", nh=6))) + tcp_80, expect_reason("trunc_l4")),
        "ipv6_ext_header_in_padding": (
            bytes(ether(ipv6(b"", nh=0))) + hop_by_hop,
            expect_reason("trunc_ipv6"),
        ),
        "vxlan_empty_udp_payload_then_padding": (
            bytes(outer_udp(b"", dport=VXLAN_PORT)) + bytes(18),
            expect_reason("trunc_vxlan"),
        ),
        "udp_length_ends_the_tunnel": (patched(vxlan_frame, 38, b"\x00\x08"), expect_reason("trunc_vxlan")),
        "udp_length_under_8_leaves_no_payload": (
            patched(vxlan_frame, 38, b"\x00\x00"),
            expect_reason("trunc_vxlan"),
        ),
        "udp_length_past_the_datagram_is_bounded_by_it": (
            patched(vxlan_frame, 38, b"\xff\xff"),
            expect_ok(flags=FLAG_VNI, overlay=OVERLAY_VXLAN, vni=5, **_ue(INNER4, 17, 1, 2)),
        ),
        "inner_datagram_past_the_outer_one": (
            patched(vxlan_frame + bytes(4), 16, struct.pack("!H", len(vxlan_frame) - 14 - 4)),
            expect_reason("trunc_ipv4"),
        ),
        "gtpu_empty_t_pdu_then_padding": (
            bytes(outer_gtpu(gtpu(0x10))) + b"\x45" + bytes(17),
            expect_reason("trunc_gtp"),
        ),
        "gtpu_ue_tcp_after_the_ue_datagram": (
            outer_gtpu(gtpu(0x10, inner=ue_ip_only + tcp_80)),
            expect_reason("trunc_l4"),
        ),
        "ipv4_udp_then_padding": (
            bytes(ether(ipv4(udp(sport=7, dport=9), src=v4[0], dst=v4[1]))) + b"\xff" * 18,
            expect_ok(**_ue(v4, 17, 7, 9)),
        ),
        "ipv6_udp_then_padding": (
            bytes(ether(ipv6(udp(sport=7, dport=9)))) + b"\xff" * 4,
            expect_ok(**_ue(v6, 17, 7, 9)),
        ),
    }


def _not_ip_and_ethernet_cases() -> Cases:
    return {
        "arp_not_ip": (arp_frame(), expect_reason("not_ip")),
        "lldp_not_ip": (ether(b"\x02\x07\x04" + bytes(7), ethertype=0x88CC), expect_reason("not_ip")),
        "ethernet_cut": (bytes(arp_frame())[:13], expect_reason("trunc_eth")),
        "empty_frame": (b"", expect_reason("trunc_eth")),
    }


def _build_cases() -> dict[str, tuple[bytes, dict]]:
    groups = (
        _plain_cases, _vlan_cases, _ipv4_cases, _ipv6_cases, _fragment_cases, _vxlan_cases,
        _geneve_cases, _gre_cases, _gtpu_cases, _gtpu_signalling_cases, _gtpu_in_overlay_cases,
        _datagram_end_cases, _not_ip_and_ethernet_cases,
    )  # fmt: skip
    table: dict[str, tuple[bytes, dict]] = {}
    for group in groups:
        for name, (packet, expected) in group().items():
            if name in table:
                raise ValueError(f"duplicate case name {name}")
            table[name] = (bytes(packet), expected)
    return table


CASES: dict[str, tuple[bytes, dict]] = _build_cases()
