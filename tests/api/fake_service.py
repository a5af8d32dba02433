"""TEST DOUBLE: an in-memory `IntentService` for the API tests. Not the NetApp's service.

The real service (netapp.service.service) keeps a store and BPF maps in step and needs the kernel;
this one keeps plain dicts, so the front door can be tested anywhere. It honours the contract's
rules the API relies on: ids are unique per tenant; tenants see only their own objects (another
tenant's look like NotFound); admins see all and name another tenant's objects `<tenant>/<id>`;
idempotency keys return the first result; intents with the same match conflict.
Tests make it fail on purpose with `fail_next`. One fake per domain contract (`FakeIntents`,
`FakeSlices`, ...) over shared dicts, composed as `FakeIntentService` like the real service.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from concurrent.futures import Future
from pathlib import Path
from datetime import datetime, timezone
from typing import Any, Optional, TypeVar

from netapp.service.store import Store
from netapp.forwarding.models import AlternativeGroup
from netapp.intents.models import Intent, LegacyMessage, legacy_to_native
from netapp.steering.models import CpuSpec
from netapp.service.contract import (
    AlternativeGroupStatus,
    AlternativeMemberStatus,
    AlternativesContract,
    CpusContract,
    DataplaneContract,
    MAX_BATCH_INTENTS,
    BatchCreateResult,
    CompiledRuleView,
    Conflict,
    ConflictView,
    CreateResult,
    DryRunReport,
    Forbidden,
    Health,
    IntentFilter,
    IntentRecord,
    IntentResult,
    IntentService,
    IntentsContract,
    InvalidInput,
    NotFound,
    Page,
    Principal,
    Scope,
    SliceRecord,
    SlicesContract,
    ServiceError,
    SliceSpec,
    batch_field,
)

T = TypeVar("T")


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _page(items: list[T], offset: int, limit: int) -> Page[T]:
    return Page(items=items[offset : offset + limit], total=len(items), offset=offset, limit=limit)


class _FakeState:
    """What the domain fakes share: dicts instead of a store and maps. Not thread-safe beyond what
    the tests need (one client)."""

    def __init__(self) -> None:
        self.intents: dict[tuple[str, str], IntentRecord] = {}  # (tenant, id) -> record
        self.slices: dict[tuple[str, str], SliceRecord] = {}
        self.alternatives: dict[int, AlternativeGroup] = {}
        self.cpus: dict[int, CpuSpec] = {}
        self.attached: dict[str, str] = {}
        self.program_id = 1
        self.idempotency: dict[tuple[str, str], tuple[str, str]] = {}  # (tenant, key) -> intent key
        # (tenant, key) -> (the batch's intents as JSON, their intent keys)
        self.batch_idempotency: dict[tuple[str, str], tuple[list[str], list[tuple[str, str]]]] = {}
        self.ready = True
        self.calls: list[str] = []
        self._failure: Optional[Exception] = None
        self._store: Optional[Store] = None

    @property
    def store(self) -> Store:
        """A real store for what the routes read beside the service, the tenants' records (the
        fake keeps its own objects in dicts); opened when first asked for, removed at exit."""
        if self._store is None:
            directory = tempfile.mkdtemp(prefix="fake-service-")
            atexit.register(shutil.rmtree, directory, ignore_errors=True)
            self._store = Store.open(Path(directory) / "tenants.db")
        return self._store

    def intent(self, intent_id: str, tenant: str = "tenant-a") -> Intent:
        return self.intents[(tenant, intent_id)].intent

    # --- failure injection ---------------------------------------------------------------------

    def fail_next(self, error: Exception) -> None:
        """The next operation raises `error` (then the fake works again)."""
        self._failure = error

    def _enter(self, operation: str) -> None:
        self.calls.append(operation)
        if self._failure is not None:
            error, self._failure = self._failure, None
            raise error

    # --- helpers -------------------------------------------------------------------------------

    def _visible_intents(self, who: Principal) -> list[IntentRecord]:
        return [r for r in self.intents.values() if who.is_admin or r.tenant == who.tenant]

    def _own_intent(self, who: Principal, name: str) -> IntentRecord:
        record = self.intents.get(_owner_and_id(who, name))
        if record is None:
            raise NotFound(f"no intent {name!r}")
        return record

    def _own_slice(self, who: Principal, name: str) -> SliceRecord:
        record = self.slices.get(_owner_and_id(who, name))
        if record is None:
            raise NotFound(f"no slice {name!r}")
        return record

    def _insert(self, who: Principal, intent: Intent, source: str) -> IntentRecord:
        if (who.tenant, intent.id) in self.intents:
            raise Conflict(f"intent id {intent.id!r} is in use", field="id")
        self._refuse_same_match(intent)
        now = _now()
        record = IntentRecord(intent=intent, tenant=who.tenant, source=source, created_at=now, updated_at=now)
        self.intents[(who.tenant, intent.id)] = record
        return record

    def _refuse_same_match(self, intent: Intent, ignore: Optional[tuple[str, str]] = None) -> None:
        for other in self.intents.values():
            if _key(other) != ignore and _same_match(other.intent, intent):
                raise Conflict(
                    f"intent {intent.id!r} has the same match as {other.intent.id!r}",
                    field="match",
                    conflicts=[{"kind": "duplicate", "intent_a": other.intent.id, "intent_b": intent.id}],
                )


class FakeIntents(_FakeState, IntentsContract):
    """Intents: ids unique per tenant, the same match conflicts, idempotency keys answer the first result."""

    def list_intents(self, who: Principal, flt: IntentFilter) -> Page[IntentRecord]:
        self._enter("list_intents")
        records = [r for r in self._visible_intents(who) if _matches(r, flt)]
        return _page(sorted(records, key=lambda r: r.intent.id), flt.offset, flt.limit)

    def get_intent(self, who: Principal, intent_id: str) -> IntentRecord:
        self._enter("get_intent")
        return self._own_intent(who, intent_id)

    def create_intent(
        self, who: Principal, intent: Intent, *, idempotency_key: Optional[str] = None
    ) -> CreateResult:
        self._enter("create_intent")
        if idempotency_key is not None and (who.tenant, idempotency_key) in self.idempotency:
            return CreateResult(self.intents[self.idempotency[(who.tenant, idempotency_key)]], created=False)
        record = self._insert(who, intent, "native")
        if idempotency_key is not None:
            self.idempotency[(who.tenant, idempotency_key)] = (who.tenant, intent.id)
        return CreateResult(record, created=True)

    def submit_create(
        self, who: Principal, intent: Intent, *, idempotency_key: Optional[str] = None
    ) -> "Future[CreateResult]":
        """Answered at once: nothing here blocks."""
        future: Future[CreateResult] = Future()
        try:
            future.set_result(self.create_intent(who, intent, idempotency_key=idempotency_key))
        except Exception as exc:  # noqa: BLE001 - whatever create_intent raised, as the real one
            future.set_exception(exc)
        return future

    def create_intents(
        self, who: Principal, intents: list[Intent], *, idempotency_key: Optional[str] = None
    ) -> BatchCreateResult:
        self._enter("create_intents")
        if len(intents) > MAX_BATCH_INTENTS:
            raise InvalidInput(f"a batch takes at most {MAX_BATCH_INTENTS} intents", field="intents")
        body = [intent.model_dump_json() for intent in intents]
        if idempotency_key is not None and (who.tenant, idempotency_key) in self.batch_idempotency:
            earlier, keys = self.batch_idempotency[(who.tenant, idempotency_key)]
            if earlier != body:
                raise Conflict(f"Idempotency-Key {idempotency_key!r} was used for another request",
                               field="Idempotency-Key")
            return BatchCreateResult([self.intents[key] for key in keys], created=False)
        before = dict(self.intents)
        records = []
        for n, intent in enumerate(intents):
            try:
                records.append(self._insert(who, intent, "native"))
            except ServiceError as exc:  # all or nothing, naming the intent by its position
                self.intents = before
                exc.field = batch_field(n, exc.field)
                exc.detail = f"{batch_field(n)}: {exc.detail}"
                raise
        if idempotency_key is not None:
            self.batch_idempotency[(who.tenant, idempotency_key)] = (body, [_key(r) for r in records])
        return BatchCreateResult(records, created=True)

    def replace_intent(self, who: Principal, intent_id: str, intent: Intent) -> IntentResult:
        self._enter("replace_intent")
        old = self._own_intent(who, intent_id)
        self._refuse_same_match(intent, ignore=_key(old))
        record = old.model_copy(update={"intent": intent, "updated_at": _now(), "revision": old.revision + 1})
        self.intents[_key(old)] = record
        return IntentResult.of(record, [])

    def delete_intent(self, who: Principal, intent_id: str) -> None:
        self._enter("delete_intent")
        del self.intents[_key(self._own_intent(who, intent_id))]

    def apply_legacy(self, who: Principal, message: LegacyMessage) -> Optional[IntentResult]:
        self._enter("apply_legacy")
        action_type, intent = legacy_to_native(message)
        if action_type == "INSERT":
            return IntentResult.of(self._insert(who, intent, "legacy"), [])
        old = self._own_intent(who, intent.id)
        if action_type == "DELETE":
            del self.intents[_key(old)]
            return None
        record = old.model_copy(update={"intent": intent, "updated_at": _now(), "revision": old.revision + 1})
        self.intents[_key(old)] = record
        return IntentResult.of(record, [])

    def dry_run(self, who: Principal, intents: list[Intent]) -> DryRunReport:
        self._enter("dry_run")
        rules = [_rule_view(intent) for intent in intents]
        conflicts = [
            ConflictView(kind="duplicate", intent_a=other.intent.id, intent_b=intent.id, reason="same match")
            for intent in intents
            for other in self.intents.values()
            if _key(other) != (who.tenant, intent.id) and _same_match(other.intent, intent)
        ]
        return DryRunReport(rules=rules, conflicts=conflicts)


class FakeSlices(_FakeState, SlicesContract):
    """Slices: stored as asked, one intent id each."""

    def list_slices(self, who: Principal, offset: int = 0, limit: int = 100) -> Page[SliceRecord]:
        self._enter("list_slices")
        visible = [s for s in self.slices.values() if who.is_admin or s.tenant == who.tenant]
        return _page(sorted(visible, key=lambda s: s.spec.id), offset, limit)

    def get_slice(self, who: Principal, slice_id: str) -> SliceRecord:
        self._enter("get_slice")
        return self._own_slice(who, slice_id)

    def put_slice(self, who: Principal, spec: SliceSpec) -> tuple[SliceRecord, bool]:
        self._enter("put_slice")
        old = self.slices.get((who.tenant, spec.id))
        now = _now()
        if old is None:
            record = SliceRecord(
                spec=spec, tenant=who.tenant, intent_ids=[f"slice-{spec.id}"], created_at=now, updated_at=now
            )
        else:
            record = old.model_copy(update={"spec": spec, "updated_at": now, "revision": old.revision + 1})
        self.slices[(who.tenant, spec.id)] = record
        return record, old is None

    def delete_slice(self, who: Principal, slice_id: str) -> None:
        self._enter("delete_slice")
        record = self._own_slice(who, slice_id)
        del self.slices[(record.tenant, record.spec.id)]


class FakeAlternatives(_FakeState, AlternativesContract):
    """Alternative groups: every member unprobed and alive."""

    def list_alternatives(self, who: Principal) -> list[AlternativeGroup]:
        self._enter("list_alternatives")
        return [self.alternatives[key] for key in sorted(self.alternatives)]

    def get_alternative(self, who: Principal, group_id: int) -> AlternativeGroupStatus:
        self._enter("get_alternative")
        if group_id not in self.alternatives:
            raise NotFound(f"no alternative group {group_id}", field="group_id")
        group = self.alternatives[group_id]
        members = [
            AlternativeMemberStatus(
                **member.model_dump(), state="unprobed", alive=True, since=None, changes=0, last_answer=None
            )
            for member in group.members
        ]
        return AlternativeGroupStatus(id=group_id, members=members, active=len(members))

    def put_alternative(self, who: Principal, group: AlternativeGroup) -> AlternativeGroup:
        self._enter("put_alternative")
        _require_admin(who)
        self.alternatives[group.id] = group
        return group

    def delete_alternative(self, who: Principal, group_id: int) -> None:
        self._enter("delete_alternative")
        _require_admin(who)
        if group_id not in self.alternatives:
            raise NotFound(f"no alternative group {group_id}", field="group_id")
        users = [r.intent.id for r in self.intents.values() if r.intent.alternative == group_id]
        if users:
            raise Conflict(f"alternative group {group_id} is used by {', '.join(users)}", intents=users)
        del self.alternatives[group_id]


class FakeCpus(_FakeState, CpusContract):
    """The CPU set: specs, meters at zero."""

    def list_cpus(self, who: Principal) -> list[dict[str, Any]]:
        self._enter("list_cpus")
        return [{**self.cpus[cpu].model_dump(), "meter_pps": 0} for cpu in sorted(self.cpus)]

    def put_cpu(self, who: Principal, spec: CpuSpec) -> CpuSpec:
        self._enter("put_cpu")
        _require_admin(who)
        self.cpus[spec.cpu] = spec
        return spec

    def delete_cpu(self, who: Principal, cpu: int) -> None:
        self._enter("delete_cpu")
        _require_admin(who)
        if self.cpus.pop(cpu, None) is None:
            raise NotFound(f"CPU {cpu} is not in the CPU set", field="cpu")


class FakeDataplane(_FakeState, DataplaneContract):
    """Attachments and a program id; counters at zero."""

    def dataplane_status(self, who: Principal) -> dict[str, Any]:
        self._enter("dataplane_status")
        interfaces = [
            {"name": name, "netns": None, "mode": mode, "ifindex": None, "attached": True}
            for name, mode in sorted(self.attached.items())
        ]
        return {"interfaces": interfaces, "rules": len(self.intents)}

    def attach(self, who: Principal, interface: str, mode: str) -> dict[str, Any]:
        self._enter("attach")
        _require_admin(who)
        if interface in self.attached:
            raise Conflict(f"{interface} is already attached ({self.attached[interface]})", field="interface")
        self.attached[interface] = mode
        return {"interface": interface, "mode": mode}

    def detach(self, who: Principal, interface: str) -> None:
        self._enter("detach")
        _require_admin(who)
        if self.attached.pop(interface, None) is None:
            raise NotFound(f"{interface} is not attached", field="interface")

    def reload_dataplane(self, who: Principal) -> dict[str, Any]:
        self._enter("reload_dataplane")
        _require_admin(who)
        self.program_id += 1
        return {
            "previous_program_id": self.program_id - 1,
            "program_id": self.program_id,
            "interfaces": sorted(self.attached),
            "duration_ms": 0.0,
        }

    def stats(self, who: Principal) -> dict[str, Any]:
        self._enter("stats")
        intents = {r.intent.id: {"packets": 0, "bytes": 0} for r in self._visible_intents(who)}
        return {"intents": intents, **({"cpus": {}} if who.is_admin else {})}


class FakeIntentService(FakeIntents, FakeSlices, FakeAlternatives, FakeCpus, FakeDataplane, IntentService):
    """Every domain's fake over one set of dicts, as the real service composes its domains."""

    def health(self) -> Health:
        self._enter("health")
        if self.ready:
            return Health(ready=True, checks={"store": "ok", "dataplane": "ok"})
        return Health(ready=False, checks={"store": "ok", "dataplane": "pinned maps are missing"})


