"""The case table, GTP-U: on the outer UDP (N3/N9), signalling, inside an overlay. Each group
returns {name: (packet or bytes, expected)}; cases.py joins them into CASES."""

from __future__ import annotations

import struct

from scapy.packet import Raw

from .common import (
    FLAG_FRAGMENT,
    FLAG_GTP,
    FLAG_GTP_QFI,
    FLAG_GTP_UL,
    FLAG_VNI,
    GENEVE_PORT,
    GTP_ECHO_RESPONSE,
    GTP_END_MARKER,
    GTP_EXT_PDU_SESSION,
    GTP_EXT_UDP_PORT,
    GTP_T_PDU,
    GTPU_PORT,
    OUTER4,
    OVERLAY_GENEVE,
    OVERLAY_GRE,
    OVERLAY_VXLAN,
    UE4,
    UE6,
    VXLAN_PORT,
    patched,
)
from .ethernet import arp_frame, ether
from .expect import Cases, _ue, expect_ok, expect_reason
from .frames import (
    inner_gtpu_frame,
    inner_gtpu_ip,
    outer_gre,
    outer_gtpu,
    outer_udp,
    ue_icmp,
    ue_tcp,
    ue_udp,
)
from .gtp import (
    GtpuHeaderBytes,
    gtp_echo_request,
    gtp_end_marker,
    gtp_error_indication,
    gtp_ext_pdcp_number,
    gtp_ext_pdu_session,
    gtp_ext_raw,
    gtp_ext_ran_container,
    gtp_ext_udp_port,
    gtpu,
)
from .ip4 import ipv4
from .overlays import geneve, geneve_option, vxlan


