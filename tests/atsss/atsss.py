"""The ATSSS downlink in the kernel, alone: dataplane/build/xdp_atsss.bpf.o loaded with libbpf,
sessions and paths written into its maps as the control plane will, UE packets run through
xdp_atsss (BPF_PROG_TEST_RUN).

The expected frames are built here from the field layouts of RFC 4340 (5.1 generic header with
X=1, 5.2 DCCP-Data, 5.8 options, 9.1 checksum) and of the MP_SEQ option of Multipath DCCP
(draft-ietf-tsvwg-multipath-dccp / RFC 9897: type 46, length 9, MP_OPT 4, a 48-bit number), not
from the C: scapy has no DCCP layer."""

from __future__ import annotations

import ipaddress
import struct
from ctypes import c_uint32, c_uint64
from dataclasses import dataclass
from typing import Any, Callable, Optional

from bench.packets import internet_checksum
from bench.libbpf import BPF_F_LOCK, BpfObject, map_delete, map_lookup, map_update, test_run
from netapp.atsss.abi import (MAX_SESSIONS, Access, Config, Mode, Path, PathFlags, PathRx, PathStats, Session,
                              SessionKey, Uplink, UplinkKey, UplinkReason)  # fmt: skip
from netapp.atsss.head4 import set_head4
from netapp.atsss.index import BUCKET_TYPES, Bucket, bucket_of, put_at_once, way_holding
from netapp.dataplane.handle import possible_cpus
from tests.utils.kernel import build_artifact, require_kernel

XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = 0, 1, 2, 3, 4
ROOM = 256  # output bytes beyond the input: the pushed headers


@dataclass(frozen=True)
class PathSpec:
    """One access path as the control plane states it."""

    local: str
    peer: str
    sport: int = 5001
    dport: int = 5002
    access: Access = Access.THREE_GPP
    smac: bytes = bytes.fromhex("02000000aa01")
    dmac: bytes = bytes.fromhex("02000000bb01")
    up: bool = True
    rtt_us: int = 0

    @property
    def family(self) -> int:
        return ipaddress.ip_address(self.local).version


def addr_words(address: str) -> tuple[int, int, int, int]:
    """An address as the four 32-bit words of the ABI (network order in memory), IPv4 in the first."""
    packed = ipaddress.ip_address(address).packed.ljust(16, b"\0")
    return struct.unpack("=4I", packed)


def port_be(port: int) -> int:
    """A port as the ABI holds it (network order in memory), read as a host-order number."""
    return int.from_bytes(port.to_bytes(2, "big"), "little")


def uplink_key(spec: PathSpec) -> UplinkKey:
    """The path's uplink packets as they arrive: from the UE's address and port to ours."""
    key = UplinkKey(family=spec.family, sport=port_be(spec.dport), dport=port_be(spec.sport))
    key.peer[:] = addr_words(spec.peer)
    key.local[:] = addr_words(spec.local)
    return key


def session_key(ue: str) -> SessionKey:
    key = SessionKey(family=ipaddress.ip_address(ue).version)
    key.addr[:] = addr_words(ue)
    return key


def path_value(spec: PathSpec, dccp_seq: int = 0) -> Path:
    value = Path(dccp_seq=dccp_seq, access=spec.access, family=spec.family,
                 flags=PathFlags.UP if spec.up else 0, rtt_us=spec.rtt_us,
                 sport=port_be(spec.sport), dport=port_be(spec.dport))  # fmt: skip
    value.smac[:] = spec.smac
    value.dmac[:] = spec.dmac
    value.local[:] = addr_words(spec.local)
    value.peer[:] = addr_words(spec.peer)
    set_head4(value)
    return value


def mac(raw: bytes) -> str:
    return ":".join(f"{byte:02x}" for byte in raw)


def path_body(spec: PathSpec, **overrides: Any) -> dict[str, Any]:
    """The path as a session's body (REST, AtsssSessionSpec) states it."""
    return {"access": "3GPP" if spec.access == Access.THREE_GPP else "non-3GPP", "local": spec.local,
            "peer": spec.peer, "local_port": spec.sport, "peer_port": spec.dport, "source_mac": mac(spec.smac),
            "next_hop_mac": mac(spec.dmac), **overrides}


