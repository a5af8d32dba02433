"""/api/v1/dataplane/cpus: the CPUs the data plane steers to (admin), beside the data plane's own
routes (netapp.api.routes.dataplane) under the same prefix and tag."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from netapp.api.deps import AdminDep, JsonBody, ReaderDep, ServiceDep
from netapp.api.routes.common import AUTHENTICATED, CHANGES, documented, require_path_matches_body
from netapp.intents.models import MAX_CPUS
from netapp.steering.models import CpuSpec

router = APIRouter(prefix="/api/v1/dataplane", tags=["dataplane"])

# Not models.CpuId: that one is strict (JSON numbers only), and a path segment is a string.
CpuPath = Annotated[int, Path(ge=0, le=MAX_CPUS - 1, description="the CPU's number")]


@router.get("/cpus", response_model=list[dict[str, Any]], responses=documented(*AUTHENTICATED, 503))
def list_cpus(service: ServiceDep, who: ReaderDep) -> list[dict[str, Any]]:
    """Each CPU of the steering set with its capacity, overload flag and meter state."""
    return service.list_cpus(who)


@router.put("/cpus/{cpu}", response_model=CpuSpec, responses=documented(*CHANGES), dependencies=[JsonBody])
def put_cpu(service: ServiceDep, who: AdminDep, cpu: CpuPath, body: CpuSpec) -> CpuSpec:
    """Add a CPU to the steering set or change it (admin)."""
    require_path_matches_body("cpu", cpu, "cpu", body.cpu)
    return service.put_cpu(who, body)


@router.delete(
    "/cpus/{cpu}", status_code=204, response_model=None, responses=documented(*AUTHENTICATED, 404, 503)
)
def delete_cpu(service: ServiceDep, who: AdminDep, cpu: CpuPath) -> None:
    """Remove a CPU from the steering set (admin); steers to it fall back (cpu_unavailable)."""
    service.delete_cpu(who, cpu)
