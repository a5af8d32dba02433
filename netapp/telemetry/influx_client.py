"""What the InfluxDB sink (netapp.telemetry.influx) needs of influxdb-client: its write options
and writer thread, its logs quietened, and its errors read (one line to log; rejected or not, and
how many lines of a partial write were refused)."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from influxdb_client.client.write.retry import WritesRetry
from influxdb_client.client.write_api import WriteOptions, WriteType
from reactivex.scheduler import EventLoopScheduler

from netapp.core.config import InfluxSettings

# The client retries a failed write this many times (its back-off: retry_interval_ms doubling,
# capped at max_retry_delay_ms) before it hands the batch back to us; few, so that a batch comes
# back to the queue, where drop-oldest applies, instead of sitting in the client for minutes.
CLIENT_RETRIES = 3
# Statuses that resending the same body cannot fix: bad line protocol, body too large,
# unprocessable. A field type conflict is one, as a partial write: the other points are stored
# and the message says how many were not ("partial write: ... dropped=N").
REJECTED_STATUSES = frozenset({400, 413, 422})
PARTIAL_WRITE = re.compile(r"partial write\b.*\bdropped=(\d+)", re.DOTALL)


class _QuietBatchLogs(logging.Filter):
    """The client (and urllib3 under it) log every failed batch and every retry; the sink reports
    both itself, rate-limited, so those records are left out. Other messages pass."""

    PREFIXES = ("The batch item wasn't processed successfully", "The retriable error occurred")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self.PREFIXES):
            return False
        # urllib3's "Retrying (%r) after connection broken by ...", for the client's retries only
        return not (
            isinstance(record.args, tuple) and record.args and isinstance(record.args[0], WritesRetry)
        )


QUIETED_LOGGERS = (
    "influxdb_client.client.write_api",
    "influxdb_client.client.write.retry",
    "urllib3.connectionpool",
)


def quiet_client_logs() -> None:
    for name in QUIETED_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _QuietBatchLogs) for f in logger.filters):
            logger.addFilter(_QuietBatchLogs())


def write_options(settings: InfluxSettings, scheduler: EventLoopScheduler) -> WriteOptions:
    """One request per batch we hand over (batch_size=1: our batches are already whole), retried
    by the client CLIENT_RETRIES times with exponential back-off."""
    return WriteOptions(
        write_type=WriteType.batching,
        batch_size=1,
        flush_interval=settings.flush_interval_ms,
        retry_interval=settings.retry_interval_ms,
        max_retries=CLIENT_RETRIES,
        max_retry_delay=settings.max_retry_delay_ms,
        # Bounded by the count above; this only has to be long enough not to cut it short.
        max_retry_time=(CLIENT_RETRIES + 1) * (settings.timeout_ms + settings.max_retry_delay_ms),
        exponential_base=2,
        write_scheduler=scheduler,
    )


def daemon_thread(name: str) -> Any:
    """A thread factory for reactivex: a daemon, so that a write stuck in a retry never holds up
    the interpreter's exit (the client's default pool threads would)."""

    def factory(target: Any) -> threading.Thread:
        return threading.Thread(target=target, name=name, daemon=True)

    return factory


def refused_lines(error: Exception, lines: int) -> int:
    """How many of a rejected batch's lines InfluxDB did not store: a partial write says, else all."""
    partial = PARTIAL_WRITE.search(describe(error))
    return min(lines, int(partial.group(1))) if partial else lines


def describe(error: Exception) -> str:
    """One line: the HTTP status and InfluxDB's message, or the connection error."""
    status = getattr(error, "status", None)
    if status is not None:
        detail = getattr(error, "body", None) or getattr(error, "reason", "")
        if isinstance(detail, bytes):
            detail = detail.decode(errors="replace")
        return f"HTTP {status} {str(detail).strip()}"[:300]
    reason = getattr(error, "reason", None)  # urllib3 MaxRetryError: the last connection error
    return str(reason or error).splitlines()[0][:300]
