"""The FRER nodes of a FrerSite (netapp/testbed/frer_site.py) loaded and configured, the talker's
traffic and the listener's capture: dataplane/build/dpp_frer.bpf.o loaded once per node, its
programs attached natively, its maps written as the control plane will."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import select
import socket
import struct
import threading
import time
from ctypes import c_uint8, c_uint32
from dataclasses import dataclass, field
from typing import Iterator, Optional, Union

from bench.libbpf import BPF_F_LOCK, BpfObject, inner_map_set, map_lookup, map_update
from bench.throughput.sink import attach_native
from netapp.dataplane.handle import possible_cpus
from netapp.frer.abi import MAX_PORTS, Algo, CpuCounts, MemberKey, NullKey, Recovery, Stream
from netapp.dataplane.abi import MapType
from netapp.dataplane.facade import Dataplane
from netapp.frer.compiler import FrerTables, assign_groups, compile_streams
from netapp.frer.dataplane import FrerDataplane, ip_mask_slots
from netapp.frer.model import RecoveryConfig
from netapp.frer.models import FrerStream
from netapp.frer.slots import with_cpu_counts
from netapp.testbed import netns
from netapp.testbed.frer_site import FrerSite
from netapp.testbed.topology import Port

ETH_P_ALL = 0x0003
UDP, IPV4 = 17, 0x0800
VLAN_TPID = b"\x81\x00"
PAYLOAD = struct.Struct("!IQQ")  # stream, number the talker gave the frame, when it sent it (CLOCK_REALTIME, ns)
SO_TIMESTAMPNS = 35
SCM_TIMESTAMPNS = SO_TIMESTAMPNS


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


@dataclass(frozen=True)
class StreamSpec:
    """A protected stream: UDP from the talker to the listener to `dport`, identified on a by its
    destination MAC (null stream identification) when `dmac` is given, else by IP; on b by IP."""

    handle: int
    dport: int
    dscp: int = 0
    dmac: Optional[str] = None
    path2_vlan: int = 0  # the VLAN id its copies get on the second path (0: untagged, as sent)


def udp_frame(site: FrerSite, spec: StreamSpec, number: int, size: int = 128) -> bytes:
    payload = PAYLOAD.pack(spec.handle, number, time.time_ns())
    payload += bytes(size - 14 - 20 - 8 - len(payload))
    udp = struct.pack("!HHHH", 4000, spec.dport, 8 + len(payload), 0)
    total = 20 + len(udp) + len(payload)
    header = struct.pack("!BBHHHBBH4s4s", 0x45, spec.dscp << 2, total, 0, 0, 64, UDP, 0,
                         ipaddress.IPv4Address(site.t0.ip).packed, ipaddress.IPv4Address(site.l0.ip).packed)
    header = header[:10] + struct.pack("!H", ipv4_checksum(header)) + header[12:]
    eth = mac_bytes(spec.dmac or site.l0.mac) + mac_bytes(site.t0.mac) + struct.pack("!H", IPV4)
    return eth + header + udp + payload  # fmt: skip


def ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack("!10H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def null_key(mac: str, vlan: int = 0) -> NullKey:
    return NullKey(dmac=(c_uint8 * 6)(*mac_bytes(mac)), vlan=vlan)


def interface_index(name: str) -> Optional[int]:
    """The ifindex of `name` in the calling thread's namespace, None when there is none."""
    try:
        return socket.if_nametoindex(name)
    except OSError:
        return None


def identity(site: FrerSite, spec: StreamSpec, vlan: int, by_mac: bool) -> dict:
    if by_mac and spec.dmac:
        return {"null": {"destination_mac": spec.dmac, "vlan": vlan or None}}
    return {"ip": {"source": site.t0.ip, "destination": site.l0.ip, "protocol": "udp", "source_port": 4000,
                   "destination_port": spec.dport, "dscp": spec.dscp, "vlan": vlan or None}}  # fmt: skip


def talker_stream(site: FrerSite, spec: StreamSpec) -> FrerStream:
    """The stream as node a has it: identified by its destination MAC when it has one, else by IP;
    replicated to both paths, the second with the stream's VLAN id."""
    ports = [{"interface": site.a1.ifname}, {"interface": site.a2.ifname, "vlan": spec.path2_vlan or None}]
    return FrerStream.model_validate(
        {"handle": spec.handle, "identification": [identity(site, spec, 0, by_mac=True)], "generation": {"ports": ports}}
    )


def listener_stream(site: FrerSite, spec: StreamSpec, recovery: RecoveryConfig) -> FrerStream:
    """The stream as node b has it: identified by IP behind the R-tag, as it comes on either path;
    recovered with `recovery`'s parameters, popped, delivered to the listener."""
    return FrerStream.model_validate({
        "handle": spec.handle,
        "identification": [identity(site, spec, vlan, by_mac=False) for vlan in sorted({0, spec.path2_vlan})],
        "recovery": {
            "algorithm": "match" if recovery.algo == Algo.MATCH else "vector",
            "history_length": recovery.history_len,
            "reset_timeout_ms": recovery.reset_ns // 1_000_000,
            "deliver_interface": site.b0.ifname,
        },
    })  # fmt: skip


