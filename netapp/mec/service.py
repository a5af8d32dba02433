"""MEC 011 application instances and their traffic rules, in the store and, as intents of the
application's tenant, in the maps.

A rule goes the way an intent goes: compiled (netapp.mec.compiler), kept inside its tenant's
traffic and destinations (netapp.tenancy; a destination refused is named by its dstInterface member,
e.g. `dstInterface.tunnelInfo.tunnelDstAddress`), written to the store and the index in one
transaction of the service (netapp.service.transaction), so its entries in the maps are those of
the equivalent intent. A rule that would be narrowed to fit the tenant's grants is refused instead:
the rule an application reads back must be the rule that acts. A PUT that collides with an installed rule is a 403 (`RuleRefused`):
MEC 011 lets a PUT answer that, and no 409.

MEC 015 allocations (netapp.mec.bwm_service) lean on this class: an application's APPLICATION_SPECIFIC
allocation polices its rules' intents (`police_rules`; a rule's PUT then reinstalls them all,
policed), and a rule's PUT that would take the packets of a session an allocation polices is refused.

Who: administrators declare and delete applications; an application's tenant (or an administrator)
reads its rules with scope read and changes them with scope intents:write. Another tenant's
application does not exist for a caller (404).
"""

from __future__ import annotations

from typing import Callable, Optional

from netapp.intents.compiler import with_police_defaults
from netapp.intents.errors import IntentError
from netapp.intents.models import Intent
from netapp.mec import app_store, bwm_store, store as mec_store
from netapp.mec.app_models import INSTANTIATED
from netapp.mec.bwm_compiler import BWM_SOURCE, allocation_intent_ids, policed_rule_intents
from netapp.mec.bwm_models import APPLICATION_SPECIFIC, BwInfo
from netapp.mec.compiler import MEC_SOURCE, filter_path, installed_intents, intent_ids, mac_key
from netapp.mec.models import MecApplication, MecApplicationSpec, RuleState, TrafficRule
from netapp.mec.policed import overridden_session
from netapp.routing.neighbours import device_mac
from netapp.service.contract import (
    Conflict,
    Forbidden,
    IntentRecord,
    InvalidInput,
    NotFound,
    Principal,
    Scope,
)
from netapp.service.rules import rule_id
from netapp.service.state import ServiceState
from netapp.service.transaction import RuleChange


