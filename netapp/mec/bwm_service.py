"""MEC 015 bandwidth allocations: stored, and enforced by the data plane's policers as intents of
the application's tenant (netapp.mec.bwm_compiler says which).

An allocation belongs to its application instance (appInsId) and so to that application's tenant:
the tenant (or an administrator) reads them with scope read and changes them with scope
intents:write; another tenant's allocations and applications are 404s. A change is one transaction
of the service: the allocation's row, its intents in the store and the index, all or none. An
application has at most one APPLICATION_SPECIFIC allocation (its rules carry one policer each way);
its sessions may have any number. An allocation that collides with an installed rule is a 403, as
MEC 015 answers a request "not allowed given the current status of the resource".
"""

from __future__ import annotations

import uuid
from typing import Callable, Optional, TypeVar

from netapp.intents.errors import IntentError
from netapp.mec import bwm_store
from netapp.mec.bwm_compiler import BWM_SOURCE, SESSION, allocation_intent_ids, check_allocation, session_intents, session_path
from netapp.mec.bwm_models import APPLICATION_SPECIFIC, BwAllocation, BwInfo, BwInfoDeltas
from netapp.mec.models import MecApplication
from netapp.mec.policed import overriding_rule
from netapp.mec.service import MecService
from netapp.service.contract import Conflict, Forbidden, InvalidInput, NotFound, Principal, Scope
from netapp.service.rules import rule_id
from netapp.service.state import ServiceState
from netapp.service.transaction import RuleChange, invalid_input

T = TypeVar("T")