def read_recovery(obj: BpfObject, handle: int) -> Recovery:
    """Stream `handle`'s recovery slot in the loaded FRER object `obj`, read under its lock, with what
    its CPUs counted without the lock added."""
    slot, cpus = Recovery(), (CpuCounts * possible_cpus())()
    map_lookup(obj.map_fd("dpp_frer_recovery"), c_uint32(handle), slot, BPF_F_LOCK)
    map_lookup(obj.map_fd("dpp_frer_cpu_counts"), c_uint32(handle), cpus)
    return with_cpu_counts(slot, cpus)


class FrerNode:
    """dpp_frer.bpf.o on one node of the site."""

    def __init__(self, obj_path, site: FrerSite, host: str):  # noqa: ANN001
        self.site, self.ns = site, site.ns(host)
        self.obj = BpfObject(obj_path)
        self.maps = {name: self.obj.map_fd(name) for name in (
            "dpp_frer_recovery", "dpp_frer_streams", "dpp_frer_null", "dpp_frer_ip", "dpp_frer_ip_masks", "dpp_frer_members",
            "dpp_frer_tx")}  # fmt: skip

    def close(self) -> None:
        self.obj.close()

    def attach(self, program: str, port: Port) -> None:
        with netns.entered(self.ns):
            attach_native(socket.if_nametoindex(port.ifname), self.obj.program_fd(program))

    def ifindex(self, port: Port) -> int:
        return self.site.ifindex(port)

    def apply(self, streams: list[FrerStream]) -> FrerTables:
        """The streams compiled (interfaces resolved in this node's namespace) and written into the
        maps, as the control plane will."""
        with netns.entered(self.ns):
            tables = compile_streams(streams, interface_index)
        groups = assign_groups(tables, {}).assigned  # and the streams' tx_group
        egress = self.obj.program_fd("dpp_frer_egress")
        writes = [
            *(("dpp_frer_null", key, c_uint32(handle)) for key, handle in tables.null.values()),
            *(("dpp_frer_ip", key, c_uint32(handle)) for key, handle in tables.ip.values()),
            *(("dpp_frer_ip_masks", c_uint32(slot), mask) for slot, mask in enumerate(ip_mask_slots(tables))),
            *(("dpp_frer_streams", c_uint32(handle), value) for handle, value in tables.streams.items()),
            *(("dpp_frer_recovery", c_uint32(handle), value) for handle, value in tables.recovery.items()),
            *(("dpp_frer_members", MemberKey(*key), value) for key, value in tables.members.items()),
        ]  # fmt: skip
        with netns.entered(self.ns):  # dpp_frer_tx resolves its ifindexes in the caller's namespace
            for key, group in groups.items():  # the groups before the streams that name them
                inner_map_set(self.maps["dpp_frer_tx"], group, MapType.DEVMAP_HASH, MAX_PORTS,
                              [(c_uint32(ifindex), (c_uint32 * 2)(ifindex, egress if program else 0))
                               for ifindex, program in key], 4, 8)
            for name, key, value in writes:
                map_update(self.maps[name], key, value)
        return tables

    def stream(self, handle: int) -> Stream:
        value = Stream()
        map_lookup(self.maps["dpp_frer_streams"], c_uint32(handle), value)
        return value

    def recovery(self, handle: int) -> Recovery:
        return read_recovery(self.obj, handle)


class PipelineNode:
    """The NetApp's pipeline (dpp.bpf.c, an anonymous instance) on one node of the site: its FRER
    stage, written by netapp.frer.dataplane, does what FrerNode's programs do."""

    def __init__(self, site: FrerSite, host: str):
        self.site, self.ns = site, site.ns(host)
        with netns.entered(self.ns):
            self.dp = Dataplane.open()
        self.frer = FrerDataplane(self.dp)

    def close(self) -> None:
        self.dp.close()

    def attach(self, program: str, port: Port) -> None:
        """The pipeline's entry on `port`, whichever FRER node program `program` names."""
        with netns.entered(self.ns):
            self.dp.attach(port.ifname)

    def ifindex(self, port: Port) -> int:
        return self.site.ifindex(port)

    def apply(self, streams: list[FrerStream]) -> FrerTables:
        with netns.entered(self.ns):  # interfaces, and dpp_frer_tx's ifindexes, of this node
            tables = compile_streams(streams, interface_index)
            self.frer.install(tables)
        return tables

    def stream(self, handle: int) -> Stream:
        return self.dp.table("dpp_frer_streams").get(handle)

    def recovery(self, handle: int) -> Recovery:
        return self.frer.recovery_read([handle])[0]


