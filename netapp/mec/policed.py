"""Whether a session's bandwidth allocation still polices all its packets: a rule of another shape
and a higher priority (an application's traffic rule) that also matches some of them acts on those
instead, unpoliced. Asked when an allocation is made and when a traffic rule changes."""

from __future__ import annotations

from typing import Optional

from netapp.mec import bwm_store
from netapp.mec.bwm_compiler import allocation_intent_ids
from netapp.mec.bwm_models import SESSION_SPECIFIC
from netapp.service.contract import Principal
from netapp.service.rules import rule_id, split_rule_id
from netapp.service.state import ServiceState


def overriding_rule(state: ServiceState, who: Principal, qualified: str) -> Optional[str]:
    """The rule that wins over some packets of installed rule `qualified` (as `who` may see it, with
    its label), or None when none does."""
    for found in state.index.overlaps(qualified).overlaps:
        if found.winner.intent_id != qualified:
            return f"{_named(state, who, found.winner.intent_id)} ({found.reason})"
    return None


def overridden_session(state: ServiceState, who: Principal, app_instance_id: str) -> Optional[tuple[str, str]]:
    """(allocation id, the rule that wins) of a session allocation of the application that a rule
    now takes packets from, or None."""
    for allocation in bwm_store.application_allocations(state.store, app_instance_id):
        if allocation.info.requestType != SESSION_SPECIFIC:
            continue
        for intent_id in allocation_intent_ids(allocation.allocationId):
            qualified = rule_id(allocation.tenant, intent_id)
            winner = overriding_rule(state, who, qualified) if qualified in state.index else None
            if winner is not None:
                return allocation.allocationId, winner
    return None


def _named(state: ServiceState, who: Principal, qualified: str) -> str:
    """A rule as `who` may see it: with its label (a traffic rule's says which) where it is its own."""
    shown = state.rules.display(who, qualified)
    tenant, intent_id = split_rule_id(qualified)
    record = state.store.get_intent(tenant, intent_id) if who.is_admin or tenant == who.tenant else None
    return f"{shown!r}" if record is None or not record.intent.label else f"{shown!r} ({record.intent.label})"
