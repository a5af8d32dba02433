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
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, Strict, StringConstraints, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from netapp.core.config import SubscriptionSettings
from netapp.core.destinations import DestinationRefused, host_address
from netapp.intents.models import IntentId
from netapp.service.contract import Conflict, Forbidden, InvalidInput, NotFound, Principal, QuotaExceeded
from netapp.telemetry.notify import Delivery, DeliveryStats, Notifier
from netapp.telemetry.pinned import check_url
from netapp.telemetry.poll import (
    ACTION,
    ALTERNATIVE,
    CPU,
    INTENT,
    INTERFACE,
    MEASUREMENTS,
    NODE_MEASUREMENTS,
    REASON,
    SLICE,
    VERDICT,
    Point,
    PointFilter,
    Poll,
)

log = logging.getLogger("netapp.telemetry.subscriptions")

SUBSCRIPTIONS_PATH = "/api/v1/subscriptions"
SUBSCRIPTION_TYPE = "TelemetryNotificationSubscription"
NOTIFICATION_TYPE = "TelemetryNotification"
EXPIRY_NOTIFICATION_TYPE = "ExpiryNotification"
SUBSCRIPTIONS_DB = "subscriptions.db"

# Sequence numbers are reserved in blocks in the store, so that they keep rising across restarts
# (a crash included) at the cost of one write per block, not one per notification.
SEQUENCE_BLOCK = 1000
# How often the manager looks for expired subscriptions when no poll comes.
EXPIRY_CHECK_S = 1.0
# The latest expiry deadline taken (2100-01-01): nanoseconds of it still fit SQLite's integers.
MAX_DEADLINE_S = 4_102_444_800

_COUNTER_FIELDS = frozenset({"packets", "bytes", "packets_rate", "bytes_rate"})
_INTERFACE_COUNTERS = ("bytes_recv", "bytes_sent", "packets_recv", "packets_sent")
# The fields a threshold may watch, per measurement: api/telemetry.md's tables (a test holds
# the two together). All of them are numbers or booleans (true counts as 1). dpp_telemetry is not
# here: its fields are each component's own (a sink may add some), so any name is taken.
THRESHOLD_FIELDS: dict[str, frozenset[str]] = {
    INTENT: _COUNTER_FIELDS,
    SLICE: _COUNTER_FIELDS | {"intents"},
    CPU: _COUNTER_FIELDS | {"enabled", "overloaded", "capacity_pps", "load"},
    VERDICT: _COUNTER_FIELDS,
    ACTION: _COUNTER_FIELDS,
    REASON: _COUNTER_FIELDS,
    INTERFACE: frozenset(
        {*_INTERFACE_COUNTERS, *(f"{name}_rate" for name in _INTERFACE_COUNTERS)}
        | {"err_in", "err_out", "drop_in", "drop_out"}
    ),
    ALTERNATIVE: frozenset({"up", "state_changes", "probes", "answers"}),
}

MeasurementName = Literal[tuple(sorted(MEASUREMENTS))]  # type: ignore[valid-type]
SliceId = Annotated[str, StringConstraints(min_length=1, max_length=48, pattern=r"^[A-Za-z0-9._-]+$")]
SubscriptionId = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
# JSON numbers only (no strings, no booleans), finite.
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]


# --- the resources ------------------------------------------------------------------------------


class _Mec(BaseModel):
    """camelCase JSON, as ETSI MEC's APIs have it; unknown members refused."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel)


class TimeStamp(_Mec):
    """MEC's TimeStamp: a moment as seconds and nanoseconds since the Unix epoch (UTC)."""

    model_config = ConfigDict(populate_by_name=True)

    seconds: Annotated[int, Strict()] = Field(ge=0, le=MAX_DEADLINE_S)
    nano_seconds: Annotated[int, Strict()] = Field(0, ge=0, le=999_999_999)

    @classmethod
    def of_ns(cls, time_ns: int) -> "TimeStamp":
        seconds, nanos = divmod(time_ns, 1_000_000_000)
        return cls(seconds=seconds, nano_seconds=nanos)

    def ns(self) -> int:
        return self.seconds * 1_000_000_000 + self.nano_seconds


class LinkType(_Mec):
    href: str = Field(description="a path on this NetApp, e.g. /api/v1/subscriptions/3f9c...")


