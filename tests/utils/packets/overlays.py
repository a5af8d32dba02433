"""Overlays carrying Ethernet or IP: VXLAN (raw bytes, see the package docstring), GENEVE and
GRE."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from scapy.contrib.geneve import GENEVE, GeneveOptions
from scapy.layers.l2 import GRE
from scapy.packet import Packet, Raw

from .common import Payload, _as_packet, _ethertype_for, _required


class VxlanBytes(Raw):
    """A VXLAN header built from raw bytes (see the package docstring)."""

    name = "VXLAN header (raw)"

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
