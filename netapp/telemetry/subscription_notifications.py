"""What a subscription's callback receives (the OpenAPI document's callbacks describe them): a
TelemetryNotification per triggered poll, an ExpiryNotification when the deadline passes. The
bodies are built as plain data, not models: a notification may hold many points."""

from __future__ import annotations

import json
from typing import Any, Literal, Union

from pydantic import BaseModel, Field

from netapp.telemetry.poll import Point, Poll
from netapp.telemetry.subscription_models import LinkType, MecModel, TimeStamp, subscription_path

NOTIFICATION_TYPE = "TelemetryNotification"
EXPIRY_NOTIFICATION_TYPE = "ExpiryNotification"


class TelemetryPoint(BaseModel):
    """One point, as api/telemetry.md describes it."""

    measurement: str
    time: str = Field(description="RFC 3339 with nanoseconds, UTC")
    tags: dict[str, str]
    fields: dict[str, Union[bool, int, float]]


class NotificationLinks(MecModel):
    subscription: LinkType


class TelemetryNotification(MecModel):
    """Points of one poll: every period, or those that crossed the threshold."""

    notification_type: Literal[NOTIFICATION_TYPE]  # type: ignore[valid-type]
    sequence: int = Field(description="rises by at least 1 per notification of the subscription")
    time_stamp: TimeStamp = Field(description="when the poll was taken")
    trigger: Literal["period", "threshold"]
    points: list[TelemetryPoint]
    truncated: bool = Field(description="more points matched than telemetry.subscriptions.max_points")
    links: NotificationLinks = Field(alias="_links")


class ExpiryNotification(MecModel):
    """The subscription reached its expiry deadline and was deleted."""

    notification_type: Literal[EXPIRY_NOTIFICATION_TYPE]  # type: ignore[valid-type]
    sequence: int
    time_stamp: TimeStamp
    expiry_deadline: TimeStamp
    links: NotificationLinks = Field(alias="_links")


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
