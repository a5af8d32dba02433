"""Well-known numbers, the addresses each header level uses, and helpers the builders share."""

from __future__ import annotations

import ipaddress

from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import ICMPv6Unknown, IPv6
from scapy.layers.l2 import ARP, GRE, Ether
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