def received_ns(ancillary: list[tuple[int, int, bytes]]) -> int:
    """The kernel's receive time of a frame (SO_TIMESTAMPNS), ns since the epoch."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS:
            seconds, nanoseconds = struct.unpack("qq", data[:16])
            return seconds * 10**9 + nanoseconds
    return time.time_ns()


@dataclass
class Capture:
    """What the listener receives on its port, in order: (stream, number) of every UDP frame, and
    each one's latency (the kernel's receive time less the talker's send time, ns)."""

    site: FrerSite
    frames: list[tuple[int, int]] = field(default_factory=list)
    latencies: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        with netns.entered(self.site.ns("listener")):
            self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._sock.setsockopt(socket.SOL_SOCKET, 33, 1 << 25)  # SO_RCVBUFFORCE: no drop under load
        self._sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self._sock.bind((self.site.l0.ifname, ETH_P_ALL))
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            if not select.select([self._sock], [], [], 0.05)[0]:
                continue
            frame, ancillary, _, _ = self._sock.recvmsg(65535, 64)
            if frame[12:14] == VLAN_TPID:
                frame = frame[:12] + frame[16:]  # a copy of the second path, as it came
            if len(frame) >= 42 + PAYLOAD.size and frame[12:14] == IPV4.to_bytes(2, "big") and frame[23] == UDP:
                stream, number, sent_ns = PAYLOAD.unpack_from(frame, 42)
                self.frames.append((stream, number))
                self.latencies.append(received_ns(ancillary) - sent_ns)

    def wait_for(self, count: int, timeout: float) -> bool:
        """Until `count` frames arrived (or the timeout)."""
        deadline = time.monotonic() + timeout
        while len(self.frames) < count and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a list another thread fills, with a deadline
        return len(self.frames) >= count

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


# The most a late talker sends back to back to catch up, in seconds of its schedule (50 frames at
# 10,000/s): a veth with an XDP program holds 256 frames, which it drains at the end of each send
# unless the CPU's ksoftirqd has the softirqs (a loaded machine).
CATCH_UP_S = 0.005


class Talker:
    """Frames of the streams, round robin, at `pps` from the talker's port, on one CPU (every hop of
    the site then runs on it, in the order sent)."""

    def __init__(self, site: FrerSite, specs: list[StreamSpec], cpu: int):
        self.site, self.specs, self.cpu = site, specs, cpu
        self.sent = {spec.handle: 0 for spec in specs}
        with netns.entered(site.ns("talker")):
            self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self._sock.bind((site.t0.ifname, 0))

    def send(self, frames: int, pps: float, during=None,  # noqa: ANN001
             catch_up_s: Optional[float] = CATCH_UP_S) -> None:
        """`frames` frames in all; `during(k)` is called before frame k (to cut or restore a path
        at a frame count rather than at a time). Late by more than `catch_up_s`, the schedule slips
        (the tests: no burst a stall owes); None, it never does (the latency bench: its rate kept,
        what a stall owes sent back to back)."""
        mine = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {self.cpu})
        try:
            start = time.monotonic()
            for k in range(frames):
                if during is not None:
                    during(k)
                ahead = start + k / pps - time.monotonic()
                if ahead > 0.001:
                    time.sleep(ahead)  # pacing: the sender keeps to its schedule, nothing waits on it
                elif catch_up_s is not None and ahead < -catch_up_s:  # late (a stall, `during`'s work):
                    start -= ahead + catch_up_s  # the schedule slips, what is owed no burst to fill a ring
                spec = self.specs[k % len(self.specs)]
                self._sock.send(udp_frame(self.site, spec, self.sent[spec.handle]))
                self.sent[spec.handle] += 1
        finally:
            os.sched_setaffinity(0, mine)

    def close(self) -> None:
        self._sock.close()


Node = Union[FrerNode, PipelineNode]


@contextlib.contextmanager
def protected_nodes(
    obj_path, streams: list[StreamSpec], recovery: RecoveryConfig  # noqa: ANN001
) -> Iterator[tuple[FrerSite, Node, Node]]:
    """A FrerSite whose nodes have the streams as talker_stream and listener_stream state them,
    compiled and written as the control plane does. The nodes run dpp_frer.bpf.o's programs at
    `obj_path`, or with obj_path None the NetApp's pipeline. Everything removed on exit."""
    site = FrerSite().build()
    nodes: list[Node] = []
    try:
        if obj_path is None:
            a, b = PipelineNode(site, "a"), PipelineNode(site, "b")
        else:
            a, b = FrerNode(obj_path, site, "a"), FrerNode(obj_path, site, "b")
        nodes += [a, b]
        a.apply([talker_stream(site, spec) for spec in streams])
        b.apply([listener_stream(site, spec, recovery) for spec in streams])
        a.attach("dpp_frer_talker", site.a0)
        for port in (site.b1, site.b2):
            b.attach("dpp_frer_listener", port)
        yield site, a, b
    finally:
        for node in nodes:
            node.close()
        site.destroy()


@contextlib.contextmanager
def protected_site(
    obj_path, streams: list[StreamSpec], recovery: RecoveryConfig, cpu: int  # noqa: ANN001
) -> Iterator[tuple[FrerSite, Node, Node, Talker, Capture]]:
    """protected_nodes' site with the Python talker (pinned to `cpu`) and the listener's capture."""
    with protected_nodes(obj_path, streams, recovery) as (site, a, b):
        capture = Capture(site)
        talker = Talker(site, streams, cpu)
        try:
            yield site, a, b, talker, capture
        finally:
            talker.close()
            capture.close()
