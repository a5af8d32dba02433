"""The N4 socket read while a group's COMMIT waits for its sync.

A group's COMMIT (synchronous FULL) writes the WAL and waits for the disk to say it is there: at
10,000 establishments a second, groups of some 16 requests, some 0.3 ms a group in which the
endpoint's thread uses no CPU and reads nothing (bench/README.md, `bench/pfcp.py`). The requests that
arrive meanwhile are the next group, and receiving each (read from the socket, its header, the
retransmission check, a template's match and values) costs the thread some 15 us once the COMMIT
has returned. `ReadWhileCommitting` hands the COMMIT to a thread of its own (`Committer`) when
datagrams are waiting, and receives them on the endpoint's thread until the COMMIT has ended: the
group's transaction is the same, its responses leave once its COMMIT has returned, as before, and
the requests read meanwhile are queued, not handled, until then (netapp.upf.pfcp.server). No next
group is handled during a COMMIT: its requests would build on a group not yet committed.
"""

from __future__ import annotations

import os
import queue
import select
import socket
import threading
from typing import Any, Callable, Optional

MAX_DATAGRAM = 65535


class Committer:
    """A thread running the COMMITs handed to it, one at a time; each one's end is told on an eventfd
    (`fileno`), which a poll of the socket can wait on with it."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[Optional[Callable[[], Any]]] = queue.SimpleQueue()
        self._ended = os.eventfd(0, os.EFD_CLOEXEC)
        self.done = True
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._serve, name="pfcp-commit", daemon=True)
        self._thread.start()

    def fileno(self) -> int:
        return self._ended

    def start(self, commit: Callable[[], Any]) -> None:
        self.done, self._error = False, None
        self._work.put(commit)

    def wait(self) -> None:
        """Until the COMMIT started has ended (its eventfd read, which blocks until then); its error
        raised here."""
        os.eventfd_read(self._ended)
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        self._work.put(None)
        self._thread.join()
        os.close(self._ended)

    def _serve(self) -> None:
        while (commit := self._work.get()) is not None:
            try:
                commit()
            except BaseException as exc:  # noqa: BLE001 - raised on the endpoint's thread
                self._error = exc
            self.done = True
            os.eventfd_write(self._ended, 1)


class ReadWhileCommitting:
    """A store's `run_commit` (netapp.service.store): on the endpoint's thread (`thread`, its id) with
    datagrams waiting in `sock` (non-blocking: the endpoint's own, a duplicate of its fd), the
    COMMIT runs on the committer's thread while each datagram that is or comes waiting is given to
    `receive` (the protocol's `datagram_received`) until it has ended; elsewhere, or with nothing
    waiting, the COMMIT runs at once on the caller's thread."""

    def __init__(self, sock: socket.socket, receive: Callable[[bytes, Any], None], thread: int,
                 waiting: Callable[[], bool], counters: Any):
        self._sock, self._receive, self._thread, self._waiting = sock, receive, thread, waiting
        self._counters = counters
        self._committer = Committer()
        # poll, not select: a service's fds (its maps') run past select's 1,024
        self._poll = select.poll()
        for fd in (sock.fileno(), self._committer.fileno()):
            self._poll.register(fd, select.POLLIN)

    def __call__(self, commit: Callable[[], Any]) -> None:
        if threading.get_ident() != self._thread or not self._waiting():
            commit()
            return
        committer = self._committer
        committer.start(commit)
        try:
            while not committer.done:
                try:
                    data, addr = self._sock.recvfrom(MAX_DATAGRAM)
                except BlockingIOError:  # none waiting: until one comes or the COMMIT ends
                    self._poll.poll()
                    continue
                self._counters["received_while_committing"] += 1
                self._receive(data, addr)
        finally:
            committer.wait()

    def close(self) -> None:
        self._committer.close()
        self._sock.close()
