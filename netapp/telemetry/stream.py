"""The event stream (GET /api/v1/telemetry/stream): every poll, filtered for the client, as a
server-sent event.

Streams are served while telemetry runs (`start` to `stop`): before, a client gets
`event: closed` at once; at `stop`, every open stream gets it and ends.

Each client has a bounded queue of polls. The collector thread puts polls in it and never waits;
the client's coroutine takes them out, filters and encodes them in a worker thread (a poll may
hold many intents) and writes them. A client that reads more slowly than polls come falls
behind: past `queue_polls` polls, the oldest waiting one is dropped and counted, and the client
gets an `event: dropped` saying how many before its next poll.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, Field, Json
from starlette.concurrency import run_in_threadpool

from netapp.core.config import StreamSettings
from netapp.service.contract import QuotaExceeded, ServiceError
from netapp.telemetry.collector import Collector
from netapp.telemetry.poll import PointFilter, Poll, rfc3339_ns
from netapp.telemetry.subscription_notifications import TelemetryPoint

EVENT_STREAM = "text/event-stream"
# What a client's EventSource waits before reconnecting after the stream ends (the `retry:` field).
RECONNECT_MS = 5000


# --- the events, as a client's EventSource sees them (the OpenAPI document's schema of the stream)


class PollData(BaseModel):
    seq: int = Field(description="the poll's number since the NetApp started")
    time: str = Field(description="when the poll was taken, RFC 3339 with nanoseconds, UTC")
    node: str
    points: list[TelemetryPoint]


class DroppedData(BaseModel):
    dropped: int = Field(description="polls lost since the last event: the client read too slowly")
    droppedTotal: int = Field(description="polls lost since the stream began")  # noqa: N815 - JSON name


class ClosedData(BaseModel):
    reason: str = Field(
        description="why the stream ends: telemetry stopped, or is not running, or too many streams"
    )


class PollEvent(BaseModel):
    """A poll's points that the caller may see and asked for."""

    event: Literal["poll"]
    data: Json[PollData]


class DroppedEvent(BaseModel):
    """Sent before the next poll when the client fell behind and polls were dropped."""

    event: Literal["dropped"]
    data: Json[DroppedData]


class ClosedEvent(BaseModel):
    """The last event: the NetApp ends the stream."""

    event: Literal["closed"]
    data: Json[ClosedData]


StreamEvent = Annotated[Union[PollEvent, DroppedEvent, ClosedEvent], Field(discriminator="event")]


class TooManyStreams(ServiceError):
    status, title = 429, "Too many streams"


class StreamEnded(Exception):
    """Telemetry stopped: the stream ends."""


class PollQueue:
    """The polls one client has yet to get: `offer` from any thread (never waits), `get` from
    the client's event loop. When full, a new poll pushes out the oldest, counted in `dropped`.
    `end` (any thread) makes the next `get` raise StreamEnded."""

    def __init__(self, capacity: int, loop: asyncio.AbstractEventLoop):
        self._polls: collections.deque[Poll] = collections.deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._loop = loop
        self._ready = asyncio.Event()
        self._dropped = 0  # since the client was last told
        self.dropped_total = 0
        self._ended = False

    def offer(self, poll: Poll) -> None:
        with self._lock:
            if len(self._polls) == self._polls.maxlen:
                self._dropped += 1
                self.dropped_total += 1
            self._polls.append(poll)
        self._wake()

    def end(self) -> None:
        with self._lock:
            self._ended = True
        self._wake()

    def _wake(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._ready.set)
        except RuntimeError:
            pass  # the loop is closed: the client is gone, and its listener about to be

    async def get(self, timeout_s: float) -> Optional[Poll]:
        """The oldest poll waiting; None when none came within `timeout_s`."""
        if (poll := self._take()) is not None:
            return poll
        # Cleared on the loop, where the offers' set() runs too: one made after the check above
        # sets it again after this clear.
        self._ready.clear()
        try:
            await asyncio.wait_for(self._ready.wait(), timeout_s)
        except asyncio.TimeoutError:
            return None
        return self._take()

    def _take(self) -> Optional[Poll]:
        with self._lock:
            if self._ended:
                raise StreamEnded()
            return self._polls.popleft() if self._polls else None

    def take_dropped(self) -> int:
        """Polls dropped since the last call."""
        with self._lock:
            dropped, self._dropped = self._dropped, 0
        return dropped


