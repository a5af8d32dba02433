"""MEC 011's /mec_app_support/v1 beyond traffic rules: an application's DNS rules, confirm_ready,
confirm_termination and termination subscriptions (over netapp.mec.app_service), and the
administrator's request of a termination (/api/v1/mec/applications/{appInstanceId}/termination).

Paths, parameters and bodies are ETSI's (MecAppSupportApi v2.1.1); answers leave absent members
out, errors are ProblemDetails (netapp.api.problems).
"""

from __future__ import annotations

from typing import Annotated, Optional

from fastapi import APIRouter, Depends, Path, Request, Response

from netapp.api.deps import AdminDep, IntentWriterDep, JsonBody, ReaderDep
from netapp.api.routes.common import AUTHENTICATED, WITH_BODY, documented
from netapp.mec.app_models import (
    TERMINATION_SUBSCRIPTION,
    AppReadyConfirmation,
    AppTerminationConfirmation,
    AppTerminationNotificationSubscription,
    LinkType,
    SelfLink,
    SubscriptionLink,
    SubscriptionLinkList,
    SubscriptionListLinks,
    TerminationRequest,
)
from netapp.mec.app_service import MecAppService
from netapp.mec.models import MEC_ID_MAX, MEC_ID_PATTERN, DnsRule, MecApplication
from netapp.mec.routes import MEC_APP_SUPPORT, AppInstanceIdPath, service_part

app_lifecycle = APIRouter(prefix=MEC_APP_SUPPORT, tags=["mec011"])
terminations = APIRouter(prefix="/api/v1/mec/applications", tags=["mec"])

AppsDep = Annotated[MecAppService, Depends(service_part("mec_apps", "MEC 011"))]
DnsRuleIdPath = Annotated[
    str, Path(min_length=1, max_length=MEC_ID_MAX, pattern=MEC_ID_PATTERN, description="a DNS rule")
]
SubscriptionIdPath = Annotated[str, Path(description="a subscription")]
RULE = "/applications/{appInstanceId}"


# --- DNS rules -----------------------------------------------------------------------------------


@app_lifecycle.get(f"{RULE}/dns_rules", response_model=list[DnsRule], response_model_exclude_none=True,
                   responses=documented(*AUTHENTICATED, 404, 503))
def list_dns_rules(apps: AppsDep, who: ReaderDep, appInstanceId: AppInstanceIdPath) -> list[DnsRule]:
    """MEC 011 ApplicationsDnsRules_GET: the DNS rules of an application instance, ACTIVE and INACTIVE."""
    return apps.list_dns_rules(who, appInstanceId)


@app_lifecycle.get(f"{RULE}/dns_rules/{{dnsRuleId}}", response_model=DnsRule, response_model_exclude_none=True,
                   responses=documented(*AUTHENTICATED, 404, 503))
def get_dns_rule(apps: AppsDep, who: ReaderDep, appInstanceId: AppInstanceIdPath, dnsRuleId: DnsRuleIdPath) -> DnsRule:
    """MEC 011 ApplicationsDnsRule_GET: one DNS rule of an application instance."""
    return apps.get_dns_rule(who, appInstanceId, dnsRuleId)


@app_lifecycle.put(f"{RULE}/dns_rules/{{dnsRuleId}}", response_model=DnsRule, response_model_exclude_none=True,
                   responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 503), dependencies=[JsonBody])
def put_dns_rule(
    apps: AppsDep, who: IntentWriterDep, appInstanceId: AppInstanceIdPath, dnsRuleId: DnsRuleIdPath, body: DnsRule
) -> DnsRule:
    """MEC 011 ApplicationsDnsRule_PUT: replace a DNS rule (its state included)."""
    return apps.put_dns_rule(who, appInstanceId, dnsRuleId, body)


# --- lifecycle -----------------------------------------------------------------------------------


@app_lifecycle.post(f"{RULE}/confirm_ready", status_code=204, response_model=None,
                    responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 409, 503), dependencies=[JsonBody])
def confirm_ready(apps: AppsDep, who: IntentWriterDep, appInstanceId: AppInstanceIdPath,
                  body: AppReadyConfirmation) -> None:
    """MEC 011 ApplicationsConfirmReady_POST: the application instance is up and running."""
    apps.confirm_ready(who, appInstanceId)