def _owner_and_id(who: Principal, name: str) -> tuple[str, str]:
    """(tenant, id) a caller means: its own for a bare id; `<tenant>/<id>` is for admins only (for
    others it names nothing, like another tenant's object)."""
    tenant, _, object_id = name.rpartition("/")
    if not tenant:
        return who.tenant, object_id
    return (tenant, object_id) if who.is_admin else ("", name)


def _key(record: IntentRecord) -> tuple[str, str]:
    return record.tenant, record.intent.id


def _require_admin(who: Principal) -> None:
    # The API checks scopes first; a service must not rely on that.
    if not who.allows(Scope.ADMIN):
        raise Forbidden("needs scope 'admin'")


def _matches(record: IntentRecord, flt: IntentFilter) -> bool:
    return (
        (flt.tenant is None or record.tenant == flt.tenant)
        and (flt.slice_id is None or record.slice_id == flt.slice_id)
        and (flt.action is None or record.intent.action.type == flt.action)
        and (flt.source is None or record.source == flt.source)
    )


def _same_match(a: Intent, b: Intent) -> bool:
    return a.match.model_dump() == b.match.model_dump()


def _rule_view(intent: Intent) -> CompiledRuleView:
    action = intent.action
    return CompiledRuleView(
        intent_id=intent.id,
        shape=",".join(sorted(intent.match.model_dump(exclude_none=True))) or "catch-all",
        match=intent.match.model_dump(mode="json", exclude_none=True),
        priority=intent.priority,
        action=action.type,
        cpu=getattr(action, "cpu", None),
        alternative=getattr(action, "alternative", None),
    )
