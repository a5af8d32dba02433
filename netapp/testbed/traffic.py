"""Send and capture real frames on the testbed's interfaces (AF_PACKET sockets inside namespaces)."""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass

from netapp.testbed import netns

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_FANOUT = 18
PACKET_FANOUT_CPU = 2
PACKET_OUTGOING = 4
PACKET_STATISTICS = 6
SO_RCVBUFFORCE = 33
CAPTURE_BUFFER = 32 << 20  # bursts from XDP outrun a Python reader; the kernel must hold them


def _packet_socket(ns: str, ifname: str) -> socket.socket:
    with netns.entered(ns):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        sock.bind((ifname, 0))
    return sock


class Sender:
    """Writes frames onto an interface, as the host on that side would."""

    def __init__(self, ns: str, ifname: str):
        self.sock = _packet_socket(ns, ifname)

    def send(self, frames: list[bytes], rounds: int = 1, pause_every: int = 64) -> int:
        """Send every frame `rounds` times; pauses briefly every `pause_every` frames so veth queues
        keep up: a veth with an XDP program holds 256 frames for its NAPI, which runs at the end of
        each send unless the CPU's ksoftirqd has the softirqs (a loaded machine), and then only
        when ksoftirqd is scheduled, as the pause lets it be, well before the ring is full."""
        sent = 0
        for _ in range(rounds):
            for frame in frames:
                self.sock.send(frame)
                sent += 1
                if sent % pause_every == 0:
                    time.sleep(0.001)
        return sent

    def close(self) -> None:
        self.sock.close()


@dataclass
class Received:
    frame: bytes
    cpu: int  # the CPU that handed the frame to the stack (PACKET_FANOUT_CPU member index)


class Capture:
    """Collects the frames an interface receives, and on which CPU the kernel processed each.

    A PACKET_FANOUT_CPU group of one socket per CPU: the kernel delivers a frame to the member
    whose index is the CPU it runs on, which shows where XDP steered it.
    """

    def __init__(self, ns: str, ifname: str, cpus: int | None = None):
        self.cpus = cpus or os.cpu_count() or 1
        group = (os.getpid() ^ id(self)) & 0xFFFF
        self.socks = []
        for _ in range(self.cpus):
            sock = _packet_socket(ns, ifname)
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, CAPTURE_BUFFER)
            sock.setsockopt(SOL_PACKET, PACKET_FANOUT, group | (PACKET_FANOUT_CPU << 16))
            sock.setblocking(False)
            self.socks.append(sock)
        self.frames: list[Received] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select(self.socks, [], [], 0.05)
            for sock in ready:
                self._drain(sock, self.socks.index(sock))

    def _drain(self, sock: socket.socket, cpu: int) -> None:
        while True:
            try:
                frame, addr = sock.recvfrom(65535)
            except BlockingIOError:
                return
            if addr[2] != PACKET_OUTGOING:
                self.frames.append(Received(frame, cpu))

    def dropped(self) -> int:
        """Frames the kernel could not queue to these sockets (PACKET_STATISTICS, since last read)."""
        total = 0
        for sock in self.socks:
            _packets, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
            total += drops
        return total

    def wait_for(self, count: int, timeout: float = 5.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.frames) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.frames)

    def close(self) -> list[Received]:
        self._stop.set()
        self._thread.join()
        for sock in self.socks:
            sock.close()
        return list(self.frames)

    def __enter__(self) -> "Capture":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
