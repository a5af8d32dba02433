"""Byte-exact checks of the hand-built encodings in packets/, against the layouts in the specs
(expected bytes written out by hand), and against scapy's GTP dissector where scapy is right."""

from __future__ import annotations

from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.l2 import Ether

from . import packets as pk


def test_gtpu_without_optional_fields_is_8_octets():
    # flags 0x30 (version 1, PT 1), T-PDU, length 1, TEID
    assert bytes(pk.gtpu(0x11223344, inner=b"\x45")).hex() == "30ff00011122334445"


def test_gtpu_dl_pdu_session_container():
    # E set: seq 0, N-PDU 0, next type 0x85; container: length 1, DL (0) << 4, QFI 9, no next
    assert bytes(pk.gtpu(1, qfi=9)).hex() == "34ff0008000000010000008501000900"


def test_gtpu_ul_pdu_session_container():
    assert bytes(pk.gtpu(1, qfi=63, ul=True)).hex() == "34ff0008000000010000008501103f00"


def test_dl_container_with_ppp_pads_before_the_next_type_octet():
    container = pk.gtp_ext_pdu_session(9, ppp=True, rqi=True, ppi=5)

    # length 2, DL, PPP|RQI|QFI, PPI << 5, 3 octets of padding, next type last
    assert container.encode(0x40).hex() == "0200c9a000000040"


def test_gtpu_extension_chain_links_each_next_type():
    message = pk.gtpu(1, exts=[pk.gtp_ext_udp_port(2152), pk.gtp_ext_pdcp_number(7)])

    assert bytes(message).hex() == "34ff000c0000000100000040010868c001000700"


def test_gtpu_sequence_number_without_extensions():
    assert bytes(pk.gtp_echo_request(seq=0x0102)).hex() == "320100040000000001020000"


def test_vxlan_header_is_rfc_7348():
    assert bytes(pk.vxlan(0x123456, b"")).hex() == "0800000012345600"


def test_default_qinq_tpids_are_88a8_then_8100():
    frame = bytes(pk.ether(pk.ipv4(pk.udp(dport=1)), vlans=(100, 200)))

    assert (frame[12:14].hex(), frame[16:18].hex(), frame[20:22].hex()) == ("88a8", "8100", "0800")


def test_ipv6_chain_sets_next_header_of_the_auth_header():
    frame = bytes(pk.ipv6(pk.udp(dport=1), ext_headers=[pk.ipv6_dest_opts(), pk.ipv6_auth()]))

    # IPv6 nh = 60; Destination Options nh = 51 (8 bytes); AH nh = 17, length 4 (24 bytes)
    assert (frame[6], frame[40], frame[48], frame[49]) == (60, 51, 17, 4)
    assert len(frame) == 40 + 8 + 24 + 8


def test_gre_optional_fields_in_wire_order():
    header = bytes(pk.gre(b"", protocol=pk.ETH_P_IP, checksum=True, key=0xAABBCCDD, seq=5))

    assert header[:2].hex() == "b000"
    assert header[8:16].hex() == "aabbccdd00000005"


def test_scapy_dissects_our_gtpu_as_sent():
    frame = bytes(pk.outer_gtpu(pk.gtpu(0xDEAD, qfi=17, ul=True, inner=pk.ue_udp(*pk.UE4, 1, 2))))

    dissected = Ether(frame)

    assert dissected[GTP_U_Header].teid == 0xDEAD
    assert (dissected[GTPPDUSessionContainer].type, dissected[GTPPDUSessionContainer].QFI) == (1, 17)
