"""/api/v1/policers: every policer of the data path with what it polices, its configuration, state and
counters (admins); /api/v1/policers/intents: those of the caller's intents and slices (a tenant reads
its UPF sessions' through /api/v1/upf/sessions/{seid}/policers)."""

from __future__ import annotations

from fastapi import APIRouter

from netapp.api.deps import AdminDep, ReaderDep, ServiceDep
from netapp.api.routes.common import AUTHENTICATED, documented
from netapp.qos.views import PolicerRecord
from netapp.upf.routes import ViewsDep

router = APIRouter(prefix="/api/v1/policers", tags=["qos"])


@router.get("", response_model=list[PolicerRecord], responses=documented(*AUTHENTICATED))
def list_policers(views: ViewsDep, service: ServiceDep, who: AdminDep) -> list[PolicerRecord]:
    """List every policer in use: by UPF session (SEID order), QER and direction, then by tenant,
    intent and slice."""
    return views.list_policers(who) + service.list_rule_policers(who)


@router.get("/intents", response_model=list[PolicerRecord], responses=documented(*AUTHENTICATED))
def list_intent_policers(service: ServiceDep, who: ReaderDep) -> list[PolicerRecord]:
    """List the policers of the caller's intents (police option) and slices (MBR); an admin's: all."""
    return service.list_rule_policers(who)
