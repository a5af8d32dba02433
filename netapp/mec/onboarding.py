"""Onboarding a MEC application instance from its MEC 010-2 AppD (netapp.mec.appd): the AppD's
traffic rules, DNS rules and services become the instance's MEC 011 ones, in one transaction of the
service (all installed, or none, and the maps untouched).

Applying is idempotent and replaces only what an AppD made: the same AppD (and values) applied
again changes nothing; a changed one takes out the rules, DNS rules and services the previous one
made and puts in the new one's, leaving those made through the API. An AppD's rule whose id is that
of a rule made through the API is refused, naming it.

The rules are confined as the API's are (netapp.mec.service): inside the tenant's grants, and, the
AppD's own constraint, on the application's address (netapp.mec.appd). An instance the AppD is the
first to name is created for the tenant given, or for the caller's own tenant (an administrator's
is site-wide while it has no record: the NetApp's own AppD, applied by its operator).

Who: administrators (the instantiation is the operator's, MEC 010-2's lifecycle management).
"""

from __future__ import annotations

import hashlib
import json
from typing import Callable, Mapping, Optional

from pydantic import BaseModel, ValidationError

from netapp.intents.errors import IntentError
from netapp.mec import app_store, appd_store, service_store, store as mec_store
from netapp.mec.appd import AppD, Onboarded, filled, onboarded
from netapp.mec.appd_store import AppdOrigin, AppliedAppd
from netapp.mec.models import MecApplication
from netapp.mec.service import MecService
from netapp.mec.service_models import ChangeType, ServiceInfo
from netapp.mec.services import MecServices
from netapp.service.contract import Conflict, Principal, Scope
from netapp.service.state import ServiceState
from netapp.service.transaction import RuleChange


class AppdApplied(BaseModel):
    """What applying an AppD did: `changed` false when the same AppD had been applied already."""

    appInstanceId: str
    tenant: str
    appDId: str
    appDVersion: str
    created: bool
    changed: bool
    trafficRuleIds: list[str]
    dnsRuleIds: list[str]
    serInstanceIds: list[str]


class AppdOnboarding:
    """Applies AppDs to application instances."""

    def __init__(self, state: ServiceState, mec: MecService, services: MecServices):
        self._state = state
        self._mec = mec
        self._services = services
        mec.on_application_removed(self._application_removed)

    def apply(self, who: Principal, app_instance_id: str, appd: AppD, tenant: Optional[str] = None,
              values: Optional[Mapping[str, str]] = None) -> AppdApplied:
        """Make the AppD's rules and services the application instance's; all or nothing."""
        self._state.require(who, Scope.ADMIN)
        appd = _with_values(appd, values or {})
        made = onboarded(appd, app_instance_id)
        digest = _digest(appd, made)
        notices: list[tuple[ServiceInfo, ChangeType]] = []

        def work(change: RuleChange) -> AppdApplied:
            application, created = self._application(app_instance_id, tenant or who.tenant, tenant)
            applied = appd_store.get_applied(self._state.store, app_instance_id)
            if applied is not None and applied.digest == digest:
                return _answer(application, appd, made, created=False, changed=False)
            previous = applied.origin if applied is not None else AppdOrigin()
            self._take_out(change, application, previous)
            _reject_api_ids(mec_store.get_application(self._state.store, app_instance_id), made)
            self._put_rules(change, who, application, made)
            notices.extend(self._put_services(application, made, previous))
            origin = AppdOrigin(trafficRuleIds=[rule.trafficRuleId for rule in made.trafficRules],
                                dnsRuleIds=[rule.dnsRuleId for rule in made.dnsRules],
                                serInstanceIds=[str(service.serInstanceId) for service in made.services])
            appd_store.put_applied(self._state.store, app_instance_id,
                                   AppliedAppd(appDId=appd.appDId, appDVersion=appd.appDVersion, digest=digest,
                                               origin=origin), self._state.now())
            self._state.tenancy.check_quotas(application.tenant)
            return _answer(application, appd, made, created=created, changed=True)

        answer = self._state.change(who, work)
        for service, kind in notices:
            self._services.notify(service, kind)
        return answer

    def _application(self, app_instance_id: str, owner: str, tenant: Optional[str]) -> tuple[MecApplication, bool]:
        """The instance, created for `owner` when it does not exist; (it, whether it was created)."""
        application = mec_store.get_application(self._state.store, app_instance_id)
        if application is not None:
            if tenant is not None and tenant != application.tenant:
                raise Conflict(f"application instance {app_instance_id!r} is tenant {application.tenant!r}'s, "
                               f"not {tenant!r}'s: delete it first to give it to another", field="tenant")
            return application, False
        application = MecApplication(appInstanceId=app_instance_id, tenant=owner)
        mec_store.insert_application(self._state.store, application, self._state.now())
        return application, True

    def _take_out(self, change: RuleChange, application: MecApplication, origin: AppdOrigin) -> None:
        """What the previously applied AppD made: its rules (and their intents) and DNS rules."""
        store = self._state.store
        for rule_id in origin.trafficRuleIds:
            self._mec.uninstall_rule(change, application.tenant, application.appInstanceId, rule_id)
            appd_store.delete_traffic_rule(store, application.appInstanceId, rule_id)
        for rule_id in origin.dnsRuleIds:
            appd_store.delete_dns_rule(store, application.appInstanceId, rule_id)

    def _put_rules(self, change: RuleChange, who: Principal, application: MecApplication, made: Onboarded) -> None:
        """The AppD's rules stored after the application's others and installed (policed, when the
        application has an allocation of its own, as all its rules then are)."""
        store, now, app_id = self._state.store, self._state.now(), application.appInstanceId
        first = appd_store.next_rule_position(store, "mec_traffic_rules", app_id)
        for offset, rule in enumerate(made.trafficRules):
            mec_store.put_rule(store, app_id, rule, now, first + offset)
        app_store.insert_dns_rules(store, app_id, made.dnsRules, now,
                                   appd_store.next_rule_position(store, "mec_dns_rules", app_id))
        allocation = self._mec.application_allocation(app_id)
        if allocation is not None:
            self._mec.police_rules(change, who, mec_store.get_application(store, app_id), allocation)
        else:
            for position, rule in enumerate(made.trafficRules):
                try:
                    self._mec.write_intents(change, who, application.tenant, self._mec.rule_intents(app_id, rule))
                except IntentError as exc:
                    raise exc.prefixed(f"appTrafficRule[{position}]") from None
        if made.trafficRules:
            self._mec.require_sessions_policed(who, app_id, made.trafficRules[0].trafficRuleId)

    def _put_services(self, application: MecApplication, made: Onboarded,
                      previous: AppdOrigin) -> list[tuple[ServiceInfo, ChangeType]]:
        """The AppD's services registered (the previous AppD's that it no longer names removed);
        what their subscribers are to hear once the change is committed."""
        store, app_id = self._state.store, application.appInstanceId
        notices: list[tuple[ServiceInfo, ChangeType]] = []
        kept = {str(service.serInstanceId) for service in made.services}
        for ser_id in previous.serInstanceIds:
            found = service_store.get_service(store, ser_id)
            if ser_id not in kept and found is not None and found[0] == app_id:
                service_store.delete_service(store, ser_id)
                notices.append((found[1], ChangeType.REMOVED))
        for position, service in enumerate(made.services):
            found = service_store.get_service(store, str(service.serInstanceId))
            if found is not None and found[0] != app_id:
                field = f"appServiceProduced[{position}].serName"
                raise Conflict(f"{field}: service {service.serInstanceId!r} is another application's", field=field)
            if found is not None and found[1] == service:
                continue
            service_store.put_service(store, app_id, application.tenant, service, self._state.now())
            notices.append((service, ChangeType.ADDED if found is None else ChangeType.ATTRIBUTES_CHANGED))
        return notices

    def _application_removed(self, app_instance_id: str) -> Callable[[], None]:
        """In the application's removal: the record of its AppD goes too."""
        appd_store.delete_applied(self._state.store, app_instance_id)
        return lambda: None