class FilterCriteria(_Mec):
    """Which points a subscriber gets (every member narrows; none given: all it may see).

    An intent point passes when its intent is listed or its slice is; a slice point when its
    slice is. Ids are the caller's own: another tenant's intent of the same id is never seen.
    """

    intents: Optional[list[IntentId]] = Field(None, min_length=1, max_length=1000)
    slices: Optional[list[SliceId]] = Field(None, min_length=1, max_length=1000)
    measurements: Optional[list[MeasurementName]] = Field(
        None, min_length=1, description="node-wide ones (all but dpp_intent, dpp_slice) need scope admin"
    )

    def point_filter(self, tenant: Optional[str]) -> PointFilter:
        """The filter for `tenant`'s points (None: every tenant's and the node's)."""
        return PointFilter(
            tenant=tenant,
            intents=_frozen(self.intents),
            slices=_frozen(self.slices),
            measurements=_frozen(self.measurements),
        )


class Threshold(_Mec):
    """Notify when a field of a measurement crosses a value: once per crossing and per series
    (a series: one intent, one slice, one CPU, ...). After it fired, a series fires again only
    once it went back past `rearmValue`."""

    measurement: MeasurementName
    field: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64, description="e.g. packets_rate, load")
    direction: Literal["rising", "falling"] = Field(
        "rising", description="rising: fire when the field goes above value; falling: below"
    )
    value: Number
    rearm_value: Optional[Number] = Field(
        None,
        description="where the field must go back to (at or past) before the series fires again "
        "(default: value)",
    )

    @field_validator("field")
    @classmethod
    def _known_field(cls, name: str, info: ValidationInfo) -> str:
        measurement = info.data.get("measurement")
        known = THRESHOLD_FIELDS.get(measurement) if measurement else None
        if known is not None and name not in known:
            raise ValueError(f"{measurement} has no field {name!r}; it has: {', '.join(sorted(known))}")
        return name

    @field_validator("rearm_value")
    @classmethod
    def _rearm_on_the_near_side(cls, rearm: Optional[float], info: ValidationInfo) -> Optional[float]:
        value, direction = info.data.get("value"), info.data.get("direction")
        if rearm is None or value is None:
            return rearm
        if direction == "rising" and rearm > value:
            raise ValueError(f"a rising threshold re-arms at or below its value ({value})")
        if direction == "falling" and rearm < value:
            raise ValueError(f"a falling threshold re-arms at or above its value ({value})")
        return rearm

    @property
    def rearm_at(self) -> float:
        return self.value if self.rearm_value is None else self.rearm_value

    def beyond(self, value: float) -> bool:
        return value > self.value if self.direction == "rising" else value < self.value

    def rearmed(self, value: float) -> bool:
        return value <= self.rearm_at if self.direction == "rising" else value >= self.rearm_at


class SubscriptionRequest(_Mec):
    """A telemetry subscription as a subscriber asks for it: exactly one of period and threshold."""

    subscription_type: Literal[SUBSCRIPTION_TYPE] = Field(  # type: ignore[valid-type]
        description=f"shall be {SUBSCRIPTION_TYPE}"
    )
    callback_reference: str = Field(
        max_length=2048,
        description="http(s) URI the NetApp POSTs the notifications to, from the NetApp host",
        examples=["https://analytics.example:8443/dpp/notifications"],
    )
    filter_criteria: FilterCriteria = Field(default_factory=FilterCriteria)
    period: Optional[Number] = Field(
        None, gt=0, le=86_400, description="seconds between notifications (at least telemetry.interval_s)"
    )
    threshold: Optional[Threshold] = None
    expiry_deadline: Optional[TimeStamp] = Field(
        None, description="when the subscription ends (an ExpiryNotification is sent); none: never"
    )

    @field_validator("callback_reference")
    @classmethod
    def _http_uri(cls, uri: str) -> str:
        refusal = callback_refusal(uri)
        if refusal:
            raise ValueError(refusal)
        return uri


