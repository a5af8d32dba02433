"""/api/v1/upf: the UPF's PFCP sessions and associations, read-only (netapp.upf.views)."""

from __future__ import annotations

from typing import Annotated, Optional

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from netapp.api.deps import ReaderDep, ServiceDep
from netapp.api.pagination import DEFAULT_LIMIT, Limit, Offset, _PageBody, set_link_header
from netapp.api.routes.common import AUTHENTICATED, documented
from netapp.qos.views import PolicerRecord
from netapp.upf.store import Association
from netapp.upf.views import SessionRecord, SessionViews

router = APIRouter(prefix="/api/v1/upf", tags=["upf"])

SeidPath = Annotated[int, Path(ge=1, le=(1 << 64) - 1, description="the UPF's SEID (decimal)")]
NodeIdQuery = Annotated[
    Optional[str],
    Query(min_length=1, max_length=255, description="admins: this association's sessions only (default: all)"),
]


class SessionPage(_PageBody[SessionRecord]):
    """A page of PFCP sessions."""


def get_session_views(request: Request, service: ServiceDep) -> SessionViews:
    """The views over the service's store, with the UPF's usage where `netapp serve` runs PFCP
    (`app.state.upf_usage`, `upf_buffering`, `upf_policers`); tests override this dependency."""
    state = request.app.state
    return SessionViews(service.store, getattr(state, "upf_usage", None),  # type: ignore[attr-defined]
                        getattr(state, "upf_buffering", None), getattr(state, "upf_policers", None))


ViewsDep = Annotated[SessionViews, Depends(get_session_views)]


@router.get("/sessions", response_model=SessionPage, responses=documented(*AUTHENTICATED))
def list_sessions(
    request: Request,
    response: Response,
    views: ViewsDep,
    who: ReaderDep,
    offset: Offset = 0,
    limit: Limit = DEFAULT_LIMIT,
    node_id: NodeIdQuery = None,
) -> SessionPage:
    """List PFCP sessions (the caller's association's; an admin's: all), in SEID order, a page at a time."""
    page = views.list_sessions(who, node_id, offset, limit)
    set_link_header(request, response, page)
    return SessionPage.of(page)


@router.get("/sessions/{seid}", response_model=SessionRecord, responses=documented(*AUTHENTICATED, 404))
def get_session(views: ViewsDep, who: ReaderDep, seid: SeidPath) -> SessionRecord:
    """A PFCP session with its PDRs, FARs, QERs and URRs as stored, and its URRs' usage now."""
    return views.get_session(who, seid)


@router.get("/sessions/{seid}/policers", response_model=list[PolicerRecord],
            responses=documented(*AUTHENTICATED, 404))
def get_session_policers(views: ViewsDep, who: ReaderDep, seid: SeidPath) -> list[PolicerRecord]:
    """A PFCP session's QER policers: configuration, state and counters now."""
    return views.session_policers(who, seid)


@router.get("/associations", response_model=list[Association], responses=documented(*AUTHENTICATED))
def list_associations(views: ViewsDep, who: ReaderDep) -> list[Association]:
    """List the PFCP associations (the caller's; an admin's: all)."""
    return views.list_associations(who)
