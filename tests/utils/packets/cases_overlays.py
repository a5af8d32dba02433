"""The case table, overlays: VXLAN, GENEVE, GRE. Each group returns
{name: (packet or bytes, expected)}; cases.py joins them into CASES."""

from __future__ import annotations

from .common import (
    EPHEMERAL_PORT,
    ETH_P_IP,
    ETH_P_TEB,
    FLAG_VNI,
    GENEVE_PORT,
    INNER4,
    INNER6,
    OUTER4,
    OVERLAY_GENEVE,
    OVERLAY_GRE,
    OVERLAY_VXLAN,
    UE4,
    VXLAN_PORT,
    patched,
)
from .ethernet import arp_frame, ether
from .expect import Cases, _ue, expect_ok, expect_reason
from .frames import ip_packet, outer_gre, outer_udp, ue_icmp, ue_tcp, ue_udp
from .ip4 import ipv4
from .overlays import geneve, geneve_option, gre, vxlan


def _vxlan_cases() -> Cases:
    vni = 0x123456
    inner = ether(ue_udp(*INNER4, 5000, 80, dscp=8))
    return {
        "vxlan_ipv4_udp": (
            outer_udp(vxlan(vni, inner), dport=VXLAN_PORT),
            expect_ok(flags=FLAG_VNI, overlay=OVERLAY_VXLAN, vni=vni, **_ue(INNER4, 17, 5000, 80, dscp=8)),
        ),
        "vxlan_outer_vlan_inner_qinq_ipv6_tcp": (
            outer_udp(
                vxlan(7, ether(ue_tcp(*INNER6, 1111, 22), vlans=(300, 301))), dport=VXLAN_PORT, vlans=(42,)
            ),
            expect_ok(flags=FLAG_VNI, vlan=42, overlay=OVERLAY_VXLAN, vni=7, **_ue(INNER6, 6, 1111, 22)),
        ),
        "vxlan_over_ipv6_icmp": (
            outer_udp(vxlan(1, ether(ue_icmp(*INNER4))), dport=VXLAN_PORT, family=6),
            expect_ok(flags=FLAG_VNI, overlay=OVERLAY_VXLAN, vni=1, **_ue(INNER4, 1, 8, 0)),
        ),
        # A non-IP inner frame is classified on the outer headers, with the overlay recorded.
        "vxlan_inner_arp": (
            outer_udp(vxlan(vni, arp_frame()), dport=VXLAN_PORT),
            expect_ok(
                flags=FLAG_VNI, overlay=OVERLAY_VXLAN, vni=vni, **_ue(OUTER4, 17, EPHEMERAL_PORT, VXLAN_PORT)
            ),
        ),
        "vxlan_inner_three_vlan_tags": (
            outer_udp(vxlan(vni, ether(ue_udp(*INNER4, 1, 2), vlans=(1, 2, 3))), dport=VXLAN_PORT),
            expect_reason("vlan_depth"),
        ),
        "vxlan_inner_gre_is_not_decapsulated": (
            outer_udp(
                vxlan(vni, ether(ip_packet(gre(ue_udp(*UE4, 1, 2)), src=INNER4[0], dst=INNER4[1]))),
                dport=VXLAN_PORT,
            ),
            expect_ok(flags=FLAG_VNI, overlay=OVERLAY_VXLAN, vni=vni, **_ue(INNER4, 47)),
        ),
        "vxlan_inner_udp_4789_is_not_decapsulated": (
            outer_udp(
                vxlan(vni, ether(ue_udp(*INNER4, 9, VXLAN_PORT, payload=bytes(vxlan(1, inner))))),
                dport=VXLAN_PORT,
            ),
            expect_ok(flags=FLAG_VNI, overlay=OVERLAY_VXLAN, vni=vni, **_ue(INNER4, 17, 9, VXLAN_PORT)),
        ),
        # RFC 7348: without the I flag the VNI field is reserved; the overlay is still VXLAN.
        "vxlan_i_flag_clear_has_no_vni": (
            outer_udp(vxlan(vni, inner, flags=0x00), dport=VXLAN_PORT),
            expect_ok(overlay=OVERLAY_VXLAN, **_ue(INNER4, 17, 5000, 80, dscp=8)),
        ),
        "vxlan_cut": (outer_udp(b"\x08\x00\x00\x00", dport=VXLAN_PORT), expect_reason("trunc_vxlan")),
        "vxlan_inner_ethernet_cut": (
            outer_udp(vxlan(vni, bytes(inner)[:13]), dport=VXLAN_PORT),
            expect_reason("trunc_eth"),
        ),
        "vxlan_inner_ip_cut": (
            outer_udp(vxlan(vni, bytes(inner)[:33]), dport=VXLAN_PORT),
            expect_reason("trunc_ipv4"),
        ),
    }


