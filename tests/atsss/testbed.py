"""ATSSS end to end on an AtsssSite (netapp/testbed/atsss_site.py): the NetApp's pipeline on the
node with sessions written by its ATSSS service, a sender in the data network and an MP-DCCP
receiver in the UE.

The sender sends a transfer as numbered UDP datagrams to the UE's own address; the node puts each
into MP-DCCP on a path. The receiver, a raw IP socket of protocol 33 in the UE's namespace (the
kernel has no DCCP: only raw sockets see it), reads every packet of either access with the tests'
own decoder of the draft's layout (tests/atsss/atsss.py decode), keeps the first copy of each MP_SEQ
number, puts them back in MP_SEQ order and checks that what it delivers in that order is the
transfer, datagram after datagram, byte for byte. The sender keeps at most `window` datagrams
beyond what the receiver delivered in flight (flow control, not pacing): no queue of the site can
overflow, so a loss-free run loses nothing however slow the machine is.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from ctypes import c_uint32, c_uint64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from bench.libbpf import BpfObject, map_lookup, map_update
from bench.throughput.sink import attach_native
from netapp.atsss.models import AtsssSessionPatch, AtsssSessionSpec
from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps
from netapp.dataplane.facade import Dataplane
from netapp.service.contract import Principal, Scope
from netapp.service.store import Store
from netapp.testbed import netns
from netapp.testbed.atsss_site import UE_ADDRESS, AtsssSite
from tests.atsss.atsss import decode
from tests.utils.kernel import build_artifact

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
IPPROTO_DCCP = 33
UE_PORT = 9000
HEADER = struct.Struct("!Q")  # a datagram's number in the transfer, before its share of the bytes
STALL_S = 30.0  # no progress for this long: the transfer failed (a bound for a report, not a pace)
REPO = Path(__file__).resolve().parents[2]
PATH_PORTS = {"p1": (5001, 5002), "p2": (6001, 6002)}  # DCCP ports of each path's subflow


def path_body(site: AtsssSite, path: str, **fields: object) -> dict:
    """`path` as a session states it: from the node's address to the UE's port on that access, by
    the router (the next hop of both); a redundant session's copies of p1 leave by n0, of p2 by n1."""
    local_port, peer_port = PATH_PORTS[path]
    port = site.n0 if path == "p1" else site.n1
    return {"access": "3GPP" if path == "p1" else "non-3GPP", "local": site.n0.ip, "peer": site.ue_port(path).ip,
            "local_port": local_port, "peer_port": peer_port, "source_mac": port.mac,
            "next_hop_mac": site.r1.mac, "interface": port.ifname, **fields}  # fmt: skip


def session(site: AtsssSite, mode: str, p1: Optional[dict] = None, p2: Optional[dict] = None) -> AtsssSessionSpec:
    return AtsssSessionSpec.model_validate({"name": "ue", "ue": UE_ADDRESS, "mode": mode,
                                            "paths": [path_body(site, "p1", **(p1 or {})),
                                                      path_body(site, "p2", **(p2 or {}))]})  # fmt: skip


class Node:
    """The NetApp on the site's node: its pipeline (an anonymous instance) attached natively to n0,
    ATSSS's service writing its maps, the store in `state`."""

    def __init__(self, site: AtsssSite, state: Path):
        self.site = site
        self.ns = site.ns("node")
        site.receive_xdp_frames(str(build_artifact("xdp_pass.bpf.o")))
        netns.set_tx_checksum(site.ns("dn"), site.dn0.ifname, False)  # whole UDP checksums, as from a NIC
        with netns.entered(self.ns):
            self.dp = Dataplane.open()
        try:
            with netns.entered(self.ns):
                self.dp.attach(site.n0.ifname)
            self.store = Store.open(state / "netapp.db", synchronous="NORMAL")
            self.atsss = Atsss(self.store, AtsssMaps(self.dp.table), netns=self.ns, program_fd=self.dp.program_fd)
        except BaseException:
            self.dp.close()
            raise

    def create(self, spec: AtsssSessionSpec) -> list[int]:
        """The session written; its paths' slots, by position."""
        return self.atsss.create_session(ADMIN, spec.name, spec).slots

    def patch(self, body: dict) -> None:
        self.atsss.patch_session(ADMIN, "ue", AtsssSessionPatch.model_validate(body))

    def delete_sessions(self) -> None:
        for stored in self.atsss.list_sessions(ADMIN):
            self.atsss.delete_session(ADMIN, f"{stored.tenant}/{stored.name}")

    def sent(self, slot: int) -> int:
        """Packets the path in `slot` sent (its entry's counter)."""
        return self.dp.table("dpp_atsss_paths").get(c_uint32(slot)).packets

    def close(self) -> None:
        try:
            self.delete_sessions()
        finally:
            self.store.close()
            self.dp.close()


