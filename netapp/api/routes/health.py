"""/healthz (the process answers) and /readyz (the service can take requests); no authentication,
so that probes (systemd, Juju, a load balancer) need no token."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from netapp.api.deps import ServiceDep
from netapp.api.routes.common import documented

router = APIRouter(tags=["health"])


class Liveness(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    ready: bool
    checks: dict[str, str] = Field(description='each check: "ok" or what is wrong')


@router.get("/healthz", response_model=Liveness, responses=documented(400, 500))
def liveness() -> Liveness:
    """The process is up and answering."""
    return Liveness()


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={
        503: {"model": Readiness, "description": "not ready: the checks say why"},
        **documented(400, 500),
    },
)
def readiness(response: Response, service: ServiceDep) -> Readiness:
    """The service is ready (store open, data plane reachable); 503 with the failing checks if not."""
    health = service.health()
    if not health.ready:
        response.status_code = 503
    return Readiness(ready=health.ready, checks=health.checks)
