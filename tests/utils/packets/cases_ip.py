"""The case table, L2 and L3: plain IPv4/IPv6, VLAN tags, IPv4 options, IPv6 extension headers,
fragments. Each group returns {name: (packet or bytes, expected)}; cases.py joins them into CASES."""

from __future__ import annotations

import struct

from scapy.packet import Packet

from .common import (
    ETH_P_8021AD,
    ETH_P_8021Q,
    FLAG_FRAGMENT,
    GTPU_PORT,
    OUTER4,
    OUTER6,
    VXLAN_PORT,
    patched,
)
from .ethernet import arp_frame, ether
from .expect import Cases, _ue, expect_ok, expect_reason
from .ip4 import ipv4
from .ip6 import ipv6, ipv6_auth, ipv6_dest_opts, ipv6_fragment, ipv6_hop_by_hop, ipv6_routing
from .l4 import icmp, icmpv6, sctp, tcp, udp
from .overlays import vxlan


def _plain_cases() -> Cases:
    v4, v6 = OUTER4, OUTER6
    return {
        "ipv4_udp": (
            ether(ipv4(udp(sport=1234, dport=53), src=v4[0], dst=v4[1], dscp=46)),
            expect_ok(**_ue(v4, 17, 1234, 53, dscp=46)),
        ),
        "ipv4_tcp": (ether(ipv4(tcp(sport=40000, dport=443))), expect_ok(**_ue(v4, 6, 40000, 443))),
        "ipv4_icmp_echo": (ether(ipv4(icmp(8, 0))), expect_ok(**_ue(v4, 1, 8, 0))),
        "ipv4_icmp_port_unreachable": (ether(ipv4(icmp(3, 3))), expect_ok(**_ue(v4, 1, 3, 3))),
        "ipv4_sctp_ports": (ether(ipv4(sctp(3868, 3869), proto=132)), expect_ok(**_ue(v4, 132, 3868, 3869))),
        "ipv6_sctp_ports": (ether(ipv6(sctp(36412, 38412), nh=132)), expect_ok(**_ue(v6, 132, 36412, 38412))),
        "ipv4_sctp_cut": (ether(ipv4(sctp(1, 2)[:11], proto=132)), expect_reason("trunc_l4")),
        "ipv4_udp_source_port_2152_is_not_gtp": (
            ether(ipv4(udp(b"\x30\xff\x00\x00", sport=GTPU_PORT, dport=5555))),
            expect_ok(**_ue(v4, 17, GTPU_PORT, 5555)),
        ),
        "ipv4_ethernet_padding_allowed": (
            bytes(ether(ipv4(udp(sport=7, dport=9)))) + b"\0" * 18,
            expect_ok(**_ue(v4, 17, 7, 9)),
        ),
        "ipv6_udp": (
            ether(ipv6(udp(sport=5353, dport=5353), dscp=10)),
            expect_ok(**_ue(v6, 17, 5353, 5353, dscp=10)),
        ),
        "ipv6_tcp": (ether(ipv6(tcp(sport=40001, dport=80))), expect_ok(**_ue(v6, 6, 40001, 80))),
        "ipv6_icmpv6_echo": (ether(ipv6(icmpv6(128, 0))), expect_ok(**_ue(v6, 58, 128, 0))),
        "ipv6_no_next_header": (ether(ipv6(b"", nh=59)), expect_ok(**_ue(v6, 59))),
        "tcp_data_offset_beyond_frame_is_ignored": (
            patched(ether(ipv4(tcp(sport=1, dport=2))), 14 + 20 + 12, b"\xf0"),
            expect_ok(**_ue(v4, 6, 1, 2)),
        ),
    }


