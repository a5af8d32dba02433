"""/api/v1/policers: every policer of the data path with what it polices, its configuration, state and
counters (admins; a tenant reads its own through its UPF sessions, /api/v1/upf/sessions/{seid}/policers)."""

from __future__ import annotations

from fastapi import APIRouter

from netapp.api.deps import AdminDep
from netapp.api.routes.common import AUTHENTICATED, documented
from netapp.qos.views import PolicerRecord
from netapp.upf.routes import ViewsDep

router = APIRouter(prefix="/api/v1/policers", tags=["qos"])


@router.get("", response_model=list[PolicerRecord], responses=documented(*AUTHENTICATED))
def list_policers(views: ViewsDep, who: AdminDep) -> list[PolicerRecord]:
    """List every policer in use, by UPF session (SEID order), QER and direction."""
    return views.list_policers(who)
