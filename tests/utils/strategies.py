"""Hypothesis strategies for differential tests of the XDP parser.

valid_packets() draws a random nested packet (each optional layer chosen at random: VLAN tags,
IPv4 options, IPv6 extension headers, overlay, GTP-U with extension headers, UE datagram) and
derives the flow key it must produce from what it drew, not from the bytes. The other strategies
damage such packets: mutated_frames() flips bytes, cuts frames and rewrites length/type/flag
fields with near and far values; truncated_frames() returns strict prefixes.

A differential test feeds the same frame to the BPF program and to refparser.parse and compares
the reason and key; refparser's own tests check it against valid_packets().expected_key.
consistently_truncated_frames() shrinks the enclosing IP/UDP lengths after cutting, so that the
cut shows as the trunc_* reason of the inner header it went through (see refparser decision 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from hypothesis import strategies as st
from scapy.contrib.geneve import GENEVE
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import (
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import GRE, Dot1AD, Dot1Q, Ether
from scapy.packet import NoPayload, Packet

from . import packets as pk

FieldPosition = tuple[int, int]  # (offset in the frame, size in bytes)


@dataclass(frozen=True)
class GeneratedPacket:
    """A valid frame, the key the parser must return for it, where its length, type and flag
    fields are (for targeted mutations) and which headers carry a length of what follows them.
    """

    frame: bytes
    expected_key: dict
    fields: tuple[FieldPosition, ...]
    length_fields: tuple[tuple[int, str], ...]  # (header offset, "ipv4"/"ipv6"/"udp") outside-in
    header_offsets: tuple[int, ...]  # where each layer starts: cuts near them are the interesting ones


# How deep an IP header sits decides what may be decapsulated after it (refparser decision 8).
_OUTER, _INNER, _UE = "outer", "inner", "ue"
_ETHERNET_OVERLAYS = ("vxlan", "geneve_ethernet", "gre_ethernet")
_OVERLAYS = _ETHERNET_OVERLAYS + ("geneve_ip", "gre_ip")
# Protocols with no ports that no depth decapsulates (none is an IPv6 extension header).
_PORTLESS_PROTOCOLS = (50, 89, 103)
_ENCAP_PORTS = {_OUTER: (pk.VXLAN_PORT, pk.GENEVE_PORT, pk.GTPU_PORT), _INNER: (pk.GTPU_PORT,), _UE: ()}


def _rarely() -> st.SearchStrategy[bool]:
    """True about one time in five: for variants that would otherwise crowd out the common case."""
    return st.sampled_from((False, False, False, False, True))


def _port() -> st.SearchStrategy[int]:
    return st.integers(0, 0xFFFF)


def _address(family: int) -> st.SearchStrategy[str]:
    return st.ip_addresses(v=family).map(str)


# ---------------------------------------------------------------------------------------------
# IP and L4


def _ipv6_extension(kind: str) -> Packet:
    factories: dict[str, Callable[[], Packet]] = {
        "hop_by_hop": pk.ipv6_hop_by_hop,
        "routing": pk.ipv6_routing,
        "dest_opts": pk.ipv6_dest_opts,
        "auth": pk.ipv6_auth,
        "first_fragment": lambda: pk.ipv6_fragment(0, more=True),
    }
    return factories[kind]()


def _ipv6_extensions(max_count: int) -> st.SearchStrategy[list]:
    kinds = st.sampled_from(("hop_by_hop", "routing", "dest_opts", "auth", "first_fragment"))
    return st.lists(kinds, max_size=max_count).map(lambda chosen: [_ipv6_extension(kind) for kind in chosen])


@st.composite
def _ip_header(
    draw, payload, *, family: int, proto: int, later_fragment: bool = False
) -> tuple[Packet, dict]:
    """An IP header (random addresses, DSCP, options or extension headers) around payload, and the
    UE fields it owns if it is the innermost one (ports left for the caller).
    """
    src, dst = draw(_address(family)), draw(_address(family))
    dscp = draw(st.integers(0, 63))
    if family == 4:
        options = b"\x01" * (4 * draw(st.integers(0, 10)))  # NOPs: the parser only skips options
        if later_fragment:
            offset, more = draw(st.integers(1, 0x1FFF)), draw(st.booleans())
        else:
            offset, more = 0, draw(_rarely())  # sometimes a first fragment, parsed like a whole one
        packet = pk.ipv4(
            payload,
            src=src,
            dst=dst,
            proto=proto,
            dscp=dscp,
            options=options,
            frag_offset=offset,
            more_fragments=more,
        )
    else:
        extensions = draw(_ipv6_extensions(5 if later_fragment else 6))
        if later_fragment:
            extensions.append(pk.ipv6_fragment(draw(st.integers(1, 0x1FFF)), more=draw(st.booleans())))
        packet = pk.ipv6(payload, src=src, dst=dst, nh=proto, dscp=dscp, ext_headers=extensions)
    fields = dict(family=family, proto=proto, dscp=dscp, src=pk.addr16(src), dst=pk.addr16(dst))
    return packet, fields


@st.composite
def _l4_segment(draw, *, family: int, depth: str) -> tuple[Packet, int, int, int]:
    """A transport header the parser reads but does not decapsulate at this depth:
    (packet, proto, sport, dport).
    """
    kind = draw(st.sampled_from(("udp", "tcp", "sctp", "icmp", "portless")))
    sport, dport = draw(_port()), draw(_port().filter(lambda port: port not in _ENCAP_PORTS[depth]))
    if kind == "udp":
        return pk.udp(draw(st.binary(max_size=16)), sport=sport, dport=dport), 17, sport, dport
    if kind == "tcp":
        return pk.tcp(sport=sport, dport=dport), 6, sport, dport
    if kind == "sctp":
        return pk.Raw(load=pk.sctp(sport, dport) + draw(st.binary(max_size=16))), 132, sport, dport
    if kind == "icmp":
        icmp_type, code = draw(st.integers(0, 255)), draw(st.integers(0, 255))
        message = pk.icmp(icmp_type, code) if family == 4 else pk.icmpv6(icmp_type, code)
        return message, 1 if family == 4 else 58, icmp_type, code
    # GRE is only decapsulated on the outermost IP header.
    protocols = _PORTLESS_PROTOCOLS + (() if depth == _OUTER else (47,))
    return pk.Raw(load=draw(st.binary(max_size=16))), draw(st.sampled_from(protocols)), 0, 0


@st.composite
def _innermost_datagram(draw, depth: str) -> tuple[Packet, dict]:
    """The IP datagram that owns the UE fields of the key, and those fields."""
    family = draw(st.sampled_from((4, 6)))
    if draw(_rarely()):  # a non-first fragment: no ports, FRAGMENT flag
        proto = draw(st.sampled_from((17, 6, 1 if family == 4 else 58) + _PORTLESS_PROTOCOLS))
        packet, fields = draw(
            _ip_header(
                draw(st.binary(min_size=8, max_size=24)), family=family, proto=proto, later_fragment=True
            )
        )
        return packet, dict(fields, sport=0, dport=0, flags=pk.FLAG_FRAGMENT)
    segment, proto, sport, dport = draw(_l4_segment(family=family, depth=depth))
    packet, fields = draw(_ip_header(segment, family=family, proto=proto))
    return packet, dict(fields, sport=sport, dport=dport)


@st.composite
def _udp_carrier(draw, payload, *, dport: int) -> tuple[Packet, dict]:
    """IP/UDP carrying an encapsulation, and the UE fields it owns if nothing inside is IP."""
    family, sport = draw(st.sampled_from((4, 6))), draw(_port())
    packet, fields = draw(_ip_header(pk.udp(payload, sport=sport, dport=dport), family=family, proto=17))
    return packet, dict(fields, sport=sport, dport=dport)


# ---------------------------------------------------------------------------------------------
# GTP-U


def _other_gtp_extension() -> st.SearchStrategy[pk.GtpExtension]:
    raw_types = st.integers(1, 255).filter(lambda ext_type: ext_type != pk.GTP_EXT_PDU_SESSION)
    return st.one_of(
        _port().map(pk.gtp_ext_udp_port),
        st.integers(0, 0xFFFF).map(pk.gtp_ext_pdcp_number),
        st.binary(max_size=10).map(pk.gtp_ext_ran_container),
        st.builds(pk.gtp_ext_raw, raw_types, st.binary(max_size=10)),
    )


@st.composite
def _pdu_session_container(draw) -> tuple[pk.GtpExtension, dict]:
    qfi, uplink = draw(st.integers(0, 63)), draw(st.booleans())
    if uplink:
        container = pk.gtp_ext_pdu_session(qfi, ul=True)
    else:
        container = pk.gtp_ext_pdu_session(
            qfi, ppp=draw(st.booleans()), rqi=draw(st.booleans()), ppi=draw(st.integers(0, 7))
        )
    flags = pk.FLAG_GTP_QFI | (pk.FLAG_GTP_UL if uplink else 0)
    return container, dict(qfi=qfi, flags=flags)


@st.composite
def _gtpu_t_pdu(draw, payload) -> tuple[Packet, dict]:
    """A GTP-U T-PDU around payload with 0 to 8 extension headers, at most one PDU Session
    Container, optional sequence and N-PDU numbers; and its key fields.
    """
    teid = draw(st.integers(0, 0xFFFFFFFF))
    extensions = draw(st.lists(_other_gtp_extension(), max_size=8))
    fields = dict(teid=teid, qfi=0, flags=pk.FLAG_GTP)
    if len(extensions) < 8 and draw(st.booleans()):
        container, container_fields = draw(_pdu_session_container())
        extensions.insert(draw(st.integers(0, len(extensions))), container)
        fields.update(qfi=container_fields["qfi"], flags=pk.FLAG_GTP | container_fields["flags"])
    seq = draw(st.none() | st.integers(0, 0xFFFF))
    npdu = draw(st.none() | st.integers(0, 0xFF))
    return pk.gtpu(teid, exts=extensions, inner=payload, seq=seq, npdu=npdu), fields


def _non_ip_payload() -> st.SearchStrategy[bytes]:
    """A T-PDU of an Ethernet or unstructured PDU session: not version 4 or 6."""
    return st.binary(min_size=1, max_size=20).filter(lambda data: data[0] >> 4 not in (4, 6))


# ---------------------------------------------------------------------------------------------
# Overlays and the whole frame


def _vlan_ids() -> st.SearchStrategy[list]:
    return st.lists(st.integers(0, 0xFFF), max_size=2)


@st.composite
def _overlay(draw, kind: str, inner_ip: Packet | None) -> tuple[Packet, dict]:
    """Outer IP / overlay around the inner IP datagram (a non-IP frame when there is none), and
    the overlay fields plus the UE fields the outer header owns if nothing inside is IP.
    """
    if kind in _ETHERNET_OVERLAYS:
        inner = pk.ether(inner_ip, vlans=draw(_vlan_ids())) if inner_ip is not None else pk.arp_frame()
    else:
        inner = inner_ip
    if kind == "vxlan":
        vni = draw(st.integers(0, 0xFFFFFF))
        outer, fields = draw(_udp_carrier(pk.vxlan(vni, inner), dport=pk.VXLAN_PORT))
        return outer, dict(fields, overlay=pk.OVERLAY_VXLAN, vni=vni, vni_flag=pk.FLAG_VNI)
    if kind.startswith("geneve"):
        vni = draw(st.integers(0, 0xFFFFFF))
        options = draw(
            st.lists(
                st.builds(
                    pk.geneve_option,
                    _port(),
                    st.integers(0, 255),
                    st.sampled_from((b"", b"\0" * 4, b"\xee" * 8)),
                ),
                max_size=3,
            )
        )
        outer, fields = draw(_udp_carrier(pk.geneve(vni, inner, options=options), dport=pk.GENEVE_PORT))
        return outer, dict(fields, overlay=pk.OVERLAY_GENEVE, vni=vni, vni_flag=pk.FLAG_VNI)
    gre_key = draw(st.none() | st.integers(0, 0xFFFFFFFF))
    tunnel = pk.gre(
        inner, key=gre_key, checksum=draw(st.booleans()), seq=draw(st.none() | st.integers(0, 0xFFFFFFFF))
    )
    outer, fields = draw(_ip_header(tunnel, family=draw(st.sampled_from((4, 6))), proto=47))
    vni_flag = pk.FLAG_VNI if gre_key is not None else 0  # "no key" is not key 0
    return outer, dict(fields, sport=0, dport=0, overlay=pk.OVERLAY_GRE, vni=gre_key or 0, vni_flag=vni_flag)


_NO_UE_FIELDS = dict(family=0, proto=0, dscp=0, sport=0, dport=0, src=bytes(16), dst=bytes(16))


@st.composite
def valid_packets(draw) -> GeneratedPacket:
    """A random valid frame and the key it must produce."""
    overlay = draw(st.sampled_from((None,) + _OVERLAYS))
    with_gtp = draw(st.booleans())
    # The last layer is sometimes not IP: a non-IP T-PDU, or a non-IP frame inside an overlay.
    non_ip_tail = (with_gtp or overlay in _ETHERNET_OVERLAYS) and draw(_rarely())
    key = pk.expect_ok()
    del key["reason"]
    ue_fields: dict | None = None  # fields of the innermost IP header, once it is built

    inner: Packet | None = None
    if not non_ip_tail:
        inner, ue_fields = draw(_innermost_datagram(_UE if with_gtp else _INNER if overlay else _OUTER))
    if with_gtp:
        tail = inner if inner is not None else draw(_non_ip_payload())
        message, gtp_fields = draw(_gtpu_t_pdu(tail))
        key.update(teid=gtp_fields["teid"], qfi=gtp_fields["qfi"], flags=gtp_fields["flags"])
        carrier, _ = draw(_udp_carrier(message, dport=pk.GTPU_PORT))
        # A non-IP T-PDU has no UE fields; the carrier's do not stand in for them.
        inner, ue_fields = carrier, ue_fields or _NO_UE_FIELDS
    if overlay is not None:
        outer, outer_fields = draw(_overlay(overlay, inner))
        key.update(overlay=outer_fields.pop("overlay"), vni=outer_fields.pop("vni"))
        key["flags"] |= outer_fields.pop("vni_flag")
        inner, ue_fields = outer, ue_fields or outer_fields

    vlans = draw(_vlan_ids())
    tpids = [draw(st.sampled_from((pk.ETH_P_8021AD, pk.ETH_P_8021Q))) for _ in vlans]
    frame = pk.ether(inner, vlans=vlans, tpids=tpids)
    key.update(vlan=vlans[0] if vlans else 0)
    flags = key["flags"] | ue_fields.pop("flags", 0)
    key.update(ue_fields, flags=flags)
    layers = _layers_with_offsets(frame)
    return GeneratedPacket(
        frame=bytes(frame),
        expected_key=key,
        # Innermost first: hypothesis favours early elements, and the outer fields are the dull ones.
        fields=tuple(reversed(list(_field_positions(layers)))),
        length_fields=tuple(_length_fields(layers)),
        header_offsets=tuple(offset for _, offset in layers),
    )


# ---------------------------------------------------------------------------------------------
# Mutations


def _layers_with_offsets(frame: Packet) -> list[tuple[Packet, int]]:
    """Each scapy layer of frame with its offset in the frame's bytes."""
    found, offset = [], 0
    layer = frame
    while not isinstance(layer, NoPayload):
        # A layer's own fields (self_build: no payload, no post_build) are as long as its header
        # in the frame, so each offset is the sum of the headers before it. Building each layer
        # with its payload instead costs the square of the depth: it was most of the time that
        # a differential test spent drawing.
        found.append((layer, offset))
        offset += len(layer.self_build())
        layer = layer.payload
    return found