class MecService:
    """The MEC 011 application instances of the site and their traffic rules."""

    def __init__(self, state: ServiceState):
        self._state = state
        # What goes with an application besides its rules (its services, netapp.mec.services): each
        # runs in the removal's transaction and returns what to do once it committed.
        self._removal_hooks: list[Callable[[str], Callable[[], None]]] = []

    def on_application_removed(self, hook: Callable[[str], Callable[[], None]]) -> None:
        self._removal_hooks.append(hook)

    # --- applications (administrators) -----------------------------------------------------------

    def create_application(self, who: Principal, spec: MecApplicationSpec) -> MecApplication:
        """Declare an application instance with its traffic rules; all installed, or none."""
        self._state.require(who, Scope.ADMIN)
        _reject_repeated_rule_ids(spec)
        _check_dns_rules(spec)
        application = MecApplication(**spec.model_dump())

        def work(change: RuleChange) -> MecApplication:
            store, now = self._state.store, self._state.now()
            if mec_store.get_application(store, spec.appInstanceId) is not None:
                raise Conflict(f"application instance {spec.appInstanceId!r} exists", field="appInstanceId")
            for position, rule in enumerate(spec.trafficRules):
                try:
                    self.write_intents(change, who, application.tenant,
                                       self.rule_intents(application.appInstanceId, rule))
                except IntentError as exc:
                    raise exc.prefixed(f"trafficRules[{position}]") from None
            mec_store.insert_application(store, application, now)
            self._state.tenancy.check_quotas(application.tenant)
            return application

        return self._state.change(who, work)

    def delete_application(self, who: Principal, app_instance_id: str) -> None:
        """Remove an application instance and what its rules installed."""
        self._state.require(who, Scope.ADMIN)
        self.remove_application(who, app_instance_id)

    def remove_application(self, who: Principal, app_instance_id: str) -> None:
        """Remove an application instance `who` sees, what its rules and allocations installed, its
        DNS rules and subscriptions (an administrator's DELETE, or the confirmation of a termination
        an administrator asked)."""

        def work(change: RuleChange) -> None:
            application = self._application(who, app_instance_id)
            for rule in application.trafficRules:
                self.uninstall_rule(change, application.tenant, app_instance_id, rule.trafficRuleId)
            for allocation in bwm_store.application_allocations(self._state.store, app_instance_id):
                self.uninstall_intents(change, application.tenant, allocation_intent_ids(allocation.allocationId),
                                       BWM_SOURCE)
                bwm_store.delete_allocation(self._state.store, allocation.allocationId)
            mec_store.delete_application(self._state.store, app_instance_id)
            committed[:] = [hook(app_instance_id) for hook in self._removal_hooks]

        committed: list[Callable[[], None]] = []
        self._state.change(who, work)
        for then in committed:
            then()

    def stop_application(self, who: Principal, app_instance_id: str) -> None:
        """Stop an application instance `who` sees (the confirmation of a stop an administrator
        asked, MEC 011 STOPPING): each ACTIVE rule becomes INACTIVE, so what it installed leaves the
        maps, while the instance, its rules, DNS rules, allocations and subscriptions stay; the
        application sets its rules ACTIVE again when it starts again. The instance is INSTANTIATED,
        no termination asked, until it confirms ready again."""

        def work(change: RuleChange) -> None:
            application = self._application(who, app_instance_id)
            for rule in application.trafficRules:
                if rule.state == RuleState.ACTIVE:
                    self.uninstall_rule(change, application.tenant, app_instance_id, rule.trafficRuleId)
                    stopped = rule.model_copy(update={"state": RuleState.INACTIVE})
                    mec_store.put_rule(self._state.store, app_instance_id, stopped, self._state.now())
            app_store.set_state(self._state.store, app_instance_id, INSTANTIATED, None)

        self._state.change(who, work)

    def list_applications(self, who: Principal) -> list[MecApplication]:
        self._state.require(who, Scope.READ)
        return mec_store.list_applications(self._state.store, None if who.is_admin else who.tenant)

    def get_application(self, who: Principal, app_instance_id: str) -> MecApplication:
        self._state.require(who, Scope.READ)
        return self._application(who, app_instance_id)

    # --- traffic rules (MEC 011) -----------------------------------------------------------------

    def list_traffic_rules(self, who: Principal, app_instance_id: str) -> list[TrafficRule]:
        return self.get_application(who, app_instance_id).trafficRules

    def get_traffic_rule(self, who: Principal, app_instance_id: str, traffic_rule_id: str) -> TrafficRule:
        self._state.require(who, Scope.READ)
        self._application(who, app_instance_id)
        return self._rule(app_instance_id, traffic_rule_id)

    def put_traffic_rule(
        self, who: Principal, app_instance_id: str, traffic_rule_id: str, rule: TrafficRule
    ) -> TrafficRule:
        """Replace a rule: what it installed goes, what it now asks comes, in one transaction."""
        self._state.require(who, Scope.INTENTS_WRITE)
        if rule.trafficRuleId != traffic_rule_id:
            raise InvalidInput(
                f"trafficRuleId {rule.trafficRuleId!r} differs from the rule being replaced ({traffic_rule_id!r})",
                field="trafficRuleId",
            )

        def work(change: RuleChange) -> TrafficRule:
            # The application's tenant only: its other rules are read when an allocation polices
            # them with this one (a PUT of one of 64 rules then reads one).
            tenant = self._tenant_of(who, app_instance_id)
            self._rule(app_instance_id, traffic_rule_id)
            allocation = self.application_allocation(app_instance_id)
            if allocation is None:
                self.uninstall_rule(change, tenant, app_instance_id, traffic_rule_id)
                self.write_intents(change, who, tenant, self.rule_intents(app_instance_id, rule))
                mec_store.put_rule(self._state.store, app_instance_id, rule, self._state.now())
            else:
                application = self._application(who, app_instance_id)
                rules = [rule if old.trafficRuleId == traffic_rule_id else old for old in application.trafficRules]
                self._police_rules(change, who, application.model_copy(update={"trafficRules": rules}),
                                   allocation, traffic_rule_id)
            self.require_sessions_policed(who, app_instance_id, traffic_rule_id)
            self._state.tenancy.check_quotas(tenant)
            return rule

        try:
            return self._state.change(who, work)
        except Conflict as exc:
            raise RuleRefused.of(traffic_rule_id, exc) from exc

    # --- application-specific bandwidth allocations (MEC 015, netapp.mec.bwm_service) -----------

    def police_rules(self, change: RuleChange, who: Principal, application: MecApplication,
                     allocation: Optional[BwInfo]) -> None:
        """Reinstall the application's rules policed by `allocation` (None: unpoliced); IntentError
        naming the allocation's field when it cannot police them."""
        self._police_rules(change, who, application, allocation, None)

    def _police_rules(self, change: RuleChange, who: Principal, application: MecApplication,
                      allocation: Optional[BwInfo], changed_rule: Optional[str]) -> None:
        """The application's rules reinstalled (`changed_rule`: the one a PUT replaces, stored here;
        an error is then said of it, else of the allocation)."""
        for rule in application.trafficRules:
            self.uninstall_rule(change, application.tenant, application.appInstanceId, rule.trafficRuleId)
        compiled = [(rule, self.rule_intents(application.appInstanceId, rule)) for rule in application.trafficRules]
        intents = [intents for _, intents in compiled]
        if allocation is not None:
            try:
                intents = policed_rule_intents(compiled, allocation, require_every_direction=changed_rule is None)
            except IntentError as exc:
                if changed_rule is None:
                    raise
                raise Forbidden(f"traffic rule {changed_rule!r}: the application's bandwidth allocation cannot "
                                f"police its rules: {exc.message}", field="trafficRuleId") from None
        for rule_intents in intents:
            self.write_intents(change, who, application.tenant, rule_intents)
        if changed_rule is not None:
            [rule] = [rule for rule in application.trafficRules if rule.trafficRuleId == changed_rule]
            mec_store.put_rule(self._state.store, application.appInstanceId, rule, self._state.now())

    def require_sessions_policed(self, who: Principal, app_instance_id: str, traffic_rule_id: str) -> None:
        """Forbidden when the rule now takes packets of one of the application's session allocations."""
        overridden = overridden_session(self._state, who, app_instance_id)
        if overridden is not None:
            allocation_id, winner = overridden
            raise Forbidden(
                f"traffic rule {traffic_rule_id!r}: bandwidth allocation {allocation_id!r} polices a session whose "
                f"packets {winner} would then take, unpoliced; change or delete the allocation first",
                field="trafficFilter",
            )

    def application_allocation(self, app_instance_id: str) -> Optional[BwInfo]:
        """The application's APPLICATION_SPECIFIC allocation, if it has one."""
        for allocation in bwm_store.application_allocations(self._state.store, app_instance_id):
            if allocation.info.requestType == APPLICATION_SPECIFIC:
                return allocation.info
        return None

    # --- the rules' intents ----------------------------------------------------------------------

    def rule_intents(self, app_instance_id: str, rule: TrafficRule) -> list[Intent]:
        """What an (active) rule of the application installs."""
        interfaces = self._interfaces_by_mac() if rule.dstInterface is not None else {}
        return installed_intents(app_instance_id, rule, interfaces)

    def write_intents(
        self, change: RuleChange, who: Principal, tenant: str, intents: list[Intent], source: str = MEC_SOURCE,
        rename: Callable[[str], str] = filter_path, matched: str = "trafficFilter[0]",
    ) -> None:
        """Store and index intents of the tenant, inside its traffic (`rename`: a match field's path
        as the ETSI member it came from; `matched`: the ETSI member of the whole match)."""
        now = self._state.now()
        for intent in intents:
            self._confine(who, tenant, intent, rename, matched)
            if self._state.store.get_intent(tenant, intent.id) is not None:
                raise Conflict(f"tenant {tenant!r} has an intent {intent.id!r}, the id of this rule's", field="trafficRuleId")
            intent = with_police_defaults(intent, self._state.police_defaults)
            self._state.store.insert_intent(
                IntentRecord(intent=intent, tenant=tenant, source=source, created_at=now, updated_at=now)
            )
            change.add(self._state.rules.compile(tenant, intent))

    def uninstall_rule(self, change: RuleChange, tenant: str, app_instance_id: str, traffic_rule_id: str) -> None:
        self.uninstall_intents(change, tenant, intent_ids(app_instance_id, traffic_rule_id))

    def uninstall_intents(self, change: RuleChange, tenant: str, ids: list[str], source: str = MEC_SOURCE) -> None:
        """Take out the tenant's intents of these ids that `source` installed."""
        for intent_id in ids:
            record = self._state.store.get_intent(tenant, intent_id)
            if record is None or record.source != source:
                continue
            self._state.store.delete_intent(tenant, intent_id)
            if rule_id(tenant, intent_id) in self._state.index:
                change.remove(rule_id(tenant, intent_id))

    def _confine(
        self, who: Principal, tenant: str, intent: Intent, rename: Callable[[str], str], matched: str
    ) -> None:
        """The tenant's grants hold every packet the intent matches, or IntentError naming the filter."""
        try:
            _, narrowed = self._state.tenancy.confined(who, tenant, intent)
        except IntentError as exc:
            raise IntentError([(destination_path(path) or rename(path), message)
                               for path, message in exc.problems]) from None
        if narrowed is not None:
            raise IntentError.at(
                matched,
                f"matches traffic outside tenant {tenant!r}'s grants (to fit, the match {narrowed}): "
                "a rule must lie inside its tenant's traffic",
            )

    def _interfaces_by_mac(self) -> dict[str, str]:
        """The data plane's interfaces by MAC, asked of the site's namespace (the change runs in it)."""
        found = {}
        for name, ifindex in self._state.index.interfaces.items():
            mac = device_mac(ifindex)
            if mac is not None:
                found.setdefault(mac_key(mac), name)
        return found

    # --- lookups and the transaction ------------------------------------------------------------

    def application_of(self, who: Principal, app_instance_id: str) -> MecApplication:
        """The application instance, if `who` may see it; NotFound otherwise."""
        return self._application(who, app_instance_id)

    def _application(self, who: Principal, app_instance_id: str) -> MecApplication:
        """The application instance, if `who` may see it (its tenant's, or an administrator)."""
        application = mec_store.get_application(self._state.store, app_instance_id)
        if application is None or not (who.is_admin or application.tenant == who.tenant):
            raise NotFound(f"no application instance {app_instance_id!r}")
        return application

    def _tenant_of(self, who: Principal, app_instance_id: str) -> str:
        """The application instance's tenant, if `who` may see it; NotFound as `_application`."""
        tenant = mec_store.get_tenant(self._state.store, app_instance_id)
        if tenant is None or not (who.is_admin or tenant == who.tenant):
            raise NotFound(f"no application instance {app_instance_id!r}")
        return tenant

    def _rule(self, app_instance_id: str, traffic_rule_id: str) -> TrafficRule:
        rule = mec_store.get_rule(self._state.store, app_instance_id, traffic_rule_id)
        if rule is None:
            raise NotFound(f"application instance {app_instance_id!r} has no traffic rule {traffic_rule_id!r}")
        return rule


