"""Composite builders: IP datagrams of either family (UE packets) and whole frames (outer
Ethernet / IP / UDP or GRE, the inner frame carrying GTP-U in an overlay)."""

from __future__ import annotations

from collections.abc import Sequence

from scapy.packet import Packet

from .common import EPHEMERAL_PORT, GTPU_PORT, INNER4, INNER6, OUTER4, OUTER6, Payload, _family_of
from .ethernet import ether
from .ip4 import ipv4
from .ip6 import ipv6
from .l4 import icmp, icmpv6, tcp, udp
from .overlays import gre


def ip_packet(payload: Payload, *, src: str, dst: str, **options) -> Packet:
    """ipv4() or ipv6(), chosen by the address family of src."""
    factory = ipv4 if _family_of(src) == 4 else ipv6
    return factory(payload, src=src, dst=dst, **options)
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