def _vlan_cases() -> Cases:
    v4, v6 = OUTER4, OUTER6
    three_tags = ether(ipv4(udp(dport=53)), vlans=(1, 2, 3), tpids=(ETH_P_8021AD, ETH_P_8021Q, ETH_P_8021Q))
    return {
        "vlan_ipv4_udp": (
            ether(ipv4(udp(sport=1, dport=2)), vlans=(100,)),
            expect_ok(vlan=100, **_ue(v4, 17, 1, 2)),
        ),
        "vlan_priority_bits_dropped": (
            ether(ipv4(udp(sport=1, dport=2)), vlans=(300,), pcp=5),
            expect_ok(vlan=300, **_ue(v4, 17, 1, 2)),
        ),
        "qinq_88a8_ipv4_udp": (
            ether(ipv4(udp(sport=1, dport=2)), vlans=(100, 200)),
            expect_ok(vlan=100, **_ue(v4, 17, 1, 2)),
        ),
        "qinq_8100_8100_ipv6_tcp": (
            ether(ipv6(tcp(sport=3, dport=4)), vlans=(4094, 5), tpids=(ETH_P_8021Q, ETH_P_8021Q)),
            expect_ok(vlan=4094, **_ue(v6, 6, 3, 4)),
        ),
        "vlan_three_tags": (three_tags, expect_reason("vlan_depth")),
        # The third TPID alone is enough: the limit is checked before the tag is read.
        "vlan_third_tag_announced_then_cut": (bytes(three_tags)[: 14 + 8], expect_reason("vlan_depth")),
        "vlan_tag_cut": (bytes(ether(ipv4(udp(dport=53)), vlans=(7,)))[:16], expect_reason("trunc_vlan")),
        "vlan_second_tag_cut": (
            bytes(ether(ipv4(udp(dport=53)), vlans=(7, 8)))[:20],
            expect_reason("trunc_vlan"),
        ),
        "vlan_arp_not_ip": (arp_frame(vlans=(10,)), expect_reason("not_ip")),
        "tpid_9100_not_ip": (
            ether(ipv4(udp(dport=53)), vlans=(9,), tpids=(0x9100,)),
            expect_reason("not_ip"),
        ),
    }


def _ipv4_cases() -> Cases:
    v4 = OUTER4
    base = bytes(ether(ipv4(udp(sport=1, dport=2))))  # IP header at 14, UDP at 34
    record_route = b"\x07\x07\x04" + bytes(4) + b"\x00"  # RR with one empty slot, then EOL
    return {
        "ipv4_options_udp": (
            ether(ipv4(udp(sport=1, dport=2), options=record_route)),
            expect_ok(**_ue(v4, 17, 1, 2)),
        ),
        "ipv4_max_options_udp": (
            ether(ipv4(udp(sport=1, dport=2), options=b"\x01" * 40)),
            expect_ok(**_ue(v4, 17, 1, 2)),
        ),
        "ipv4_header_cut": (base[: 14 + 19], expect_reason("trunc_ipv4")),
        "ipv4_options_cut": (
            bytes(ether(ipv4(udp(dport=2), options=record_route)))[: 14 + 22],
            expect_reason("trunc_ipv4"),
        ),
        "ipv4_total_length_past_frame": (
            patched(base, 16, struct.pack("!H", 100)),
            expect_reason("trunc_ipv4"),
        ),
        "ipv4_total_length_below_header": (
            patched(base, 16, struct.pack("!H", 19)),
            expect_reason("bad_ipv4"),
        ),
        "ipv4_version_6_under_ethertype_ip": (patched(base, 14, b"\x65"), expect_reason("bad_ipv4")),
        "ipv4_ihl_4": (patched(base, 14, b"\x44"), expect_reason("bad_ipv4")),
        "udp_cut": (ether(ipv4(b"\x00\x01\x00\x02", proto=17)), expect_reason("trunc_l4")),
        "tcp_cut": (ether(ipv4(bytes(tcp(dport=80))[:19], proto=6)), expect_reason("trunc_l4")),
        "icmp_cut": (ether(ipv4(b"\x08\x00\x00\x00", proto=1)), expect_reason("trunc_l4")),
    }


