"""MEC 011 AppTerminationNotifications to an application's subscribers, through the notifier the
telemetry subscriptions and the service availability notifications use (netapp.telemetry.notify):
queued, so the administrator's request does not wait on callbacks; each attempt through the pinned
transport, so a callback reaches only an address the callback policy allows at the moment it is
sent (netapp.telemetry.pinned); a connection error, a timeout, 408, 429 or a 5xx retried with
exponential backoff, at most `max_retries` times, then given up. The settings are the
subscriptions' (telemetry.subscriptions: max_retries, retry_interval_ms, max_retry_delay_ms,
timeout_ms; api/subscriptions.md). What became of each subscription's notifications is counted
(`stats_of`) and logged. The termination does not depend on delivery: the instance goes when it
confirms or when its maxGracefulTimeout passes (netapp.mec.app_service)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any, Optional

from netapp.core.config import SubscriptionSettings
from netapp.core.destinations import Destinations
from netapp.telemetry.notify import Delivery, DeliveryStats, Notifier


class TerminationNotifier:
    """Queues notifications to callbacks, counted per subscription."""

    def __init__(self, settings: SubscriptionSettings, destinations: Optional[Destinations] = None):
        self.notifier = Notifier(settings, destinations=destinations)
        self._stats: dict[str, DeliveryStats] = {}
        self._sequence = itertools.count(1)
        self._lock = threading.Lock()  # the stats and the sequence (API threads)

    @property
    def destinations(self) -> Destinations:
        return self.notifier.destinations

    def start(self) -> None:
        self.notifier.start()

    def close(self) -> None:
        self.notifier.stop()

    def send(self, notifications: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Queue each (subscription id, callback, body); never waits on a callback."""
        for subscription_id, callback, body in notifications:
            with self._lock:
                stats = self._stats.setdefault(subscription_id, DeliveryStats())
                sequence = next(self._sequence)
            encoded = json.dumps(body, separators=(",", ":")).encode()
            # No secret: an ETSI subscription has none. Final: its retries go on after the instance
            # and its subscriptions are gone (a termination that times out removes them).
            self.notifier.send(Delivery(subscription_id, callback, "", encoded, sequence, stats, final=True))

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every notification queued was sent or given up; False when that took longer
        than `timeout_s` (retries due later than that are still waiting)."""
        deadline = time.monotonic() + timeout_s
        while not self.notifier.idle():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def stats_of(self, subscription_id: str) -> Optional[DeliveryStats]:
        """How the subscription's notifications went: sent, retried, failed after the retries,
        refused by the policy (None: none was sent to it)."""
        with self._lock:
            stats = self._stats.get(subscription_id)
        return None if stats is None else self.notifier.stats_of(stats)
