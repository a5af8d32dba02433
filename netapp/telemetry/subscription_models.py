"""The telemetry subscription resources, as callers send and read them (MEC 011/013 style: camelCase
members, `subscriptionType`, `callbackReference`, `_links.self`, `expiryDeadline` as a MEC
TimeStamp), and the checks on them that need no settings: what a callback URI may look like, which
fields a threshold may watch, which measurements a caller may see. The manager
(netapp.telemetry.subscriptions) makes the checks that need its settings or a resolver.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Literal, Optional
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, Strict, StringConstraints, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from netapp.core.destinations import host_address
from netapp.intents.models import IntentId
from netapp.service.contract import Forbidden, Principal
from netapp.telemetry.notify import DeliveryStats
from netapp.telemetry.poll import (
    ACTION,
    ALTERNATIVE,
    ATSSS_ACK,
    ATSSS_ACK_FIELDS,
    ATSSS_PATH,
    ATSSS_QOS,
    ATSSS_QOS_FIELDS,
    ATSSS_PATH_FIELDS,
    NOTIFICATION,
    NOTIFICATION_FIELDS,
    CPU,
    INTENT,
    INTERFACE,
    MEASUREMENTS,
    NODE_MEASUREMENTS,
    REASON,
    RSS_WORKER,
    SLICE,
    UPF_ASSOCIATION,
    UPF_BUFFERING,
    UPF_BUFFERING_FIELDS,
    UPF_COUNTS,
    UPF_URR,
    VERDICT,
    PointFilter,
)

SUBSCRIPTIONS_PATH = "/api/v1/subscriptions"
SUBSCRIPTION_TYPE = "TelemetryNotificationSubscription"

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
    RSS_WORKER: _COUNTER_FIELDS,
    ACTION: _COUNTER_FIELDS,
    REASON: _COUNTER_FIELDS,
    INTERFACE: frozenset(
        {*_INTERFACE_COUNTERS, *(f"{name}_rate" for name in _INTERFACE_COUNTERS)}
        | {"err_in", "err_out", "drop_in", "drop_out"}
    ),
    ALTERNATIVE: frozenset({"up", "state_changes", "probes", "answers"}),
    UPF_URR: frozenset(UPF_COUNTS),
    UPF_ASSOCIATION: frozenset(UPF_COUNTS),
    UPF_BUFFERING: frozenset(UPF_BUFFERING_FIELDS),
    ATSSS_PATH: frozenset(ATSSS_PATH_FIELDS),
    ATSSS_QOS: frozenset(ATSSS_QOS_FIELDS),
    ATSSS_ACK: frozenset(ATSSS_ACK_FIELDS),
    NOTIFICATION: frozenset(NOTIFICATION_FIELDS),
}

MeasurementName = Literal[tuple(sorted(MEASUREMENTS))]  # type: ignore[valid-type]
SliceId = Annotated[str, StringConstraints(min_length=1, max_length=48, pattern=r"^[A-Za-z0-9._-]+$")]
SubscriptionId = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
# JSON numbers only (no strings, no booleans), finite.
Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]


# --- the resources ------------------------------------------------------------------------------


class MecModel(BaseModel):
    """camelCase JSON, as ETSI MEC's APIs have it; unknown members refused."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel)


class TimeStamp(MecModel):
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


class LinkType(MecModel):
    href: str = Field(description="a path on this NetApp, e.g. /api/v1/subscriptions/3f9c...")


class FilterCriteria(MecModel):
    """Which points a subscriber gets (every member narrows; none given: all it may see).

    An intent point passes when its intent is listed or its slice is; a slice point when its
    slice is. Ids are the caller's own: another tenant's intent of the same id is never seen.
    """

    intents: Optional[list[IntentId]] = Field(None, min_length=1, max_length=1000)
    slices: Optional[list[SliceId]] = Field(None, min_length=1, max_length=1000)
    measurements: Optional[list[MeasurementName]] = Field(
        None, min_length=1, description="node-wide ones (all but dpp_intent, dpp_slice and the UPF's) need scope admin"
    )

    def point_filter(self, tenant: Optional[str]) -> PointFilter:
        """The filter for `tenant`'s points (None: every tenant's and the node's)."""
        return PointFilter(
            tenant=tenant,
            intents=_frozen(self.intents),
            slices=_frozen(self.slices),
            measurements=_frozen(self.measurements),
        )


class Threshold(MecModel):
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


class SubscriptionRequest(MecModel):
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


class NotificationStats(MecModel):
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


class SelfLink(MecModel):
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


class SubscriptionLink(MecModel):
    model_config = ConfigDict(populate_by_name=True)

    href: str
    subscription_type: str


class SubscriptionListLinks(MecModel):
    model_config = ConfigDict(populate_by_name=True)

    self_: LinkType = Field(alias="self")
    subscriptions: list[SubscriptionLink]


class SubscriptionLinkList(MecModel):
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


def subscription_path(subscription_id: str) -> str:
    return f"{SUBSCRIPTIONS_PATH}/{subscription_id}"


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
            "a tenant sees dpp_intent, dpp_slice, dpp_upf_urr, dpp_upf_association and dpp_atsss_path",
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