def _gtpu_cases() -> Cases:
    teid = 0x11223344
    ue = ue_udp(*UE4, 40000, 53, dscp=34)
    ue_fields = _ue(UE4, 17, 40000, 53, dscp=34)
    gtp_dl = dict(teid=teid, flags=FLAG_GTP | FLAG_GTP_QFI)
    gtp_ul = dict(teid=teid, flags=FLAG_GTP | FLAG_GTP_QFI | FLAG_GTP_UL)
    several = (gtp_ext_udp_port(2152), gtp_ext_pdcp_number(7), gtp_ext_ran_container(b"\xaa" * 6))
    eight = tuple(gtp_ext_pdcp_number(n) for n in range(7))
    zero_length = gtp_ext_raw(GTP_EXT_UDP_PORT, b"", length_units=0)  # after 12 octets of header
    base = bytes(outer_gtpu(gtpu(teid, inner=ue)))  # GTP-U at 42
    # S set, E clear, next type 0x85: the extension chain must not be followed.
    next_type_without_e = outer_gtpu(
        GtpuHeaderBytes(
            load=struct.pack("!BBHIHBB", 0x32, GTP_T_PDU, 4 + len(ue), teid, 1, 0, GTP_EXT_PDU_SESSION)
        )
        / ue
    )
    return {
        "gtpu_no_ext_ipv4_udp": (
            outer_gtpu(gtpu(teid, inner=ue)),
            expect_ok(teid=teid, flags=FLAG_GTP, **ue_fields),
        ),
        "gtpu_seq_only": (
            outer_gtpu(gtpu(teid, seq=5, inner=ue)),
            expect_ok(teid=teid, flags=FLAG_GTP, **ue_fields),
        ),
        "gtpu_psc_dl_qfi": (outer_gtpu(gtpu(teid, qfi=9, inner=ue)), expect_ok(qfi=9, **gtp_dl, **ue_fields)),
        "gtpu_psc_ul_qfi": (
            outer_gtpu(gtpu(teid, qfi=5, ul=True, inner=ue)),
            expect_ok(qfi=5, **gtp_ul, **ue_fields),
        ),
        "gtpu_psc_dl_ppp_rqi_long": (
            outer_gtpu(gtpu(teid, exts=[gtp_ext_pdu_session(63, ppp=True, rqi=True, ppi=5)], inner=ue)),
            expect_ok(qfi=63, **gtp_dl, **ue_fields),
        ),
        "gtpu_psc_ul_high_bits_masked": (
            outer_gtpu(gtpu(teid, exts=[gtp_ext_raw(GTP_EXT_PDU_SESSION, b"\x10\xc7")], inner=ue)),
            expect_ok(qfi=7, **gtp_ul, **ue_fields),
        ),
        "gtpu_psc_pdu_type_2_counts_as_dl": (
            outer_gtpu(gtpu(teid, exts=[gtp_ext_raw(GTP_EXT_PDU_SESSION, b"\x20\x03")], inner=ue)),
            expect_ok(qfi=3, **gtp_dl, **ue_fields),
        ),
        "gtpu_several_exts_psc_ul": (
            outer_gtpu(gtpu(teid, qfi=3, ul=True, exts=several, inner=ue)),
            expect_ok(qfi=3, **gtp_ul, **ue_fields),
        ),
        "gtpu_several_exts_psc_last": (
            outer_gtpu(gtpu(teid, exts=several + (gtp_ext_pdu_session(4),), inner=ue)),
            expect_ok(qfi=4, **gtp_dl, **ue_fields),
        ),
        "gtpu_two_psc_first_wins": (
            outer_gtpu(gtpu(teid, qfi=5, ul=True, exts=several[:1] + (gtp_ext_pdu_session(4),), inner=ue)),
            expect_ok(qfi=5, **gtp_ul, **ue_fields),
        ),
        "gtpu_eight_exts": (
            outer_gtpu(gtpu(teid, qfi=1, exts=eight, inner=ue)),
            expect_ok(qfi=1, **gtp_dl, **ue_fields),
        ),
        "gtpu_nine_exts": (
            outer_gtpu(gtpu(teid, qfi=1, exts=eight + (gtp_ext_udp_port(1),), inner=ue)),
            expect_reason("gtp_ext_depth"),
        ),
        "gtpu_ext_length_zero": (
            outer_gtpu(
                gtpu(teid, exts=[gtp_ext_raw(GTP_EXT_UDP_PORT, b"\x08\x68", length_units=0)], inner=ue)
            ),
            expect_reason("bad_gtp"),
        ),
        # Malformed and cut short: the 4 octets of an extension header are checked before its
        # length octet (refparser decision 2).
        **{
            f"gtpu_ext_length_zero_in_{left}_bytes": (
                outer_gtpu(bytes(gtpu(teid, exts=[zero_length]))[: 12 + left]),
                expect_reason("trunc_gtp"),
            )
            for left in (1, 2, 3)
        },
        "gtpu_ext_cut": (
            outer_gtpu(bytes(gtpu(teid, exts=[gtp_ext_pdu_session(1, ppp=True)]))[:18]),
            expect_reason("trunc_gtp"),
        ),
        "gtpu_version_2": (patched(base, 42, b"\x50"), expect_reason("bad_gtp")),
        "gtpu_version_0": (patched(base, 42, b"\x10"), expect_reason("bad_gtp")),
        "gtpu_pt_0": (patched(base, 42, b"\x20"), expect_reason("bad_gtp")),
        "gtpu_header_cut": (outer_gtpu(bytes(gtpu(teid))[:7]), expect_reason("trunc_gtp")),
        "gtpu_optional_fields_cut": (outer_gtpu(bytes(gtpu(teid, seq=1))[:10]), expect_reason("trunc_gtp")),
        "gtpu_empty_t_pdu": (outer_gtpu(gtpu(teid)), expect_reason("trunc_gtp")),
        # No UE packet: the tunnel alone, never the carrier's addresses and port 2152.
        "gtpu_non_ip_t_pdu": (
            outer_gtpu(gtpu(teid, qfi=2, inner=bytes(arp_frame()))),
            expect_ok(qfi=2, **gtp_dl),
        ),
        "gtpu_next_type_ignored_without_e_flag": (
            next_type_without_e,
            expect_ok(teid=teid, flags=FLAG_GTP, **ue_fields),
        ),
        "gtpu_ue_ipv6_tcp": (
            outer_gtpu(gtpu(teid, qfi=8, ul=True, inner=ue_tcp(*UE6, 50000, 443, dscp=46))),
            expect_ok(qfi=8, **gtp_ul, **_ue(UE6, 6, 50000, 443, dscp=46)),
        ),
        "gtpu_ue_icmp": (
            outer_gtpu(gtpu(teid, inner=ue_icmp(*UE4))),
            expect_ok(teid=teid, flags=FLAG_GTP, **_ue(UE4, 1, 8, 0)),
        ),
        "gtpu_ue_later_fragment": (
            outer_gtpu(
                gtpu(teid, qfi=1, inner=ipv4(b"y" * 24, src=UE4[0], dst=UE4[1], proto=17, frag_offset=10))
            ),
            expect_ok(qfi=1, teid=teid, flags=FLAG_GTP | FLAG_GTP_QFI | FLAG_FRAGMENT, **_ue(UE4, 17)),
        ),
        "gtpu_ue_ip_cut": (outer_gtpu(gtpu(teid, inner=bytes(ue)[:19])), expect_reason("trunc_ipv4")),
        "gtpu_ue_udp_cut": (
            outer_gtpu(gtpu(teid, inner=ipv4(b"\x00" * 7, src=UE4[0], dst=UE4[1], proto=17))),
            expect_reason("trunc_l4"),
        ),
        "gtpu_ue_bad_ipv4": (
            outer_gtpu(gtpu(teid, inner=patched(ue, 0, b"\x43"))),
            expect_reason("bad_ipv4"),
        ),
        "gtpu_over_ipv6_with_vlan": (
            outer_gtpu(gtpu(teid, qfi=9, inner=ue), family=6, vlans=(12,)),
            expect_ok(vlan=12, qfi=9, **gtp_dl, **ue_fields),
        ),
        "gtpu_ue_udp_2152_is_not_decapsulated": (
            outer_gtpu(gtpu(teid, inner=ue_udp(*UE4, 1, GTPU_PORT, payload=bytes(gtpu(5, inner=ue))))),
            expect_ok(teid=teid, flags=FLAG_GTP, **_ue(UE4, 17, 1, GTPU_PORT)),
        ),
        "gtpu_ue_udp_4789_is_not_decapsulated": (
            outer_gtpu(gtpu(teid, inner=ue_udp(*UE4, 1, VXLAN_PORT, payload=bytes(vxlan(3, arp_frame()))))),
            expect_ok(teid=teid, flags=FLAG_GTP, **_ue(UE4, 17, 1, VXLAN_PORT)),
        ),
    }


