"""IPv6 and its extension headers, chained in the order given."""

from __future__ import annotations

from collections.abc import Iterable

from scapy.layers.inet6 import (
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
)
from scapy.layers.ipsec import AH
from scapy.packet import Packet

from .common import OUTER6, Payload, _as_packet, _ip_proto_for, _required


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