def _geneve_cases() -> Cases:
    vni = 0xABCDEF
    options = [geneve_option(0x0102, 1, b"\x11" * 4), geneve_option(0xFFFF, 0x80, b"\x22" * 8)]
    inner_frame = ether(ue_udp(*INNER4, 6000, 443))
    base = bytes(outer_udp(geneve(vni, inner_frame), dport=GENEVE_PORT))  # GENEVE at 42
    overlay = dict(overlay=OVERLAY_GENEVE, vni=vni, flags=FLAG_VNI)
    return {
        "geneve_options_ethernet_ipv4_udp": (
            outer_udp(geneve(vni, inner_frame, options=options), dport=GENEVE_PORT),
            expect_ok(**overlay, **_ue(INNER4, 17, 6000, 443)),
        ),
        "geneve_ipv4_payload": (
            outer_udp(geneve(vni, ue_tcp(*INNER4, 1, 2)), dport=GENEVE_PORT),
            expect_ok(**overlay, **_ue(INNER4, 6, 1, 2)),
        ),
        "geneve_options_ipv6_payload": (
            outer_udp(geneve(vni, ue_udp(*INNER6, 3, 4), options=options[:1]), dport=GENEVE_PORT, family=6),
            expect_ok(**overlay, **_ue(INNER6, 17, 3, 4)),
        ),
        "geneve_inner_arp": (
            outer_udp(geneve(vni, arp_frame()), dport=GENEVE_PORT),
            expect_ok(**overlay, **_ue(OUTER4, 17, EPHEMERAL_PORT, GENEVE_PORT)),
        ),
        "geneve_version_1": (patched(base, 42, b"\x40"), expect_reason("bad_geneve")),
        "geneve_unknown_protocol": (
            outer_udp(geneve(vni, b"\x00" * 20, protocol=0x88CC), dport=GENEVE_PORT),
            expect_reason("bad_geneve"),
        ),
        "geneve_ipv4_protocol_carrying_ipv6": (
            outer_udp(geneve(vni, ue_udp(*INNER6, 1, 2), protocol=ETH_P_IP), dport=GENEVE_PORT),
            expect_reason("bad_ipv4"),
        ),
        "geneve_options_cut": (
            # opt_len says 3 words; only the 2 of one option follow.
            outer_udp(
                patched(bytes(geneve(vni, b"", options=options[:1], protocol=ETH_P_TEB)), 0, b"\x03"),
                dport=GENEVE_PORT,
            ),
            expect_reason("trunc_geneve"),
        ),
        "geneve_cut": (
            outer_udp(bytes(geneve(vni, inner_frame))[:7], dport=GENEVE_PORT),
            expect_reason("trunc_geneve"),
        ),
    }


def _gre_cases() -> Cases:
    inner_ip = ue_udp(*INNER4, 7000, 8000)
    inner_ue = _ue(INNER4, 17, 7000, 8000)
    base = bytes(outer_gre(inner_ip))  # GRE at 34
    gre_overlay = dict(overlay=OVERLAY_GRE)
    return {
        "gre_ipv4": (outer_gre(inner_ip), expect_ok(**gre_overlay, **inner_ue)),
        "gre_teb_key": (
            outer_gre(ether(inner_ip, vlans=(5,)), key=0xDEADBEEF),
            expect_ok(flags=FLAG_VNI, **gre_overlay, vni=0xDEADBEEF, **inner_ue),
        ),
        "gre_checksum_key_seq_ipv6": (
            outer_gre(ue_tcp(*INNER6, 1, 2), checksum=True, key=77, seq=1),
            expect_ok(flags=FLAG_VNI, **gre_overlay, vni=77, **_ue(INNER6, 6, 1, 2)),
        ),
        "gre_checksum_only": (outer_gre(inner_ip, checksum=True), expect_ok(**gre_overlay, **inner_ue)),
        "gre_seq_only": (outer_gre(inner_ip, seq=99), expect_ok(**gre_overlay, **inner_ue)),
        "gre_over_ipv6_key": (
            outer_gre(inner_ip, family=6, key=5),
            expect_ok(flags=FLAG_VNI, **gre_overlay, vni=5, **inner_ue),
        ),
        "gre_teb_inner_arp": (
            outer_gre(arp_frame(), key=3),
            expect_ok(flags=FLAG_VNI, **gre_overlay, vni=3, **_ue(OUTER4, 47)),
        ),
        "gre_version_1": (patched(base, 35, b"\x01"), expect_reason("bad_gre")),
        "gre_routing_bit": (outer_gre(inner_ip, routing=True), expect_reason("bad_gre")),
        "gre_unknown_protocol": (outer_gre(b"\x00" * 8, protocol=0x880B), expect_reason("bad_gre")),
        "gre_key_cut": (ether(ipv4(bytes(gre(inner_ip, key=1))[:6], proto=47)), expect_reason("trunc_gre")),
        "gre_cut": (ether(ipv4(b"\x00\x00\x08", proto=47)), expect_reason("trunc_gre")),
    }