# The ETSI member each destination field of a rule's intent came from (netapp.mec.compiler's table).
_DESTINATION_MEMBERS = {
    "action.interface": "dstInterface.srcMacAddress",
    "action.towards": "dstInterface.dstIpAddress",
    "action.encapsulate.peer": "dstInterface.tunnelInfo.tunnelDstAddress",
    "action.encapsulate.source": "dstInterface.tunnelInfo.tunnelSrcAddress",  # not a destination: its source
}


def destination_path(path: str) -> Optional[str]:
    """A destination field of a rule's intent as the dstInterface member it came from (None: not one):
    `action.encapsulate.peer` -> `dstInterface.tunnelInfo.tunnelDstAddress`, `action.interfaces[1]` ->
    `dstInterface[1].srcMacAddress` (a DUPLICATE's copy)."""
    if path in _DESTINATION_MEMBERS:
        return _DESTINATION_MEMBERS[path]
    if path.startswith("action.interfaces["):
        return f"dstInterface{path.removeprefix('action.interfaces')}.srcMacAddress"
    return None


class RuleRefused(Forbidden):
    """A traffic rule's change that contradicts the state (a collision with an installed rule, an id
    in use): MEC 011 lets a PUT answer 403, "not allowed given the current status of the resource",
    and no 409."""

    title = "Conflict"

    @classmethod
    def of(cls, traffic_rule_id: str, exc: Conflict) -> "RuleRefused":
        """The conflict, said of the rule (its intents are named `mec-<tag>-<n>`, netapp.mec.compiler)."""
        field = "trafficFilter" if exc.field == "match" else exc.field
        return cls(f"traffic rule {traffic_rule_id!r}: {exc.detail}", field=field, reason=exc.reason, **exc.extra)


def _check_dns_rules(spec: MecApplicationSpec) -> None:
    """InvalidInput naming a DNS rule that cannot be served or repeats an id."""
    seen: set[str] = set()
    for position, rule in enumerate(spec.dnsRules):
        problem = rule.problem()
        if problem is not None:
            raise InvalidInput(problem[1], field=f"dnsRules[{position}].{problem[0]}")
        if rule.dnsRuleId in seen:
            raise InvalidInput(f"{rule.dnsRuleId!r} is the id of an earlier DNS rule",
                               field=f"dnsRules[{position}].dnsRuleId")
        seen.add(rule.dnsRuleId)


def _reject_repeated_rule_ids(spec: MecApplicationSpec) -> None:
    seen: dict[str, int] = {}
    for position, rule in enumerate(spec.trafficRules):
        if rule.trafficRuleId in seen:
            raise InvalidInput(
                f"trafficRules[{position}].trafficRuleId: {rule.trafficRuleId!r} is already "
                f"trafficRules[{seen[rule.trafficRuleId]}]'s",
                field=f"trafficRules[{position}].trafficRuleId",
            )
        seen[rule.trafficRuleId] = position
