"""The experiment's frames at a given packet size, and the pcap file dpp-pktgen reads them from.

Size is the UE's IP packet (what the paper's 64-1500 byte sizes can only mean here: the nested
headers alone take 136 bytes). On the wire each frame carries 108 bytes of encapsulation on top:
outer Ethernet / IPv4 / UDP / VXLAN (50), inner Ethernet / IPv4 / UDP (42) and GTP-U with its
PDU Session Container (16). The outer UDP checksum is 0, as VXLAN senders over IPv4 send it
(RFC 7348), so no receiver spends time verifying it.
"""

from __future__ import annotations

import struct
from pathlib import Path

from netapp.testbed import scenario
from netapp.testbed.topology import EdgeSite

ENCAPSULATION_BYTES = 50 + 42 + 16
UE_HEADER_BYTES = 20 + 8  # the UE packet's IPv4 and UDP headers
MIN_SIZE = UE_HEADER_BYTES
OUTER_UDP_CHECKSUM_AT = 14 + 20 + 6
# The UE packet's UDP source port, which the generator advances to make many flows of one frame.
UE_SOURCE_PORT_AT = ENCAPSULATION_BYTES + 20
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)  # Ethernet, microseconds


def frame_bytes(size: int) -> int:
    """Length on the wire (without FCS) of a frame carrying a UE packet of `size` bytes."""
    return size + ENCAPSULATION_BYTES


def flow_frame(site: EdgeSite, flow: scenario.Flow, size: int) -> bytes:
    if size < MIN_SIZE:
        raise ValueError(f"a UE packet has at least {MIN_SIZE} bytes (IPv4 + UDP), not {size}")
    frame = bytearray(scenario.frame(site, flow, payload_len=size - UE_HEADER_BYTES))
    frame[OUTER_UDP_CHECKSUM_AT : OUTER_UDP_CHECKSUM_AT + 2] = b"\0\0"
    assert len(frame) == frame_bytes(size)
    ue = ENCAPSULATION_BYTES
    assert frame[ue] == 0x45 and frame[ue + 9] == 17, "the UE packet is IPv4 without options / UDP"
    return bytes(frame)


def flow_frames(site: EdgeSite, size: int) -> list[bytes]:
    """One frame per flow, in flow order: the generator sends flow k mod 16 as its k-th frame."""
    return [flow_frame(site, flow, size) for flow in scenario.flows()]


def write_pcap(path: Path, frames: list[bytes]) -> Path:
    records = b"".join(struct.pack("<IIII", 0, 0, len(f), len(f)) + f for f in frames)
    path.write_bytes(PCAP_HEADER + records)
    return path