# Relative (offset, size) of the fields whose corruption moves the parser onto another path.
_FIELDS_BY_LAYER = {
    Ether: ((12, 2),),
    Dot1Q: ((2, 2),),
    Dot1AD: ((2, 2),),
    IP: ((0, 1), (2, 2), (6, 2), (9, 1)),
    IPv6: ((0, 1), (4, 2), (6, 1)),
    IPv6ExtHdrHopByHop: ((0, 1), (1, 1)),
    IPv6ExtHdrRouting: ((0, 1), (1, 1)),
    IPv6ExtHdrDestOpt: ((0, 1), (1, 1)),
    IPv6ExtHdrFragment: ((0, 1), (2, 2)),
    AH: ((0, 1), (1, 1)),
    UDP: ((2, 2), (4, 2)),
    TCP: ((12, 1),),
    GRE: ((0, 2), (2, 2)),
    GENEVE: ((0, 1), (2, 2)),
    pk.VxlanBytes: ((0, 1),),
    pk.GtpuHeaderBytes: ((0, 1), (1, 1), (2, 2)),
}


def _field_positions(layers: list[tuple[Packet, int]]) -> Iterator[FieldPosition]:
    for layer, offset in layers:
        for relative, size in _FIELDS_BY_LAYER.get(type(layer), ()):
            yield offset + relative, size
        if isinstance(layer, pk.GtpuHeaderBytes) and len(layer.load) > 8:
            yield offset + 11, 1  # next extension type
        if isinstance(layer, pk.GtpuExtBytes):
            # length, PDU type and QFI octets (if a PDU Session Container), next type
            yield from ((offset, 1), (offset + 1, 1), (offset + 2, 1), (offset + len(layer.load) - 1, 1))