def _gtpu_signalling_cases() -> Cases:
    return {
        "gtpu_echo_request": (outer_gtpu(gtp_echo_request(7)), expect_reason("gtp_signalling")),
        "gtpu_echo_response_over_ipv6": (
            outer_gtpu(gtpu(0, msg_type=GTP_ECHO_RESPONSE, seq=7, inner=b"\x0e\x00"), family=6),
            expect_reason("gtp_signalling"),
        ),
        "gtpu_end_marker": (outer_gtpu(gtp_end_marker(0x99)), expect_reason("gtp_signalling")),
        "gtpu_end_marker_with_psc": (
            outer_gtpu(gtpu(0x99, qfi=3, msg_type=GTP_END_MARKER)),
            expect_reason("gtp_signalling"),
        ),
        "gtpu_error_indication": (
            outer_gtpu(gtp_error_indication(0x1234, OUTER4[0])),
            expect_reason("gtp_signalling"),
        ),
        # The header is validated before the message type is looked at.
        "gtpu_echo_request_cut": (outer_gtpu(bytes(gtp_echo_request())[:10]), expect_reason("trunc_gtp")),
        "gtpu_end_marker_bad_ext": (
            outer_gtpu(gtpu(1, msg_type=GTP_END_MARKER, exts=[gtp_ext_raw(0x40, b"\0\0", length_units=0)])),
            expect_reason("bad_gtp"),
        ),
    }