@dataclass
class Received:
    """What the receiver saw: datagrams delivered in MP_SEQ order, packets per path (by the UE's
    address they came to), copies dropped, packets that came before an earlier number."""

    delivered: int = 0
    per_path: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    out_of_order: int = 0
    error: Optional[str] = None


class Receiver:
    """The UE's MP-DCCP receiver: a raw socket of protocol 33 read by a thread, reordering by MP_SEQ
    from `first_mp_seq` and checking each delivered datagram against `expected(k)`."""

    def __init__(self, site: AtsssSite, expected: Callable[[int], bytes], first_mp_seq: int = 0):
        self.expected = expected
        self.paths = {site.ue_port(path).ip: path for path in ("p1", "p2")}
        self.result = Received(per_path={path: 0 for path in ("p1", "p2")})
        self.progress = threading.Condition()
        self._next = first_mp_seq
        self._pending: dict[int, bytes] = {}
        with netns.entered(site.ns("ue")):
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, IPPROTO_DCCP)
        self._sock.setsockopt(socket.SOL_SOCKET, 33, 1 << 24)  # SO_RCVBUFFORCE
        self._sock.settimeout(0.2)  # how often the thread looks whether it is to stop
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                packet = self._sock.recv(65535)
            except socket.timeout:
                continue
            try:
                self._take(packet)
            except AssertionError as exc:  # the decoder's or the check's: the transfer has failed
                with self.progress:
                    self.result.error = str(exc)
                    self.progress.notify_all()
                return

    def _take(self, packet: bytes) -> None:
        # The decoder reads a frame: the IP packet behind an Ethernet header of IPv4's type.
        got = decode(bytes(12) + b"\x08\x00" + packet)
        path = self.paths.get(got.dst)
        assert path is not None, f"DCCP to {got.dst}, not an address of the UE's accesses"
        with self.progress:
            self.result.per_path[path] += 1
            if got.mp_seq < self._next or got.mp_seq in self._pending:
                self.result.duplicates += 1
                self.progress.notify_all()
                return
            if got.mp_seq != self._next:
                self.result.out_of_order += 1
            self._pending[got.mp_seq] = udp_payload(got.inner)
            while self._next in self._pending:
                self._deliver(self._pending.pop(self._next))
                self._next += 1
            self.progress.notify_all()

    def _deliver(self, payload: bytes) -> None:
        k = self.result.delivered
        number = HEADER.unpack_from(payload)[0]
        assert number == k, f"datagram {number} delivered where {k} was due (MP_SEQ {self._next})"
        assert payload[HEADER.size :] == self.expected(k), f"datagram {k}: its bytes differ from those sent"
        self.result.delivered += 1

    def wait_for(self, count: int) -> None:
        """Until `count` datagrams are delivered."""
        self._wait(lambda: self.result.delivered >= count, f"{count} delivered")

    def wait_for_copies(self, count: int, paths: Sequence[str]) -> None:
        """Until `count` packets came on each of `paths` (each of which carries every datagram)."""
        if paths:
            self.wait_for_arrivals({path: count for path in paths})

    def wait_for_arrivals(self, per_path: dict[str, int]) -> None:
        """Until at least so many packets came on each path (the later copies of redundant ones too)."""
        self._wait(lambda: all(self.result.per_path[p] >= n for p, n in per_path.items()), f"arrivals {per_path}")

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        """Until `done()`; AssertionError when the receiver found a packet wrong, or when no packet
        came for STALL_S."""
        with self.progress:
            seen, deadline = self._arrivals(), time.monotonic() + STALL_S
            while not done() and self.result.error is None:
                if self._arrivals() != seen:
                    seen, deadline = self._arrivals(), time.monotonic() + STALL_S
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"stalled before {what}: {self.result.delivered} delivered, waiting for "
                                         f"MP_SEQ {self._next} with {len(self._pending)} behind it; per path "
                                         f"{self.result.per_path}")
                self.progress.wait(left)
            assert self.result.error is None, self.result.error

    def _arrivals(self) -> int:
        return sum(self.result.per_path.values())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