def _ipv6_cases() -> Cases:
    v6 = OUTER6
    base = bytes(ether(ipv6(udp(sport=1, dport=2))))

    def with_exts(*headers: Packet, payload: Packet | None = None) -> Packet:
        return ether(ipv6(payload if payload is not None else udp(sport=1, dport=2), ext_headers=headers))

    six = (
        ipv6_hop_by_hop(),
        ipv6_routing(),
        ipv6_dest_opts(),
        ipv6_auth(),
        ipv6_fragment(0, True),
        ipv6_dest_opts(),
    )
    return {
        "ipv6_hop_by_hop_udp": (with_exts(ipv6_hop_by_hop()), expect_ok(**_ue(v6, 17, 1, 2))),
        "ipv6_routing_udp": (with_exts(ipv6_routing()), expect_ok(**_ue(v6, 17, 1, 2))),
        "ipv6_first_fragment_udp": (with_exts(ipv6_fragment(0, True)), expect_ok(**_ue(v6, 17, 1, 2))),
        "ipv6_dest_opts_udp": (with_exts(ipv6_dest_opts()), expect_ok(**_ue(v6, 17, 1, 2))),
        "ipv6_auth_header_udp": (with_exts(ipv6_auth()), expect_ok(**_ue(v6, 17, 1, 2))),
        "ipv6_hop_by_hop_tcp": (
            with_exts(ipv6_hop_by_hop(), payload=tcp(sport=9, dport=10)),
            expect_ok(**_ue(v6, 6, 9, 10)),
        ),
        "ipv6_six_ext_headers_udp": (with_exts(*six), expect_ok(**_ue(v6, 17, 1, 2))),
        "ipv6_seven_ext_headers": (with_exts(*six, ipv6_hop_by_hop()), expect_reason("ipv6_ext_depth")),
        "ipv6_ext_header_cut": (ether(ipv6(b"\x11\x00\x01\x04", nh=0)), expect_reason("trunc_ipv6")),
        "ipv6_routing_body_cut": (
            ether(ipv6(bytes(ipv6_routing())[:16], nh=43)),
            expect_reason("trunc_ipv6"),
        ),
        "ipv6_auth_header_cut": (ether(ipv6(bytes(ipv6_auth())[:12], nh=51)), expect_reason("trunc_ipv6")),
        "ipv6_esp_ends_chain": (ether(ipv6(b"\x00" * 16, nh=50)), expect_ok(**_ue(v6, 50))),
        "ipv6_header_cut": (base[: 14 + 39], expect_reason("trunc_ipv6")),
        "ipv6_payload_length_past_frame": (
            patched(base, 18, struct.pack("!H", 9)),
            expect_reason("trunc_ipv6"),
        ),
        "ipv6_version_4_under_ethertype_ipv6": (patched(base, 14, b"\x40"), expect_reason("bad_ipv6")),
        "ipv6_udp_cut": (ether(ipv6(b"\x00\x01\x00", nh=17)), expect_reason("trunc_l4")),
    }


def _fragment_cases() -> Cases:
    v4, v6 = OUTER4, OUTER6
    looks_like_vxlan = bytes(udp(vxlan(5, arp_frame()), dport=VXLAN_PORT))
    return {
        "ipv4_first_fragment_udp": (
            ether(ipv4(udp(b"x" * 16, sport=1, dport=2), more_fragments=True)),
            expect_ok(**_ue(v4, 17, 1, 2)),
        ),
        "ipv4_later_fragment": (
            ether(ipv4(b"x" * 16, proto=17, frag_offset=185)),
            expect_ok(flags=FLAG_FRAGMENT, **_ue(v4, 17)),
        ),
        "ipv4_later_fragment_is_not_decapsulated": (
            ether(ipv4(looks_like_vxlan, proto=17, frag_offset=3, more_fragments=True)),
            expect_ok(flags=FLAG_FRAGMENT, **_ue(v4, 17)),
        ),
        "ipv6_later_fragment": (
            ether(ipv6(b"x" * 16, nh=17, ext_headers=[ipv6_fragment(100)])),
            expect_ok(flags=FLAG_FRAGMENT, **_ue(v6, 17)),
        ),
        "ipv6_later_fragment_after_hop_by_hop": (
            ether(ipv6(b"x" * 16, nh=6, ext_headers=[ipv6_hop_by_hop(), ipv6_fragment(1, True)])),
            expect_ok(flags=FLAG_FRAGMENT, **_ue(v6, 6)),
        ),
    }