class AtsssProgram:
    """xdp_atsss.bpf.o, loaded; closed with the object."""

    def __init__(self) -> None:
        require_kernel()
        self.obj = BpfObject(build_artifact("xdp_atsss.bpf.o"))
        self.prog = self.obj.program_fd("xdp_atsss")
        self.sessions = self.obj.map_fd("dpp_atsss_sessions")
        self.slots = self.obj.map_fd("dpp_atsss_slots")
        self.index = {4: self.obj.map_fd("dpp_atsss_index4"), 6: self.obj.map_fd("dpp_atsss_index6")}
        self._next_slot = 0
        self._session_slots: dict[str, list[int]] = {}  # UE -> the path slots of the session added
        self.paths = self.obj.map_fd("dpp_atsss_paths")
        self.stats = self.obj.map_fd("dpp_atsss_path_stats")
        self.uplink = self.obj.map_fd("dpp_atsss_uplink")
        self.rx = self.obj.map_fd("dpp_atsss_path_rx")
        self.uplink_stats = self.obj.map_fd("dpp_atsss_uplink_stats")
        self.config = self.obj.map_fd("dpp_atsss_config")
        self.acks = self.obj.map_fd("dpp_atsss_acks")

    def close(self) -> None:
        self.obj.close()

    def add_path(self, slot: int, spec: PathSpec, dccp_seq: int = 0, ue: Optional[str] = None) -> None:
        """The path in its slot, its counters and heard state zeroed; with `ue`, its uplink too (the
        packets from the path's peer, carrying the UE's packets)."""
        map_update(self.paths, c_uint32(slot), path_value(spec, dccp_seq))
        map_update(self.stats, c_uint32(slot), (PathStats * possible_cpus())())
        map_update(self.rx, c_uint32(slot), PathRx())
        if ue is not None:
            value = Uplink(path=slot, family=ipaddress.ip_address(ue).version)
            value.ue[:] = addr_words(ue)
            map_update(self.uplink, uplink_key(spec), value)

    def delete_uplink(self, spec: PathSpec) -> None:
        map_delete(self.uplink, uplink_key(spec))

    def path_rx(self, slot: int) -> PathRx:
        value = PathRx()
        map_lookup(self.rx, c_uint32(slot), value)
        return value

    def received(self, slot: int) -> tuple[int, int, int]:
        """(UE packets, their bytes, Acks) the path received, summed over the CPUs."""
        values = (PathStats * possible_cpus())()
        map_lookup(self.stats, c_uint32(slot), values)
        return sum(v.rx_packets for v in values), sum(v.rx_bytes for v in values), sum(v.rx_acks for v in values)

    def uplink_counts(self) -> dict[UplinkReason, int]:
        """The uplink's counters by reason, summed over the CPUs."""
        counts = {}
        for reason in UplinkReason:
            values = (c_uint64 * possible_cpus())()
            map_lookup(self.uplink_stats, c_uint32(reason), values)
            counts[reason] = sum(values)
        return counts

    def set_config(self, flags: int = 0, ack_ratio: int = 0) -> None:
        map_update(self.config, c_uint32(0), Config(flags=flags, ack_ratio=ack_ratio))

    def set_up(self, slot: int, up: bool) -> None:
        """The path reported up or down, the rest of it (its sequence number) kept; so is the mask of
        the paths up of each session added that names it (as the control plane keeps it)."""
        value = self.path(slot)
        value.flags = (value.flags | PathFlags.UP) if up else (value.flags & ~PathFlags.UP)
        map_update(self.paths, c_uint32(slot), value)
        for ue, slots in self._session_slots.items():
            if slot in slots:
                self._rewrite_session(ue, lambda session: setattr(session, "up", self._up_mask(slots)))

    def _up_mask(self, slots: list[int]) -> int:
        """The positions of `slots` whose path is up, as bits (struct dpp_atsss_session.up)."""
        return sum(1 << position for position, slot in enumerate(slots) if self.path(slot).flags & PathFlags.UP)

    def _rewrite_session(self, ue: str, change: Callable[[Session], None]) -> None:
        """The UE's session read, changed and written back where it is (no packet runs meanwhile)."""
        key = session_key(ue)
        way = way_holding(self.bucket(key), key)
        fd, where = (self.slots, c_uint32(self.bucket(key).slot[way])) if way is not None else (self.sessions, key)
        value = Session()
        map_lookup(fd, where, value)
        change(value)
        map_update(fd, where, value)

    def set_congested(self, slot: int, congested: bool) -> None:
        """The path reported congested or no longer, the rest of it kept."""
        value = self.path(slot)
        flag = PathFlags.CONGESTED
        value.flags = (value.flags | flag) if congested else (value.flags & ~flag)
        map_update(self.paths, c_uint32(slot), value)

    def set_rtt(self, slot: int, rtt_us: int) -> None:
        """The path's RTT as the control plane feeds it, the rest of it kept."""
        value = self.path(slot)
        value.rtt_us = rtt_us
        map_update(self.paths, c_uint32(slot), value)

    def path(self, slot: int) -> Path:
        value = Path()
        map_lookup(self.paths, c_uint32(slot), value)
        return value

    def add_session(self, ue: str, mode: Mode, slots: list[int], weights: Optional[list[int]] = None,
                    mp_seq: int = 0, priorities: Optional[list[int]] = None, flags: int = 0) -> None:
        value = Session(mode=mode, n_paths=len(slots), mp_seq=mp_seq, flags=flags, up=self._up_mask(slots))
        self._session_slots[ue] = list(slots)
        value.path[: len(slots)] = slots
        value.weight[: len(slots)] = weights or [1] * len(slots)
        value.priority[: len(slots)] = priorities or [0] * len(slots)
        self.put_session(session_key(ue), value)

    def put_session(self, key: SessionKey, value: Session, hashed: bool = False) -> None:
        """The session in the next slot, led to by a way of its bucket of the index (as the control
        plane writes it, at once: no packet runs meanwhile), or in dpp_atsss_sessions when the
        bucket is full or `hashed` (a session whose bucket was full)."""
        bucket = self.bucket(key)
        self._next_slot = self._next_slot % (MAX_SESSIONS - 1) + 1
        if not hashed and put_at_once(bucket, key, self._next_slot):
            map_update(self.slots, c_uint32(self._next_slot), value)
            map_update(self.index[key.family], c_uint32(bucket_of(key)), bucket)
        else:
            map_update(self.sessions, key, value)

    def bucket(self, key: SessionKey) -> Bucket:
        """The key's bucket of the index as the map holds it."""
        value = BUCKET_TYPES[key.family]()
        map_lookup(self.index[key.family], c_uint32(bucket_of(key)), value)
        return value

    def delete_session(self, ue: str) -> None:
        self._session_slots.pop(ue, None)
        key = session_key(ue)
        bucket = self.bucket(key)
        way = way_holding(bucket, key)
        if way is None:
            map_delete(self.sessions, key)
            return
        bucket.live &= ~(1 << way)
        map_update(self.index[key.family], c_uint32(bucket_of(key)), bucket)

    def session(self, ue: str) -> Optional[Session]:
        """The UE's session, where the data path finds it (the index first), read under its lock."""
        key, value = session_key(ue), Session()
        bucket = self.bucket(key)
        way = way_holding(bucket, key)
        if way is not None:
            return value if map_lookup(self.slots, c_uint32(bucket.slot[way]), value, BPF_F_LOCK) else None
        return value if map_lookup(self.sessions, key, value, BPF_F_LOCK) else None

    def sent(self, slot: int) -> tuple[int, int]:
        """(packets, bytes) the path sent: its entry's counters."""
        value = Path()
        map_lookup(self.paths, c_uint32(slot), value)
        return value.packets, value.bytes

    def run(self, frame: bytes) -> tuple[int, bytes]:
        result = test_run(self.prog, frame, 1, out_size=len(frame) + ROOM)
        return result.retval, result.data


