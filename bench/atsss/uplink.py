"""The uplink's cases of bench.atsss: a 128-byte MP-DCCP Data frame from a UE (outer IPv4 from the
UE's address on its access, DCCP-Data with MP_SEQ, the UE's IPv4 packet) checked, its path found,
the path's state moved, decapsulated; with no Ack owed, and with an Ack for every Data packet built
into the ring (dpp_atsss_acks). Among 10,000 sessions every repetition is another UE: the walk
writes the outer source (the UE's address on the access, which finds the path) and the UE packet's
source, and keeps the DCCP checksum right (bench/bpf/harness.bpf.c, csum_off).

The UE's DCCP-Acks on one path (ack_frame): without an Ack Vector, with a short one and a long one
(RFC 4340 11.4), which the loss estimate reads (nf/atsss/loss.h). Every repetition is the path's
next Ack (AckWalk): its acknowledgement number `step` past the previous one, so each judges `step`
numbers, as a UE Acking every `step` packets; a repeated Ack would judge none and measure only the
loss code's early return."""

from __future__ import annotations

import ipaddress
import struct
from ctypes import c_uint32
from dataclasses import dataclass

from bench.atsss.ring import AckRing
from bench.harness import Walk
from bench.libbpf import BpfObject, map_lookup, map_update
from bench.packets import internet_checksum
from netapp.atsss.abi import Config, PathRx, Uplink, UplinkKey

FRAME = 128
LOCAL = ipaddress.IPv4Address("10.0.0.1")
FIRST_PEER = ipaddress.IPv4Address("10.200.0.0")
UE_PORT, OUR_PORT = 6002, 6001
OPTIONS = bytes([46, 9, 4]) + (7).to_bytes(6, "big") + bytes(3)  # MP_SEQ, Padding
PEER_AT = 14 + 12  # the outer IPv4 source
DCCP_AT = 14 + 20
CHECK_AT = DCCP_AT + 6
UE_AT = DCCP_AT + 16 + len(OPTIONS) + 12  # the UE packet's IPv4 source
NEVER = 0xFFFFFFFF  # an Ack ratio no benchmark reaches
RING_CHUNK = 2000  # repetitions between drains: the ring holds some 2,500 Acks


def le32(address: ipaddress.IPv4Address) -> int:
    """An IPv4 address as the ABI's __be32 word, read as a host-order number."""
    return int.from_bytes(address.packed, "little")


