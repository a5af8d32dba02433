"""The benchmark's packet, and the check that FORWARD rewrote it as it should.

One nested packet, as a UPF-facing edge node sees it: an outer Ethernet/IPv4/UDP VXLAN tunnel,
inside it an Ethernet/IPv4/UDP GTP-U tunnel with a PDU Session Container (QFI), inside that the UE's
IPv4/UDP packet. Cases differ only in the UE destination address, so every packet has the same
length and the harness floor is the same for all of them.

VXLAN and GTP-U headers are packed by hand: scapy's VXLAN layer writes VXLAN-GPE bits for an
Ethernet payload, and the GTP-U extension chain must be exactly what the parser reads.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from ipaddress import IPv4Address

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

VXLAN_PORT = 4789
GTPU_PORT = 2152
VXLAN_FLAG_VNI_VALID = 0x08
GTP_FLAGS_V1_PT_EXT = 0x34  # version 1, protocol type GTP, extension header present
GTP_T_PDU = 0xFF
GTP_EXT_PDU_SESSION = 0x85
PDU_SESSION_UPLINK = 1

# Outer headers: where FORWARD rewrites (Ethernet, then IPv4 without options, then UDP).
ETH_LEN = 14
IPV4_LEN = 20
UDP_LEN = 8
OUTER_IP = ETH_LEN
OUTER_IP_CHECKSUM = OUTER_IP + 10
OUTER_IP_DST = OUTER_IP + 16
OUTER_UDP = OUTER_IP + IPV4_LEN
OUTER_UDP_CHECKSUM = OUTER_UDP + 6

# Documentation and private addresses, a pair per level so a dump shows which header is which.
OUTER_MACS = ("02:00:00:00:01:01", "02:00:00:00:01:02")
OUTER_IPS = ("192.0.2.1", "198.51.100.1")
INNER_MACS = ("02:00:00:00:02:01", "02:00:00:00:02:02")
INNER_IPS = ("172.16.0.1", "172.16.0.2")
UE_PAYLOAD = bytes(range(64))


@dataclass(frozen=True)
class Flow:
    """What the classifier sees of a packet: the tunnel ids and the UE's 5-tuple (UDP)."""

    vni: int
    teid: int
    qfi: int
    ue_src: str
    ue_dst: str
    ue_sport: int
    ue_dport: int


def vxlan_header(vni: int) -> bytes:
    return struct.pack("!II", VXLAN_FLAG_VNI_VALID << 24, vni << 8)


def gtpu_header(teid: int, qfi: int, payload_len: int) -> bytes:
    """GTP-U T-PDU with sequence/N-PDU fields and one uplink PDU Session Container (TS 38.415)."""
    optional = struct.pack("!HBB", 0, 0, GTP_EXT_PDU_SESSION)
    container = struct.pack("!BBBB", 1, PDU_SESSION_UPLINK << 4, qfi & 0x3F, 0)  # 4 bytes, then "no next"
    length = len(optional) + len(container) + payload_len
    return struct.pack("!BBHI", GTP_FLAGS_V1_PT_EXT, GTP_T_PDU, length, teid) + optional + container


def nested_packet(flow: Flow) -> bytes:
    """Outer VXLAN tunnel / inner GTP-U tunnel / UE UDP packet, checksums filled in."""
    ue = bytes(
        IP(src=flow.ue_src, dst=flow.ue_dst) / UDP(sport=flow.ue_sport, dport=flow.ue_dport) / UE_PAYLOAD
    )
    gtp = gtpu_header(flow.teid, flow.qfi, len(ue)) + ue
    inner = Ether(src=INNER_MACS[0], dst=INNER_MACS[1]) / IP(src=INNER_IPS[0], dst=INNER_IPS[1])
    inner = inner / UDP(sport=GTPU_PORT, dport=GTPU_PORT) / gtp
    overlay = vxlan_header(flow.vni) + bytes(inner)
    outer = Ether(src=OUTER_MACS[0], dst=OUTER_MACS[1]) / IP(src=OUTER_IPS[0], dst=OUTER_IPS[1])
    # A non-zero outer UDP checksum, so FORWARD's incremental L4 checksum update is exercised.
    return bytes(outer / UDP(sport=49152, dport=VXLAN_PORT) / overlay)


def _ones_complement_sum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def internet_checksum(data: bytes) -> int:
    """The checksum field's value for data (RFC 1071), a zero byte padding an odd length."""
    return ~_ones_complement_sum(data) & 0xFFFF


def ipv4_header_valid(header: bytes) -> bool:
    return _ones_complement_sum(header) == 0xFFFF


def udp_checksum_valid(src: bytes, dst: bytes, segment: bytes) -> bool:
    pseudo = src + dst + struct.pack("!BBH", 0, 17, len(segment))
    return _ones_complement_sum(pseudo + segment) == 0xFFFF


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


class RewriteError(AssertionError):
    """FORWARD's output is not the expected rewrite of its input."""


def check_forwarded(original: bytes, output: bytes, new_dmac: str, new_dst: IPv4Address) -> None:
    """FORWARD to a member with no source MAC of its own: destination MAC and outer IPv4 destination
    replaced, the old destination MAC as source, both outer checksums still valid, nothing else changed."""
    if len(output) != len(original):
        raise RewriteError(f"forwarded packet is {len(output)} bytes, sent {len(original)}")
    expected = bytearray(original)
    expected[0:6] = mac_bytes(new_dmac)
    expected[6:12] = original[0:6]
    expected[OUTER_IP_DST : OUTER_IP_DST + 4] = new_dst.packed
    # Checksums are checked for validity below; take them from the output for the byte comparison.
    for offset in (OUTER_IP_CHECKSUM, OUTER_UDP_CHECKSUM):
        expected[offset : offset + 2] = output[offset : offset + 2]
    if bytes(expected) != output:
        first = next(i for i, (a, b) in enumerate(zip(expected, output, strict=True)) if a != b)
        raise RewriteError(f"forwarded packet differs from the expected rewrite at byte {first}")
    if not ipv4_header_valid(output[OUTER_IP:OUTER_UDP]):
        raise RewriteError("outer IPv4 header checksum is wrong after the rewrite")
    udp_len = struct.unpack_from("!H", output, OUTER_UDP + 4)[0]
    src, dst = output[OUTER_IP + 12 : OUTER_IP + 16], output[OUTER_IP_DST : OUTER_IP_DST + 4]
    if not udp_checksum_valid(src, dst, output[OUTER_UDP : OUTER_UDP + udp_len]):
        raise RewriteError("outer UDP checksum is wrong after the rewrite")
