"""Packet factories for the XDP parser tests, and a table of named cases.

Factories return scapy packets that compose inside-out: each takes its payload (a scapy packet or
raw bytes) and returns the packet with that payload, lengths and checksums filled in by scapy at
``bytes()`` time. A nested packet reads from the wire inwards::

    outer_udp(vxlan(100, ether(ue_udp(...))), dport=VXLAN_PORT)

Scapy layers are used where they encode what the parser expects. Three are built from raw bytes
instead, each for a reason found by reading scapy's code:

* VXLAN: scapy's VXLAN layer sets the GPE "next protocol" bits (flags 0x0c, next protocol 3) when
  its payload is Ethernet, which is VXLAN-GPE, not RFC 7348 VXLAN.
* GTP-U header: built with struct so that every flag, the optional fields and the next-extension
  type are under the test's control (malformed headers included).
* GTP-U extension headers: scapy's GTPPDUSessionContainer computes its length before padding and
  appends the padding after the whole payload when another extension follows, so a container with
  optional fields (PPP, timestamps) is mis-sized. We follow TS 29.281 section 5.2.1 (length octet in
  4-octet units, contents, next-type octet last, padding before it) and TS 38.415 section 5.5.2
  (octet 1: PDU type << 4 and flags; octet 2: QFI in the low 6 bits; DL adds PPP/RQI above it).

The raw headers use tagged Raw subclasses so that code walking a packet (strategies.py) can tell a
GTP-U header from an ordinary payload.

CASES maps a case name to ``(frame_bytes, expected)``. ``expected`` is written by hand: either a
full flow key plus ``"reason": None`` (see expect_ok) or ``{"reason": name}`` (see expect_reason).
The decisions these expectations follow are listed in refparser.py's docstring.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scapy.contrib.geneve import GENEVE, GeneveOptions
from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption
from scapy.layers.inet6 import (
    ICMPv6Unknown,
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import ARP, GRE, Dot1AD, Dot1Q, Ether
from scapy.packet import Packet, Raw

Payload = Packet | bytes

# Well-known numbers, spelled out here rather than imported from the code under test.
VXLAN_PORT = 4789
GENEVE_PORT = 6081
GTPU_PORT = 2152
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_ARP = 0x0806
ETH_P_TEB = 0x6558  # transparent Ethernet bridging (GRE and GENEVE carrying Ethernet)
ETH_P_8021Q = 0x8100
ETH_P_8021AD = 0x88A8

GTP_ECHO_REQUEST = 1
GTP_ECHO_RESPONSE = 2
GTP_ERROR_INDICATION = 26
GTP_END_MARKER = 254
GTP_T_PDU = 255

# GTP-U extension header types (TS 29.281 figure 5.2.1-3).
GTP_EXT_UDP_PORT = 0x40
GTP_EXT_RAN_CONTAINER = 0x81
GTP_EXT_PDU_SESSION = 0x85
GTP_EXT_PDCP_NUMBER = 0xC0

# Documentation and private ranges, one pair per level, so a key shows which header it came from.
OUTER4 = ("192.0.2.1", "198.51.100.1")
OUTER6 = ("2001:db8::1", "2001:db8::2")
INNER4 = ("172.16.0.1", "172.16.0.2")
INNER6 = ("fd00::1", "fd00::2")
UE4 = ("10.45.0.2", "203.0.113.10")
UE6 = ("2001:db8:45::2", "2001:db8:cafe::10")
MAC_SRC = "02:00:00:00:00:01"
MAC_DST = "02:00:00:00:00:02"
EPHEMERAL_PORT = 49152

# Flow key flag bits and overlays (enum dpp_key_flags, enum dpp_overlay).
FLAG_GTP = 1
FLAG_GTP_QFI = 2
FLAG_GTP_UL = 4
FLAG_FRAGMENT = 8
FLAG_VNI = 16
OVERLAY_VXLAN = 1
OVERLAY_GENEVE = 2
OVERLAY_GRE = 3


class VxlanBytes(Raw):
    """A VXLAN header built from raw bytes (see module docstring)."""

    name = "VXLAN header (raw)"


class GtpuHeaderBytes(Raw):
    """A GTP-U header (mandatory part and, when flagged, the 4 optional octets)."""

    name = "GTP-U header (raw)"


class GtpuExtBytes(Raw):
    """One GTP-U extension header, length octet to next-type octet."""

    name = "GTP-U extension header (raw)"


# ---------------------------------------------------------------------------------------------
# Helpers


def _as_packet(payload: Payload) -> Packet:
    return payload if isinstance(payload, Packet) else Raw(load=bytes(payload))


def _family_of(address: str) -> int:
    return ipaddress.ip_address(address).version


def _ip_proto_for(payload: Payload) -> int | None:
    """The IP protocol number of a payload we built, so callers rarely have to say it."""
    by_class = {UDP: 17, TCP: 6, ICMP: 1, ICMPv6Unknown: 58, GRE: 47, IP: 4, IPv6: 41}
    return by_class.get(type(payload))


def _ethertype_for(payload: Payload) -> int | None:
    by_class = {IP: ETH_P_IP, IPv6: ETH_P_IPV6, ARP: ETH_P_ARP, Ether: ETH_P_TEB}
    return by_class.get(type(payload))


def _required(value: int | None, what: str) -> int:
    if value is None:
        raise ValueError(f"cannot infer the {what} of this payload: pass it explicitly")
    return value


def addr16(address: str) -> bytes:
    """An address as struct dpp_flow_key stores it: 16 bytes, IPv4 in the first 4."""
    return ipaddress.ip_address(address).packed.ljust(16, b"\0")


def patched(frame: Payload, offset: int, new_bytes: bytes) -> bytes:
    """A copy of frame with new_bytes written at offset, to make malformed headers."""
    data = bytearray(bytes(frame))
    data[offset : offset + len(new_bytes)] = new_bytes
    return bytes(data)


# ---------------------------------------------------------------------------------------------
# L2


def ether(
    payload: Payload,
    *,
    vlans: Sequence[int] = (),
    tpids: Sequence[int] | None = None,
    ethertype: int | None = None,
    pcp: int = 0,
) -> Packet:
    """An Ethernet frame with optional VLAN tags, outermost first.

    tpids defaults to 0x8100 for one tag and 802.1ad QinQ (0x88a8 then 0x8100) for two or more.
    """
    payload = _as_packet(payload)
    final_type = ethertype if ethertype is not None else _required(_ethertype_for(payload), "ethertype")
    if tpids is None:
        tpids = (ETH_P_8021Q,) if len(vlans) == 1 else (ETH_P_8021AD,) + (ETH_P_8021Q,) * (len(vlans) - 1)
    # Each header's type field names the next header: TPIDs first, then the payload's ethertype.
    next_types = list(tpids[: len(vlans)]) + [final_type]
    frame: Packet = Ether(src=MAC_SRC, dst=MAC_DST, type=next_types[0])
    for vlan_id, tpid, next_type in zip(vlans, tpids[: len(vlans)], next_types[1:], strict=True):
        tag_class = Dot1AD if tpid == ETH_P_8021AD else Dot1Q
        frame = frame / tag_class(prio=pcp, vlan=vlan_id, type=next_type)
    return frame / payload


def arp_frame(*, vlans: Sequence[int] = ()) -> Packet:
    return ether(ARP(psrc=OUTER4[0], pdst=OUTER4[1]), vlans=vlans)


# ---------------------------------------------------------------------------------------------
# L3


def ipv4(
    payload: Payload,
    *,
    src: str = OUTER4[0],
    dst: str = OUTER4[1],
    proto: int | None = None,
    dscp: int = 0,
    options: bytes = b"",
    frag_offset: int = 0,
    more_fragments: bool = False,
    ttl: int = 64,
) -> Packet:
    """An IPv4 header. options are raw option bytes (padded to 4 by scapy); frag_offset is in
    8-octet units, as on the wire.
    """
    payload = _as_packet(payload)
    header = IP(
        src=src,
        dst=dst,
        proto=proto if proto is not None else _required(_ip_proto_for(payload), "IP protocol"),
        tos=dscp << 2,
        ttl=ttl,
        frag=frag_offset,
        flags="MF" if more_fragments else 0,
        options=[IPOption(options)] if options else [],
    )
    return header / payload


_IPV6_EXT_NUMBERS = {
    IPv6ExtHdrHopByHop: 0,
    IPv6ExtHdrRouting: 43,
    IPv6ExtHdrFragment: 44,
    IPv6ExtHdrDestOpt: 60,
    AH: 51,
}


def ipv6_hop_by_hop() -> Packet:
    return IPv6ExtHdrHopByHop()  # 8 bytes: scapy pads with PadN


def ipv6_routing() -> Packet:
    return IPv6ExtHdrRouting(addresses=["2001:db8::99"])  # 24 bytes (hdr ext len 2)


def ipv6_fragment(offset: int = 0, more: bool = False) -> Packet:
    """offset in 8-octet units; a non-zero offset makes a non-first fragment."""
    return IPv6ExtHdrFragment(offset=offset, m=int(more), id=0x1234)


def ipv6_dest_opts() -> Packet:
    return IPv6ExtHdrDestOpt()


def ipv6_auth() -> Packet:
    """An AH with a 12-byte ICV: 24 bytes, length field (24 / 4) - 2 = 4 (RFC 4302)."""
    # scapy's AH fills neither its length nor its next header when built, so both are explicit.
    return AH(payloadlen=4, spi=0x100, seq=1, icv=b"\0" * 12)


def ipv6(
    payload: Payload,
    *,
    src: str = OUTER6[0],
    dst: str = OUTER6[1],
    nh: int | None = None,
    dscp: int = 0,
    ext_headers: Iterable[Packet] = (),
) -> Packet:
    """An IPv6 header, then ext_headers in order (each chained by its next-header field), then
    payload. nh is the payload's protocol when it cannot be inferred.
    """
    payload = _as_packet(payload)
    proto = nh if nh is not None else _required(_ip_proto_for(payload), "next header")
    chain = [header.copy() for header in ext_headers]
    numbers = [_IPV6_EXT_NUMBERS[type(header)] for header in chain]
    # Set every next-header field ourselves: scapy's automatic binding skips AH. (With no
    # extension headers the list of next headers is longer than the chain: hence strict=False.)
    for header, next_header in zip(chain, numbers[1:] + [proto], strict=False):
        header.nh = next_header
    packet: Packet = IPv6(src=src, dst=dst, tc=dscp << 2, nh=(numbers + [proto])[0])
    for header in chain:
        packet = packet / header
    return packet / payload


def ip_packet(payload: Payload, *, src: str, dst: str, **options) -> Packet:
    """ipv4() or ipv6(), chosen by the address family of src."""
    factory = ipv4 if _family_of(src) == 4 else ipv6
    return factory(payload, src=src, dst=dst, **options)


# ---------------------------------------------------------------------------------------------
# L4


def udp(payload: Payload = b"", *, sport: int = EPHEMERAL_PORT, dport: int) -> Packet:
    header = UDP(sport=sport, dport=dport)
    if isinstance(payload, Packet):
        return header / payload
    return header / Raw(load=payload) if payload else header


def tcp(*, sport: int = EPHEMERAL_PORT, dport: int, payload: bytes = b"") -> Packet:
    segment = TCP(sport=sport, dport=dport, flags="S")
    return segment / Raw(load=payload) if payload else segment


def sctp(sport: int, dport: int, *, tag: int = 0x1234ABCD) -> bytes:
    """RFC 9260 common header: source port, destination port, verification tag, checksum (not
    computed: the parser never reads it)."""
    return struct.pack("!HHII", sport, dport, tag, 0)


def icmp(icmp_type: int = 8, code: int = 0) -> Packet:
    return ICMP(type=icmp_type, code=code)


def icmpv6(icmp_type: int = 128, code: int = 0) -> Packet:
    return ICMPv6Unknown(type=icmp_type, code=code, msgbody=b"\0" * 4)  # 8 bytes, like echo


def ue_udp(src: str, dst: str, sport: int, dport: int, *, dscp: int = 0, payload: bytes = b"ue") -> Packet:
    """A UE (or any innermost) IP/UDP datagram; the family follows the addresses."""
    return ip_packet(udp(payload, sport=sport, dport=dport), src=src, dst=dst, dscp=dscp)


def ue_tcp(src: str, dst: str, sport: int, dport: int, *, dscp: int = 0) -> Packet:
    return ip_packet(tcp(sport=sport, dport=dport), src=src, dst=dst, dscp=dscp)


def ue_icmp(src: str, dst: str, *, icmp_type: int | None = None, code: int = 0) -> Packet:
    """An ICMP echo request (ICMPv6 for IPv6 addresses) unless told otherwise."""
    if _family_of(src) == 4:
        message = icmp(8 if icmp_type is None else icmp_type, code)
    else:
        message = icmpv6(128 if icmp_type is None else icmp_type, code)
    return ip_packet(message, src=src, dst=dst)


# ---------------------------------------------------------------------------------------------
# Overlays


def vxlan(vni: int, inner: Payload, *, flags: int = 0x08) -> Packet:
    """RFC 7348: flags (I bit), 3 reserved octets, 24-bit VNI, 1 reserved octet; then Ethernet."""
    header = struct.pack("!BxxxI", flags, vni << 8)
    return VxlanBytes(load=header) / _as_packet(inner)


def geneve_option(class_id: int = 0x0102, opt_type: int = 1, data: bytes = b"\0" * 4) -> Packet:
    """One GENEVE TLV option; data must be a multiple of 4 bytes."""
    return GeneveOptions(classid=class_id, type=opt_type, data=data)


def geneve(
    vni: int, inner: Payload, *, options: Sequence[Packet] = (), protocol: int | None = None, version: int = 0
) -> Packet:
    """RFC 8926. protocol defaults from inner: Ethernet 0x6558, IPv4 0x0800, IPv6 0x86DD."""
    inner = _as_packet(inner)
    proto = protocol if protocol is not None else _required(_ethertype_for(inner), "GENEVE protocol")
    return GENEVE(version=version, vni=vni, proto=proto, options=list(options)) / inner


def gre(
    inner: Payload,
    *,
    key: int | None = None,
    checksum: bool = False,
    seq: int | None = None,
    protocol: int | None = None,
    version: int = 0,
    routing: bool = False,
) -> Packet:
    """RFC 2784/2890 GRE. The optional fields appear in wire order: checksum, key, sequence."""
    inner = _as_packet(inner)
    proto = protocol if protocol is not None else _required(_ethertype_for(inner), "GRE protocol")
    header = GRE(
        chksum_present=int(checksum),
        routing_present=int(routing),
        key_present=int(key is not None),
        seqnum_present=int(seq is not None),
        version=version,
        proto=proto,
    )
    if key is not None:
        header.key = key
    if seq is not None:
        header.sequence_number = seq
    return header / inner


# ---------------------------------------------------------------------------------------------
# GTP-U


@dataclass(frozen=True)
class GtpExtension:
    """One GTP-U extension header: its type and the octets between its length and next-type octets.

    length_units overrides the computed length octet, to build malformed headers.
    """

    ext_type: int
    content: bytes
    length_units: int | None = None

    def encode(self, next_type: int) -> bytes:
        # The whole header (length octet + content + next-type octet) is a multiple of 4 octets;
        # padding sits before the next-type octet, which must stay last.
        padded = self.content + b"\0" * (-(len(self.content) + 2) % 4)
        units = (len(padded) + 2) // 4 if self.length_units is None else self.length_units
        return bytes([units]) + padded + bytes([next_type])


def gtp_ext_pdu_session(
    qfi: int, *, ul: bool = False, ppp: bool = False, rqi: bool = False, ppi: int = 0
) -> GtpExtension:
    """PDU Session Container (TS 38.415 5.5.2): UL or DL PDU SESSION INFORMATION.

    On the wire: length octet, PDU type << 4 (with QMP/SNP... flags, all 0 here), QFI octet (DL:
    PPP and RQI bits above the 6-bit QFI), optional octets and padding, next type. Without optional
    fields that is 4 octets (length 1); DL with PPP adds the PPI octet and grows to 8 (length 2).
    """
    if ul:
        return GtpExtension(GTP_EXT_PDU_SESSION, bytes([0x10, qfi & 0x3F]))
    qfi_octet = (0x80 if ppp else 0) | (0x40 if rqi else 0) | (qfi & 0x3F)
    content = bytes([0x00, qfi_octet]) + (bytes([ppi << 5]) if ppp else b"")
    return GtpExtension(GTP_EXT_PDU_SESSION, content)


def gtp_ext_udp_port(port: int) -> GtpExtension:
    return GtpExtension(GTP_EXT_UDP_PORT, struct.pack("!H", port))


def gtp_ext_pdcp_number(number: int) -> GtpExtension:
    return GtpExtension(GTP_EXT_PDCP_NUMBER, struct.pack("!H", number))


def gtp_ext_ran_container(data: bytes) -> GtpExtension:
    return GtpExtension(GTP_EXT_RAN_CONTAINER, data)


def gtp_ext_raw(ext_type: int, content: bytes, *, length_units: int | None = None) -> GtpExtension:
    return GtpExtension(ext_type, content, length_units)


def gtpu(
    teid: int,
    qfi: int | None = None,
    *,
    ul: bool = False,
    exts: Sequence[GtpExtension] = (),
    inner: Payload | None = None,
    msg_type: int = GTP_T_PDU,
    seq: int | None = None,
    npdu: int | None = None,
    version: int = 1,
    pt: int = 1,
    flags: int | None = None,
) -> Packet:
    """A GTP-U message (TS 29.281 section 5.1).

    qfi adds a PDU Session Container (UL when ul) before exts. E is set when there are
    extensions, S when seq is given, PN when npdu is given; any of them brings the 4 optional
    octets. flags overrides the whole first octet (version/PT/E/S/PN) for malformed headers.
    """
    chain = ((gtp_ext_pdu_session(qfi, ul=ul),) if qfi is not None else ()) + tuple(exts)
    first_octet = flags if flags is not None else _gtp_flags(version, pt, bool(chain), seq, npdu)
    # Each extension's last octet is the type of the one after it; 0 ends the chain.
    next_types = [ext.ext_type for ext in chain[1:]] + [0]
    encoded_exts = [ext.encode(next_type) for ext, next_type in zip(chain, next_types, strict=False)]
    optional = b""
    if first_octet & 0x07:
        first_type = chain[0].ext_type if chain else 0
        optional = struct.pack("!HBB", seq or 0, npdu or 0, first_type)
    payload = bytes(_as_packet(inner)) if inner is not None else b""
    # The length field counts everything after the mandatory 8 octets.
    length = len(optional) + sum(map(len, encoded_exts)) + len(payload)
    packet: Packet = GtpuHeaderBytes(
        load=struct.pack("!BBHI", first_octet, msg_type, length, teid) + optional
    )
    for encoded in encoded_exts:
        packet = packet / GtpuExtBytes(load=encoded)
    return packet / _as_packet(inner) if inner is not None else packet


def _gtp_flags(version: int, pt: int, has_exts: bool, seq: int | None, npdu: int | None) -> int:
    return version << 5 | pt << 4 | int(has_exts) << 2 | int(seq is not None) << 1 | int(npdu is not None)


def gtp_echo_request(seq: int = 1) -> Packet:
    """Echo Request: TEID 0, S set (TS 29.281 section 7.2.1)."""
    return gtpu(0, msg_type=GTP_ECHO_REQUEST, seq=seq)


def gtp_end_marker(teid: int) -> Packet:
    return gtpu(teid, msg_type=GTP_END_MARKER)


def gtp_error_indication(teid_data: int, peer: str, *, udp_port: int | None = GTPU_PORT) -> Packet:
    """Error Indication: TEID Data I and GTP-U Peer Address IEs, with the UDP Port extension."""
    peer_bytes = ipaddress.ip_address(peer).packed
    ies = struct.pack("!BI", 16, teid_data) + struct.pack("!BH", 133, len(peer_bytes)) + peer_bytes
    exts = (gtp_ext_udp_port(udp_port),) if udp_port is not None else ()
    return gtpu(0, msg_type=GTP_ERROR_INDICATION, seq=0, exts=exts, inner=ies)


# ---------------------------------------------------------------------------------------------
# Whole frames


def outer_udp(
    payload: Payload,
    *,
    dport: int,
    sport: int = EPHEMERAL_PORT,
    family: int = 4,
    vlans: Sequence[int] = (),
    src: str | None = None,
    dst: str | None = None,
) -> Packet:
    """Ethernet / outer IP / UDP carrying payload (an encapsulation, usually)."""
    default_src, default_dst = OUTER4 if family == 4 else OUTER6
    datagram = ip_packet(
        udp(payload, sport=sport, dport=dport), src=src or default_src, dst=dst or default_dst
    )
    return ether(datagram, vlans=vlans)


def outer_gre(inner: Payload, *, family: int = 4, vlans: Sequence[int] = (), **gre_options) -> Packet:
    """Ethernet / outer IP / GRE carrying inner (see gre() for the options)."""
    src, dst = OUTER4 if family == 4 else OUTER6
    return ether(ip_packet(gre(inner, **gre_options), src=src, dst=dst), vlans=vlans)


def outer_gtpu(gtp_message: Packet, *, family: int = 4, vlans: Sequence[int] = ()) -> Packet:
    """GTP-U on the outer UDP (N3/N9), source port 2152 as UPFs send it."""
    return outer_udp(gtp_message, dport=GTPU_PORT, sport=GTPU_PORT, family=family, vlans=vlans)


def inner_gtpu_frame(gtp_message: Packet, *, family: int = 4) -> Packet:
    """An inner Ethernet frame carrying GTP-U, to put inside VXLAN, GENEVE or GRE-TEB."""
    return ether(inner_gtpu_ip(gtp_message, family=family))


def inner_gtpu_ip(gtp_message: Packet, *, family: int = 4) -> Packet:
    src, dst = INNER4 if family == 4 else INNER6
    return ip_packet(udp(gtp_message, sport=GTPU_PORT, dport=GTPU_PORT), src=src, dst=dst)


# ---------------------------------------------------------------------------------------------
# Expected results


KEY_FIELDS = (
    "ifindex", "vni", "teid", "vlan", "overlay", "qfi", "flags",
    "family", "proto", "dscp", "sport", "dport", "src", "dst",
)  # fmt: skip


def expect_ok(**fields) -> dict:
    """An expected flow key: the given fields, every other field 0 (addresses 16 zero bytes)."""
    unknown = set(fields) - set(KEY_FIELDS)
    if unknown:
        raise ValueError(f"not flow key fields: {sorted(unknown)}")
    key = {name: 0 for name in KEY_FIELDS}
    key.update(src=bytes(16), dst=bytes(16))
    key.update(fields)
    return {"reason": None, **key}


def expect_reason(reason: str) -> dict:
    return {"reason": reason}


def _ue(addresses: tuple[str, str], proto: int, sport: int = 0, dport: int = 0, **more) -> dict:
    """The UE-field part of an expected key, for the innermost header built from addresses."""
    src, dst = addresses
    family = _family_of(src)
    return dict(
        family=family, proto=proto, sport=sport, dport=dport, src=addr16(src), dst=addr16(dst), **more
    )


# ---------------------------------------------------------------------------------------------
# The case table. Each group returns {name: (packet or bytes, expected)}.

Cases = dict[str, tuple[Payload, dict]]  # name -> (packet, hand-written expected result)


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
