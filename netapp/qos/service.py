"""The policers of intents and slices as the service shows them (netapp.qos.contract): read from the
data plane's rule policers (netapp.qos.rules), a tenant's own only, never another tenant's."""

from __future__ import annotations

from netapp.qos.rules import INTENT, owner_parts
from netapp.qos.views import PolicerRecord, policer_record
from netapp.service.contract import Principal, Scope
from netapp.service.rules import split_rule_id
from netapp.service.state import ServiceState


class RulePolicerViews:
    def __init__(self, state: ServiceState):
        self._state = state

    def list_rule_policers(self, who: Principal) -> list[PolicerRecord]:
        """The caller's intents' and slices' policers (an admin's: every tenant's), by tenant, kind
        and id; none without a data path."""
        self._state.require(who, Scope.READ)
        dataplane = self._state.opened_dataplane
        if dataplane is None:
            return []
        policers = dataplane.rule_policers
        records = []
        for owner, policer_id in sorted(policers.owned().items()):
            kind, qualified = owner_parts(owner)
            tenant, local = split_rule_id(qualified)
            if tenant != who.tenant and not who.is_admin:
                continue
            what = {"intent_id": local} if kind == INTENT else {"slice_id": local}
            records.append(policer_record(policers.policers, policer_id, tenant=tenant, **what))
        return records
