"""Notifications out: a JSON body POSTed to a subscriber's callback URI, signed, retried.

A few worker threads take deliveries from one bounded queue, so a slow or dead callback holds one
worker for at most one request timeout, never the collector or the other subscribers. A
subscription's deliveries go out one at a time, in the order they were made (DeliveryQueue). A delivery
that meets a connection error, a timeout, 408, 429 or a 5xx goes back into the queue with a due
time (exponential backoff), not into a sleeping worker; after `max_retries` retries it is given
up and counted. Any other answer outside 2xx is final: the receiver refused the notification.

Where a notification may go is checked when it is sent, not only when the subscription was made:
the callback's host is resolved for each delivery, and a delivery to an address the policy refuses
(netapp.core.destinations, setting telemetry.subscriptions.callback_allow) is not sent, counted
(`refused`) and logged once; the subscription's `last_error` says why. The connection goes to the
address that was checked (netapp.telemetry.pinned). Redirects are not followed, and proxies named
in the environment are not used.

The signature (api/subscriptions.md, "Verifying a notification"): HMAC-SHA256, keyed with the
subscription's secret (its UTF-8 bytes), over `<timestamp>.<body>`, where the timestamp is the
X-DPP-Timestamp header (Unix seconds, set at each attempt) and the body the raw bytes received.
Signing the timestamp with the body lets a receiver refuse replays of an old notification.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import httpx

import netapp
from netapp.core.config import SubscriptionSettings
from netapp.core.destinations import AllowList, DestinationRefused, Destinations, Resolver, resolve
from netapp.telemetry.pinned import PinnedTransport

log = logging.getLogger("netapp.telemetry.notify")

SIGNATURE_HEADER = "X-DPP-Signature"
TIMESTAMP_HEADER = "X-DPP-Timestamp"
SUBSCRIPTION_HEADER = "X-DPP-Subscription"
# How far a receiver should let X-DPP-Timestamp stray from its own clock (our recommendation).
SIGNATURE_TOLERANCE_S = 300
USER_AGENT = f"dpp-netapp/{netapp.__version__}"
# Notifications of one subscription that may wait behind the one out (being sent or retried):
# beyond, a new one is dropped and counted, so that a subscriber that stopped answering cannot fill
# the queue that every other subscriber's notifications share.
MAX_BEHIND = 100

# Answers worth trying again: the receiver may take it later.
RETRY_STATUSES = frozenset({408, 429})


# --- signatures --------------------------------------------------------------------------------


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The X-DPP-Signature value of `body` sent at `timestamp`: `sha256=<hex>`."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def verify_signature(
    secret: str,
    body: bytes,
    timestamp: Optional[str],
    signature: Optional[str],
    *,
    now_s: Optional[float] = None,
    tolerance_s: float = SIGNATURE_TOLERANCE_S,
) -> bool:
    """What a receiver does with a notification's headers: the signature matches the body and
    the timestamp, and the timestamp is recent (an old notification replayed is refused)."""
    try:
        sent_at = int(timestamp or "")
    except ValueError:
        return False
    now = time.time() if now_s is None else now_s
    if abs(now - sent_at) > tolerance_s:
        return False
    # Bytes: compare_digest refuses str that is not ASCII, and a forged header may be anything.
    return hmac.compare_digest(
        sign(secret, sent_at, body).encode(), (signature or "").encode("utf-8", "replace")
    )


# --- deliveries ----------------------------------------------------------------------------------


@dataclass
class DeliveryStats:
    """How one subscription's notifications went since the NetApp started."""

    sent: int = 0
    retried: int = 0  # attempts after a failed one
    failed: int = 0  # given up: out of retries, or refused by the receiver
    dropped: int = 0  # never sent: the queue was full, or the NetApp stopped first
    refused: int = 0  # never sent: the callback's address is not allowed (last_error says why)
    last_sequence: int = 0  # the sequence number of the last notification sent
    last_error: str = ""
    # Set when the subscription is deleted: what is still queued for it is not sent.
    cancelled: bool = False


@dataclass
class Delivery:
    """One notification to send: the body is final, the signature is made at each attempt."""

    subscription_id: str
    url: str
    secret: str
    body: bytes
    sequence: int
    stats: DeliveryStats
    # Sent even after the subscription is gone (its expiry notification).
    final: bool = False
    attempts: int = 0


