"""/api/v1/stats: counters per intent and slice (the caller's), and for admins per CPU and verdict."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from netapp.api.deps import ReaderDep, ServiceDep
from netapp.api.routes.common import AUTHENTICATED, documented

router = APIRouter(prefix="/api/v1/stats", tags=["stats"])


@router.get("", response_model=dict[str, Any], responses=documented(*AUTHENTICATED, 503))
def get_stats(service: ServiceDep, who: ReaderDep) -> dict[str, Any]:
    """Packet and byte counters the caller may see."""
    return service.stats(who)
