"""/api/v1/subscriptions: telemetry subscriptions in the ETSI MEC style (callback, filter, period
or threshold, expiry deadline). Notifications are POSTed to the callback, signed (api/subscriptions.md).

Creating and deleting one needs scope intents:write: a subscription makes the NetApp send requests
on the tenant's behalf, which is more than reading, and the tenant that acts on its telemetry is
the one that changes its intents. Reading and listing one's subscriptions needs read."""

from __future__ import annotations

from typing import Annotated, Optional, Union

from fastapi import APIRouter, Depends, Header, Path, Request, Response
from pydantic import Field

from netapp.api.deps import IntentWriterDep, JsonBody, ReaderDep, TelemetryDep, TenantsDep
from netapp.api.routes.common import AUTHENTICATED, WITH_BODY, documented
from netapp.service.contract import TelemetryUnavailable
from netapp.telemetry.notify import SIGNATURE_HEADER, SUBSCRIPTION_HEADER, TIMESTAMP_HEADER
from netapp.telemetry.subscription_models import (
    Subscription,
    SubscriptionCreated,
    SubscriptionId,
    SubscriptionLinkList,
    SubscriptionRequest,
)
from netapp.telemetry.subscription_notifications import ExpiryNotification, TelemetryNotification
from netapp.telemetry.subscriptions import SubscriptionManager

router = APIRouter(prefix="/api/v1/subscriptions", tags=["subscriptions"])

SubscriptionIdPath = Annotated[SubscriptionId, Path(description="the subscription's id")]


async def get_subscriptions(telemetry: TelemetryDep) -> SubscriptionManager:
    """The subscription manager of the running telemetry; 503 when there is none."""
    manager: Optional[SubscriptionManager] = getattr(telemetry, "subscriptions", None)
    if manager is None:
        raise TelemetryUnavailable("subscriptions are not served by this NetApp's telemetry")
    return manager


SubscriptionsDep = Annotated[SubscriptionManager, Depends(get_subscriptions)]


# --- what a callback receives (the OpenAPI document's `callbacks`; never served here) ------------

notifications = APIRouter(generate_unique_id_function=lambda route: route.name)

NotificationBody = Annotated[
    Union[TelemetryNotification, ExpiryNotification], Field(discriminator="notification_type")
]


@notifications.post(
    "{$request.body#/callbackReference}",
    status_code=204,
    response_model=None,
    responses={
        204: {"description": "taken (any 2xx does)"},
        500: {"description": "any 5xx, 408 or 429, or no answer: the notification is sent again later"},
    },
)
def telemetry_notification(
    body: NotificationBody,
    signature: Annotated[str, Header(alias=SIGNATURE_HEADER, description="sha256=<hex HMAC>")],
    timestamp: Annotated[int, Header(alias=TIMESTAMP_HEADER, description="Unix seconds, signed too")],
    subscription: Annotated[str, Header(alias=SUBSCRIPTION_HEADER, description="the subscription's id")],
) -> None:
    """A notification, signed with the subscription's secret: HMAC-SHA256 over
    `<X-DPP-Timestamp>.<body>` (api/subscriptions.md says how to verify it)."""


# --- the resource ---------------------------------------------------------------------------------


@router.post(
    "",
    status_code=201,
    response_model=SubscriptionCreated,
    response_model_exclude_none=True,  # MEC leaves out what is not there
    responses={
        201: {"description": "created; the secret is in this answer only"},
        **documented(*AUTHENTICATED, *WITH_BODY, 409, 503),
    },
    callbacks=notifications.routes,
    dependencies=[JsonBody],
)
def create_subscription(
    request: Request,
    response: Response,
    subscriptions: SubscriptionsDep,
    who: IntentWriterDep,
    tenants: TenantsDep,
    body: SubscriptionRequest,
) -> SubscriptionCreated:
    """Subscribe a callback URI (a public address, or one the allow-list names) to the caller's
    telemetry, every period or on a threshold."""
    created = subscriptions.create(who, body, quota=tenants.quotas_of(who).subscriptions)
    response.headers["Location"] = request.url_for("get_subscription", subscription_id=created.id).path
    return created


@router.get("", response_model=SubscriptionLinkList, responses=documented(*AUTHENTICATED, 503))
def list_subscriptions(subscriptions: SubscriptionsDep, who: ReaderDep) -> SubscriptionLinkList:
    """Links to the caller's subscriptions (an admin's: everyone's)."""
    return SubscriptionLinkList.of(subscriptions.list_subscriptions(who))


@router.get(
    "/{subscription_id}",
    response_model=Subscription,
    response_model_exclude_none=True,
    responses=documented(*AUTHENTICATED, 404, 503),
)
def get_subscription(
    subscriptions: SubscriptionsDep, who: ReaderDep, subscription_id: SubscriptionIdPath
) -> Subscription:
    """Read one subscription, with how its notifications went (never its secret)."""
    return subscriptions.get(who, subscription_id)


@router.delete(
    "/{subscription_id}",
    status_code=204,
    response_model=None,
    responses=documented(*AUTHENTICATED, 404, 503),
)
def delete_subscription(
    subscriptions: SubscriptionsDep, who: IntentWriterDep, subscription_id: SubscriptionIdPath
) -> None:
    """Delete a subscription; notifications still queued for it are not sent."""
    subscriptions.delete(who, subscription_id)
