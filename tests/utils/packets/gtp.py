"""GTP-U (TS 29.281): T-PDUs and the signalling messages, the header and the extension headers
built from raw bytes (see the package docstring)."""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from scapy.packet import Packet, Raw

from .common import (
    GTP_ECHO_REQUEST,
    GTP_END_MARKER,
    GTP_ERROR_INDICATION,
    GTP_EXT_PDCP_NUMBER,
    GTP_EXT_PDU_SESSION,
    GTP_EXT_RAN_CONTAINER,
    GTP_EXT_UDP_PORT,
    GTP_T_PDU,
    GTPU_PORT,
    Payload,
    _as_packet,
)


class GtpuHeaderBytes(Raw):
    """A GTP-U header (mandatory part and, when flagged, the 4 optional octets)."""

    name = "GTP-U header (raw)"


class GtpuExtBytes(Raw):
    """One GTP-U extension header, length octet to next-type octet."""

    name = "GTP-U extension header (raw)"

@dataclass(frozen=True)
class GtpExtension:
    """One GTP-U extension header: its type and the octets between its length and next-type octets.

    length_units overrides the computed length octet, to build malformed headers.
    """

    ext_type: int
    content: bytes
    length_units: int | None = None

    def encode(self, next_type: int) -> bytes:
        # The whole header (length octet + content + next-type octet) is a multiple of 4 octets;
        # padding sits before the next-type octet, which must stay last.
        padded = self.content + b"\0" * (-(len(self.content) + 2) % 4)
        units = (len(padded) + 2) // 4 if self.length_units is None else self.length_units
        return bytes([units]) + padded + bytes([next_type])


def gtp_ext_pdu_session(
    qfi: int, *, ul: bool = False, ppp: bool = False, rqi: bool = False, ppi: int = 0
) -> GtpExtension:
    """PDU Session Container (TS 38.415 5.5.2): UL or DL PDU SESSION INFORMATION.

    On the wire: length octet, PDU type << 4 (with QMP/SNP... flags, all 0 here), QFI octet (DL:
    PPP and RQI bits above the 6-bit QFI), optional octets and padding, next type. Without optional
    fields that is 4 octets (length 1); DL with PPP adds the PPI octet and grows to 8 (length 2).
    """
    if ul:
        return GtpExtension(GTP_EXT_PDU_SESSION, bytes([0x10, qfi & 0x3F]))
    qfi_octet = (0x80 if ppp else 0) | (0x40 if rqi else 0) | (qfi & 0x3F)
    content = bytes([0x00, qfi_octet]) + (bytes([ppi << 5]) if ppp else b"")
    return GtpExtension(GTP_EXT_PDU_SESSION, content)


def gtp_ext_udp_port(port: int) -> GtpExtension:
    return GtpExtension(GTP_EXT_UDP_PORT, struct.pack("!H", port))


def gtp_ext_pdcp_number(number: int) -> GtpExtension:
    return GtpExtension(GTP_EXT_PDCP_NUMBER, struct.pack("!H", number))


def gtp_ext_ran_container(data: bytes) -> GtpExtension:
    return GtpExtension(GTP_EXT_RAN_CONTAINER, data)


def gtp_ext_raw(ext_type: int, content: bytes, *, length_units: int | None = None) -> GtpExtension:
    return GtpExtension(ext_type, content, length_units)


def gtpu(
    teid: int,
    qfi: int | None = None,
    *,
    ul: bool = False,
    exts: Sequence[GtpExtension] = (),
    inner: Payload | None = None,
    msg_type: int = GTP_T_PDU,
    seq: int | None = None,
    npdu: int | None = None,
    version: int = 1,
    pt: int = 1,
    flags: int | None = None,
) -> Packet:
    """A GTP-U message (TS 29.281 section 5.1).

    qfi adds a PDU Session Container (UL when ul) before exts. E is set when there are
    extensions, S when seq is given, PN when npdu is given; any of them brings the 4 optional
    octets. flags overrides the whole first octet (version/PT/E/S/PN) for malformed headers.
    """
    chain = ((gtp_ext_pdu_session(qfi, ul=ul),) if qfi is not None else ()) + tuple(exts)
    first_octet = flags if flags is not None else _gtp_flags(version, pt, bool(chain), seq, npdu)
    # Each extension's last octet is the type of the one after it; 0 ends the chain.
    next_types = [ext.ext_type for ext in chain[1:]] + [0]
    encoded_exts = [ext.encode(next_type) for ext, next_type in zip(chain, next_types, strict=False)]
    optional = b""
    if first_octet & 0x07:
        first_type = chain[0].ext_type if chain else 0
        optional = struct.pack("!HBB", seq or 0, npdu or 0, first_type)
    payload = bytes(_as_packet(inner)) if inner is not None else b""
    # The length field counts everything after the mandatory 8 octets.
    length = len(optional) + sum(map(len, encoded_exts)) + len(payload)
    packet: Packet = GtpuHeaderBytes(
        load=struct.pack("!BBHI", first_octet, msg_type, length, teid) + optional
    )
    for encoded in encoded_exts:
        packet = packet / GtpuExtBytes(load=encoded)
    return packet / _as_packet(inner) if inner is not None else packet


def _gtp_flags(version: int, pt: int, has_exts: bool, seq: int | None, npdu: int | None) -> int:
    return version << 5 | pt << 4 | int(has_exts) << 2 | int(seq is not None) << 1 | int(npdu is not None)


def gtp_echo_request(seq: int = 1) -> Packet:
    """Echo Request: TEID 0, S set (TS 29.281 section 7.2.1)."""
    return gtpu(0, msg_type=GTP_ECHO_REQUEST, seq=seq)


def gtp_end_marker(teid: int) -> Packet:
    return gtpu(teid, msg_type=GTP_END_MARKER)


def gtp_error_indication(teid_data: int, peer: str, *, udp_port: int | None = GTPU_PORT) -> Packet:
    """Error Indication: TEID Data I and GTP-U Peer Address IEs, with the UDP Port extension."""
    peer_bytes = ipaddress.ip_address(peer).packed
    ies = struct.pack("!BI", 16, teid_data) + struct.pack("!BH", 133, len(peer_bytes)) + peer_bytes
    exts = (gtp_ext_udp_port(udp_port),) if udp_port is not None else ()
    return gtpu(0, msg_type=GTP_ERROR_INDICATION, seq=0, exts=exts, inner=ies)