def _length_fields(layers: list[tuple[Packet, int]]) -> Iterator[tuple[int, str]]:
    kinds = {IP: "ipv4", IPv6: "ipv6", UDP: "udp"}
    for layer, offset in layers:
        if type(layer) in kinds:
            yield offset, kinds[type(layer)]


def cut_consistently(frame: bytes, cut: int, length_fields: tuple[tuple[int, str], ...]) -> bytes:
    """frame cut at cut, with the lengths of the IP and UDP headers before the cut shrunk to match,
    so the parser runs out of bytes in the header that was cut, not in the outer IP header.
    length_fields comes from the GeneratedPacket the frame was made from.
    """
    data = bytearray(frame[:cut])
    field_of = {"ipv4": (2, 0), "ipv6": (4, 40), "udp": (4, 0)}  # length offset, header excluded
    for header, kind in length_fields:
        relative, excluded = field_of[kind]
        if header + relative + 2 <= cut:
            new_length = max(cut - header - excluded, 0)
            data[header + relative : header + relative + 2] = new_length.to_bytes(2, "big")
    return bytes(data)


def _field_value(size: int, current: int) -> st.SearchStrategy[int]:
    """Anything, or an off-by-a-few value: the latter finds boundary bugs in length checks."""
    largest = (1 << (8 * size)) - 1
    return st.integers(0, largest) | st.integers(-4, 4).map(lambda delta: (current + delta) & largest)


