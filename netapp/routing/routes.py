"""/api/v1/routes: the private routing tables' routes (admin), netapp.routing.service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from netapp.api.deps import AdminDep, JsonBody, ServiceDep
from netapp.api.routes.common import AUTHENTICATED, CHANGES, documented
from netapp.routing.models import Route, RouteStatus, normal_prefix
from netapp.routing.service import Routing

router = APIRouter(prefix="/api/v1/routes", tags=["routes"])


def get_routing(request: Request, service: ServiceDep) -> Routing:
    """The running service's routes (`app.state.routing`, set where `netapp serve` has a data plane),
    else the stored routes alone."""
    routing = getattr(request.app.state, "routing", None)
    if routing is None:
        routing = Routing(service.store, request.app.state.settings.upf)  # type: ignore[attr-defined]
    return routing


RoutingDep = Annotated[Routing, Depends(get_routing)]
InstanceQuery = Annotated[str, Query(min_length=1, max_length=255, description="the route's network instance")]
PrefixQuery = Annotated[str, Query(min_length=1, max_length=64, description="the route's prefix, e.g. 10.0.0.0/8")]


@router.get("", response_model=list[RouteStatus], responses=documented(*AUTHENTICATED))
def list_routes(routing: RoutingDep, who: AdminDep) -> list[RouteStatus]:
    """List the routes of the private routing tables (admin), with whether each next hop is resolved."""
    return routing.list_routes()


@router.post("", response_model=RouteStatus, status_code=201, responses=documented(*CHANGES),
             dependencies=[JsonBody])
def add_route(routing: RoutingDep, who: AdminDep, body: Route) -> RouteStatus:
    """Create or replace the route of a prefix in a private network instance (admin)."""
    return routing.add_route(body)


@router.delete("", status_code=204, response_model=None, responses=documented(*AUTHENTICATED, 404, 503))
def delete_route(routing: RoutingDep, who: AdminDep, instance: InstanceQuery, prefix: PrefixQuery) -> None:
    """Delete the route of a prefix in a network instance (admin)."""
    routing.delete_route(instance, normal_prefix(prefix))
