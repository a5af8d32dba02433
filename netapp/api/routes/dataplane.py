"""/api/v1/dataplane: the XDP pipeline's state, the interfaces it is attached to, its program (the
CPUs it steers to are netapp.steering.routes', under the same prefix)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from netapp.api.deps import AdminDep, JsonBody, ReaderDep, ServiceDep
from netapp.api.routes.common import AUTHENTICATED, CHANGES, documented
from netapp.intents.models import InterfaceName

router = APIRouter(prefix="/api/v1/dataplane", tags=["dataplane"])


class AttachRequest(BaseModel):
    """Attach the pipeline to an interface."""

    model_config = ConfigDict(extra="forbid")

    interface: InterfaceName
    mode: Literal["native", "generic", "offload"] = Field(
        "native", description="XDP mode; generic works on any driver, slower"
    )


class DetachRequest(BaseModel):
    """Detach the pipeline from an interface."""

    model_config = ConfigDict(extra="forbid")

    interface: InterfaceName


@router.get("", response_model=dict[str, Any], responses=documented(*AUTHENTICATED, 503))
def dataplane_status(service: ServiceDep, who: ReaderDep) -> dict[str, Any]:
    """Interfaces and modes, program and map ids, map fill levels, per-CPU state."""
    return service.dataplane_status(who)


@router.post(
    "/attach", response_model=dict[str, Any], responses=documented(*CHANGES), dependencies=[JsonBody]
)
def attach(service: ServiceDep, who: AdminDep, body: AttachRequest) -> dict[str, Any]:
    """Attach the XDP pipeline to an interface (admin)."""
    return service.attach(who, body.interface, body.mode)


@router.post(
    "/detach", status_code=204, response_model=None, responses=documented(*CHANGES), dependencies=[JsonBody]
)
def detach(service: ServiceDep, who: AdminDep, body: DetachRequest) -> None:
    """Detach the XDP pipeline from an interface (admin)."""
    service.detach(who, body.interface)


class ReloadResult(BaseModel):
    """What a program replacement did."""

    previous_program_id: int = Field(description="kernel id of the program replaced")
    program_id: int = Field(description="kernel id of the program now running")
    interfaces: list[str] = Field(description="interfaces switched to the new program")
    duration_ms: float = Field(description="time the replacement took")


@router.post("/reload", response_model=ReloadResult, responses=documented(*AUTHENTICATED, 503))
def reload_dataplane(service: ServiceDep, who: AdminDep) -> dict[str, Any]:
    """Replace the XDP program under traffic (admin).

    Loads the program this NetApp build carries with the running instance's maps, then switches
    every attached interface to it in one step: rules, counters, CPUs and alternatives carry over
    and no packet meets an interface without a program. On failure the previous program keeps
    running (503); a failure after the switch, where a queue or port that takes redirected or
    copied frames was not given the new program, is a 503 that says so: reload again. Use after
    upgrading the NetApp, or after changing `flow_cache`.
    """
    return service.reload_dataplane(who)
