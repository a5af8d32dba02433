"""The InfluxDB sink's own bookkeeping (netapp.telemetry.influx): the line protocol it holds (polls
still to format, queued chunks, batches in the client's hands), what it counts, its back-off after
failed writes and its rate-limited drop log. No client, no threads: the sink holds the lock."""

from __future__ import annotations

import dataclasses
import time
from typing import Optional

from netapp.telemetry.poll import Poll


@dataclasses.dataclass
class Chunk:
    """Line protocol waiting in the queue: lines joined by newlines, no trailing newline."""

    body: bytes
    lines: int
    queued_at: float  # time.monotonic()
    failed_before: bool = False  # a batch the client gave up on: sending it again is a retry


@dataclasses.dataclass
class PendingPoll:
    poll: Poll
    lines: int  # lines still to be queued; making room lowers it, and its tail is never formatted


class InFlight:
    """Batches handed to the client, by body: its callbacks name a batch by its body only."""

    def __init__(self) -> None:
        self._lines: dict[bytes, list[int]] = {}
        self.total = 0

    def add(self, body: bytes, lines: int) -> None:
        self._lines.setdefault(body, []).append(lines)
        self.total += lines

    def lines_of(self, body: bytes) -> int:
        held = self._lines.get(body)
        return held[-1] if held else 0

    def pop(self, body: bytes) -> int:
        """Forget one batch with this body; its lines (0: not ours, e.g. after close)."""
        held = self._lines.get(body)
        if not held:
            return 0
        lines = held.pop()
        if not held:
            del self._lines[body]
        self.total -= lines
        return lines

    def clear(self) -> int:
        total, self.total = self.total, 0
        self._lines.clear()
        return total


class Backoff:
    """Consecutive failed writes -> how long to wait before the next attempt: `initial_s`
    doubling per failure, at most `cap_s`. The client's own retries count as failures too, so
    the wait after it gives up on a batch carries on doubling from where its retries stopped."""

    def __init__(self, initial_s: float, cap_s: float):
        self.initial_s = initial_s
        self.cap_s = cap_s
        self.failures = 0
        self.failing_since: Optional[float] = None
        self.last_error = ""

    def failed(self, error: str) -> None:
        if self.failures == 0:
            self.failing_since = time.monotonic()
        self.failures += 1
        self.last_error = error

    def succeeded(self) -> None:
        self.failures = 0
        self.failing_since = None

    def delay_s(self) -> float:
        if self.failures == 0:
            return 0.0
        return min(self.cap_s, self.initial_s * 2 ** min(self.failures - 1, 32))


class DropLog:
    """Drops since the last report, logged at most once per `every_s` seconds."""

    def __init__(self, every_s: float):
        self.every_s = every_s
        self.dropped = 0
        self.rejected = 0
        self.rejection = ""
        self._last_at = float("-inf")

    def add(self, points: int, rejection: str = "") -> None:
        self.dropped += points
        if rejection:
            self.rejected += points
            self.rejection = rejection

    def due(self, now: float) -> bool:
        return self.dropped > 0 and now - self._last_at >= self.every_s

    def take(self, now: float) -> tuple[int, int, str]:
        report = (self.dropped, self.rejected, self.rejection)
        self.dropped = self.rejected = 0
        self._last_at = now
        return report


@dataclasses.dataclass
class Tally:
    offered: int = 0
    written: int = 0
    dropped: int = 0
    rejected: int = 0
    retried: int = 0
    write_errors: int = 0
    batches_written: int = 0


def head_of(body: bytes, lines: int) -> bytes:
    """The first `lines` lines of `body`."""
    end = -1
    for _ in range(lines):
        end = body.index(b"\n", end + 1)
    return body[:end]


def without_head(body: bytes, lines: int) -> bytes:
    """`body` without its first `lines` lines."""
    start = -1
    for _ in range(lines):
        start = body.index(b"\n", start + 1)
    return body[start + 1 :]
