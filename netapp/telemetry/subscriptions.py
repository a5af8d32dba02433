"""Telemetry subscriptions in the ETSI MEC style: a callback URI, a filter, a trigger (a period or
a threshold) and an optional expiry deadline; notifications go out through netapp.telemetry.notify.

The resources look like MEC 011/013 subscriptions: `subscriptionType`, `callbackReference`,
`_links.self`, `expiryDeadline` as a MEC TimeStamp, an `ExpiryNotification` when the deadline
passes (api/subscriptions.md describes them for users).

Where callbacks may go: only to public addresses, unless the operator's allow-list
(telemetry.subscriptions.callback_allow) adds networks or names (netapp.core.destinations).
Checked when a subscription is created, and again when each notification is sent (the name may
resolve elsewhere by then); a refused notification is counted, not sent.

Who sees what: a subscription belongs to its creator's tenant and only ever receives that
tenant's points; the node-wide measurements need an admin. Whether the creator was an admin is
taken at creation and kept with the subscription.

Threads: the collector hands each poll to `offer`, which puts it in a one-poll slot and returns.
The manager's own thread evaluates the subscriptions against it and queues the notifications for
the notifier's workers. A poll that arrives while the previous one is still being evaluated
replaces the waiting one (counted in `polls_skipped`): a crossing only that poll saw is missed.

Subscriptions, with their secrets, live in their own SQLite file (state_dir/subscriptions.db),
so that a restart loses none; one whose deadline passed while the NetApp was down gets its
expiry notification when it starts again.

The parts: the resources and their checks (subscription_models), what the callbacks receive
(subscription_notifications), period and threshold triggers (subscription_triggers), the SQLite
file (subscription_store), and here the manager that ties them to the collector and the notifier.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import httpx

from netapp.core.config import SubscriptionSettings
from netapp.service.contract import Conflict, InvalidInput, NotFound, Principal, QuotaExceeded
from netapp.telemetry.notify import Delivery, DeliveryStats, Notifier
from netapp.telemetry.pinned import callback_refusal
from netapp.telemetry.poll import Point, PointFilter, Poll
from netapp.telemetry.subscription_models import (
    FilterCriteria,
    LinkType,
    NotificationStats,
    SelfLink,
    Subscription,
    SubscriptionCreated,
    SubscriptionRequest,
    Threshold,
    point_filter,
    require_visible,
    subscription_path,
)
from netapp.telemetry.subscription_notifications import encode, expiry_notification, telemetry_notification
from netapp.telemetry.subscription_store import StoredSubscription, SubscriptionStore
from netapp.telemetry.subscription_triggers import PeriodTrigger, ThresholdTrigger, Trigger

log = logging.getLogger("netapp.telemetry.subscriptions")

SUBSCRIPTIONS_DB = "subscriptions.db"

# Sequence numbers are reserved in blocks in the store, so that they keep rising across restarts
# (a crash included) at the cost of one write per block, not one per notification.
SEQUENCE_BLOCK = 1000
# How often the manager looks for expired subscriptions when no poll comes.
EXPIRY_CHECK_S = 1.0


# --- the manager ---------------------------------------------------------------------------------


@dataclass
class _Active:
    """A subscription being served: what is stored, and what only this run knows."""

    stored: StoredSubscription
    trigger: Trigger
    stats: DeliveryStats = field(default_factory=DeliveryStats)
    sequence: int = 0
    reserved: int = 0

    @property
    def id(self) -> str:
        return self.stored.id


class SubscriptionManager:
    """Creates, lists, reads and deletes subscriptions for callers, and turns polls into their
    notifications. `offer` is the collector listener."""

    def __init__(
        self,
        store: SubscriptionStore,
        settings: SubscriptionSettings,
        *,
        interval_s: float,
        notifier: Optional[Notifier] = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ):
        self.store = store
        self.settings = settings
        self.interval_s = interval_s
        self.notifier = notifier if notifier is not None else Notifier(settings)
        self._clock_ns = clock_ns
        self._lock = threading.Lock()  # guards _active (API threads, the evaluator)
        self._active: dict[str, _Active] = {}
        for stored in store.load():
            self._active[stored.id] = self._activate(stored)
        self.polls_skipped = 0
        self._pending: Optional[Poll] = None
        self._evaluating = False
        self._poll_ready = threading.Condition()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @classmethod
    def open(
        cls, state_dir: Path, settings: SubscriptionSettings, *, interval_s: float
    ) -> "SubscriptionManager":
        return cls(SubscriptionStore.open(state_dir / SUBSCRIPTIONS_DB), settings, interval_s=interval_s)

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self.notifier.start()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="telemetry-subscriptions", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop evaluating polls, give the notifications queued `timeout_s`, close the store."""
        self._stop.set()
        with self._poll_ready:
            self._poll_ready.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self.notifier.stop(timeout_s)
        self.store.close()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every poll offered was evaluated and every notification sent or given up;
        False when that took longer than `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._poll_ready:
                evaluated = self._pending is None and not self._evaluating
            if evaluated and self.notifier.idle():
                return True
            time.sleep(0.005)
        return False

    # --- what callers do ---------------------------------------------------------------------

    def create(
        self, who: Principal, request: SubscriptionRequest, quota: Optional[int] = None
    ) -> SubscriptionCreated:
        """A new subscription of the caller's tenant (InvalidInput, Forbidden or Conflict);
        QuotaExceeded when the tenant holds `quota` subscriptions already."""
        which = point_filter(who, request.filter_criteria, "filterCriteria.measurements")
        self._check_trigger(who, request)
        now = self._clock_ns()
        self._check_deadline(request, now)
        self._check_callback(request.callback_reference)
        stored = StoredSubscription(
            id=secrets.token_hex(12),
            tenant=who.tenant,
            admin=who.is_admin,
            request=request,
            secret=secrets.token_urlsafe(32),
            created_ns=now,
        )
        with self._lock:
            self._check_room(who.tenant, quota)
            self.store.add(stored)
            active = self._active[stored.id] = _Active(stored, self._trigger(request, which))
        log.info(
            "telemetry: subscription %s of tenant %s created (%s)",
            stored.id,
            who.tenant,
            request.callback_reference,
        )
        return SubscriptionCreated(**self._view(active).model_dump(by_alias=True), secret=stored.secret)

    def list_subscriptions(self, who: Principal) -> list[Subscription]:
        """The caller's subscriptions (an admin's: everyone's), oldest first."""
        with self._lock:
            visible = [active for active in self._active.values() if _sees(who, active.stored)]
        return [self._view(active) for active in visible]

    def get(self, who: Principal, subscription_id: str) -> Subscription:
        return self._view(self._find(who, subscription_id))

    def delete(self, who: Principal, subscription_id: str) -> None:
        """Delete it; what is still queued for it is not sent."""
        active = self._find(who, subscription_id)
        self._remove(active)
        log.info("telemetry: subscription %s of tenant %s deleted", active.id, active.stored.tenant)

    def _find(self, who: Principal, subscription_id: str) -> _Active:
        with self._lock:
            active = self._active.get(subscription_id)
        if active is None or not _sees(who, active.stored):
            raise NotFound(f"subscription {subscription_id!r} not found")
        return active

    def _check_trigger(self, who: Principal, request: SubscriptionRequest) -> None:
        if (request.period is None) == (request.threshold is None):
            raise InvalidInput(
                "give exactly one of period (a notification every so many seconds) and threshold "
                "(a notification when a field crosses a value)",
                field="period" if request.period is not None else "threshold",
            )
        if request.period is not None and request.period < self.interval_s:
            raise InvalidInput(
                f"period {request.period:g} s is shorter than the collector's interval "
                f"({self.interval_s:g} s, setting telemetry.interval_s): no poll comes more often",
                field="period",
            )
        if request.threshold is not None:
            self._check_threshold(who, request.threshold, request.filter_criteria)

    @staticmethod
    def _check_threshold(who: Principal, threshold: Threshold, criteria: FilterCriteria) -> None:
        require_visible(who, [threshold.measurement], "threshold.measurement")
        if criteria.measurements is not None and threshold.measurement not in criteria.measurements:
            raise InvalidInput(
                f"{threshold.measurement} is not among filterCriteria.measurements: it would never fire",
                field="threshold.measurement",
            )

    def _check_callback(self, uri: str) -> None:
        """The callback's host resolves, and only to addresses it may reach."""
        reason = callback_refusal(self.notifier.destinations, httpx.URL(uri))
        if reason is not None:
            raise InvalidInput(reason, field="callbackReference")

    @staticmethod
    def _check_deadline(request: SubscriptionRequest, now_ns: int) -> None:
        deadline = request.expiry_deadline
        if deadline is not None and deadline.ns() <= now_ns:
            raise InvalidInput("the expiry deadline has passed already", field="expiryDeadline")

    def held(self, tenant: str) -> int:
        """How many subscriptions the tenant holds."""
        with self._lock:
            return self._held(tenant)

    def _held(self, tenant: str) -> int:
        return sum(1 for active in self._active.values() if active.stored.tenant == tenant)

    def _check_room(self, tenant: str, quota: Optional[int]) -> None:
        held = self._held(tenant)
        QuotaExceeded.unless_room(tenant, "subscriptions", held, quota, "delete one first")
        if held >= self.settings.max_per_tenant:
            raise Conflict(
                f"tenant {tenant!r} holds {held} subscriptions, the most allowed "
                "(setting telemetry.subscriptions.max_per_tenant): delete one first"
            )

    def _view(self, active: _Active) -> Subscription:
        stored = active.stored
        return Subscription(
            **stored.request.model_dump(by_alias=True),
            id=stored.id,
            tenant=stored.tenant,
            links=SelfLink(self_=LinkType(href=subscription_path(stored.id))),
            notification_stats=NotificationStats.of(self.notifier.stats_of(active.stats)),
        )

    # --- polls in, notifications out ----------------------------------------------------------

    def offer(self, poll: Poll) -> None:
        """The collector listener: keep the poll for the manager's thread and return."""
        with self._poll_ready:
            if self._pending is not None:
                self.polls_skipped += 1
            self._pending = poll
            self._poll_ready.notify()

    def evaluate(self, poll: Poll) -> None:
        """Expire what is due, then notify every subscription the poll triggers."""
        self._expire(self._clock_ns())
        with self._lock:
            serving = list(self._active.values())
        for active in serving:
            points = active.trigger.fire(poll)
            if points is not None:
                self._notify(active, poll, points)

    def _run(self) -> None:
        self._expire(self._clock_ns())  # those whose deadline passed while the NetApp was down
        while not self._stop.is_set():
            poll = self._next_poll()
            try:
                if poll is None:
                    self._expire(self._clock_ns())
                else:
                    self.evaluate(poll)
            except Exception:  # one bad evaluation must not end the notifications for good
                log.exception("telemetry: subscriptions: evaluating a poll failed")
            finally:
                with self._poll_ready:
                    self._evaluating = False

    def _next_poll(self) -> Optional[Poll]:
        """The poll waiting, or None after EXPIRY_CHECK_S without one (or on stop)."""
        with self._poll_ready:
            if self._pending is None and not self._stop.is_set():
                self._poll_ready.wait(EXPIRY_CHECK_S)
            poll, self._pending = self._pending, None
            self._evaluating = True
            return poll

    def _notify(self, active: _Active, poll: Poll, points: Iterator[Point]) -> None:
        limit = self.settings.max_points
        kept = list(itertools.islice(points, limit + 1))
        body = telemetry_notification(
            active.id, self._next_sequence(active), poll, active.trigger.name, kept[:limit], len(kept) > limit
        )
        self._send(active, body)

    def _send(self, active: _Active, body: dict[str, Any], final: bool = False) -> None:
        stored = active.stored
        self.notifier.send(
            Delivery(
                subscription_id=stored.id,
                url=stored.request.callback_reference,
                secret=stored.secret,
                body=encode(body),
                sequence=body["sequence"],
                stats=active.stats,
                final=final,
            )
        )

    def _next_sequence(self, active: _Active) -> int:
        active.sequence += 1
        if active.sequence > active.reserved:
            active.reserved = active.sequence + SEQUENCE_BLOCK - 1
            self.store.reserve(active.id, active.reserved)
        return active.sequence

    def _expire(self, now_ns: int) -> None:
        with self._lock:
            expired = [
                active
                for active in self._active.values()
                if active.stored.deadline_ns is not None and active.stored.deadline_ns <= now_ns
            ]
        for active in expired:
            self._remove(active)
            deadline = active.stored.deadline_ns or now_ns
            body = expiry_notification(active.id, self._next_sequence(active), now_ns, deadline)
            self._send(active, body, final=True)
            log.info("telemetry: subscription %s of tenant %s expired", active.id, active.stored.tenant)

    def _remove(self, active: _Active) -> None:
        with self._lock:
            if self._active.pop(active.id, None) is None:
                return
            self.store.remove(active.id)
        active.stats.cancelled = True

    def _activate(self, stored: StoredSubscription) -> _Active:
        """A stored subscription served again: its sequence goes on from the reserved block."""
        which = stored.request.filter_criteria.point_filter(None if stored.admin else stored.tenant)
        return _Active(
            stored, self._trigger(stored.request, which), sequence=stored.sequence, reserved=stored.sequence
        )

    def _trigger(self, request: SubscriptionRequest, which: PointFilter) -> Trigger:
        if request.threshold is not None:
            return ThresholdTrigger(request.threshold, which)
        assert request.period is not None  # one of them: _check_trigger
        return PeriodTrigger(request.period, which, slack_s=self.interval_s / 2)


def _sees(who: Principal, stored: StoredSubscription) -> bool:
    """A tenant sees its own subscriptions; an admin sees every one."""
    return who.is_admin or stored.tenant == who.tenant
