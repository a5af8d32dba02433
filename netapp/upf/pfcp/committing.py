"""The N4 socket read while a group's COMMIT waits for its sync.

A group's COMMIT (synchronous FULL) writes the WAL and waits for the disk to say it is there: at
10,000 establishments a second, groups of some 16 requests, some 0.3 ms a group in which the
endpoint's thread uses no CPU and reads nothing (bench/README.md, `bench/pfcp.py`). The requests that
arrive meanwhile are the next group, and receiving each (read from the socket, its header, the
retransmission check, a template's match and values) costs the thread some 15 us once the COMMIT
has returned. `ReadWhileCommitting` hands the COMMIT to a thread of its own (`Committer`) when
datagrams are waiting, and receives those on the endpoint's thread meanwhile: the
group's transaction is the same, its responses leave once its COMMIT has returned, as before, and
the requests read meanwhile are queued, not handled, until then (netapp.upf.pfcp.server). No next
group is handled during a COMMIT: its requests would build on a group not yet committed.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
from typing import Any, Callable, Optional

MAX_DATAGRAM = 65535
MAX_READ = 64  # datagrams read during one COMMIT at most


class Committer:
    """A thread running the COMMITs handed to it, one at a time. `start` returns once the COMMIT has
    begun (SQLite has let go of the GIL: the endpoint's thread then runs Python while it syncs
    without keeping it from starting); `wait` once it has ended. Both on eventfds: a wait on one
    lets go of the GIL, so the committer is never kept waiting for it by a thread that polls."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[Optional[Callable[[], Any]]] = queue.SimpleQueue()
        self._started = os.eventfd(0, os.EFD_CLOEXEC)
        self._ended = os.eventfd(0, os.EFD_CLOEXEC)
        self.done = True
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._serve, name="pfcp-commit", daemon=True)
        self._thread.start()

    def start(self, commit: Callable[[], Any]) -> None:
        self.done, self._error = False, None
        self._work.put(commit)
        os.eventfd_read(self._started)

    def wait(self) -> None:
        """Until the COMMIT started has ended; its error raised here."""
        os.eventfd_read(self._ended)
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        self._work.put(None)
        self._thread.join()
        os.close(self._started)
        os.close(self._ended)

    def _serve(self) -> None:
        while (commit := self._work.get()) is not None:
            os.eventfd_write(self._started, 1)
            try:
                commit()
            except BaseException as exc:  # noqa: BLE001 - raised on the endpoint's thread
                self._error = exc
            self.done = True
            os.eventfd_write(self._ended, 1)


class ReadWhileCommitting:
    """A store's `run_commit` (netapp.service.store): on the endpoint's thread (`thread`, its id) with
    datagrams waiting in `sock` (non-blocking: the endpoint's own, a duplicate of its fd), the
    COMMIT runs on the committer's thread while the datagrams waiting are given to `receive` (the
    protocol's `datagram_received`), MAX_READ at most, until none waits or the COMMIT has ended;
    then the COMMIT's end is waited for. Those that come later are read by the loop once the group
    is answered: reading on while the COMMIT's thread wants the GIL back would keep it waiting
    (the interpreter's switch interval, 5 ms). Elsewhere, or with nothing waiting, the COMMIT runs
    at once on the caller's thread."""

    def __init__(self, sock: socket.socket, receive: Callable[[bytes, Any], None], thread: int,
                 waiting: Callable[[], bool], counters: Any):
        self._sock, self._receive, self._thread, self._waiting = sock, receive, thread, waiting
        self._counters = counters
        self._committer = Committer()

    def __call__(self, commit: Callable[[], Any]) -> None:
        if threading.get_ident() != self._thread or not self._waiting():
            commit()
            return
        committer = self._committer
        committer.start(commit)
        try:
            for _ in range(MAX_READ):
                if committer.done:
                    break
                try:
                    data, addr = self._sock.recvfrom(MAX_DATAGRAM)
                except BlockingIOError:
                    break
                self._counters["received_while_committing"] += 1
                self._receive(data, addr)
        finally:
            committer.wait()

    def close(self) -> None:
        self._committer.close()
        self._sock.close()
