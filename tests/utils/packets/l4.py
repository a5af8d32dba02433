"""L4 headers: UDP, TCP, SCTP's common header, ICMP and ICMPv6."""

from __future__ import annotations

import struct

from scapy.layers.inet import ICMP, TCP, UDP
from scapy.layers.inet6 import ICMPv6Unknown
from scapy.packet import Packet, Raw

from .common import EPHEMERAL_PORT, Payload


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