# --- frames, from the protocols' field layouts ----------------------------------------------------

ETH_IP, ETH_IPV6 = 0x0800, 0x86DD
IN_MACS = bytes.fromhex("020000000002" "020000000001")


def ue_packet(ue: str, payload: bytes = b"downlink data", src: Optional[str] = None) -> bytes:
    """A UDP datagram to the UE (checksum 0 over IPv4, left unchecked here: only carried)."""
    udp = struct.pack("!HHHH", 443, 40000, 8 + len(payload), 0) + payload
    if ipaddress.ip_address(ue).version == 4:
        src4 = ipaddress.ip_address(src or "198.51.100.7").packed
        head = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 63, 17, 0, src4,
                           ipaddress.ip_address(ue).packed)
        return head[:10] + struct.pack("!H", internet_checksum(head)) + head[12:] + udp
    src6 = ipaddress.ip_address(src or "2001:db8:dd::7").packed
    return struct.pack("!IHBB16s16s", 6 << 28, len(udp), 17, 63, src6, ipaddress.ip_address(ue).packed) + udp


def ethernet(packet: bytes, padding: int = 0) -> bytes:
    ethertype = ETH_IP if packet[0] >> 4 == 4 else ETH_IPV6
    return IN_MACS + struct.pack("!H", ethertype) + packet + bytes(padding)


