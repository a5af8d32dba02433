"""/api/v1/alternatives: the alternative node groups overflow and forward traffic goes to (site)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from netapp.api.deps import AdminDep, JsonBody, ReaderDep, ServiceDep
from netapp.api.routes.common import AUTHENTICATED, CHANGES, documented, require_path_matches_body
from netapp.forwarding.models import AlternativeGroup, AlternativeGroupStatus
from netapp.intents.models import MAX_ALT_GROUPS

router = APIRouter(prefix="/api/v1/alternatives", tags=["alternatives"])

# Not models.GroupId: that one is strict (JSON numbers only), and a path segment is a string.
GroupIdPath = Annotated[int, Path(ge=0, le=MAX_ALT_GROUPS - 1, description="the group's id")]


@router.get("", response_model=list[AlternativeGroup], responses=documented(*AUTHENTICATED))
def list_alternatives(service: ServiceDep, who: ReaderDep) -> list[AlternativeGroup]:
    """List the alternative node groups."""
    return service.list_alternatives(who)


@router.get("/{group_id}", response_model=AlternativeGroupStatus, responses=documented(*AUTHENTICATED, 404))
def get_alternative(service: ServiceDep, who: ReaderDep, group_id: GroupIdPath) -> AlternativeGroupStatus:
    """An alternative node group with each member's liveness (state, alive, last change)."""
    return service.get_alternative(who, group_id)


@router.put(
    "/{group_id}", response_model=AlternativeGroup, responses=documented(*CHANGES), dependencies=[JsonBody]
)
def put_alternative(
    service: ServiceDep, who: AdminDep, group_id: GroupIdPath, body: AlternativeGroup
) -> AlternativeGroup:
    """Create or replace an alternative node group (admin)."""
    require_path_matches_body("group id", group_id, "id", body.id)
    return service.put_alternative(who, body)


@router.delete(
    "/{group_id}", status_code=204, response_model=None, responses=documented(*AUTHENTICATED, 404, 409, 503)
)
def delete_alternative(service: ServiceDep, who: AdminDep, group_id: GroupIdPath) -> None:
    """Delete an alternative node group (admin); refused while intents use it."""
    service.delete_alternative(who, group_id)
