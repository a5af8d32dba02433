"""MEC 011 service management (/mec_service_mgmt/v1: services, their discovery, service
availability subscriptions, transports) and timing (/mec_app_support/v1/timing), over
netapp.mec.services and netapp.mec.timing.

The paths, parameters and bodies are ETSI's (MecServiceMgmtApi and MecAppSupportApi, v2.1.1);
answers leave absent members out, as ETSI's types have no nulls, and errors are ProblemDetails
(netapp.api.problems).
"""

from __future__ import annotations

from typing import Annotated, Optional

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from netapp.api.deps import IntentWriterDep, JsonBody, ReaderDep, ServiceDep
from netapp.api.routes.common import AUTHENTICATED, CHANGES, WITH_BODY, documented
from netapp.mec import timing
from netapp.mec.models import MEC_ID_MAX, MEC_ID_PATTERN
from netapp.mec.routes import MEC_APP_SUPPORT, AppInstanceIdPath, MecDep
from netapp.mec.service_models import (
    CurrentTime,
    SerAvailabilitySubscription,
    ServiceInfo,
    ServiceSubscriptionLinkList,
    TimingCaps,
    TransportInfo,
)
from netapp.mec.services import SERVICE_MGMT, MecServices, ServiceQuery

service_mgmt = APIRouter(prefix=SERVICE_MGMT, tags=["mec011"])
app_timing = APIRouter(prefix=MEC_APP_SUPPORT + "/timing", tags=["mec011"])


def get_services(service: ServiceDep, _mec: MecDep) -> MecServices:
    """The service's MEC service registry, where MEC 011 is served (MecDep answers 503 elsewhere)."""
    return service.mec_services


ServicesDep = Annotated[MecServices, Depends(get_services)]
ServiceIdPath = Annotated[
    str, Path(min_length=1, max_length=MEC_ID_MAX, pattern=MEC_ID_PATTERN, description="a service instance")
]
SubscriptionIdPath = Annotated[
    str, Path(min_length=1, max_length=MEC_ID_MAX, pattern=MEC_ID_PATTERN, description="a subscription")
]

# What a DELETE's path names: any string. ETSI documents no 400 for its DELETEs, and an id we could
# never have assigned names nothing to delete: 404.
AnyIdPath = Annotated[str, Path(description="an id as the resource's URI has it")]


def service_query(
    ser_instance_id: Annotated[Optional[list[str]], Query(max_length=64)] = None,
    ser_name: Annotated[Optional[list[str]], Query(max_length=64)] = None,
    ser_category_id: Optional[str] = None,
    consumed_local_only: Optional[bool] = None,
    is_local: Optional[bool] = None,
    scope_of_locality: Optional[str] = None,
) -> ServiceQuery:
    """Services_GET's query parameters, as ETSI names them."""
    return ServiceQuery(ser_instance_id, ser_name, ser_category_id, consumed_local_only, is_local, scope_of_locality)


QueryDep = Annotated[ServiceQuery, Depends(service_query)]
ANSWER = {"response_model_exclude_none": True, "response_model_by_alias": True}


# --- discovery ------------------------------------------------------------------------------------


@service_mgmt.get("/services", response_model=list[ServiceInfo], responses=documented(*AUTHENTICATED, 503),
                  **ANSWER)
def list_services(services: ServicesDep, who: ReaderDep, query: QueryDep) -> list[ServiceInfo]:
    """MEC 011 Services_GET: the services of the MEC host (the NetApp's and every application's)."""
    return services.discover(who, query)


@service_mgmt.get("/services/{serviceId}", response_model=ServiceInfo,
                  responses=documented(*AUTHENTICATED, 404, 503), **ANSWER)
def get_service(services: ServicesDep, who: ReaderDep, serviceId: ServiceIdPath) -> ServiceInfo:
    """MEC 011 ServicesServiceId_GET: one service of the MEC host."""
    return services.get(who, serviceId)


@service_mgmt.get("/transports", response_model=list[TransportInfo], responses=documented(*AUTHENTICATED, 503),
                  **ANSWER)
def list_transports(services: ServicesDep, who: ReaderDep) -> list[TransportInfo]:
    """MEC 011 Transports_GET: the transports the platform offers its applications' services."""
    return services.transports(who)


# --- an application's services ------------------------------------------------------------------


@service_mgmt.get("/applications/{appInstanceId}/services", response_model=list[ServiceInfo],
                  responses=documented(*AUTHENTICATED, 404, 503), **ANSWER)
def list_app_services(
    services: ServicesDep, who: ReaderDep, appInstanceId: AppInstanceIdPath, query: QueryDep
) -> list[ServiceInfo]:
    """MEC 011 AppServices_GET: the services an application instance registered."""
    return services.app_services(who, appInstanceId, query)


@service_mgmt.post("/applications/{appInstanceId}/services", response_model=ServiceInfo, status_code=201,
                   responses=documented(*CHANGES), dependencies=[JsonBody], **ANSWER)