def dccp_data(spec: PathSpec, seq: int, mp_seq: int, payload: bytes, cscov: int = 0) -> bytes:
    """A DCCP-Data packet, checksum 0: the generic header with X=1 (RFC 4340 5.1; CCVal 0, the
    checksum coverage cscov), MP_SEQ (type 46, length 9, MP_OPT 4, 48-bit number) and Padding
    (type 0) to a 4-byte boundary."""
    options = bytes([46, 9, 4]) + mp_seq.to_bytes(6, "big")
    options += bytes(-len(options) % 4)
    doff = (16 + len(options)) // 4
    res_type_x = (2 << 1) | 1  # Res 0, Type 2 (DCCP-Data), X 1
    header = struct.pack("!HHBBHBBH", spec.sport, spec.dport, doff, cscov, 0, res_type_x, 0, seq >> 32)
    header += struct.pack("!I", seq & 0xFFFFFFFF)
    return header + options + payload


def expected_frame(spec: PathSpec, seq: int, mp_seq: int, inner: bytes, cscov: int = 0) -> bytes:
    """The frame the downlink must send on `spec` for the UE packet `inner`; its DCCP checksum over
    the whole packet (cscov 0), or over the header and options and the first (cscov - 1) * 4 bytes
    of `inner` (RFC 4340 9.2; the pseudo-header's length is the whole packet's either way)."""
    dccp = dccp_data(spec, seq, mp_seq, inner, cscov)
    covered = dccp if cscov == 0 else dccp[: len(dccp) - len(inner) + (cscov - 1) * 4]
    local, peer = ipaddress.ip_address(spec.local).packed, ipaddress.ip_address(spec.peer).packed
    if spec.family == 4:
        pseudo = local + peer + struct.pack("!BBH", 0, 33, len(dccp))
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(dccp), 0, 0x4000, 64, 33, 0, local, peer)
        ip = ip[:10] + struct.pack("!H", internet_checksum(ip)) + ip[12:]
        ethertype = ETH_IP
    else:
        pseudo = local + peer + struct.pack("!I3xB", len(dccp), 33)
        ip = struct.pack("!IHBB16s16s", 6 << 28, len(dccp), 33, 64, local, peer)
        ethertype = ETH_IPV6
    dccp = dccp[:6] + struct.pack("!H", internet_checksum(pseudo + covered)) + dccp[8:]
    return spec.dmac + spec.smac + struct.pack("!H", ethertype) + ip + dccp


@dataclass(frozen=True)
class Decoded:
    """What this test's own decoder reads from an emitted frame."""

    family: int
    src: str
    dst: str
    sport: int
    dport: int
    seq: int
    mp_seq: int
    inner: bytes


def decode(frame: bytes) -> Decoded:
    """Read a frame the downlink sent, by the same layouts; fails on anything else."""
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    if ethertype == ETH_IP:
        ihl = (frame[14] & 0x0F) * 4
        assert frame[14 + 9] == 33, "not DCCP"
        src, dst = (str(ipaddress.ip_address(frame[26 + 4 * i : 30 + 4 * i])) for i in range(2))
        family, l4 = 4, 14 + ihl
    else:
        assert ethertype == ETH_IPV6 and frame[14 + 6] == 33, "not DCCP over IPv6"
        src, dst = (str(ipaddress.ip_address(frame[22 + 16 * i : 38 + 16 * i])) for i in range(2))
        family, l4 = 6, 54
    sport, dport, doff, _, _, res_type_x, _, seq_high, seq_low = struct.unpack_from("!HHBBHBBHI", frame, l4)
    assert res_type_x == (2 << 1) | 1, f"not DCCP-Data with X=1: {res_type_x:#x}"
    options = frame[l4 + 16 : l4 + doff * 4]
    assert options[:3] == bytes([46, 9, 4]), f"no MP_SEQ first: {options.hex()}"
    assert set(options[9:]) <= {0}, f"not Padding after MP_SEQ: {options.hex()}"
    return Decoded(family, src, dst, sport, dport, (seq_high << 32) | seq_low,
                   int.from_bytes(options[3:9], "big"), frame[l4 + doff * 4 :])  # fmt: skip


def delete_every_session(service: Any, admin: Any) -> None:
    """Every tenant's sessions out of `service` (netapp.atsss.service.Atsss), as `admin`: a module's
    program starts the next test empty."""
    for session in service.list_sessions(admin):
        service.delete_session(admin, f"{session.tenant}/{session.name}")
