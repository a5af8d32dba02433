"""The InfluxDB sink: every poll written as line protocol through influxdb-client's batching write
API, without ever blocking the collector, and without losing a point it does not count.

How a poll travels:

    offer(poll)            collector thread: appends the poll to `pending` and returns
    pending -> queue       feeder thread: formats the poll (`Poll.line_chunks`) into chunks
    queue -> in flight     feeder thread: joins chunks into batches of up to batch_lines lines and
                           hands them to the client's batching writer (one request per batch)
    in flight -> written   client thread: success callback; or retry callback, then success; or
                           error callback: the batch comes back to the head of the queue

Everything the sink holds (pending + queued + in flight) is at most `buffer_points` lines. The
client's own pipeline is unbounded, so the sink hands it at most two batches at a time (one while
writes fail) and keeps the rest in its own queue, where it can choose what to drop.

When the buffer is full the OLDEST points are dropped: counters are cumulative, so the newest poll
alone still carries every total, and after an outage the dashboards get the recent past rather
than its first minutes followed by a hole up to now (Telegraf's metric buffer does the same). What
is dropped is counted in `points_dropped` and logged at most every DROP_LOG_EVERY_S seconds.
Batches InfluxDB refuses (HTTP 400, 413, 422: bad line protocol, too large, a field type conflict)
cannot succeed by resending: their refused points are counted as dropped (and in
`points_rejected`) instead of being retried forever; of a partial write, the rest count as written.
Every other failure (connection refused, timeout, 5xx, 401/403/404: a server or a setting an
operator can fix) keeps the batch and retries it with exponential back-off.

The invariant: points_offered == points_written + points_dropped + points_queued.

The sink's bookkeeping (queue, in flight, back-off, drop log, tally) is netapp.telemetry.influx_buffer;
what it needs of influxdb-client (write options, quiet logs, reading errors) is
netapp.telemetry.influx_client.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections import deque
from typing import Any

from influxdb_client import InfluxDBClient, WritePrecision
from reactivex.scheduler import EventLoopScheduler

from netapp.core.config import InfluxSettings
from netapp.telemetry.influx_buffer import (
    Backoff,
    Chunk,
    DropLog,
    InFlight,
    PendingPoll,
    Tally,
    head_of,
    without_head,
)
from netapp.telemetry.influx_client import (
    REJECTED_STATUSES,
    daemon_thread,
    describe,
    quiet_client_logs,
    refused_lines,
    write_options,
)
from netapp.telemetry.poll import Poll

log = logging.getLogger("netapp.telemetry")

DROP_LOG_EVERY_S = 10.0
IDLE_WAKE_S = 1.0  # the feeder looks at its deadlines (flush, back-off, drop log) at least this often


class InfluxSink:
    """A `Sink` writing polls to InfluxDB 2.x, or 1.8 through its v2 API (see InfluxSettings)."""

    name = "influxdb"

    def __init__(self, settings: InfluxSettings):
        self.settings = settings
        self.buffer_points = settings.buffer_points
        # Half the buffer at most per batch, so that new polls can always make room by dropping
        # older queued lines rather than finding the whole buffer in the client's hands.
        self.batch_lines = max(1, min(settings.batch_lines, settings.buffer_points // 2))
        self.max_in_flight = min(2 * self.batch_lines, settings.buffer_points // 2)
        self._flush_interval_s = settings.flush_interval_ms / 1000
        self._tally = Tally()
        self._pending: deque[PendingPoll] = deque()
        self._pending_lines = 0
        self._queue: deque[Chunk] = deque()
        self._queued_lines = 0
        self._in_flight = InFlight()
        self._backoff = Backoff(settings.retry_interval_ms / 1000, settings.max_retry_delay_ms / 1000)
        self._retry_at = 0.0  # monotonic time before which nothing is sent (after a failed batch)
        self._drops = DropLog(DROP_LOG_EVERY_S)
        self._flushers = 0  # flush() callers waiting: partial batches go out at once
        self._closing = False  # close() began: offers are refused (and counted)
        self._stopped = False  # the feeder is told to exit; callbacks are no longer counted
        self._changed = threading.Condition()  # guards all of the above; notified on every change
        quiet_client_logs()
        self._scheduler = EventLoopScheduler(thread_factory=daemon_thread("influxdb-writer"))
        self._options = write_options(settings, self._scheduler)
        self._client = InfluxDBClient(
            url=settings.url,
            token=settings.token.get_secret_value(),
            org=settings.org,
            timeout=settings.timeout_ms,
        )
        self._write_api = self._client.write_api(
            write_options=self._options,
            success_callback=self._on_written,
            error_callback=self._on_failed,
            retry_callback=self._on_retry,
        )
        self._feeder = threading.Thread(target=self._feed, name="influxdb-feeder", daemon=True)
        self._feeder.start()

    @classmethod
    def from_settings(cls, settings: InfluxSettings) -> "InfluxSink":
        return cls(settings)

    # --- the Sink protocol ---------------------------------------------------------------------

    def offer(self, poll: Poll) -> None:
        """Take the poll and return: formatting and writing happen on the sink's threads."""
        lines = poll.point_count
        with self._changed:
            self._tally.offered += lines
            if self._closing:
                self._drop(lines, "")
                return
            self._pending.append(PendingPoll(poll, lines))
            self._pending_lines += lines
            self._make_room()
            self._changed.notify_all()

    def stats(self) -> dict[str, int]:
        with self._changed:
            tally = self._tally
            return {
                "points_offered": tally.offered,
                "points_written": tally.written,
                "points_dropped": tally.dropped,
                "points_rejected": tally.rejected,
                "points_queued": self._held(),
                "points_retried": tally.retried,
                "write_errors": tally.write_errors,
                "batches_written": tally.batches_written,
            }

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Send partial batches now and wait until nothing is held; False if `timeout_s` passed
        first (InfluxDB slow or down, or polls still coming in)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            self._flushers += 1
            self._changed.notify_all()
            try:
                while self._held() > 0 and not self._stopped:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._changed.wait(remaining)
                return self._held() == 0
            finally:
                self._flushers -= 1

    def close(self, timeout_s: float = 5.0) -> None:
        """Deliver what is held within `timeout_s`; what is still held then is counted as dropped
        (a batch the client still completes after this stays counted as dropped)."""
        with self._changed:
            if self._closing:
                return
            self._closing = True
        self.flush(timeout_s)
        with self._changed:
            self._stopped = True
            lost = self._forget_everything_held()
            self._changed.notify_all()
        self._feeder.join(IDLE_WAKE_S)  # it stops at its next chunk or wake-up
        self._log_drops(force=True)
        if lost:
            log.warning(
                "influxdb: closing with %d points not written to %s (%s): counted as dropped",
                lost,
                self.settings.url,
                self._backoff.last_error or "InfluxDB too slow",
            )
        self._options.max_close_wait = 0  # the client then waits one 0.1 s step, not 5 minutes
        self._write_api.close()
        self._client.close()
        self._scheduler.dispose()

    # --- holding and dropping (callers hold self._changed) -------------------------------------

    def _held(self) -> int:
        return self._pending_lines + self._queued_lines + self._in_flight.total

    def _forget_everything_held(self) -> int:
        """Closing: count every held line as dropped (not logged as a buffer drop); how many."""
        for pending in self._pending:
            pending.lines = 0  # the feeder may be formatting one: it must not count it again
        lost = self._pending_lines + self._queued_lines + self._in_flight.clear()
        self._pending.clear()
        self._queue.clear()
        self._pending_lines = self._queued_lines = 0
        self._tally.dropped += lost
        return lost

    def _make_room(self) -> None:
        """Drop the oldest lines until the buffer holds at most buffer_points: queued chunks
        first (formatted from older polls), then unformatted polls. In-flight lines are the
        client's and stay counted; at most max_in_flight < buffer_points of them."""
        excess = self._held() - self.buffer_points
        if excess > 0:
            excess -= self._drop_queued(excess)
        if excess > 0:
            self._trim_pending(excess)

    def _drop_queued(self, wanted: int) -> int:
        dropped = 0
        while self._queue and dropped < wanted:
            chunk = self._queue[0]
            cut = min(chunk.lines, wanted - dropped)
            if cut == chunk.lines:
                self._queue.popleft()
            else:
                rest = without_head(chunk.body, cut)
                self._queue[0] = dataclasses.replace(chunk, body=rest, lines=chunk.lines - cut)
            self._queued_lines -= cut
            dropped += cut
        self._drop(dropped, "")
        return dropped

    def _trim_pending(self, wanted: int) -> None:
        dropped = 0
        while self._pending and dropped < wanted:
            pending = self._pending[0]
            cut = min(pending.lines, wanted - dropped)
            pending.lines -= cut
            if pending.lines == 0:
                self._pending.popleft()
            self._pending_lines -= cut
            dropped += cut
        self._drop(dropped, "")

    def _drop(self, points: int, rejection: str) -> None:
        if points <= 0:
            return
        self._tally.dropped += points
        if rejection:
            self._tally.rejected += points
        self._drops.add(points, rejection)

    # --- the feeder thread ---------------------------------------------------------------------

    def _feed(self) -> None:
        while not self._stopped:
            try:
                self._format_next_poll()
                self._send_due_batches()
                self._log_drops()
                self._wait_for_work()
            except Exception:  # a bug must cost what it touched (counted), never the feeder
                log.exception("influxdb: the sink's feeder failed; going on")
                time.sleep(IDLE_WAKE_S)

    def _format_next_poll(self) -> None:
        """Format the oldest pending poll into queued chunks, outside the lock (100k lines take
        ~0.1 s); each chunk is queued as soon as it is made."""
        with self._changed:
            if not self._pending:
                return
            pending = self._pending[0]
        try:
            for text, lines in pending.poll.line_chunks(self.batch_lines):
                with self._changed:
                    if not self._queue_chunk(pending, text.encode(), lines):
                        break
        finally:
            with self._changed:
                self._finish(pending)

    def _queue_chunk(self, pending: PendingPoll, body: bytes, lines: int) -> bool:
        """Queue what is still wanted of this chunk; False once nothing more of the poll is."""
        keep = min(lines, pending.lines)
        if keep <= 0 or self._stopped:
            return False
        if keep < lines:
            body = head_of(body, keep)
        pending.lines -= keep
        self._pending_lines -= keep
        self._queue.append(Chunk(body, keep, time.monotonic()))
        self._queued_lines += keep
        self._changed.notify_all()
        return pending.lines > 0

    def _finish(self, pending: PendingPoll) -> None:
        if self._pending and self._pending[0] is pending:
            self._pending.popleft()
        if pending.lines > 0:  # formatting failed, or made fewer lines than point_count: count them
            log.error("influxdb: poll %d: %d points could not be formatted", pending.poll.seq, pending.lines)
            self._pending_lines -= pending.lines
            self._drop(pending.lines, "")
            pending.lines = 0

    def _send_due_batches(self) -> None:
        while True:
            with self._changed:
                if not self._batch_due(time.monotonic()):
                    return
                body, lines = self._take_batch()
                self._in_flight.add(body, lines)
            self._write(body)

    def _batch_due(self, now: float) -> bool:
        return now >= self._next_send_at()

    def _next_send_at(self) -> float:
        """When the next batch may go (monotonic); inf while only a callback can change that."""
        if not self._queue or self._stopped or self._in_flight_full():
            return math.inf
        if self._queued_lines >= self.batch_lines or self._flushers > 0 or self._closing:
            due = 0.0
        else:  # a partial batch waits up to flush_interval_ms for more lines
            due = self._queue[0].queued_at + self._flush_interval_s
        return max(due, self._retry_at)

    def _in_flight_full(self) -> bool:
        """Two batches in the client at most; one while writes fail (the rest waits here, where
        drop-oldest applies)."""
        in_flight = self._in_flight.total
        if in_flight == 0:
            return False
        return self._backoff.failures > 0 or in_flight + self.batch_lines > self.max_in_flight

    def _take_batch(self) -> tuple[bytes, int]:
        """The oldest queued chunks, joined, up to batch_lines lines (at least one chunk)."""
        chunks = [self._queue.popleft()]
        lines = chunks[0].lines
        while self._queue and lines + self._queue[0].lines <= self.batch_lines:
            chunks.append(self._queue.popleft())
            lines += chunks[-1].lines
        self._queued_lines -= lines
        self._tally.retried += sum(chunk.lines for chunk in chunks if chunk.failed_before)
        body = chunks[0].body if len(chunks) == 1 else b"\n".join(chunk.body for chunk in chunks)
        return body, lines

    def _write(self, body: bytes) -> None:
        try:
            self._write_api.write(
                bucket=self.settings.bucket,
                org=self.settings.org,
                record=body,
                write_precision=WritePrecision.NS,
            )
        except Exception as exc:  # the client refused it outright (closed, broken pipeline): a failed write
            self._on_failed(None, body, exc)

    def _wait_for_work(self) -> None:
        with self._changed:
            now = time.monotonic()
            if self._stopped or self._pending or self._batch_due(now):
                return
            self._changed.wait(self._seconds_to_next_deadline(now))

    def _seconds_to_next_deadline(self, now: float) -> float:
        return max(0.001, min(now + IDLE_WAKE_S, self._next_send_at()) - now)

    def _log_drops(self, force: bool = False) -> None:
        """Report the drops since the last report, if the last was DROP_LOG_EVERY_S ago."""
        with self._changed:
            now = time.monotonic()
            if not (self._drops.due(now) or (force and self._drops.dropped)):
                return
            dropped, rejected, rejection = self._drops.take(now)
            error = self._backoff.last_error if self._backoff.failures else ""
        if rejected:
            log.error("influxdb: %s rejected %d points (dropped): %s", self.settings.url, rejected, rejection)
        if dropped > rejected:
            log.warning(
                "influxdb: dropped the %d oldest points: the buffer of %d points was full%s",
                dropped - rejected,
                self.buffer_points,
                f"; InfluxDB: {error}" if error else "",
            )

    # --- client callbacks (the client's writer thread) ------------------------------------------

    def _on_written(self, _batch: Any, body: bytes) -> None:
        with self._changed:
            lines = self._in_flight.pop(body)
            if self._stopped or lines == 0:  # closed meanwhile: already counted as dropped
                return
            self._tally.written += lines
            self._tally.batches_written += 1
            if self._backoff.failing_since is not None:
                outage_s = time.monotonic() - self._backoff.failing_since
                log.info("influxdb: writes to %s succeed again after %.0f s", self.settings.url, outage_s)
            self._backoff.succeeded()
            self._retry_at = 0.0
            self._changed.notify_all()

    def _on_retry(self, _batch: Any, body: bytes, error: Exception) -> None:
        with self._changed:
            if self._stopped:
                return
            self._tally.retried += self._in_flight.lines_of(body)
            self._tally.write_errors += 1
            self._note_failure(error)

    def _on_failed(self, _batch: Any, body: bytes, error: Exception) -> None:
        """The client gave up on the batch: back to the head of the queue (it was counted in the
        buffer all along, so there is room), unless resending cannot help."""
        with self._changed:
            lines = self._in_flight.pop(body)
            if self._stopped or lines == 0:
                return
            self._tally.write_errors += 1
            status = getattr(error, "status", None)
            if status in REJECTED_STATUSES:
                refused = refused_lines(error, lines)
                self._tally.written += lines - refused
                self._drop(refused, describe(error))
            else:
                self._note_failure(error)
                # queued_at 0: due as soon as the back-off allows, not a flush interval later
                self._queue.appendleft(Chunk(body, lines, 0.0, failed_before=True))
                self._queued_lines += lines
                self._retry_at = time.monotonic() + self._backoff.delay_s()
            self._make_room()  # a no-op: its lines were in the buffer all along; the bound is kept anyway
            self._changed.notify_all()

    def _note_failure(self, error: Exception) -> None:
        if self._backoff.failures == 0:
            log.warning(
                "influxdb: writes to %s fail (%s); holding up to %d points and retrying",
                self.settings.url,
                describe(error),
                self.buffer_points,
            )
        self._backoff.failed(describe(error))