def _gtpu_in_overlay_cases() -> Cases:
    teid = 0xCAFE0001
    ue = ue_udp(*UE4, 1000, 2000)
    ue_fields = _ue(UE4, 17, 1000, 2000)
    gtp_ul = dict(teid=teid, qfi=9, flags=FLAG_VNI | FLAG_GTP | FLAG_GTP_QFI | FLAG_GTP_UL)
    gtp_message = gtpu(teid, qfi=9, ul=True, inner=ue)
    return {
        "vxlan_gtpu_psc_ul_ipv4_udp": (
            outer_udp(vxlan(1000, inner_gtpu_frame(gtp_message)), dport=VXLAN_PORT),
            expect_ok(overlay=OVERLAY_VXLAN, vni=1000, **gtp_ul, **ue_fields),
        ),
        "vxlan_gtpu_inner_ipv6_ue_ipv6_tcp": (
            outer_udp(
                vxlan(2, inner_gtpu_frame(gtpu(teid, inner=ue_tcp(*UE6, 5, 6)), family=6)),
                dport=VXLAN_PORT,
                vlans=(3,),
            ),
            expect_ok(
                vlan=3, overlay=OVERLAY_VXLAN, vni=2, teid=teid, flags=FLAG_VNI | FLAG_GTP,
                **_ue(UE6, 6, 5, 6),
            ),
        ),
        "geneve_ethernet_gtpu": (
            outer_udp(
                geneve(0x10, inner_gtpu_frame(gtp_message), options=[geneve_option()]), dport=GENEVE_PORT
            ),
            expect_ok(overlay=OVERLAY_GENEVE, vni=0x10, **gtp_ul, **ue_fields),
        ),
        "geneve_ip_gtpu_ue_ipv6": (
            outer_udp(
                geneve(0x11, inner_gtpu_ip(gtpu(teid, qfi=1, inner=ue_udp(*UE6, 7, 8)))), dport=GENEVE_PORT
            ),
            expect_ok(
                overlay=OVERLAY_GENEVE,
                vni=0x11,
                teid=teid,
                qfi=1,
                flags=FLAG_VNI | FLAG_GTP | FLAG_GTP_QFI,
                **_ue(UE6, 17, 7, 8),
            ),
        ),
        "gre_teb_gtpu": (
            outer_gre(inner_gtpu_frame(gtp_message), key=0x20),
            expect_ok(overlay=OVERLAY_GRE, vni=0x20, **gtp_ul, **ue_fields),
        ),
        "gre_ip_checksum_key_seq_gtpu": (
            outer_gre(inner_gtpu_ip(gtp_message), checksum=True, key=0x21, seq=4, family=6),
            expect_ok(overlay=OVERLAY_GRE, vni=0x21, **gtp_ul, **ue_fields),
        ),
        "vxlan_gtpu_echo_request": (
            outer_udp(vxlan(1000, inner_gtpu_frame(gtp_echo_request())), dport=VXLAN_PORT),
            expect_reason("gtp_signalling"),
        ),
        "vxlan_gtpu_bad_version": (
            outer_udp(vxlan(1000, inner_gtpu_frame(gtpu(teid, version=2, inner=ue))), dport=VXLAN_PORT),
            expect_reason("bad_gtp"),
        ),
        "vxlan_gtpu_header_cut": (
            outer_udp(vxlan(1000, ether(inner_gtpu_ip(Raw(load=bytes(gtp_message)[:11])))), dport=VXLAN_PORT),
            expect_reason("trunc_gtp"),
        ),
    }