def data_frame(ue: ipaddress.IPv4Address) -> bytes:
    """Ethernet / IPv4 (FIRST_PEER -> LOCAL, protocol 33) / DCCP-Data (X=1, MP_SEQ) / the UE's IPv4
    UDP packet, FRAME bytes, the DCCP checksum right."""
    inner_len = FRAME - DCCP_AT - 16 - len(OPTIONS)
    udp = struct.pack("!HHHH", 40000, 443, inner_len - 20, 0) + bytes(inner_len - 28)
    inner = struct.pack("!BBHHHBBH4s4s", 0x45, 0, inner_len, 0, 0, 64, 17, 0, ue.packed, bytes([198, 51, 100, 7]))
    inner = inner[:10] + struct.pack("!H", internet_checksum(inner)) + inner[12:] + udp
    dccp = struct.pack("!HHBBHBBHI", UE_PORT, OUR_PORT, (16 + len(OPTIONS)) // 4, 0, 0, (2 << 1) | 1, 0, 0, 42)
    return framed(dccp + OPTIONS + inner)


def framed(dccp: bytes) -> bytes:
    """Ethernet / IPv4 (FIRST_PEER -> LOCAL, protocol 33) around a DCCP packet, its checksum made."""
    pseudo = FIRST_PEER.packed + LOCAL.packed + struct.pack("!BBH", 0, 33, len(dccp))
    dccp = dccp[:6] + struct.pack("!H", internet_checksum(pseudo + dccp)) + dccp[8:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(dccp), 0, 0x4000, 64, 33, 0, FIRST_PEER.packed, LOCAL.packed)
    ip = ip[:10] + struct.pack("!H", internet_checksum(ip)) + ip[12:]
    return bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + dccp


ACK, VECTOR0 = 3, 38  # the DCCP-Ack type; Ack Vector [Nonce 0]
RECEIVED, NOT_RECEIVED = 0x00, 0xC0  # a state byte's top bits; its low 6: the run less one
ACK_SEQ_AT = DCCP_AT + 12  # the low word of the Ack's own sequence number
ACK_NUMBER_AT = DCCP_AT + 16 + 4  # the low word of its acknowledgement number
FIRST_ACK = 1000
NUMBERS = (1 << 31) - 1  # the walk's length: a prime, so any step walks it in order


def short_vector() -> bytes:
    """One state byte: the 64 numbers up to the acknowledged one received."""
    return bytes([VECTOR0, 3, RECEIVED | 63])


def long_vector() -> bytes:
    """The 64 state bytes the loss estimate reads (DPP_ATSSS_ACK_VECTOR_MAX), one number each,
    received and not in turn: a UE that lost every other packet."""
    return bytes([VECTOR0, 66]) + bytes(NOT_RECEIVED if k % 2 else RECEIVED for k in range(64))


def ack_frame(options: bytes) -> bytes:
    """Ethernet / IPv4 (FIRST_PEER -> LOCAL, protocol 33) / DCCP-Ack (X=1: the acknowledgement
    subheader, `options` padded to 4 bytes), the DCCP checksum right; numbers 0 (the walk's)."""
    options += bytes(-len(options) % 4)
    dccp = struct.pack("!HHBBHBBHIHHI", UE_PORT, OUR_PORT, (24 + len(options)) // 4, 0, 0, (ACK << 1) | 1, 0, 0, 0,
                       0, 0, 0)  # fmt: skip
    return framed(dccp + options)


@dataclass(frozen=True)
class AckWalk(Walk):
    """Session 0's first path's Acks in order: repetition r acknowledges FIRST_ACK + r * step (its
    own sequence number goes on alike), the DCCP checksum kept right."""

    step: int = 2

    @property
    def stride(self) -> int:
        return self.step


def ack_walk(step: int) -> AckWalk:
    return AckWalk(NUMBERS, teid_base=FIRST_ACK, src_base=FIRST_ACK, teid_off=ACK_NUMBER_AT, src_off=ACK_SEQ_AT,
                   csum_off=CHECK_AT, step=step)  # fmt: skip


def restart_loss(obj: BpfObject) -> None:
    """Session 0's first path's loss estimate (and what it heard) zeroed: its next Ack only marks."""
    map_update(obj.map_fd("dpp_atsss_path_rx"), c_uint32(1), PathRx())


def judged(obj: BpfObject) -> int:
    """The numbers session 0's first path's loss estimate counted, delivered or lost."""
    rx = PathRx()
    map_lookup(obj.map_fd("dpp_atsss_path_rx"), c_uint32(1), rx)
    return rx.delivered + rx.lost


def walk(sessions: int, first_ue: ipaddress.IPv4Address) -> Walk:
    """Session i: its UE's address on the access FIRST_PEER + i, its UE first_ue + i."""
    return Walk(sessions, teid_base=int(first_ue), src_base=int(FIRST_PEER), teid_off=UE_AT, src_off=PEER_AT,
                csum_off=CHECK_AT)  # fmt: skip


def install(obj: BpfObject, sessions: int, first_ue: ipaddress.IPv4Address) -> None:
    """Session i's first path (slot 2i + 1) found by its uplink packets."""
    uplink_fd = obj.map_fd("dpp_atsss_uplink")
    for i in range(sessions):
        key = UplinkKey(family=4, sport=int.from_bytes(UE_PORT.to_bytes(2, "big"), "little"),
                        dport=int.from_bytes(OUR_PORT.to_bytes(2, "big"), "little"))  # fmt: skip
        key.peer[0] = le32(FIRST_PEER + i)
        key.local[0] = le32(LOCAL)
        value = Uplink(path=2 * i + 1, family=4)
        value.ue[0] = le32(first_ue + i)
        map_update(uplink_fd, key, value)


def set_ack_ratio(obj: BpfObject, ratio: int) -> None:
    map_update(obj.map_fd("dpp_atsss_config"), c_uint32(0), Config(ack_ratio=ratio))


def drained_runs(run, ring: AckRing, repeat: int) -> int:  # noqa: ANN001 (run: repeat -> ns)
    """`repeat` repetitions in chunks the ring can hold, drained between (as its sender would): the
    mean of the chunks' per-repetition times."""
    chunks = max(1, repeat // RING_CHUNK)
    total = 0
    for _ in range(chunks):
        total += run(RING_CHUNK)
        ring.drain()
    return total // chunks
