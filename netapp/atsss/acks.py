"""The proxy's DCCP-Acks sent to the UEs. The data path builds each Ack whole into the ring
dpp_atsss_acks (struct dpp_atsss_ack: the frame, and the interface its Data came in on and the Ack
leaves by; nf/atsss/uplink.h says why there and not in XDP); AckSender drains the ring and
transmits every frame out of its interface through an AF_PACKET socket, one per interface, opened
in the node's namespace. It counts what it sent, what the kernel refused (a link gone or down, a
full queue: the Ack is lost, and the path's next one acknowledges the same numbers and more) and
the records it could not read.

The ring is read with libbpf's ring_buffer API (the libbpf that libdpp links against): the records
are handed over in order, one consumer at a time."""

from __future__ import annotations

import ctypes
import errno
import logging
import socket
import threading
from ctypes import CFUNCTYPE, c_int, c_size_t, c_void_p
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional

from netapp.atsss.abi import Ack
from netapp.dataplane.libbpf import libbpf
from netapp.service.state import namespace

log = logging.getLogger(__name__)

SampleFn = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t)
POLL_MS = 100  # the sender's wait for records: how soon it sees that it is stopped


@lru_cache(maxsize=None)
def _libbpf() -> ctypes.CDLL:
    lib = libbpf()
    lib.ring_buffer__new.restype = c_void_p
    lib.ring_buffer__new.argtypes = [c_int, SampleFn, c_void_p, c_void_p]
    for name in ("ring_buffer__consume", "ring_buffer__poll", "ring_buffer__free"):
        getattr(lib, name).argtypes = [c_void_p] + ([c_int] if name == "ring_buffer__poll" else [])
    return lib


class AckRing:
    """The ring dpp_atsss_acks: (ifindex, frame) records, in order. `malformed`: records of another
    size or longer than a frame may be (never handed over)."""

    def __init__(self, map_fd: int):
        self._lib = _libbpf()
        self._records: list[tuple[int, bytes]] = []
        self.malformed = 0
        self._callback = SampleFn(self._sample)  # kept: libbpf calls it until freed
        self._rb = self._lib.ring_buffer__new(map_fd, self._callback, None, None)
        if not self._rb:
            raise OSError(ctypes.get_errno(), "ring_buffer__new(dpp_atsss_acks)")

    def _sample(self, _ctx: int, data: int, size: int) -> int:
        if size != ctypes.sizeof(Ack):
            self.malformed += 1
            return 0
        record = Ack.from_buffer_copy(ctypes.string_at(data, size))
        if record.len > len(record.frame):
            self.malformed += 1
            return 0
        self._records.append((record.ifindex, bytes(record.frame[: record.len])))
        return 0

    def drain(self) -> list[tuple[int, bytes]]:
        """Every record the ring holds, in order; the ring left empty."""
        if self._lib.ring_buffer__consume(self._rb) < 0:
            raise OSError(ctypes.get_errno(), "ring_buffer__consume(dpp_atsss_acks)")
        return self._taken()

    def wait(self, timeout_ms: int) -> list[tuple[int, bytes]]:
        """The records that come within timeout_ms (none: an empty list)."""
        rc = self._lib.ring_buffer__poll(self._rb, timeout_ms)
        if rc < 0 and -rc != errno.EINTR:
            raise OSError(-rc, "ring_buffer__poll(dpp_atsss_acks)")
        return self._taken()

    def _taken(self) -> list[tuple[int, bytes]]:
        records, self._records = self._records, []
        return records

    def close(self) -> None:
        if self._rb:
            self._lib.ring_buffer__free(self._rb)
            self._rb = None


@dataclass
class AckCounters:
    """What the sender did with the records it read."""

    sent: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # errno name -> Acks the kernel refused
    malformed: int = 0


class AckSender:
    """Sends the ring's Acks out of their interfaces (in `netns`: the node's namespace). `drain`
    once, or `start` a thread that waits for them until `stop`."""

    def __init__(self, ring: AckRing, netns: Optional[str] = None):
        self._ring = ring
        self._netns = netns
        self._sockets: dict[int, socket.socket] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.counters = AckCounters()

    def drain(self) -> int:
        """Send what the ring holds now; how many records were read."""
        return self._send_all(self._ring.drain())

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="atsss-acks", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """The thread ended (what is in the ring then stays there) and the sockets closed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._send_all(self._ring.wait(POLL_MS))

    def _send_all(self, records: list[tuple[int, bytes]]) -> int:
        for ifindex, frame in records:
            self._send(ifindex, frame)
        self.counters.malformed = self._ring.malformed
        return len(records)

    def _send(self, ifindex: int, frame: bytes) -> None:
        try:
            self._socket(ifindex).send(frame)
            self.counters.sent += 1
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, "EIO")
            self.counters.failed[name] = self.counters.failed.get(name, 0) + 1
            log.debug("ATSSS Ack out of ifindex %d not sent: %s", ifindex, exc)

    def _socket(self, ifindex: int) -> socket.socket:
        """The interface's sending socket (protocol 0: it receives nothing), opened once."""
        sock = self._sockets.get(ifindex)
        if sock is None:
            with namespace(self._netns):
                sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                try:
                    sock.bind((socket.if_indextoname(ifindex), 0))
                except OSError:
                    sock.close()
                    raise
            self._sockets[ifindex] = sock
        return sock
