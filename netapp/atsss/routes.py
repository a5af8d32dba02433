"""/api/v1/atsss: the ATSSS sessions (tenant-scoped, as intents), the paths' state a monitoring or AI
module feeds (PATCH), and each path's counters; netapp.atsss.service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response

from netapp.api.deps import IntentWriterDep, JsonBody, ReaderDep, ServiceDep
from netapp.api.routes.common import AUTHENTICATED, CHANGES, TenantQuery, documented, service_name
from netapp.atsss.models import AtsssSession, AtsssSessionPatch, AtsssSessionSpec, SessionCounters, SessionName
from netapp.atsss.service import Atsss

router = APIRouter(prefix="/api/v1/atsss", tags=["atsss"])
SESSIONS = "/sessions"


def get_atsss(request: Request, service: ServiceDep) -> Atsss:
    """The running service's sessions (`app.state.atsss`, set where `netapp serve` has a data plane
    with ATSSS's maps), else the stored sessions alone."""
    atsss = getattr(request.app.state, "atsss", None)
    if atsss is None:
        atsss = Atsss(service.store)  # type: ignore[attr-defined]
    return atsss


AtsssDep = Annotated[Atsss, Depends(get_atsss)]
NamePath = Annotated[SessionName, Path(description="the session's name")]


@router.get(SESSIONS, response_model=list[AtsssSession], responses=documented(*AUTHENTICATED))
def list_atsss_sessions(atsss: AtsssDep, who: ReaderDep) -> list[AtsssSession]:
    """List the caller's ATSSS sessions (an admin's: every tenant's)."""
    return atsss.list_sessions(who)


@router.post(SESSIONS, response_model=AtsssSession, status_code=201, responses=documented(*CHANGES),
             dependencies=[JsonBody])
def create_atsss_session(request: Request, response: Response, atsss: AtsssDep, who: IntentWriterDep,
                         body: AtsssSessionSpec, tenant: TenantQuery = None) -> AtsssSession:
    """Create an ATSSS session; the node gives its paths their slots (409 when the tenant has one of that name)."""
    session = atsss.create_session(who, service_name(who, body.name, tenant), body)
    response.headers["Location"] = f"{request.scope.get('root_path', '')}{router.prefix}{SESSIONS}/{session.name}"
    return session


@router.get(SESSIONS + "/{name}", response_model=AtsssSession, responses=documented(*AUTHENTICATED, 404))
def get_atsss_session(atsss: AtsssDep, who: ReaderDep, name: NamePath, tenant: TenantQuery = None) -> AtsssSession:
    """Read one ATSSS session."""
    return atsss.get_session(who, service_name(who, name, tenant))


@router.put(SESSIONS + "/{name}", response_model=AtsssSession,
            responses={200: {"description": "replaced"}, 201: {"description": "created"}, **documented(*CHANGES)},
            dependencies=[JsonBody])
def put_atsss_session(response: Response, atsss: AtsssDep, who: IntentWriterDep, name: NamePath,
                      body: AtsssSessionSpec, tenant: TenantQuery = None) -> AtsssSession:
    """Create or replace an ATSSS session (the name in the body must be the one in the path); an
    unchanged path keeps its DCCP sequence numbers, an unchanged session its MP_SEQ numbers."""
    session, created = atsss.put_session(who, service_name(who, name, tenant), body)
    if created:
        response.status_code = 201
    return session


@router.patch(SESSIONS + "/{name}", response_model=AtsssSession, responses=documented(*CHANGES),
              dependencies=[JsonBody])
def patch_atsss_session(atsss: AtsssDep, who: IntentWriterDep, name: NamePath, body: AtsssSessionPatch,
                        tenant: TenantQuery = None) -> AtsssSession:
    """Change a session's mode or its paths' state: up or down, RTT, weight (what a monitoring or AI
    module reports); the rest is kept, and so are the sequence numbers."""
    return atsss.patch_session(who, service_name(who, name, tenant), body)


@router.delete(SESSIONS + "/{name}", status_code=204, response_model=None,
               responses=documented(*AUTHENTICATED, 404, 409, 503))
def delete_atsss_session(atsss: AtsssDep, who: IntentWriterDep, name: NamePath, tenant: TenantQuery = None) -> None:
    """Delete an ATSSS session: the UE's packets go on as without ATSSS (409 while an MTS session steers it)."""
    atsss.delete_session(who, service_name(who, name, tenant))


@router.get(SESSIONS + "/{name}/counters", response_model=SessionCounters, responses=documented(*AUTHENTICATED, 404))
def atsss_session_counters(atsss: AtsssDep, who: ReaderDep, name: NamePath,
                           tenant: TenantQuery = None) -> SessionCounters:
    """Each path's packets and bytes on this node, its state and its share (no paths: not in a data path here)."""
    return atsss.session_counters(who, service_name(who, name, tenant))