class DeliveryQueue:
    """Deliveries ordered by when they are due (now, or after a retry's backoff); bounded.

    A subscription's notifications go out in the order they were made: one of its deliveries at a
    time is out (queued to send, being sent, or waiting for its retry); the next waits behind it
    until the worker says it is `done`. Several workers would otherwise send a subscriber a change
    before the addition it follows. A subscriber that does not answer holds back its own
    notifications only, and at most `max_behind` of them wait (beyond, `put` refuses).

    `get` blocks until a delivery is due. After `close`, it hands out what is due already and
    then None: retries due later, and what waits behind them, are left behind (`left_behind`).
    """

    def __init__(
        self, capacity: int, monotonic: Callable[[], float] = time.monotonic, max_behind: int = MAX_BEHIND
    ):
        self.capacity = capacity
        self.max_behind = max_behind
        self._monotonic = monotonic
        self._heap: list[tuple[float, int, Delivery]] = []
        self._order = itertools.count()  # ties in due time keep their arrival order
        # Subscriptions with a delivery out -> their deliveries waiting behind it, in order.
        self._behind: dict[str, deque[Delivery]] = {}
        self._waiting = 0  # deliveries in self._behind
        self._ready = threading.Condition()
        self._closed = False

    def __len__(self) -> int:
        with self._ready:
            return len(self._heap) + self._waiting

    def put(self, delivery: Delivery) -> bool:
        """Queue a new delivery, due now or after its subscription's delivery out; False (not
        queued) when the queue is full or closed, or max_behind wait behind that delivery already."""
        with self._ready:
            if self._closed or len(self._heap) + self._waiting >= self.capacity:
                return False
            behind = self._behind.get(delivery.subscription_id)
            if behind is not None:
                if len(behind) >= self.max_behind:
                    return False
                behind.append(delivery)
                self._waiting += 1
            else:
                self._behind[delivery.subscription_id] = deque()
                self._push(delivery, self._monotonic())
            return True

    def done(self, delivery: Delivery) -> None:
        """The delivery `get` handed out is over (sent, given up, refused or cancelled): the next of
        its subscription is due."""
        with self._ready:
            behind = self._behind.get(delivery.subscription_id)
            if behind is None:
                return
            if behind:
                self._waiting -= 1
                self._push(behind.popleft(), self._monotonic())
            else:
                del self._behind[delivery.subscription_id]

    def retry(self, delivery: Delivery, delay_s: float) -> None:
        """Queue a delivery again after `delay_s`. Not bounded: it held its place already."""
        with self._ready:
            self._push(delivery, self._monotonic() + delay_s)

    def _push(self, delivery: Delivery, due: float) -> None:
        heapq.heappush(self._heap, (due, next(self._order), delivery))
        self._ready.notify()

    def get(self) -> Optional[Delivery]:
        with self._ready:
            while True:
                wait = self._wait_for_first()
                if wait is None:
                    return None
                if wait <= 0:
                    return heapq.heappop(self._heap)[2]
                self._ready.wait(wait)

    def _wait_for_first(self) -> Optional[float]:
        """Seconds until the first delivery is due (<= 0: now); None: nothing more to hand out."""
        if not self._heap:
            if self._closed:
                return None
            return 1.0  # nothing queued: wait for a put (it notifies) or the close
        wait = self._heap[0][0] - self._monotonic()
        if self._closed and wait > 0:
            return None
        return wait

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def left_behind(self) -> list[Delivery]:
        """What is still queued (after close: the retries that were not due yet, and what waits
        behind them)."""
        with self._ready:
            return [delivery for _, _, delivery in self._heap] + [
                delivery for behind in self._behind.values() for delivery in behind]


