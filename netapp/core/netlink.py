"""A listener of rtnetlink multicast groups on a thread of its own: the socket, the wake-up pipe that
stops it, and the loop that hands every readable moment to the subclass (`_drain`). The route cache's
watch (netapp.upf.nexthop) and the private routes' neighbour watch (netapp.routing.neighbours) are
two."""

from __future__ import annotations

import logging
import os
import select
import socket
import struct
import threading
from typing import Iterable, Iterator, Optional

log = logging.getLogger(__name__)

NETLINK_ROUTE = 0
SOL_NETLINK = 270
NETLINK_ADD_MEMBERSHIP = 1
NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port
RECV_BYTES = 1 << 16


def messages(buffer: bytes) -> Iterator[tuple[int, bytes]]:
    """The netlink messages of one datagram: (type, body after the header)."""
    offset = 0
    while offset + NLMSG_HEADER.size <= len(buffer):
        length, kind, _, _, _ = NLMSG_HEADER.unpack_from(buffer, offset)
        if length < NLMSG_HEADER.size:
            return
        yield kind, buffer[offset + NLMSG_HEADER.size:offset + length]
        offset += (length + 3) & ~3


class NetlinkListener:
    """Subscribed to `groups` when made (a group the kernel lacks is skipped), so nothing that
    happens before start() is missed; close() stops the thread and closes the socket."""

    THREAD_NAME = "netlink-listener"

    def __init__(self, groups: Iterable[int]):
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, NETLINK_ROUTE)
        self._sock.setblocking(False)
        self._sock.bind((0, 0))
        for group in groups:
            try:
                self._sock.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)
            except OSError:  # a kernel without the group (next hop objects): nothing to watch there
                log.debug("netlink group %d not available", group)
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._thread: Optional[threading.Thread] = None

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.THREAD_NAME, daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        """Stop the thread (if it runs) and close the socket."""
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join()
            self._thread = None
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._sock.close()

    def _run(self) -> None:
        # poll, not select: select refuses descriptors from 1024 up, which a serve holding many
        # sockets and maps reaches, and the watch would stop for good.
        poller = select.poll()
        poller.register(self._sock, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._wake_r in ready:
                return
            self._drain()

    def _drain(self) -> None:
        """Read what is pending (the socket does not block)."""
        raise NotImplementedError
