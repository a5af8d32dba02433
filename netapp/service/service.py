"""The NetApp service: the desired state in the store, and the BPF maps kept equal to it.

Every change is one transaction of the store and the maps (netapp.service.transaction): they change
together or not at all. The service is one class per domain over a shared state
(netapp.service.state), composed here:

| domain                        | module                              | contract               |
|-------------------------------|-------------------------------------|------------------------|
| intents                       | netapp.service.intents              | IntentsContract        |
| slices                        | netapp.service.slices               | SlicesContract         |
| alternative groups, liveness  | netapp.forwarding.service           | AlternativesContract   |
| CPUs                          | netapp.steering.service             | CpusContract           |
| interfaces, program, stats    | netapp.service.admin                | DataplaneContract      |
| telemetry counters            | netapp.service.counters             | (netapp.telemetry)     |
| MEC 011 applications, rules   | netapp.mec.service                  | (its routes call it)   |
| MEC 011 DNS rules, lifecycle  | netapp.mec.app_service              | (its routes call it)   |
| MEC 015 bandwidth allocations | netapp.mec.bwm_service              | (its routes call it)   |
| MEC 011 services, discovery   | netapp.mec.services                 | (its routes call it)   |
| MEC 010-2 AppD onboarding     | netapp.mec.onboarding               | (its route calls it)   |

A network function brings its own package, `netapp/<function>/` (its contract, its class, its
`MapChange` if its tables are not rules), and is composed here: built in `__init__`, its contract's
methods handed to it in "the domains" below, its part of `start()` and of the reconcile if it has
one; the other domains stay as they are.

The store is the truth: `start()` compiles every stored intent and makes the maps hold exactly that
(`Dataplane.apply`, a full diff against what the pinned maps hold), so stale entries of an earlier
run go and missing ones come. Maps and XDP links are pinned: the process may die (kill -9 included)
and restart without traffic noticing.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Optional

from netapp.core.config import Settings
from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.forwarding.liveness import GTPU_PORT
from netapp.forwarding.models import AlternativeGroup, AlternativeGroupStatus
from netapp.forwarding.service import AlternativesService
from netapp.intents.compiler import CompiledDocument, CompiledRule, CompileError, SharedPolice, redirect_ports, rule_tunnels
from netapp.intents.index import RuleIndex
from netapp.intents.models import Intent, LegacyMessage
from netapp.frer.service import Frer
from netapp.mec.app_service import MecAppService
from netapp.mec.bwm_service import BwmService
from netapp.mec.onboarding import AppdOnboarding
from netapp.mec.service import MecService
from netapp.mec.services import MecServices
from netapp.qos.dispatch import apply_settings as apply_dispatch
from netapp.qos.service import RulePolicerViews
from netapp.qos.slices import with_slice_police
from netapp.qos.views import PolicerRecord
from netapp.service.admin import AdminService
from netapp.service.contract import (
    BatchCreateResult,
    Conflict,
    CreateResult,
    DataplaneUnavailable,
    DryRunReport,
    Health,
    IntentFilter,
    IntentRecord,
    IntentResult,
    IntentService,
    Page,
    Principal,
    ServiceError,
    SliceRecord,
    SliceSpec,
)
from netapp.service.counters import ServiceCounters
from netapp.service.function_rules import FunctionRules
from netapp.service.intents import IntentsService
from netapp.service.rules import rule_id, split_rule_id
from netapp.service.slices import SliceService
from netapp.service.state import OwnLocked, ServiceState
from netapp.service.store import Store, StoreError
from netapp.steering.models import CpuSpec
from netapp.steering.service import CpuService
from netapp.telemetry.notifications import MEC_SERVICE_AVAILABILITY, MEC_TERMINATION
from netapp.telemetry.notify import Notifier
from netapp.telemetry.sample import Counters

__all__ = ["NetAppService", "rule_id", "split_rule_id"]

log = logging.getLogger("netapp.service")


def check_default_alternative(state: ServiceState) -> None:
    """A changed default_alternative must keep every confined tenant's intents that name no group
    inside its destinations: the service does not start otherwise (naming the tenant and intent),
    as a tenant's narrowed spec or a group's new members are refused."""
    wanted = state.settings.default_alternative
    if wanted == state.tenancy.default_group():
        return
    try:
        state.tenancy.check_default_group(wanted)
    except Conflict as exc:
        state.checks["store"] = f"settings default_alternative: {exc}"
        raise ServiceError(f"settings default_alternative {wanted}: {exc}") from exc


class NetAppService(IntentService):
    """The one implementation of the contract: the domains composed, their lifecycle, the reconcile.

    `dataplane` and `store` may be given (tests give a Dataplane over FakeDpp); otherwise `start()`
    opens the pinned instance named by the settings and the store under their state_dir. The
    service owns both from then on and closes them in `close()`. `echo_port`, `peer_echo_port`:
    the GTP-U echo ports of liveness, ours and the peers' (None: the same); tests take free ports.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        dataplane: Optional[Dataplane] = None,
        store: Optional[Store] = None,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        echo_port: int = GTPU_PORT,
        peer_echo_port: Optional[int] = None,
    ):
        self.settings = settings
        self._state = state = ServiceState(settings, dataplane, store, clock)
        state.reconcile = self._reconcile
        self._intents = IntentsService(state)
        self._slices = SliceService(state)
        self._rule_policers = RulePolicerViews(state)
        self._alternatives = AlternativesService(state, echo_port, peer_echo_port)
        self._cpus = CpuService(state)
        self._admin = AdminService(state, self._cpus, self._left_out)
        self._counters = ServiceCounters(state, self._admin.wanted_attachments)
        self._mec = MecService(state)
        self._bwm = BwmService(state, self._mec)
        self._mec_apps = MecAppService(state, self._mec)
        self._mec_services = MecServices(state, self._mec)
        self._mec_onboarding = AppdOnboarding(state, self._mec, self._mec_services)

    @property
    def dataplane(self) -> Dataplane:
        return self._state.dataplane

    @property
    def store(self) -> Store:
        return self._state.store

    @property
    def lock(self) -> Any:
        """The lock every change holds: FRER's service takes it too where intents protect their flows."""
        return self._state.lock

    def serve_function(self, name: str, function: OwnLocked) -> None:
        """Network function `name` (ATSSS, the UPF) writes this service's maps or runs the program under
        locks of its own (OwnLocked): a reload holds them too, in their order around the service's, and
        requeues its programs; /readyz shows its heal as check `name`."""
        self._state.own_locked[name] = function

    def protect_with(self, frer: Frer) -> None:
        """Intents' protected streams (action.protect) go through `frer`, over the node's FRER maps;
        it must hold this service's lock (`lock`). Without it they are stored only."""
        self._state.protection.use(frer)

    @property
    def mec(self) -> MecService:
        """MEC 011: application instances and their traffic rules, as intents of their tenants."""
        return self._mec

    @property
    def mec_apps(self) -> MecAppService:
        """MEC 011: DNS rules, confirm_ready / confirm_termination, termination subscriptions."""
        return self._mec_apps

    @property
    def mec_onboarding(self) -> AppdOnboarding:
        """MEC 010-2 AppDs applied to application instances (netapp.mec.onboarding)."""
        return self._mec_onboarding

    @property
    def bwm(self) -> BwmService:
        """MEC 015: bandwidth allocations, enforced by the intents' policers."""
        return self._bwm

    @property
    def mec_services(self) -> MecServices:
        """MEC 011 service management: the NetApp's services and its applications', discovered."""
        return self._mec_services

    def notifiers(self) -> dict[str, Notifier]:
        """The service's notifiers by name, whose delivery counts telemetry exposes
        (netapp.telemetry.notifications)."""
        return {MEC_TERMINATION: self._mec_apps.notifier.notifier, MEC_SERVICE_AVAILABILITY: self._mec_services.notifier}

    def function_rules(self, name: str) -> FunctionRules:
        """The rules network function `name` installs itself (the UPF's SDF filters), beside the
        intents' in the index and maps."""
        return FunctionRules(self._state, name)

    def load_function_rules(self, name: str, stored: Callable[[Store], Mapping[str, CompiledRule]]) -> None:
        """Before start(): network function `name`'s rules as its state in the store compiles them
        (the UPF's stored sessions), read by start() once the store is open, so that its first
        reconcile installs them with the intents' -- a restart leaves them in the maps."""
        self._state.function_loaders[name] = stored

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Open the store and the (pinned) instance, reconcile the maps, attach the interfaces."""
        state = self._state
        with state.exclusive():
            self._open_store()
            self._open_dataplane()
            self._cpus.probe_queue_limit()
            self._admin.refresh_interfaces()
            self._alternatives.open_liveness()
            self._load_function_rules()
            self._reconcile()
            self._admin.attach_interfaces()
            self._dispatch()
            state.started = True
            if state.liveness is not None:
                state.liveness.start()
            state.checks.pop("started", None)
            self._intents.start()
        # Outside the site's namespace: the notifiers' threads reach callbacks from the host's.
        self._mec_services.start()
        self._mec_apps.start()

    def close(self) -> None:
        """Release the handles; pinned maps and links stay, and so does forwarding. Creates already
        queued are made first."""
        self._intents.close()
        self._mec_services.close()
        self._mec_apps.close()
        self._alternatives.close_liveness()  # before the lock: its thread takes the lock
        state = self._state
        with state.exclusive():
            state.started = False
            state.checks["started"] = "closed"
            if state.opened_dataplane is not None:
                state.opened_dataplane.close()
            if state.opened_store is not None:
                state.opened_store.close()

    def health(self) -> Health:
        """Ready when the store is open and the maps are reconciled; the other checks inform."""
        checks = {**self._state.checks, **{name: f.heal_status() for name, f in self._state.own_locked.items()}}
        essential = ("store", "dataplane", "reconcile")
        ready = self._state.started and all(checks.get(name) == "ok" for name in essential)
        return Health(ready=ready, checks=checks)

    def _open_store(self) -> None:
        state = self._state
        if state.opened_store is None:
            try:
                state.opened_store = Store.open(self.settings.db_path)
            except StoreError as exc:
                state.checks["store"] = str(exc)
                raise ServiceError(f"store: {exc}") from exc
        state.checks["store"] = "ok"
        with state.store.transaction():
            check_default_alternative(state)
            state.store.put_setting("snapshot", self._settings_snapshot(), state.now())

    def _dispatch(self) -> None:
        """The GTP-U dispatcher as the settings say (netapp.qos.dispatch); off: a previous run's undone."""
        dispatch, state = self.settings.dispatch, self._state
        try:
            apply_dispatch(state.dataplane, dispatch.workers, dispatch.interfaces, state.index.interfaces,
                           dispatch.queue_size)
        except (ValueError, LookupError, DataplaneError) as exc:
            state.checks["dispatch"] = str(exc)
            raise ServiceError(f"dispatch: {exc}") from exc
        state.checks["dispatch"] = "ok"

    def _load_function_rules(self) -> None:
        state = self._state
        for name, stored in state.function_loaders.items():
            rules = state.function_rules.setdefault(name, {})  # FunctionRules hold this dict
            rules.clear()
            rules.update(stored(state.store))

    def _settings_snapshot(self) -> dict[str, Any]:
        """The settings that shape the data plane, as this start used them (no secrets among them)."""
        return self.settings.model_dump(
            mode="json",
            include={
                "instance",
                "interfaces",
                "default_verdict",
                "default_alternative",
                "cpumap_priority",
                "flow_cache",
                "max_rules",
                "meter_window_ms",
                "dataplane",
                "dispatch",
            },
        )

    def _open_dataplane(self) -> None:
        state = self._state
        if state.opened_dataplane is None:
            try:
                state.opened_dataplane = Dataplane.open(
                    instance=self.settings.instance,
                    flow_cache=self.settings.flow_cache,
                    max_rules=self.settings.max_rules,
                    default_verdict=self.settings.default_verdict,
                    map_sizes=self.settings.dataplane.map_sizes,
                )
                if self.settings.meter_window_ms is not None:  # also on an instance pinned before
                    state.opened_dataplane.set_meter_window(self.settings.meter_window_ms * 1_000_000)
            except DataplaneError as exc:
                state.checks["dataplane"] = str(exc)
                raise DataplaneUnavailable(f"open instance {self.settings.instance!r}: {exc}") from exc
        state.checks["dataplane"] = "ok"

    # --- reconciling -----------------------------------------------------------------------------

    def _reconcile(self) -> None:
        """Make the maps hold exactly what the store compiles to (O(n): on start and after a
        failed undo, never per change)."""
        state = self._state
        index, uncompiled = self._compile_store()
        document = self._site_document(index, uncompiled)
        try:
            state.dataplane.resync()
            state.dataplane.adopt_site_state()
            report = state.dataplane.apply_compiled(document)
        except DataplaneError as exc:
            state.checks["reconcile"] = f"the maps could not be reconciled: {exc}"
            state.maps_stale = str(exc)
            raise DataplaneUnavailable(f"reconcile: {exc}") from exc
        state.index, state.uncompiled, state.maps_stale = index, uncompiled, None
        for spec in document.cpus:
            self._cpus.prioritise_thread(spec.cpu)
        state.revision += 1
        state.checks["reconcile"] = "ok"
        state.checks["stored state"] = self._describe_left_out()
        log.info(
            "reconciled: %d intents, %d rules upserted, %d deleted",
            len(index),
            report.upserted,
            report.deleted,
        )

    def _compile_store(self) -> tuple[RuleIndex, dict[str, str]]:
        """An index of every stored intent; those that do not compile (an interface that went
        away) are left out and reported, the others installed."""
        index = RuleIndex(self._state.index.interfaces)
        uncompiled: dict[str, str] = {}
        slices: dict[tuple[str, str], Optional[SharedPolice]] = {}
        for record in self._state.store.all_intents():
            qualified = rule_id(record.tenant, record.intent.id)
            try:
                rule = index.compile(record.intent, qualified)
                if record.slice_id is not None:
                    rule = with_slice_police(rule, self._slice_police(slices, record.tenant, record.slice_id))
                index.add(rule)
            except CompileError as exc:
                uncompiled[qualified] = exc.line()
        for rules in self._state.function_rules.values():  # the network functions' own (the UPF's)
            for rule in rules.values():
                try:
                    index.add(rule)
                except CompileError as exc:
                    uncompiled[rule.intent_id] = exc.line()
        return index, uncompiled

    def _slice_police(
        self, known: dict[tuple[str, str], Optional[SharedPolice]], tenant: str, slice_id: str
    ) -> Optional[SharedPolice]:
        """The policer of a stored slice's rules (netapp.qos.slices), each slice read once."""
        if (tenant, slice_id) not in known:
            record = self._state.store.get_slice(tenant, slice_id)
            known[(tenant, slice_id)] = self._slices.shared_police(tenant, record.spec) if record else None
        return known[(tenant, slice_id)]

    def _site_document(self, index: RuleIndex, uncompiled: dict[str, str]) -> CompiledDocument:
        groups = self._alternatives.compiled(uncompiled)
        ruleset = index.ruleset()
        return CompiledDocument(
            ruleset=ruleset,
            alternatives=tuple(groups),
            cpus=tuple(self._cpus.usable(uncompiled)),
            default_verdict=self.settings.default_verdict,
            default_alternative=self.settings.default_alternative,
            redirect_ifindexes=redirect_ports(ruleset.rules),
            tunnels=rule_tunnels(ruleset.rules),
        )

    def _left_out(self) -> dict[str, str]:
        """What the store holds and the maps do not, and why: objects that did not compile at the
        last reconcile, and intents that collide with an installed one."""
        left_out = dict(self._state.uncompiled)
        for conflict in self._state.index.conflicts():
            left_out[conflict.intent_b] = conflict.reason
        return left_out

    def _describe_left_out(self) -> str:
        """For /readyz, which anyone may read: counts, no names."""
        count = len(self._left_out())
        return (
            "ok" if not count else f"{count} stored objects are not in the maps (see the data plane status)"
        )

    # --- the domains -----------------------------------------------------------------------------

    def list_intents(self, who: Principal, flt: IntentFilter) -> Page[IntentRecord]:
        return self._intents.list_intents(who, flt)

    def get_intent(self, who: Principal, intent_id: str) -> IntentRecord:
        return self._intents.get_intent(who, intent_id)

    def create_intent(
        self, who: Principal, intent: Intent, *, idempotency_key: Optional[str] = None
    ) -> CreateResult:
        return self._intents.create_intent(who, intent, idempotency_key=idempotency_key)

    def submit_create(
        self, who: Principal, intent: Intent, *, idempotency_key: Optional[str] = None
    ) -> "Future[CreateResult]":
        return self._intents.submit_create(who, intent, idempotency_key=idempotency_key)

    def create_intents(
        self, who: Principal, intents: list[Intent], *, idempotency_key: Optional[str] = None
    ) -> BatchCreateResult:
        return self._intents.create_intents(who, intents, idempotency_key=idempotency_key)

    def replace_intent(self, who: Principal, intent_id: str, intent: Intent) -> IntentResult:
        return self._intents.replace_intent(who, intent_id, intent)

    def delete_intent(self, who: Principal, intent_id: str) -> None:
        self._intents.delete_intent(who, intent_id)

    def apply_legacy(self, who: Principal, message: LegacyMessage) -> Optional[IntentResult]:
        return self._intents.apply_legacy(who, message)

    def dry_run(self, who: Principal, intents: list[Intent]) -> DryRunReport:
        return self._intents.dry_run(who, intents)

    def dry_run_legacy(self, who: Principal, message: LegacyMessage) -> DryRunReport:
        return self._intents.dry_run_legacy(who, message)

    def list_slices(self, who: Principal, offset: int = 0, limit: int = 100) -> Page[SliceRecord]:
        return self._slices.list_slices(who, offset, limit)

    def get_slice(self, who: Principal, slice_id: str) -> SliceRecord:
        return self._slices.get_slice(who, slice_id)

    def put_slice(self, who: Principal, spec: SliceSpec) -> tuple[SliceRecord, bool]:
        return self._slices.put_slice(who, spec)

    def delete_slice(self, who: Principal, slice_id: str) -> None:
        self._slices.delete_slice(who, slice_id)

    def list_rule_policers(self, who: Principal) -> list[PolicerRecord]:
        return self._rule_policers.list_rule_policers(who)

    def list_alternatives(self, who: Principal) -> list[AlternativeGroup]:
        return self._alternatives.list_alternatives(who)

    def get_alternative(self, who: Principal, group_id: int) -> AlternativeGroupStatus:
        return self._alternatives.get_alternative(who, group_id)

    def put_alternative(self, who: Principal, group: AlternativeGroup) -> AlternativeGroup:
        return self._alternatives.put_alternative(who, group)

    def delete_alternative(self, who: Principal, group_id: int) -> None:
        self._alternatives.delete_alternative(who, group_id)

    def list_cpus(self, who: Principal) -> list[dict[str, Any]]:
        return self._cpus.list_cpus(who)

    def put_cpu(self, who: Principal, spec: CpuSpec) -> CpuSpec:
        return self._cpus.put_cpu(who, spec)

    def delete_cpu(self, who: Principal, cpu: int) -> None:
        self._cpus.delete_cpu(who, cpu)

    def dataplane_status(self, who: Principal) -> dict[str, Any]:
        return self._admin.dataplane_status(who)

    def attach(self, who: Principal, interface: str, mode: str) -> dict[str, Any]:
        return self._admin.attach(who, interface, mode)

    def detach(self, who: Principal, interface: str) -> None:
        self._admin.detach(who, interface)

    def reload_dataplane(self, who: Principal) -> dict[str, Any]:
        return self._admin.reload_dataplane(who)

    def stats(self, who: Principal) -> dict[str, Any]:
        return self._admin.stats(who)

    def counters(self) -> Counters:
        """Every counter at one moment, named, for the telemetry collector (netapp.telemetry)."""
        return self._counters.counters()
