"""An IPv4 path's outer headers as the downlink copies them (struct dpp_atsss_path's head4,
dataplane/include/dpp/nf/atsss.h): Ethernet to the next hop, the IPv4 header of a DCCP packet with
total length and checksum 0, the DCCP ports, and the two sums the downlink completes with the
packet's length: the IPv4 header's and the DCCP pseudo-header's addresses and ports'. Built from
the path's own fields, so that whoever writes a path (netapp.atsss.table) writes it whole."""

from __future__ import annotations

import struct

from netapp.atsss.abi import HEAD4_LEN, IP_DF, IPPROTO_DCCP, TTL, Path


def fold(total: int) -> int:
    """A one's complement sum of 16-bit words folded to 16 bits (0 only when every word is 0)."""
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def native_sum(raw: bytes) -> int:
    """The folded sum of `raw`'s 16-bit words as the data path reads them (host order in memory)."""
    return fold(sum(struct.unpack(f"={len(raw) // 2}H", raw)))


def set_head4(value: Path) -> None:
    """`value`'s template filled from its MAC addresses, addresses and ports (IPv4 paths), or zeroed."""
    if value.family != 4:
        value.head4[:] = bytes(HEAD4_LEN)
        value.head4_ip_sum = value.head4_dccp_sum = 0
        return
    local, peer = struct.pack("=I", value.local[0]), struct.pack("=I", value.peer[0])
    ip = struct.pack("!BBHHHBBH", 0x45, 0, 0, 0, IP_DF, TTL, IPPROTO_DCCP, 0) + local + peer
    ports = struct.pack("=HH", value.sport, value.dport)
    head = bytes(value.dmac) + bytes(value.smac) + b"\x08\x00" + ip + ports
    value.head4[:] = head.ljust(HEAD4_LEN, b"\0")
    value.head4_ip_sum = native_sum(ip)
    value.head4_dccp_sum = native_sum(local + peer + ports)

