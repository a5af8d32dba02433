"""/api/v1/slices: network slices (S-NSSAI, priority, members) and the intents they own."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from netapp.api.deps import JsonBody, ReaderDep, ServiceDep, SliceWriterDep
from netapp.api.pagination import DEFAULT_LIMIT, Limit, Offset, SlicePage, set_link_header
from netapp.api.routes.common import (
    AUTHENTICATED,
    CHANGES,
    TenantQuery,
    documented,
    require_path_matches_body,
    service_name,
)
from netapp.service.contract import SliceRecord, SliceSpec

router = APIRouter(prefix="/api/v1/slices", tags=["slices"])

SliceIdPath = Annotated[
    str, Path(min_length=1, max_length=48, pattern=r"^[A-Za-z0-9._-]+$", description="the slice's id")
]


@router.get("", response_model=SlicePage, responses=documented(*AUTHENTICATED))
def list_slices(
    request: Request,
    response: Response,
    service: ServiceDep,
    who: ReaderDep,
    offset: Offset = 0,
    limit: Limit = DEFAULT_LIMIT,
) -> SlicePage:
    """List slices (the caller's; an admin's: everyone's), one page at a time."""
    page = service.list_slices(who, offset=offset, limit=limit)
    set_link_header(request, response, page)
    return SlicePage.of(page)


@router.get("/{slice_id}", response_model=SliceRecord, responses=documented(*AUTHENTICATED, 404))
def get_slice(
    service: ServiceDep, who: ReaderDep, slice_id: SliceIdPath, tenant: TenantQuery = None
) -> SliceRecord:
    """Read one slice."""
    return service.get_slice(who, service_name(who, slice_id, tenant))


@router.put(
    "/{slice_id}",
    response_model=SliceRecord,
    responses={
        200: {"description": "resized (replaced)"},
        201: {"model": SliceRecord, "description": "created"},
        **documented(*CHANGES),
    },
    dependencies=[JsonBody],
)
def put_slice(
    request: Request,
    response: Response,
    service: ServiceDep,
    who: SliceWriterDep,
    slice_id: SliceIdPath,
    body: SliceSpec,
) -> SliceRecord:
    """Create a slice or resize it, with its intents, in one transaction (201 created, 200 replaced)."""
    require_path_matches_body("slice id", slice_id, "id", body.id)
    record, created = service.put_slice(who, body)
    if created:
        response.status_code = 201
        response.headers["Location"] = request.url_for("get_slice", slice_id=body.id).path
    return record


@router.delete(
    "/{slice_id}", status_code=204, response_model=None, responses=documented(*AUTHENTICATED, 404, 409, 503)
)
def delete_slice(
    service: ServiceDep, who: SliceWriterDep, slice_id: SliceIdPath, tenant: TenantQuery = None
) -> None:
    """Delete a slice and the intents it owns."""
    service.delete_slice(who, service_name(who, slice_id, tenant))
