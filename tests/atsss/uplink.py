"""Uplink frames for the ATSSS tests, built from RFC 4340's layouts (5.1 generic header, 5.3 the
Acknowledgement Number Subheader, 5.8 options, 9.1 checksum and 9.2 its coverage, 11.4 Ack Vector) and the MP_SEQ
option of Multipath DCCP, not from the C."""

from __future__ import annotations

import ipaddress
import struct
from typing import Optional

from bench.packets import internet_checksum
from tests.atsss.atsss import ETH_IP, ETH_IPV6, PathSpec

DATA, ACK, DATAACK = 2, 3, 4
RECEIVED, ECN_MARKED, RESERVED, NOT_RECEIVED = 0, 1, 2, 3  # Ack Vector states (RFC 4340 11.4)
SEQ48 = 1 << 48
UE_SIDE_MAC = bytes.fromhex("02000000cc01")  # the UE side's next hop, the uplink frames' source
OUR_MAC = bytes.fromhex("02000000dd01")


def mp_seq_option(number: int) -> bytes:
    """Multipath option (46), length 9, MP_OPT MP_SEQ (4), a 48-bit number."""
    return bytes([46, 9, 4]) + number.to_bytes(6, "big")


def ack_vector(ack: int, states: dict[int, int], span: int, option: int = 38) -> bytes:
    """An Ack Vector option reporting the `span` numbers from `ack` down: each number's state as
    `states` says (absent: not received), runs of one state of at most 64 numbers a byte."""
    runs: list[list[int]] = []
    for k in range(span):
        state = states.get((ack - k) % SEQ48, NOT_RECEIVED)
        if runs and runs[-1][0] == state and runs[-1][1] < 63:
            runs[-1][1] += 1
        else:
            runs.append([state, 0])
    body = bytes(state << 6 | run for state, run in runs)
    assert len(body) <= 253, "one option holds 253 state bytes"
    return bytes([option, 2 + len(body)]) + body


def dccp_header(sport: int, dport: int, kind: int, seq: int, ack: Optional[int] = None, options: bytes = b"",
                cscov: int = 0, x: int = 1, doff: Optional[int] = None) -> bytes:
    """The generic header (X=1: 48-bit numbers), the ack subheader when `ack` is given, the
    options padded to 4 bytes; checksum 0."""
    options += bytes(-len(options) % 4)
    sub = b"" if ack is None else struct.pack("!HHI", 0, ack >> 32, ack & 0xFFFFFFFF)
    length = 16 + len(sub) + len(options)
    header = struct.pack("!HHBBHBBHI", sport, dport, length // 4 if doff is None else doff, cscov, 0,
                         (kind << 1) | x, 0, seq >> 32, seq & 0xFFFFFFFF)  # fmt: skip
    return header + sub + options


def checksummed(src: str, dst: str, dccp: bytes, covered: Optional[int] = None) -> bytes:
    """The DCCP packet with its checksum: over the pseudo-header (addresses, the whole length,
    protocol 33) and the first `covered` bytes (all by default)."""
    a, b = ipaddress.ip_address(src).packed, ipaddress.ip_address(dst).packed
    if len(a) == 4:
        pseudo = a + b + struct.pack("!BBH", 0, 33, len(dccp))
    else:
        pseudo = a + b + struct.pack("!I3xB", len(dccp), 33)
    body = dccp if covered is None else dccp[:covered]
    return dccp[:6] + struct.pack("!H", internet_checksum(pseudo + body)) + dccp[8:]


def ip_frame(src: str, dst: str, dccp: bytes, src_mac: bytes, dst_mac: bytes, padding: int = 0) -> bytes:
    """Ethernet / IPv4 or IPv6 (protocol 33) around a DCCP packet."""
    a, b = ipaddress.ip_address(src).packed, ipaddress.ip_address(dst).packed
    if len(a) == 4:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(dccp), 0, 0x4000, 64, 33, 0, a, b)
        ip = ip[:10] + struct.pack("!H", internet_checksum(ip)) + ip[12:]
        ethertype = ETH_IP
    else:
        ip = struct.pack("!IHBB16s16s", 6 << 28, len(dccp), 33, 64, a, b)
        ethertype = ETH_IPV6
    return dst_mac + src_mac + struct.pack("!H", ethertype) + ip + dccp + bytes(padding)


def uplink_frame(spec: PathSpec, inner: bytes, seq: int, kind: int = DATA, ack: Optional[int] = None,
                 options: Optional[bytes] = None, padding: int = 0) -> bytes:
    """What the UE sends on the path: from its address and port (the path's peer and dport) to ours,
    MP_SEQ first among the options unless `options` says otherwise; checksum correct."""
    opts = mp_seq_option((seq + 1000) % (1 << 48)) if options is None else options
    dccp = dccp_header(spec.dport, spec.sport, kind, seq, ack, opts) + inner
    return ip_frame(spec.peer, spec.local, checksummed(spec.peer, spec.local, dccp), UE_SIDE_MAC, OUR_MAC, padding)


def decapsulated(inner: bytes) -> bytes:
    """The frame the uplink must leave: the incoming link header, the UE packet's EtherType."""
    ethertype = ETH_IP if inner[0] >> 4 == 4 else ETH_IPV6
    return OUR_MAC + UE_SIDE_MAC + struct.pack("!H", ethertype) + inner


def expected_ack(spec: PathSpec, seq: int, ack: int) -> bytes:
    """The proxy's DCCP-Ack on the path: from our address and port back to the UE's, our sequence
    number on the path, acknowledging `ack`; no options; the frame's addresses swapped."""
    dccp = dccp_header(spec.sport, spec.dport, ACK, seq, ack)
    return ip_frame(spec.local, spec.peer, checksummed(spec.local, spec.peer, dccp), OUR_MAC, UE_SIDE_MAC)