@st.composite
def _mutated(draw, frame: bytes, packet: GeneratedPacket) -> bytes:
    """frame (packet's frame, maybe already mutated) after one more mutation: a field rewritten,
    a byte flipped, or the tail cut off (with or without fixing the IP and UDP lengths).
    """
    fields, length_fields = packet.fields, packet.length_fields
    data = bytearray(frame)
    kind = draw(st.sampled_from(("field", "flip", "truncate", "cut_consistently")))
    if kind == "field":
        offset, size = draw(st.sampled_from(fields))
        if offset + size <= len(data):  # an earlier cut may have removed it
            current = int.from_bytes(data[offset : offset + size], "big")
            data[offset : offset + size] = draw(_field_value(size, current)).to_bytes(size, "big")
    elif kind == "flip" and data:
        data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
    elif kind == "truncate":
        del data[min(draw(cut_points(packet)), len(data)) :]
    elif kind == "cut_consistently":
        return cut_consistently(frame, min(draw(cut_points(packet)), len(frame)), length_fields)
    return bytes(data)


@st.composite
def mutated_frames(draw) -> bytes:
    """A valid frame after 1 to 4 random mutations: field rewrites, byte flips, truncations."""
    packet = draw(valid_packets())
    frame = packet.frame
    for _ in range(draw(st.integers(1, 4))):
        frame = draw(_mutated(frame, packet))
    return frame