class BwmService:
    """The bandwidth allocations of the site's MEC application instances."""

    def __init__(self, state: ServiceState, mec: MecService):
        self._state = state
        self._mec = mec

    # --- reads -----------------------------------------------------------------------------------

    def list_allocations(
        self,
        who: Principal,
        app_instance_ids: Optional[list[str]] = None,
        app_names: Optional[list[str]] = None,
        session_ids: Optional[list[str]] = None,
    ) -> list[BwAllocation]:
        """The allocations `who` may see, of the given applications (by instance id or by name).
        Sessions are named by their filters, not by ids: asking by session_id finds none."""
        self._state.require(who, Scope.READ)
        found = bwm_store.list_allocations(self._state.store, None if who.is_admin else who.tenant)
        if app_instance_ids:
            found = [one for one in found if one.info.appInsId in app_instance_ids]
        if app_names:
            named = {app.appInstanceId for app in self._mec.list_applications(who) if app.appName in app_names}
            found = [one for one in found if one.info.appInsId in named]
        if session_ids:
            found = []
        return found

    def get_allocation(self, who: Principal, allocation_id: str) -> BwAllocation:
        self._state.require(who, Scope.READ)
        return self._allocation(who, allocation_id)

    # --- changes ---------------------------------------------------------------------------------

    def create_allocation(self, who: Principal, info: BwInfo) -> BwAllocation:
        """A new allocation, enforced from now on."""
        self._state.require(who, Scope.INTENTS_WRITE)
        _check(info)
        allocation_id = str(uuid.uuid4())

        def work(change: RuleChange) -> BwAllocation:
            application = self._owned_application(who, info.appInsId)
            allocation = BwAllocation(allocationId=allocation_id, tenant=application.tenant, info=info)
            self._require_one_per_application(allocation)
            self._install(change, who, application, allocation)
            bwm_store.put_allocation(self._state.store, allocation, self._state.now())
            return allocation

        return self._change(who, work)

    def put_allocation(self, who: Principal, allocation_id: str, info: BwInfo) -> BwAllocation:
        """Replace an allocation (its application and request type stay)."""
        self._state.require(who, Scope.INTENTS_WRITE)
        _check(info)
        return self._replace(who, allocation_id, lambda old: info)

    def patch_allocation(self, who: Principal, allocation_id: str, deltas: BwInfoDeltas) -> BwAllocation:
        """Change the members an allocation's PATCH gives, in the allocation as the change reads it
        under the service's lock: a change made meanwhile (another PATCH, of other members) is kept."""
        self._state.require(who, Scope.INTENTS_WRITE)

        def patched(old: BwInfo) -> BwInfo:
            _require_same_owner(old, deltas.appInsId, deltas.requestType)
            info = deltas.applied_to(old)
            _check(info)
            return info

        return self._replace(who, allocation_id, patched)

    def _replace(self, who: Principal, allocation_id: str, new_info: Callable[[BwInfo], BwInfo]) -> BwAllocation:
        """The allocation's body replaced by `new_info` of the one stored, read in the transaction."""

        def work(change: RuleChange) -> BwAllocation:
            old = self._allocation(who, allocation_id)
            info = new_info(old.info)
            _require_same_owner(old.info, info.appInsId, info.requestType)
            application = self._owned_application(who, info.appInsId)
            allocation = old.model_copy(update={"info": info})
            self._uninstall(change, who, application, old)
            self._install(change, who, application, allocation)
            bwm_store.put_allocation(self._state.store, allocation, self._state.now())
            return allocation

        return self._change(who, work)

    def delete_allocation(self, who: Principal, allocation_id: str) -> None:
        """Remove an allocation: its traffic is no longer policed by it."""
        self._state.require(who, Scope.INTENTS_WRITE)

        def work(change: RuleChange) -> None:
            allocation = self._allocation(who, allocation_id)
            application = self._owned_application(who, allocation.info.appInsId)
            self._uninstall(change, who, application, allocation)
            bwm_store.delete_allocation(self._state.store, allocation_id)

        self._change(who, work)

    # --- the allocation's intents ----------------------------------------------------------------

    def _install(self, change: RuleChange, who: Principal, application: MecApplication, allocation: BwAllocation) -> None:
        if allocation.info.requestType == APPLICATION_SPECIFIC:
            self._mec.police_rules(change, who, application, allocation.info)
            return
        intents = session_intents(allocation.allocationId, allocation.info)
        self._mec.write_intents(
            change, who, application.tenant, intents, source=BWM_SOURCE, rename=session_path, matched=SESSION,
        )
        for intent in intents:
            self._require_policed_everywhere(who, rule_id(application.tenant, intent.id))
        self._state.tenancy.check_quotas(application.tenant)

    def _require_policed_everywhere(self, who: Principal, qualified: str) -> None:
        """Forbidden when a rule of another shape wins over some of the session's packets (a traffic
        rule of the application, of a higher priority): those would go its way, unpoliced."""
        winner = overriding_rule(self._state, who, qualified)
        if winner is not None:
            raise Forbidden(
                f"the session's packets also match {winner}, which acts on them: they would go unpoliced; "
                "allocate to the application (requestType 0) or narrow that rule",
                field=SESSION,
            )

    def _uninstall(
        self, change: RuleChange, who: Principal, application: MecApplication, allocation: BwAllocation
    ) -> None:
        if allocation.info.requestType == APPLICATION_SPECIFIC:
            self._mec.police_rules(change, who, application, None)  # the rules back as they were
            return
        self._mec.uninstall_intents(change, application.tenant, allocation_intent_ids(allocation.allocationId), BWM_SOURCE)

    # --- lookups and the transaction -------------------------------------------------------------

    def _allocation(self, who: Principal, allocation_id: str) -> BwAllocation:
        allocation = bwm_store.get_allocation(self._state.store, allocation_id)
        if allocation is None or not (who.is_admin or allocation.tenant == who.tenant):
            raise NotFound(f"no bandwidth allocation {allocation_id!r}")
        return allocation

    def _owned_application(self, who: Principal, app_instance_id: str) -> MecApplication:
        """The allocation's application, which `who` must see: an unknown one is the body's fault (400)."""
        try:
            return self._mec.application_of(who, app_instance_id)
        except NotFound:
            raise InvalidInput(f"no application instance {app_instance_id!r}", field="appInsId") from None

    def _require_one_per_application(self, allocation: BwAllocation) -> None:
        if allocation.info.requestType != APPLICATION_SPECIFIC:
            return
        for other in bwm_store.application_allocations(self._state.store, allocation.info.appInsId):
            if other.info.requestType == APPLICATION_SPECIFIC:
                raise Forbidden(
                    f"application instance {allocation.info.appInsId!r} has an APPLICATION_SPECIFIC allocation "
                    f"already ({other.allocationId}): change that one",
                    field="appInsId",
                )

    def _change(self, who: Principal, work: Callable[[RuleChange], T]) -> T:
        """The transaction; a collision with an installed rule is a 403 (MEC 015 has no 409)."""
        try:
            return self._state.change(who, work)
        except Conflict as exc:
            field = "sessionFilter" if exc.field in ("match", "trafficRuleId") else exc.field
            raise Forbidden(f"bandwidth allocation: {exc.detail}", field=field, reason=exc.reason, **exc.extra) from exc


def _check(info: BwInfo) -> None:
    """What an allocation must be before it is looked at further: InvalidInput naming the field."""
    try:
        check_allocation(info)
    except IntentError as exc:
        raise invalid_input(exc) from None


def _require_same_owner(old: BwInfo, app_instance_id: str, request_type: int) -> None:
    """A PUT or PATCH keeps the allocation's application and request type."""
    if app_instance_id != old.appInsId:
        raise InvalidInput(f"{app_instance_id!r}: an allocation stays with its application ({old.appInsId!r})",
                           field="appInsId")
    if request_type != old.requestType:
        raise InvalidInput(f"{request_type}: an allocation keeps its request type ({old.requestType})",
                           field="requestType")
