"""MEC 015's bandwidth management API, /bwm/v1 (ETSI BwManagementApi v2.1.1's server URL): an
application's bandwidth allocations, over netapp.mec.bwm_service.

Paths, query parameters and bodies are ETSI's; answers leave absent members out (ETSI's types have
no nulls), errors are ProblemDetails (netapp.api.problems). The document has no subscriptions and
no capability resource, so neither is served.
"""

from __future__ import annotations

from typing import Annotated, Optional

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from netapp.api.deps import IntentWriterDep, JsonBody, ReaderDep
from netapp.api.routes.common import AUTHENTICATED, WITH_BODY, documented
from netapp.mec.bwm_models import BwInfo, BwInfoDeltas
from netapp.mec.bwm_service import BwmService
from netapp.mec.routes import service_part

BWM = "/bwm/v1"

bwm = APIRouter(prefix=BWM, tags=["mec015"])


BwmDep = Annotated[BwmService, Depends(service_part("bwm", "MEC 015 BWM"))]
AllocationIdPath = Annotated[str, Path(description="a bandwidth allocation (an unknown one, of any length, is a 404)")]
Names = Optional[list[str]]


@bwm.get("/bw_allocations", response_model=list[BwInfo], response_model_exclude_none=True,
         responses=documented(*AUTHENTICATED, 503))
def list_bw_allocations(
    service: BwmDep,
    who: ReaderDep,
    app_instance_id: Annotated[Names, Query(description="allocations of these application instances")] = None,
    app_name: Annotated[Names, Query(description="allocations of the applications of these names")] = None,
    session_id: Annotated[Names, Query(description="sessions are named by filters here: finds none")] = None,
) -> list[BwInfo]:
    """MEC 015 bandwidthAllocationListGET: the caller's bandwidth allocations, filtered."""
    return [one.info for one in service.list_allocations(who, app_instance_id, app_name, session_id)]


@bwm.post("/bw_allocations", response_model=BwInfo, response_model_exclude_none=True, status_code=201,
          responses=documented(*AUTHENTICATED, *WITH_BODY, 503), dependencies=[JsonBody])
def create_bw_allocation(
    request: Request, response: Response, service: BwmDep, who: IntentWriterDep, body: BwInfo
) -> BwInfo:
    """MEC 015 bandwidthAllocationPOST: allocate bandwidth to an application or a session, enforced by policers."""
    created = service.create_allocation(who, body)
    response.headers["Location"] = request.url_for("get_bw_allocation", allocationId=created.allocationId).path
    return created.info


@bwm.get("/bw_allocations/{allocationId}", response_model=BwInfo, response_model_exclude_none=True,
         responses=documented(*AUTHENTICATED, 404, 503))
def get_bw_allocation(service: BwmDep, who: ReaderDep, allocationId: AllocationIdPath) -> BwInfo:
    """MEC 015 bandwidthAllocationGET: one bandwidth allocation."""
    return service.get_allocation(who, allocationId).info


@bwm.put("/bw_allocations/{allocationId}", response_model=BwInfo, response_model_exclude_none=True,
         responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 503), dependencies=[JsonBody])
def put_bw_allocation(service: BwmDep, who: IntentWriterDep, allocationId: AllocationIdPath, body: BwInfo) -> BwInfo:
    """MEC 015 bandwidthAllocationPUT: replace a bandwidth allocation; its policers follow."""
    return service.put_allocation(who, allocationId, body).info


@bwm.patch("/bw_allocations/{allocationId}", response_model=BwInfo, response_model_exclude_none=True,
           responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 503), dependencies=[JsonBody])
def patch_bw_allocation(
    service: BwmDep, who: IntentWriterDep, allocationId: AllocationIdPath, body: BwInfoDeltas
) -> BwInfo:
    """MEC 015 bandwidthAllocationPATCH: change some members of a bandwidth allocation."""
    return service.patch_allocation(who, allocationId, body).info


@bwm.delete("/bw_allocations/{allocationId}", status_code=204, response_model=None,
            responses=documented(*AUTHENTICATED, 404, 503))
def delete_bw_allocation(service: BwmDep, who: IntentWriterDep, allocationId: AllocationIdPath) -> None:
    """MEC 015 bandwidthAllocationDELETE: remove a bandwidth allocation and its policers."""
    service.delete_allocation(who, allocationId)
