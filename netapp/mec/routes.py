"""The MEC front doors: /api/v1/mec/applications (administrators declare application instances) and
MEC 011's /mec_app_support/v1 (an application reads and changes its traffic rules), over
netapp.mec.service.

The MEC 011 paths, parameters and bodies are ETSI's (MecAppSupportApi, v2.1.1: its server URL is
/mec_app_support/v1); answers leave absent members out, as ETSI's types have no nulls, and errors
are ProblemDetails (netapp.api.problems).
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, Optional

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from netapp.api.deps import AdminDep, IntentWriterDep, JsonBody, PrincipalDep, ReaderDep, ServiceDep
from netapp.api.routes.common import AUTHENTICATED, CHANGES, WITH_BODY, documented
from netapp.mec.models import (
    MEC_APP_SUPPORT,
    MEC_ID_MAX,
    MEC_ID_PATTERN,
    MecApplication,
    MecApplicationSpec,
    TrafficRule,
)
from netapp.mec.appd import PLACEHOLDER, AppD
from netapp.mec.onboarding import AppdApplied, AppdOnboarding
from netapp.mec.service import MecService
from netapp.service.contract import DataplaneUnavailable, InvalidInput


applications = APIRouter(prefix="/api/v1/mec/applications", tags=["mec"])
app_support = APIRouter(prefix=MEC_APP_SUPPORT, tags=["mec011"])


def service_part(attribute: str, served: str) -> Callable[..., Any]:
    """A dependency giving the service's MEC part `attribute`; a service without one (the API tests'
    fakes) answers 503, once the caller is known (a request without a valid token gets its 401 first)."""

    def get_part(service: ServiceDep, _caller: PrincipalDep) -> Any:
        part = getattr(service, attribute, None)
        if part is None:
            raise DataplaneUnavailable(f"{served} is served by the NetApp's service only")
        return part

    return get_part


MecDep = Annotated[MecService, Depends(service_part("mec", "MEC 011"))]
OnboardingDep = Annotated[AppdOnboarding, Depends(service_part("mec_onboarding", "MEC 010-2 onboarding"))]
AppInstanceIdPath = Annotated[
    str, Path(min_length=1, max_length=MEC_ID_MAX, pattern=MEC_ID_PATTERN, description="a MEC application instance")
]
TrafficRuleIdPath = Annotated[
    str, Path(min_length=1, max_length=MEC_ID_MAX, pattern=MEC_ID_PATTERN, description="a traffic rule")
]


# --- /api/v1/mec/applications ------------------------------------------------------------------


@applications.post("", response_model=MecApplication, response_model_exclude_none=True, status_code=201,
                   responses=documented(*CHANGES), dependencies=[JsonBody])
def create_mec_application(
    request: Request, response: Response, mec: MecDep, who: AdminDep, body: MecApplicationSpec
) -> MecApplication:
    """Declare a MEC application instance, its tenant and its traffic rules (admin); the rules are installed."""
    created = mec.create_application(who, body)
    response.headers["Location"] = request.url_for(
        "get_mec_application", appInstanceId=created.appInstanceId
    ).path
    return created


@applications.get("", response_model=list[MecApplication], response_model_exclude_none=True,
                  responses=documented(*AUTHENTICATED, 503))
def list_mec_applications(mec: MecDep, who: ReaderDep) -> list[MecApplication]:
    """List the MEC application instances (the caller's tenant's; an admin's: all)."""
    return mec.list_applications(who)


@applications.get("/{appInstanceId}", response_model=MecApplication, response_model_exclude_none=True,
                  responses=documented(*AUTHENTICATED, 404, 503))
def get_mec_application(mec: MecDep, who: ReaderDep, appInstanceId: AppInstanceIdPath) -> MecApplication:
    """A MEC application instance with its traffic rules."""
    return mec.get_application(who, appInstanceId)


@applications.delete("/{appInstanceId}", status_code=204, response_model=None,
                     responses=documented(*AUTHENTICATED, 404, 503))
def delete_mec_application(mec: MecDep, who: AdminDep, appInstanceId: AppInstanceIdPath) -> None:
    """Remove a MEC application instance and what its traffic rules installed (admin)."""
    mec.delete_application(who, appInstanceId)


@applications.put("/{appInstanceId}/appd", response_model=AppdApplied, responses=documented(*CHANGES),
                  dependencies=[JsonBody])
def apply_mec_appd(
    onboarding: OnboardingDep,
    who: AdminDep,
    appInstanceId: AppInstanceIdPath,
    body: AppD,
    tenant: Annotated[Optional[str], Query(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$",
                                           description="the tenant of an instance the AppD creates "
                                                       "(default: the caller's)")] = None,
    value: Annotated[list[str], Query(max_length=32, description="NAME=VALUE: the value of the AppD's "
                                                                 "<NAME> placeholders")] = [],
) -> AppdApplied:
    """Apply a MEC 010-2 AppD to an application instance (admin): its appTrafficRule, appDNSRule and
    appServiceProduced become the instance's MEC 011 rules and services, replacing those an AppD made
    before; the same AppD again changes nothing."""
    return onboarding.apply(who, appInstanceId, body, tenant, placeholder_values(value))


def placeholder_values(given: list[str]) -> dict[str, str]:
    """`value` query parameters (NAME=VALUE) by name; InvalidInput naming one that is not that."""
    values = {}
    for position, item in enumerate(given):
        name, sep, text = item.partition("=")
        if not sep or PLACEHOLDER.fullmatch(f"<{name}>") is None:
            raise InvalidInput(f"value[{position}]: {item!r} is not NAME=VALUE with NAME lower-case letters, "
                               "digits and '-'", field=f"value[{position}]")
        values[name] = text
    return values


# --- MEC 011 /mec_app_support/v1 -----------------------------------------------------------------


@app_support.get("/applications/{appInstanceId}/traffic_rules", response_model=list[TrafficRule],
                 response_model_exclude_none=True, responses=documented(*AUTHENTICATED, 404, 503))
def list_traffic_rules(mec: MecDep, who: ReaderDep, appInstanceId: AppInstanceIdPath) -> list[TrafficRule]:
    """MEC 011 ApplicationsTrafficRules_GET: the traffic rules of an application instance."""
    return mec.list_traffic_rules(who, appInstanceId)


@app_support.get("/applications/{appInstanceId}/traffic_rules/{trafficRuleId}", response_model=TrafficRule,
                 response_model_exclude_none=True, responses=documented(*AUTHENTICATED, 404, 503))
def get_traffic_rule(
    mec: MecDep, who: ReaderDep, appInstanceId: AppInstanceIdPath, trafficRuleId: TrafficRuleIdPath
) -> TrafficRule:
    """MEC 011 ApplicationsTrafficRule_GET: one traffic rule of an application instance."""
    return mec.get_traffic_rule(who, appInstanceId, trafficRuleId)


@app_support.put("/applications/{appInstanceId}/traffic_rules/{trafficRuleId}", response_model=TrafficRule,
                 response_model_exclude_none=True, responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 503),
                 dependencies=[JsonBody])
def put_traffic_rule(
    mec: MecDep,
    who: IntentWriterDep,
    appInstanceId: AppInstanceIdPath,
    trafficRuleId: TrafficRuleIdPath,
    body: TrafficRule,
) -> TrafficRule:
    """MEC 011 ApplicationsTrafficRule_PUT: replace a traffic rule; the data plane follows (INACTIVE: not installed)."""
    return mec.put_traffic_rule(who, appInstanceId, trafficRuleId, body)