class NotificationStats(_Mec):
    """How the subscription's notifications went since the NetApp started."""

    model_config = ConfigDict(populate_by_name=True)

    sent: int
    retried: int = Field(description="attempts after a failed one")
    failed: int = Field(description="given up: out of retries, or refused by the receiver (4xx)")
    dropped: int = Field(description="never sent: the notification queue was full")
    refused: int = Field(
        description="never sent: the callback's address is not allowed (setting "
        "telemetry.subscriptions.callback_allow; lastError says why)"
    )
    last_sequence: int = Field(description="sequence number of the last notification delivered")
    last_error: Optional[str] = Field(
        None, description="why the last failed attempt failed, until one succeeds"
    )

    @classmethod
    def of(cls, stats: DeliveryStats) -> "NotificationStats":
        return cls(
            sent=stats.sent,
            retried=stats.retried,
            failed=stats.failed,
            dropped=stats.dropped,
            refused=stats.refused,
            last_sequence=stats.last_sequence,
            last_error=stats.last_error or None,
        )


class SelfLink(_Mec):
    model_config = ConfigDict(populate_by_name=True)

    self_: LinkType = Field(alias="self")


class Subscription(SubscriptionRequest):
    """A telemetry subscription as the NetApp holds it."""

    model_config = ConfigDict(populate_by_name=True)

    id: str
    tenant: str = Field(description="whose points it receives")
    links: SelfLink = Field(alias="_links")
    notification_stats: NotificationStats


class SubscriptionCreated(Subscription):
    """The subscription just created, with its secret: the only time the secret is shown."""

    secret: str = Field(
        description="HMAC-SHA256 key of the notifications' X-DPP-Signature; shown this once, never again"
    )


class SubscriptionLink(_Mec):
    model_config = ConfigDict(populate_by_name=True)

    href: str
    subscription_type: str


class SubscriptionListLinks(_Mec):
    model_config = ConfigDict(populate_by_name=True)

    self_: LinkType = Field(alias="self")
    subscriptions: list[SubscriptionLink]


class SubscriptionLinkList(_Mec):
    """MEC's SubscriptionLinkList: a link to each subscription the caller may see."""

    model_config = ConfigDict(populate_by_name=True)

    links: SubscriptionListLinks = Field(alias="_links")

    @classmethod
    def of(cls, subscriptions: Iterable[Subscription]) -> "SubscriptionLinkList":
        links = [
            SubscriptionLink(href=item.links.self_.href, subscription_type=item.subscription_type)
            for item in subscriptions
        ]
        return cls(links=SubscriptionListLinks(self_=LinkType(href=SUBSCRIPTIONS_PATH), subscriptions=links))


# --- what the callbacks receive (documented in the OpenAPI document's callbacks) -----------------


class TelemetryPoint(BaseModel):
    """One point, as api/telemetry.md describes it."""

    measurement: str
    time: str = Field(description="RFC 3339 with nanoseconds, UTC")
    tags: dict[str, str]
    fields: dict[str, Union[bool, int, float]]


class NotificationLinks(_Mec):
    subscription: LinkType


class TelemetryNotification(_Mec):
    """Points of one poll: every period, or those that crossed the threshold."""

    notification_type: Literal[NOTIFICATION_TYPE]  # type: ignore[valid-type]
    sequence: int = Field(description="rises by at least 1 per notification of the subscription")
    time_stamp: TimeStamp = Field(description="when the poll was taken")
    trigger: Literal["period", "threshold"]
    points: list[TelemetryPoint]
    truncated: bool = Field(description="more points matched than telemetry.subscriptions.max_points")
    links: NotificationLinks = Field(alias="_links")


class ExpiryNotification(_Mec):
    """The subscription reached its expiry deadline and was deleted."""

    notification_type: Literal[EXPIRY_NOTIFICATION_TYPE]  # type: ignore[valid-type]
    sequence: int
    time_stamp: TimeStamp
    expiry_deadline: TimeStamp
    links: NotificationLinks = Field(alias="_links")


def subscription_path(subscription_id: str) -> str:
    return f"{SUBSCRIPTIONS_PATH}/{subscription_id}"


def telemetry_notification(
    subscription_id: str, sequence: int, poll: Poll, trigger: str, points: list[Point], truncated: bool
) -> dict[str, Any]:
    """A TelemetryNotification body (built as plain data: a notification may hold many points)."""
    return {
        "notificationType": NOTIFICATION_TYPE,
        "sequence": sequence,
        "timeStamp": _time_stamp(poll.time_ns),
        "trigger": trigger,
        "points": [point.to_json() for point in points],
        "truncated": truncated,
        "_links": {"subscription": {"href": subscription_path(subscription_id)}},
    }