def _with_values(appd: AppD, values: Mapping[str, str]) -> AppD:
    """The AppD with its `<name>` placeholders given their values; InvalidInput naming the member
    a value does not fit."""
    document = filled(appd.model_dump(exclude_none=True), values)
    try:
        return AppD.model_validate(document)
    except ValidationError as exc:
        raise IntentError.from_validation(exc) from None


def _digest(appd: AppD, made: Onboarded) -> str:
    """What identifies an application of the AppD: its id, version and what it makes."""
    body = {"appDId": appd.appDId, "appDVersion": appd.appDVersion, "made": made.model_dump(mode="json")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _reject_api_ids(application: Optional[MecApplication], made: Onboarded) -> None:
    """Conflict naming an AppD rule whose id is a rule's the application was given otherwise."""
    if application is None:
        return
    _reject_taken(application, "appTrafficRule", "trafficRuleId", "traffic rule",
                  [rule.trafficRuleId for rule in made.trafficRules], {rule.trafficRuleId for rule in application.trafficRules})
    _reject_taken(application, "appDNSRule", "dnsRuleId", "DNS rule",
                  [rule.dnsRuleId for rule in made.dnsRules], {rule.dnsRuleId for rule in application.dnsRules})


def _reject_taken(application: MecApplication, member: str, key: str, kind: str, ids: list[str], taken: set[str]) -> None:
    for position, rule_id in enumerate(ids):
        if rule_id in taken:
            field = f"{member}[{position}].{key}"
            raise Conflict(f"{field}: application instance {application.appInstanceId!r} has a {kind} {rule_id!r} "
                           "made through the API", field=field)


def _answer(application: MecApplication, appd: AppD, made: Onboarded, created: bool, changed: bool) -> AppdApplied:
    return AppdApplied(
        appInstanceId=application.appInstanceId, tenant=application.tenant, appDId=appd.appDId,
        appDVersion=appd.appDVersion, created=created, changed=changed,
        trafficRuleIds=[rule.trafficRuleId for rule in made.trafficRules],
        dnsRuleIds=[rule.dnsRuleId for rule in made.dnsRules],
        serInstanceIds=[str(service.serInstanceId) for service in made.services],
    )