@app_lifecycle.post(f"{RULE}/confirm_termination", status_code=204, response_model=None,
                    responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 409, 503), dependencies=[JsonBody])
def confirm_termination(apps: AppsDep, who: IntentWriterDep, appInstanceId: AppInstanceIdPath,
                        body: AppTerminationConfirmation) -> None:
    """MEC 011 ApplicationsConfirmTermination_POST: the application is ready for the termination asked of it."""
    apps.confirm_termination(who, appInstanceId, body)


@terminations.post("/{appInstanceId}/termination", response_model=MecApplication, response_model_exclude_none=True,
                   responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 503))
def request_termination(
    apps: AppsDep, who: AdminDep, appInstanceId: AppInstanceIdPath, body: Optional[TerminationRequest] = None
) -> MecApplication:
    """Ask a MEC application instance to terminate or stop (admin): its subscribers are notified, and it
    goes (or stops) once it confirms (confirm_termination) or its maxGracefulTimeout has passed."""
    asked = body or TerminationRequest()
    return apps.request_termination(who, appInstanceId, asked.maxGracefulTimeout, asked.operationAction)


# --- termination subscriptions -------------------------------------------------------------------


def _subscription_path(request: Request, app_instance_id: str, subscription_id: str) -> str:
    return request.url_for("get_app_subscription", appInstanceId=app_instance_id, subscriptionId=subscription_id).path


@app_lifecycle.get(f"{RULE}/subscriptions", response_model=SubscriptionLinkList,
                   responses=documented(*AUTHENTICATED, 404, 503))
def list_app_subscriptions(
    request: Request, apps: AppsDep, who: ReaderDep, appInstanceId: AppInstanceIdPath
) -> SubscriptionLinkList:
    """MEC 011 ApplicationsSubscriptions_GET: the application's termination subscriptions, as links."""
    links = [SubscriptionLink(href=_subscription_path(request, appInstanceId, one), rel=TERMINATION_SUBSCRIPTION)
             for one in apps.list_subscriptions(who, appInstanceId)]
    return SubscriptionLinkList(links=SubscriptionListLinks(self_=LinkType(href=request.url.path), subscriptions=links))


@app_lifecycle.post(f"{RULE}/subscriptions", response_model=AppTerminationNotificationSubscription, status_code=201,
                    responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 503), dependencies=[JsonBody])
def create_app_subscription(
    request: Request, response: Response, apps: AppsDep, who: IntentWriterDep, appInstanceId: AppInstanceIdPath,
    body: AppTerminationNotificationSubscription,
) -> AppTerminationNotificationSubscription:
    """MEC 011 ApplicationsSubscriptions_POST: subscribe a callback to the application's termination."""
    subscription_id = apps.create_subscription(who, appInstanceId, body)
    path = _subscription_path(request, appInstanceId, subscription_id)
    response.headers["Location"] = path
    return _subscription(appInstanceId, body.callbackReference, path)


@app_lifecycle.get(f"{RULE}/subscriptions/{{subscriptionId}}", response_model=AppTerminationNotificationSubscription,
                   responses=documented(*AUTHENTICATED, 404, 503))
def get_app_subscription(
    request: Request, apps: AppsDep, who: ReaderDep, appInstanceId: AppInstanceIdPath,
    subscriptionId: SubscriptionIdPath,
) -> AppTerminationNotificationSubscription:
    """MEC 011 ApplicationsSubscription_GET: one termination subscription."""
    callback = apps.get_subscription(who, appInstanceId, subscriptionId)
    return _subscription(appInstanceId, callback, request.url.path)


@app_lifecycle.delete(f"{RULE}/subscriptions/{{subscriptionId}}", status_code=204, response_model=None,
                      responses=documented(*AUTHENTICATED, 404, 503))
def delete_app_subscription(
    apps: AppsDep, who: IntentWriterDep, appInstanceId: AppInstanceIdPath, subscriptionId: SubscriptionIdPath
) -> None:
    """MEC 011 ApplicationsSubscription_DELETE: end a termination subscription."""
    apps.delete_subscription(who, appInstanceId, subscriptionId)


def _subscription(app_instance_id: str, callback: str, path: str) -> AppTerminationNotificationSubscription:
    return AppTerminationNotificationSubscription(
        subscriptionType=TERMINATION_SUBSCRIPTION, callbackReference=callback,
        links=SelfLink(self_=LinkType(href=path)), appInstanceId=app_instance_id,
    )
