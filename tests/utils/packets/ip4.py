"""IPv4, with options and fragments."""

from __future__ import annotations

from scapy.layers.inet import IP, IPOption
from scapy.packet import Packet

from .common import OUTER4, Payload, _as_packet, _ip_proto_for, _required


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