def cut_points(packet: GeneratedPacket) -> st.SearchStrategy[int]:
    """Where to cut packet's frame (strictly inside it): anywhere, or a few bytes past the start
    of one of its layers, where a cut lands in a header rather than in a payload.
    """
    last = len(packet.frame) - 1
    # Innermost layers first: hypothesis favours early choices and small numbers.
    starts = st.sampled_from(packet.header_offsets[::-1])
    near_a_header = st.builds(lambda start, into: min(start + into, last), starts, st.integers(0, 12))
    return near_a_header | st.integers(0, last)


@st.composite
def truncated_frames(draw) -> bytes:
    """A strict prefix of a valid frame."""
    packet = draw(valid_packets())
    return packet.frame[: draw(cut_points(packet))]


@st.composite
def consistently_truncated_frames(draw) -> bytes:
    """A strict prefix of a valid frame whose IP and UDP lengths were shrunk to fit: the parser
    must stop with the trunc_* reason of whatever header the cut went through.
    """
    packet = draw(valid_packets())
    return cut_consistently(packet.frame, draw(cut_points(packet)), packet.length_fields)


def any_frames() -> st.SearchStrategy[bytes]:
    """Everything a differential test should try: valid, mutated, truncated and random frames."""
    return st.one_of(
        valid_packets().map(lambda packet: packet.frame),
        mutated_frames(),
        truncated_frames(),
        consistently_truncated_frames(),
        st.binary(max_size=256),
    )