def udp_payload(inner: bytes) -> bytes:
    """The UDP payload of the UE's IPv4 packet."""
    assert inner[0] >> 4 == 4 and inner[9] == socket.IPPROTO_UDP, "not the sender's UDP over IPv4"
    start = (inner[0] & 0x0F) * 4 + 8
    return inner[start : struct.unpack_from("!H", inner, 2)[0]]


@dataclass(frozen=True)
class Transfer:
    """`size` bytes in datagrams of `chunk` bytes each (the last one shorter)."""

    size: int
    chunk: int = 1400
    data: bytes = field(default=b"", repr=False)

    @classmethod
    def random(cls, size: int, chunk: int = 1400) -> "Transfer":
        return cls(size, chunk, os.urandom(size))

    @property
    def datagrams(self) -> int:
        return -(-self.size // self.chunk)

    def part(self, k: int) -> bytes:
        return self.data[k * self.chunk : (k + 1) * self.chunk]


def send(site: AtsssSite, transfer: Transfer, receiver: Receiver, window: int,
         during: Optional[Callable[[int], None]] = None, copies_on: Sequence[str] = ()) -> Received:
    """The transfer from the data network to the UE's address, at most `window` datagrams beyond
    what the receiver delivered, and beyond what came on each path of `copies_on` (paths that
    carry a copy of every datagram: redundant's, whose slow path's copies would otherwise fall
    ever further behind the fast path's until its queue overflows); `during(k)` is called before
    datagram k is sent (to cut a path at a point of the transfer rather than at a time). Returns
    once every datagram was delivered.

    The sending thread stays on one CPU meanwhile: each datagram then goes through the router into
    the node on that CPU's backlog, in the order sent, so the node numbers them in that order (on
    two CPUs' backlogs two datagrams could reach it the other way round)."""
    with netns.entered(site.ns("dn")):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(mine)})
    try:
        for k in range(transfer.datagrams):
            if during is not None:
                during(k)
            receiver.wait_for(k - window + 1)
            receiver.wait_for_copies(k - window + 1, copies_on)
            sock.sendto(HEADER.pack(k) + transfer.part(k), (UE_ADDRESS, UE_PORT))
        receiver.wait_for(transfer.datagrams)
    finally:
        os.sched_setaffinity(0, mine)
        sock.close()
    return receiver.result


@contextlib.contextmanager
def relay(site: AtsssSite, path: str, delay_ms: float) -> Iterator[None]:
    """`path`'s downlink carried `delay_ms` late by a relay in its namespace (bench.frer.relay)."""
    inbound, outbound = site.relay_ports(path)
    process = subprocess.Popen(["ip", "netns", "exec", site.ns(path), sys.executable, "-m", "bench.frer.relay",
                                inbound, outbound, str(delay_ms)], stdout=subprocess.PIPE, text=True, cwd=REPO)  # fmt: skip
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready", "the relay did not start"
        yield
    finally:
        process.kill()
        process.wait()


class Loss:
    """Random loss on `path` (dataplane/build/xdp_loss.bpf.o on its port towards the router): the
    drop probability set, the frames passed and dropped read."""

    def __init__(self, site: AtsssSite, path: str, probability: float):
        self.site, self.path = site, path
        self.obj = BpfObject(build_artifact("xdp_loss.bpf.o"))
        map_update(self.obj.map_fd("loss_config"), c_uint32(0), c_uint32(int(probability * (1 << 32))))
        port = site.loss_port(path)
        with netns.entered(site.ns(path)):
            attach_native(socket.if_nametoindex(port.ifname), self.obj.program_fd("xdp_loss"))

    def counts(self) -> tuple[int, int]:
        """(passed, dropped)."""
        values = []
        for counter in (0, 1):
            value = c_uint64()
            map_lookup(self.obj.map_fd("loss_counts"), c_uint32(counter), value)
            values.append(value.value)
        return values[0], values[1]

    def close(self) -> None:
        port = self.site.loss_port(self.path)
        netns.run(["ip", "link", "set", "dev", port.ifname, "xdp", "off"], netns=self.site.ns(self.path))
        self.obj.close()