def register_service(
    request: Request, response: Response, services: ServicesDep, who: IntentWriterDep,
    appInstanceId: AppInstanceIdPath, body: ServiceInfo,
) -> ServiceInfo:
    """MEC 011 AppServices_POST: register a service of the application instance (its id is ours)."""
    registered = services.register(who, appInstanceId, body)
    response.headers["Location"] = request.url_for(
        "get_app_service", appInstanceId=appInstanceId, serviceId=registered.serInstanceId
    ).path
    return registered


@service_mgmt.get("/applications/{appInstanceId}/services/{serviceId}", response_model=ServiceInfo,
                  responses=documented(*AUTHENTICATED, 404, 503), **ANSWER)
def get_app_service(
    services: ServicesDep, who: ReaderDep, appInstanceId: AppInstanceIdPath, serviceId: ServiceIdPath
) -> ServiceInfo:
    """MEC 011 AppServicesServiceId_GET: one service of the application instance."""
    return services.app_service(who, appInstanceId, serviceId)


@service_mgmt.put("/applications/{appInstanceId}/services/{serviceId}", response_model=ServiceInfo,
                  responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 503), dependencies=[JsonBody], **ANSWER)
def put_app_service(
    services: ServicesDep, who: IntentWriterDep, appInstanceId: AppInstanceIdPath, serviceId: ServiceIdPath,
    body: ServiceInfo,
) -> ServiceInfo:
    """MEC 011 AppServicesServiceId_PUT: replace a service of the application instance."""
    return services.update(who, appInstanceId, serviceId, body)


@service_mgmt.delete("/applications/{appInstanceId}/services/{serviceId}", status_code=204, response_model=None,
                     responses=documented(*AUTHENTICATED, 404, 503))
def delete_app_service(
    services: ServicesDep, who: IntentWriterDep, appInstanceId: AnyIdPath, serviceId: AnyIdPath
) -> None:
    """MEC 011 AppServicesServiceId_DELETE: the application instance's service is gone."""
    services.remove(who, appInstanceId, serviceId)


# --- service availability subscriptions ---------------------------------------------------------


@service_mgmt.get("/applications/{appInstanceId}/subscriptions", response_model=ServiceSubscriptionLinkList,
                  responses=documented(*AUTHENTICATED, 404, 503), **ANSWER)
def list_service_subscriptions(services: ServicesDep, who: ReaderDep, appInstanceId: AppInstanceIdPath) -> ServiceSubscriptionLinkList:
    """MEC 011 ApplicationsSubscriptions_GET: links to the application instance's subscriptions."""
    return services.subscriptions(who, appInstanceId)


@service_mgmt.post("/applications/{appInstanceId}/subscriptions", response_model=SerAvailabilitySubscription,
                   status_code=201, responses=documented(*CHANGES), dependencies=[JsonBody], **ANSWER)
def create_service_subscription(
    response: Response, services: ServicesDep, who: IntentWriterDep, appInstanceId: AppInstanceIdPath,
    body: SerAvailabilitySubscription,
) -> SerAvailabilitySubscription:
    """MEC 011 ApplicationsSubscriptions_POST: notifications of services that appear, change or go."""
    _, created = services.subscribe(who, appInstanceId, body)
    response.headers["Location"] = created.links.self.href
    return created


@service_mgmt.get("/applications/{appInstanceId}/subscriptions/{subscriptionId}",
                  response_model=SerAvailabilitySubscription, responses=documented(*AUTHENTICATED, 404, 503),
                  **ANSWER)
def get_service_subscription(
    services: ServicesDep, who: ReaderDep, appInstanceId: AppInstanceIdPath, subscriptionId: SubscriptionIdPath
) -> SerAvailabilitySubscription:
    """MEC 011 ApplicationsSubscription_GET: one subscription of the application instance."""
    return services.subscription(who, appInstanceId, subscriptionId)


@service_mgmt.delete("/applications/{appInstanceId}/subscriptions/{subscriptionId}", status_code=204,
                     response_model=None, responses=documented(*AUTHENTICATED, 404, 503))
def delete_service_subscription(
    services: ServicesDep, who: IntentWriterDep, appInstanceId: AnyIdPath, subscriptionId: AnyIdPath
) -> None:
    """MEC 011 ApplicationsSubscription_DELETE: no more notifications to this subscription."""
    services.unsubscribe(who, appInstanceId, subscriptionId)


# --- timing -----------------------------------------------------------------------------------------


@app_timing.get("/current_time", response_model=CurrentTime, responses=documented(*AUTHENTICATED), **ANSWER)
def get_current_time(_who: ReaderDep) -> CurrentTime:
    """MEC 011 TimingCurrentTime_GET: the platform's time and whether it is traceable to a reference."""
    return timing.current_time()


@app_timing.get("/timing_caps", response_model=TimingCaps, responses=documented(*AUTHENTICATED), **ANSWER)
def get_timing_caps(_who: ReaderDep) -> TimingCaps:
    """MEC 011 TimingCaps_GET: the platform's timing capabilities (the time it answered at)."""
    return timing.timing_caps()
