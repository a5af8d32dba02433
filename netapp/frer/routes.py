"""/api/v1/frer: the protected streams (tenant-scoped, as intents) and their 802.1CB counters, the
ports' counters (admin); netapp.frer.service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response

from netapp.api.deps import AdminDep, IntentWriterDep, JsonBody, ReaderDep, ServiceDep
from netapp.api.routes.common import AUTHENTICATED, CHANGES, TenantQuery, documented, service_name
from netapp.frer.models import FrerStreamSpec, PortCounters, StreamCounters, StreamName, StreamStatus
from netapp.frer.service import Frer

router = APIRouter(prefix="/api/v1/frer", tags=["frer"])
STREAMS = "/streams"


def get_frer(request: Request, service: ServiceDep) -> Frer:
    """The running service's streams (`app.state.frer`, set where `netapp serve` has a data plane
    with FRER's maps), else the stored streams alone."""
    frer = getattr(request.app.state, "frer", None)
    if frer is None:
        frer = Frer(service.store)  # type: ignore[attr-defined]
    return frer


FrerDep = Annotated[Frer, Depends(get_frer)]
NamePath = Annotated[StreamName, Path(description="the stream's name")]


@router.get(STREAMS, response_model=list[StreamStatus], responses=documented(*AUTHENTICATED))
def list_streams(frer: FrerDep, who: ReaderDep) -> list[StreamStatus]:
    """List the caller's protected streams (an admin's: every tenant's)."""
    return frer.list_streams(who)


@router.post(STREAMS, response_model=StreamStatus, status_code=201, responses=documented(*CHANGES),
             dependencies=[JsonBody])
def create_stream(request: Request, response: Response, frer: FrerDep, who: IntentWriterDep, body: FrerStreamSpec,
                  tenant: TenantQuery = None) -> StreamStatus:
    """Create a protected stream; the node gives it its handle (409 when the tenant has one of that name)."""
    stream = frer.create_stream(who, service_name(who, body.name, tenant), body)
    response.headers["Location"] = f"{request.scope.get('root_path', '')}{router.prefix}{STREAMS}/{stream.name}"
    return stream


@router.get(STREAMS + "/{name}", response_model=StreamStatus, responses=documented(*AUTHENTICATED, 404))
def get_stream(frer: FrerDep, who: ReaderDep, name: NamePath, tenant: TenantQuery = None) -> StreamStatus:
    """Read one protected stream."""
    return frer.get_stream(who, service_name(who, name, tenant))


@router.put(STREAMS + "/{name}", response_model=StreamStatus,
            responses={200: {"description": "replaced"}, 201: {"description": "created"}, **documented(*CHANGES)},
            dependencies=[JsonBody])
def put_stream(response: Response, frer: FrerDep, who: IntentWriterDep, name: NamePath, body: FrerStreamSpec,
               tenant: TenantQuery = None) -> StreamStatus:
    """Create or replace a protected stream (the name in the body must be the one in the path). A
    recovered stream whose recovery parameters change starts again from a reset, its counters zero."""
    stream, created = frer.put_stream(who, service_name(who, name, tenant), body)
    if created:
        response.status_code = 201
    return stream


@router.delete(STREAMS + "/{name}", status_code=204, response_model=None,
               responses=documented(*AUTHENTICATED, 404, 503))
def delete_stream(frer: FrerDep, who: IntentWriterDep, name: NamePath, tenant: TenantQuery = None) -> None:
    """Delete a protected stream: its frames go on as without FRER."""
    frer.delete_stream(who, service_name(who, name, tenant))


@router.get(STREAMS + "/{name}/counters", response_model=StreamCounters, responses=documented(*AUTHENTICATED, 404))
def stream_counters(frer: FrerDep, who: ReaderDep, name: NamePath, tenant: TenantQuery = None) -> StreamCounters:
    """A stream's counters on this node, by 802.1CB's names (null without a data path)."""
    return frer.stream_counters(who, service_name(who, name, tenant))


@router.get("/ports", response_model=list[PortCounters], responses=documented(*AUTHENTICATED))
def port_counters(frer: FrerDep, who: AdminDep) -> list[PortCounters]:
    """The node's ports that received frames whose R-tag could not be read, and how many (admin)."""
    return frer.port_counters(who)