class StreamHub:
    """The streams of one collector: at most `max_clients` at once, each its own listener."""

    def __init__(self, collector: Collector, settings: StreamSettings):
        self.collector = collector
        self.settings = settings
        self._lock = threading.Lock()
        self._queues: dict[PollQueue, str] = {}  # open streams -> their tenant
        self._running = False

    @property
    def clients(self) -> int:
        with self._lock:
            return len(self._queues)

    def start(self) -> None:
        with self._lock:
            self._running = True

    def stop(self) -> None:
        """End every open stream (each gets `event: closed`); new ones end at once."""
        with self._lock:
            self._running = False
            ending = list(self._queues)
        for queue in ending:
            queue.end()

    def held(self, tenant: str) -> int:
        """How many streams of the tenant are open."""
        with self._lock:
            return self._held(tenant)

    def _held(self, tenant: str) -> int:
        return sum(1 for owner in self._queues.values() if owner == tenant)

    def check_room(self, tenant: str = "", quota: Optional[int] = None) -> None:
        """QuotaExceeded when the tenant has `quota` streams open, TooManyStreams when every place
        is taken (`events` takes one, atomically)."""
        QuotaExceeded.unless_room(tenant, "streams", self.held(tenant), quota, "close one first")
        if self.clients >= self.settings.max_clients:
            raise TooManyStreams(
                f"{self.settings.max_clients} streams are open, the most allowed "
                "(setting telemetry.stream.max_clients); try again later"
            )

    async def events(
        self, which: PointFilter, tenant: str = "", quota: Optional[int] = None
    ) -> AsyncIterator[str]:
        """The stream of one client of `tenant`, until it goes away or telemetry stops."""
        queue, refusal = self._join(asyncio.get_running_loop(), tenant, quota)
        if queue is None:
            yield f"retry: {RECONNECT_MS}\n\n"
            yield sse_event("closed", {"reason": refusal})
            return
        try:  # from the first yield on: a client may go at any of them
            yield f"retry: {RECONNECT_MS}\n\n"
            async for event in self._serve(queue, which):
                yield event
        except StreamEnded:
            yield sse_event("closed", {"reason": "telemetry stopped"})
        finally:
            self._leave(queue)

    async def _serve(self, queue: PollQueue, which: PointFilter) -> AsyncIterator[str]:
        while True:
            poll = await queue.get(self.settings.keepalive_s)
            if poll is None:
                yield ": keep-alive\n\n"  # proxies close connections that stay silent
                continue
            dropped = queue.take_dropped()
            if dropped:
                yield sse_event("dropped", {"dropped": dropped, "droppedTotal": queue.dropped_total})
            yield await run_in_threadpool(poll_event, poll, which)

    def _join(
        self, loop: asyncio.AbstractEventLoop, tenant: str, quota: Optional[int]
    ) -> tuple[Optional[PollQueue], str]:
        """A new client's queue, listening; (None, why) when it cannot be served."""
        queue = PollQueue(self.settings.queue_polls, loop)
        with self._lock:
            if not self._running:
                return None, "telemetry is not running"
            if len(self._queues) >= self.settings.max_clients:
                return None, "too many streams"  # the places went since check_room
            if quota is not None and self._held(tenant) >= quota:
                return None, "the tenant's streams quota is reached"
            self._queues[queue] = tenant
        self.collector.add_listener(queue.offer)
        return queue, ""

    def _leave(self, queue: PollQueue) -> None:
        self.collector.remove_listener(queue.offer)
        with self._lock:
            self._queues.pop(queue, None)


def poll_event(poll: Poll, which: PointFilter) -> str:
    """`event: poll` with the poll's points that `which` lets through."""
    return sse_event(
        "poll",
        {
            "seq": poll.seq,
            "time": rfc3339_ns(poll.time_ns),
            "node": poll.node,
            "points": [point.to_json() for point in poll.points(which)],
        },
    )


def sse_event(name: str, data: Any) -> str:
    # Compact JSON has no newline, so the data is one `data:` line.
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