class Notifier:
    """Worker threads that send deliveries from the queue to their callbacks."""

    def __init__(
        self,
        settings: SubscriptionSettings,
        *,
        clock_s: Callable[[], float] = time.time,
        resolver: Resolver = resolve,
        destinations: Optional[Destinations] = None,
    ):
        self.settings = settings
        self.queue = DeliveryQueue(settings.queue)
        self._clock_s = clock_s
        # Where callbacks may go (the settings' policy unless given); the subscription manager
        # checks new ones with it too.
        self.destinations = destinations if destinations is not None else Destinations(
            AllowList.of(settings.callback_allow), resolver)
        self._lock = threading.Lock()  # the stats, which API readers and workers share
        # Every subscription's counts summed, those deleted since included (netapp.telemetry.notifications).
        self._totals = DeliveryStats()
        self._busy = 0  # deliveries being sent now
        self._workers: list[threading.Thread] = []

    def start(self) -> None:
        if self._workers:
            return
        for number in range(self.settings.workers):
            worker = threading.Thread(target=self._work, name=f"telemetry-notify-{number}", daemon=True)
            worker.start()
            self._workers.append(worker)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Send what is due within `timeout_s`; retries due later are dropped (counted)."""
        self.queue.close()
        deadline = time.monotonic() + timeout_s
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        self._workers = []
        left = self.queue.left_behind()
        if left:
            log.warning("telemetry: %d notifications not sent: the NetApp is stopping", len(left))
        with self._lock:
            for delivery in left:
                delivery.stats.dropped += 1
                self._totals.dropped += 1

    def send(self, delivery: Delivery) -> bool:
        """Queue a delivery (never waits); False, counted as dropped, when the queue is full."""
        if self.queue.put(delivery):
            return True
        with self._lock:
            delivery.stats.dropped += 1
            self._totals.dropped += 1
        return False

    def idle(self) -> bool:
        """Nothing queued and nothing being sent."""
        with self._lock:
            busy = self._busy
        return busy == 0 and len(self.queue) == 0

    def totals(self) -> DeliveryStats:
        """What became of every notification since the notifier was made, whatever its subscription."""
        return self.stats_of(self._totals)

    def stats_of(self, stats: DeliveryStats) -> DeliveryStats:
        """A copy of `stats`, consistent (taken under the workers' lock)."""
        with self._lock:
            return DeliveryStats(**{name: getattr(stats, name) for name in stats.__dataclass_fields__})

    # --- the workers --------------------------------------------------------------------------

    def _work(self) -> None:
        with httpx.Client(
            timeout=self.settings.timeout_ms / 1000,
            follow_redirects=False,  # a redirect could send the data elsewhere than the subscriber said
            headers={"User-Agent": USER_AGENT},
            transport=PinnedTransport(self.destinations, proxy=self.settings.proxy),
            trust_env=False,
        ) as client:
            while (delivery := self.queue.get()) is not None:
                with self._lock:
                    self._busy += 1
                retried = False
                try:
                    retried = self._attempt(client, delivery)
                except Exception:  # a bug on one delivery must not cost the worker
                    log.exception("telemetry: notification %d to %s failed", delivery.sequence, delivery.url)
                finally:
                    if not retried:  # before busy drops: idle() never sees the next one missing
                        self.queue.done(delivery)
                    with self._lock:
                        self._busy -= 1

    def _attempt(self, client: httpx.Client, delivery: Delivery) -> bool:
        """One attempt at the delivery; True when it went back into the queue for a retry."""
        if delivery.stats.cancelled and not delivery.final:
            return False  # the subscription was deleted while this waited
        delivery.attempts += 1
        try:
            error, retryable = self._post(client, delivery)
        except DestinationRefused as exc:
            self._count_refused(delivery, f"refused: {exc}")
            return False
        if error is None:
            self._count_sent(delivery)
        elif retryable and delivery.attempts <= self.settings.max_retries:
            self._count_retry(delivery, error)
            self.queue.retry(delivery, self._backoff_s(delivery.attempts))
            return True
        else:
            self._count_failed(delivery, error)
        return False

    def _post(self, client: httpx.Client, delivery: Delivery) -> tuple[Optional[str], bool]:
        """(None, _) when the receiver took it; else (what went wrong, whether to try again)."""
        timestamp = int(self._clock_s())
        headers = {
            "Content-Type": "application/json",
            TIMESTAMP_HEADER: str(timestamp),
            SIGNATURE_HEADER: sign(delivery.secret, timestamp, delivery.body),
            SUBSCRIPTION_HEADER: delivery.subscription_id,
        }
        try:
            response = client.post(delivery.url, content=delivery.body, headers=headers)
        except httpx.TransportError as exc:  # connection refused, timeout, reset: try again later
            return f"{type(exc).__name__}: {exc}", True
        if response.is_success:
            return None, False
        status = response.status_code
        if response.is_redirect:
            return f"HTTP {status} (redirects are not followed)", False
        return f"HTTP {status}", status in RETRY_STATUSES or status >= 500

    def _backoff_s(self, attempts: int) -> float:
        delay_ms = self.settings.retry_interval_ms * 2 ** (attempts - 1)
        return min(delay_ms, self.settings.max_retry_delay_ms) / 1000

    def _count_sent(self, delivery: Delivery) -> None:
        with self._lock:
            stats = delivery.stats
            stats.sent += 1
            self._totals.sent += 1
            stats.last_sequence = max(stats.last_sequence, delivery.sequence)
            recovered = bool(stats.last_error)
            stats.last_error = ""
        if recovered:
            log.info(
                "telemetry: subscription %s: %s takes notifications again",
                delivery.subscription_id,
                delivery.url,
            )

    def _count_retry(self, delivery: Delivery, error: str) -> None:
        with self._lock:
            delivery.stats.retried += 1
            self._totals.retried += 1
            first = not delivery.stats.last_error
            delivery.stats.last_error = error
        if first:  # once per outage, not once per attempt
            log.warning(
                "telemetry: subscription %s: %s failed (%s); retrying",
                delivery.subscription_id,
                delivery.url,
                error,
            )

    def _count_refused(self, delivery: Delivery, error: str) -> None:
        with self._lock:
            delivery.stats.refused += 1
            self._totals.refused += 1
            first = delivery.stats.last_error != error
            delivery.stats.last_error = error
        if first:  # once, not once per notification, until something changes
            log.warning(
                "telemetry: subscription %s: notifications to %s are not sent: %s",
                delivery.subscription_id,
                delivery.url,
                error,
            )

    def _count_failed(self, delivery: Delivery, error: str) -> None:
        with self._lock:
            delivery.stats.failed += 1
            self._totals.failed += 1
            delivery.stats.last_error = error
        log.warning(
            "telemetry: subscription %s: notification %d to %s given up after %d attempts (%s)",
            delivery.subscription_id,
            delivery.sequence,
            delivery.url,
            delivery.attempts,
            error,
        )