def expiry_notification(subscription_id: str, sequence: int, now_ns: int, deadline_ns: int) -> dict[str, Any]:
    return {
        "notificationType": EXPIRY_NOTIFICATION_TYPE,
        "sequence": sequence,
        "timeStamp": _time_stamp(now_ns),
        "expiryDeadline": _time_stamp(deadline_ns),
        "_links": {"subscription": {"href": subscription_path(subscription_id)}},
    }


def _time_stamp(time_ns: int) -> dict[str, int]:
    seconds, nanos = divmod(time_ns, 1_000_000_000)
    return {"seconds": seconds, "nanoSeconds": nanos}


def encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


# --- validation shared with the event stream --------------------------------------------------


def callback_refusal(uri: str) -> Optional[str]:
    """Why `uri` cannot be a callback (None: it can): http or https, a host spelt plainly, no
    credentials. Where the host may be is the manager's check (it needs the settings)."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError on a port out of range
        url = httpx.URL(uri)  # what will send it must take it too
    except (ValueError, httpx.InvalidURL) as exc:
        return f"not a URI: {exc}"
    if parts.scheme not in ("http", "https"):
        return "the scheme must be http or https"
    if not parts.hostname:
        return "a host is required"
    try:
        host_address(url.host)
    except ValueError as exc:
        return str(exc)
    if parts.username is not None or parts.password is not None:
        return "credentials in the URI would show in every read of the subscription; check the signature"
    if parts.fragment:
        return "a fragment is never sent; leave it out"
    return None


def require_visible(who: Principal, measurements: Optional[Iterable[str]], field: str) -> None:
    """Node-wide measurements are for admins: Forbidden naming `field` otherwise."""
    node_wide = sorted(set(measurements or ()) & NODE_MEASUREMENTS)
    if node_wide and not who.is_admin:
        raise Forbidden(
            f"{', '.join(node_wide)}: node-wide measurements need scope 'admin'; "
            "a tenant sees dpp_intent and dpp_slice",
            field=field,
            required_scope="admin",
        )


def point_filter(who: Principal, criteria: FilterCriteria, field: str) -> PointFilter:
    """The points `who` gets for `criteria`: its tenant's (an admin's: all), never the node's
    unless it is an admin (Forbidden naming `field`)."""
    require_visible(who, criteria.measurements, field)
    return criteria.point_filter(None if who.is_admin else who.tenant)


def _frozen(values: Optional[list[str]]) -> Optional[frozenset[str]]:
    return None if values is None else frozenset(values)


# --- triggers -----------------------------------------------------------------------------------


class PeriodTrigger:
    """Every `period` seconds of poll time, the points of the poll at hand."""

    name = "period"

    def __init__(self, period_s: float, which: PointFilter, slack_s: float):
        self._period_ns = int(period_s * 1e9)
        # Polls tick on a grid with some jitter: one a little early still counts as on time.
        self._slack_ns = int(slack_s * 1e9)
        self._which = which
        self._last_ns: Optional[int] = None

    def fire(self, poll: Poll) -> Optional[Iterator[Point]]:
        if self._last_ns is not None and poll.time_ns - self._last_ns < self._period_ns - self._slack_ns:
            return None
        self._last_ns = poll.time_ns
        return poll.points(self._which)


class ThresholdTrigger:
    """The points whose field crossed the threshold this poll, edge-triggered per series."""

    name = "threshold"

    def __init__(self, threshold: Threshold, which: PointFilter):
        self._threshold = threshold
        self._which = dataclasses.replace(which, measurements=frozenset({threshold.measurement}))
        self._fired: set[tuple[Any, ...]] = set()  # series that crossed and did not re-arm yet

    def fire(self, poll: Poll) -> Optional[Iterator[Point]]:
        crossed: list[Point] = []
        still_fired: set[tuple[Any, ...]] = set()
        for point in poll.points(self._which):
            key = (point.measurement, tuple(sorted(point.tags.items())))
            value = point.fields.get(self._threshold.field)
            if value is None:  # not this poll (no rate yet): nothing changes
                if key in self._fired:
                    still_fired.add(key)
            elif key in self._fired:
                if not self._threshold.rearmed(float(value)):
                    still_fired.add(key)
            elif self._threshold.beyond(float(value)):
                still_fired.add(key)
                crossed.append(point)
        # Series gone from the poll are forgotten: one that comes back and is beyond fires again.
        self._fired = still_fired
        return iter(crossed) if crossed else None


Trigger = Union[PeriodTrigger, ThresholdTrigger]


# --- the store ------------------------------------------------------------------------------------


class SubscriptionStoreError(Exception):
    """The subscriptions file cannot be used."""


@dataclass(frozen=True)
class StoredSubscription:
    id: str
    tenant: str
    admin: bool  # its creator was an admin: it sees every tenant and the node-wide measurements
    request: SubscriptionRequest
    secret: str
    created_ns: int
    sequence: int = 0  # the highest sequence number reserved

    @property
    def deadline_ns(self) -> Optional[int]:
        deadline = self.request.expiry_deadline
        return None if deadline is None else deadline.ns()


class SubscriptionStore:
    """Subscriptions in SQLite: their own file, written on create, delete and every
    SEQUENCE_BLOCK notifications. It holds the secrets: the file is made readable by its owner
    only."""

    SCHEMA_VERSION = 1
    SCHEMA = """CREATE TABLE IF NOT EXISTS subscriptions (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        admin INTEGER NOT NULL,
        request TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_ns INTEGER NOT NULL,
        sequence INTEGER NOT NULL
    )"""

    def __init__(self, connection: sqlite3.Connection, path: Path):
        self._connection = connection
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path) -> "SubscriptionStore":
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.touch(mode=0o600, exist_ok=True)
            os.chmod(path, 0o600)
            connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version > cls.SCHEMA_VERSION:
                raise SubscriptionStoreError(
                    f"{path}: written by a newer NetApp (schema {version}; "
                    f"this one knows {cls.SCHEMA_VERSION})"
                )
            connection.execute(cls.SCHEMA)
            connection.execute(f"PRAGMA user_version = {cls.SCHEMA_VERSION}")
        except (OSError, sqlite3.Error) as exc:
            raise SubscriptionStoreError(f"{path}: {exc}") from exc
        return cls(connection, path)

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def add(self, stored: StoredSubscription) -> None:
        with self._lock:
            self._connection.execute(
                "INSERT INTO subscriptions (id, tenant, admin, request, secret, created_ns, sequence) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    stored.id,
                    stored.tenant,
                    int(stored.admin),
                    stored.request.model_dump_json(by_alias=True),
                    stored.secret,
                    stored.created_ns,
                    stored.sequence,
                ),
            )

    def remove(self, subscription_id: str) -> None:
        with self._lock:
            self._connection.execute("DELETE FROM subscriptions WHERE id = ?", (subscription_id,))

    def reserve(self, subscription_id: str, sequence: int) -> None:
        """Record that sequence numbers up to `sequence` may have been used."""
        with self._lock:
            self._connection.execute(
                "UPDATE subscriptions SET sequence = ? WHERE id = ?", (sequence, subscription_id)
            )

    def load(self) -> list[StoredSubscription]:
        """Every subscription whose request this NetApp still accepts (others are logged and kept)."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT id, tenant, admin, request, secret, created_ns, sequence "
                "FROM subscriptions ORDER BY created_ns"
            ).fetchall()
        loaded = []
        for subscription_id, tenant, admin, request, secret, created_ns, sequence in rows:
            try:
                parsed = SubscriptionRequest.model_validate_json(request)
            except ValueError as exc:
                log.error(
                    "telemetry: subscription %s is not valid any more, left aside: %s", subscription_id, exc
                )
                continue
            loaded.append(
                StoredSubscription(subscription_id, tenant, bool(admin), parsed, secret, created_ns, sequence)
            )
        return loaded


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
        """The callback's host resolves, and only to addresses it may reach (the notifier checks
        again at every delivery: a name may resolve elsewhere later)."""
        url, destinations = httpx.URL(uri), self.notifier.destinations
        try:
            check_url(destinations, url)
            return
        except DestinationRefused as exc:
            reason = str(exc)
        except OSError as exc:
            reason = f"{url.host} does not resolve ({exc}); allowed: {destinations.allow}"
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
