"""Group commit: requests that arrive while a transaction is in flight share the next one.

One writer thread takes every queued request, in arrival order, and hands them to `handle` as one
group; each request's future gets its own result or its own exception. There is no timer: a request
that finds the writer idle is handled at once, alone, so grouping adds no latency. Under load,
requests queue while a transaction (its map writes, its fsync) is in flight and the next one takes
them all: one transaction and one fsync then serve many requests, where one each would cap the rate
at the disk's syncs per second.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import Future
from typing import Callable, Generic, Optional, TypeVar, Union

log = logging.getLogger("netapp.service")

R = TypeVar("R")  # a request
T = TypeVar("T")  # its result


class WriterClosed(RuntimeError):
    """The writer was closed: it takes no more requests."""


class GroupWriter(Generic[R, T]):
    """A thread that handles queued requests in groups of at most `max_group`.

    `handle(requests)` returns one outcome per request, in order: its result, or the exception it
    must raise. Should `handle` raise, every request of the group gets that exception.
    """

    def __init__(
        self, handle: Callable[[list[R]], list[Union[T, BaseException]]], *, name: str, max_group: int
    ):
        self._handle = handle
        self._max_group = max_group
        self._queue: deque[tuple[R, Future[T]]] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, request: R) -> "Future[T]":
        """Queue a request; its future is answered once its group is handled."""
        future: Future[T] = Future()
        with self._wake:
            if self._closed:
                raise WriterClosed("the writer is closed")
            self._queue.append((request, future))
            self._wake.notify()
        return future

    def close(self) -> None:
        """Take no more requests, handle those queued, stop the thread."""
        with self._wake:
            self._closed = True
            self._wake.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while True:
            group = self._next_group()
            if group is None:
                return
            if group:
                self._answer(group)

    def _next_group(self) -> Optional[list[tuple[R, "Future[T]"]]]:
        """The queued requests (up to max_group) once there are some; None once closed and empty."""
        with self._wake:
            while not self._queue and not self._closed:
                self._wake.wait()
            if not self._queue:
                return None
            group = []
            while self._queue and len(group) < self._max_group:
                request, future = self._queue.popleft()
                if future.set_running_or_notify_cancel():  # False: its caller gave up before
                    group.append((request, future))
            return group

    def _answer(self, group: list[tuple[R, "Future[T]"]]) -> None:
        try:
            outcomes = self._handle([request for request, _ in group])
            if len(outcomes) != len(group):
                raise RuntimeError(f"{len(outcomes)} outcomes for a group of {len(group)}")
        except Exception as exc:  # noqa: BLE001 - the thread must live on: the callers get it
            log.exception("a group of %d requests failed as a whole", len(group))
            outcomes = [exc] * len(group)
        for (_, future), outcome in zip(group, outcomes):
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
