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

One module per protocol or family, each importable on its own; every public name is re-exported
here, so ``from tests.utils.packets import X`` and ``packets.X`` work for all of them:

* common: well-known numbers, the addresses of each header level, flow key flags, helpers
* ethernet: Ethernet with VLAN tags, and ARP
* ip4: IPv4; ip6: IPv6 and its extension headers; l4: UDP, TCP, SCTP, ICMP, ICMPv6
* overlays: VXLAN, GENEVE, GRE; gtp: GTP-U, its extension headers and signalling messages
* frames: UE datagrams of either family and whole frames (outer_udp, outer_gtpu, inner_gtpu_frame)
* expect: expected results; cases: CASES, joined from cases_ip, cases_overlays and cases_gtpu
"""

from __future__ import annotations

# Packet and Raw are part of the interface: builders return Packets, and tests wrap bytes in Raw.
from scapy.packet import Packet, Raw

from .cases import CASES
from .common import (
    EPHEMERAL_PORT,
    ETH_P_8021AD,
    ETH_P_8021Q,
    ETH_P_ARP,
    ETH_P_IP,
    ETH_P_IPV6,
    ETH_P_TEB,
    FLAG_FRAGMENT,
    FLAG_GTP,
    FLAG_GTP_QFI,
    FLAG_GTP_UL,
    FLAG_VNI,
    GENEVE_PORT,
    GTP_ECHO_REQUEST,
    GTP_ECHO_RESPONSE,
    GTP_END_MARKER,
    GTP_ERROR_INDICATION,
    GTP_EXT_PDCP_NUMBER,
    GTP_EXT_PDU_SESSION,
    GTP_EXT_RAN_CONTAINER,
    GTP_EXT_UDP_PORT,
    GTP_T_PDU,
    GTPU_PORT,
    INNER4,
    INNER6,
    MAC_DST,
    MAC_SRC,
    OUTER4,
    OUTER6,
    OVERLAY_GENEVE,
    OVERLAY_GRE,
    OVERLAY_VXLAN,
    UE4,
    UE6,
    VXLAN_PORT,
    Payload,
    addr16,
    patched,
)
from .ethernet import arp_frame, ether
from .expect import KEY_FIELDS, Cases, expect_ok, expect_reason
from .frames import (
    inner_gtpu_frame,
    inner_gtpu_ip,
    ip_packet,
    outer_gre,
    outer_gtpu,
    outer_udp,
    ue_icmp,
    ue_tcp,
    ue_udp,
)
from .gtp import (
    GtpExtension,
    GtpuExtBytes,
    GtpuHeaderBytes,
    gtp_echo_request,
    gtp_end_marker,
    gtp_error_indication,
    gtp_ext_pdcp_number,
    gtp_ext_pdu_session,
    gtp_ext_ran_container,
    gtp_ext_raw,
    gtp_ext_udp_port,
    gtpu,
)
from .ip4 import ipv4
from .ip6 import ipv6, ipv6_auth, ipv6_dest_opts, ipv6_fragment, ipv6_hop_by_hop, ipv6_routing
from .l4 import icmp, icmpv6, sctp, tcp, udp
from .overlays import VxlanBytes, geneve, geneve_option, gre, vxlan
