"""TEST DOUBLE: an in-memory `IntentService` for the API tests. Not the NetApp's service.

The real service (netapp.service.service) keeps a store and BPF maps in step and needs the kernel;
this one keeps plain dicts, so the front door can be tested anywhere. It honours the contract's
rules the API relies on: ids are unique per tenant; tenants see only their own objects (another
tenant's look like NotFound); admins see all and name another tenant's objects `<tenant>/<id>`;
idempotency keys return the first result; intents with the same match conflict.
Tests make it fail on purpose with `fail_next`. One fake per domain contract (`FakeIntents`,
`FakeSlices`, ..., each network function's in tests/<function>/fake.py) over shared state
(tests.api.fake_state), composed as `FakeIntentService` like the real service.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Optional, TypeVar

from netapp.intents.models import Intent, LegacyMessage, legacy_to_native
from netapp.service.contract import (
    DataplaneContract,
    MAX_BATCH_INTENTS,
    BatchCreateResult,
    CompiledRuleView,
    Conflict,
    ConflictView,
    CreateResult,
    DryRunReport,
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
    SliceRecord,
    SlicesContract,
    ServiceError,
    SliceSpec,
    batch_field,
)
from tests.api.fake_state import FakeState, intent_key, require_admin, same_match, utc_now
from tests.forwarding.fake import FakeAlternatives
from tests.qos.fake import FakePolicers
from tests.steering.fake import FakeCpus

T = TypeVar("T")


def _page(items: list[T], offset: int, limit: int) -> Page[T]:
    return Page(items=items[offset : offset + limit], total=len(items), offset=offset, limit=limit)


class FakeIntents(FakeState, IntentsContract):
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
            self.batch_idempotency[(who.tenant, idempotency_key)] = (body, [intent_key(r) for r in records])
        return BatchCreateResult(records, created=True)

    def replace_intent(self, who: Principal, intent_id: str, intent: Intent) -> IntentResult:
        self._enter("replace_intent")
        old = self._own_intent(who, intent_id)
        self._refuse_same_match(intent, ignore=intent_key(old))
        record = old.model_copy(update={"intent": intent, "updated_at": utc_now(), "revision": old.revision + 1})
        self.intents[intent_key(old)] = record
        return IntentResult.of(record, [])

    def delete_intent(self, who: Principal, intent_id: str) -> None:
        self._enter("delete_intent")
        del self.intents[intent_key(self._own_intent(who, intent_id))]

    def apply_legacy(self, who: Principal, message: LegacyMessage) -> Optional[IntentResult]:
        self._enter("apply_legacy")
        action_type, intent = legacy_to_native(message)
        if action_type == "INSERT":
            return IntentResult.of(self._insert(who, intent, "legacy"), [])
        old = self._own_intent(who, intent.id)
        if action_type == "DELETE":
            del self.intents[intent_key(old)]
            return None
        record = old.model_copy(update={"intent": intent, "updated_at": utc_now(), "revision": old.revision + 1})
        self.intents[intent_key(old)] = record
        return IntentResult.of(record, [])

    def dry_run(self, who: Principal, intents: list[Intent]) -> DryRunReport:
        self._enter("dry_run")
        rules = [_rule_view(intent) for intent in intents]
        conflicts = [
            ConflictView(kind="duplicate", intent_a=other.intent.id, intent_b=intent.id, reason="same match")
            for intent in intents
            for other in self.intents.values()
            if intent_key(other) != (who.tenant, intent.id) and same_match(other.intent, intent)
        ]
        return DryRunReport(rules=rules, conflicts=conflicts)

    def dry_run_legacy(self, who: Principal, message: LegacyMessage) -> DryRunReport:
        action_type, intent = legacy_to_native(message)
        if action_type == "DELETE":
            raise InvalidInput("a dry run compiles INSERT and UPDATE messages; a DELETE has nothing to compile",
                               field="Action.actionType")
        return self.dry_run(who, [intent])


class FakeSlices(FakeState, SlicesContract):
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
        now = utc_now()
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


class FakeDataplane(FakeState, DataplaneContract):
    """Attachments and a program id; counters at zero."""

    def dataplane_status(self, who: Principal) -> dict[str, Any]:
        self._enter("dataplane_status")
        interfaces = [
            {"name": name, "netns": None, "mode": mode, "ifindex": None, "attached": True}
            for name, mode in sorted(self.attached.items())
        ]
        return {"interfaces": interfaces, "rules": len(self.intents), "clock": self.clock}

    def attach(self, who: Principal, interface: str, mode: str) -> dict[str, Any]:
        self._enter("attach")
        require_admin(who)
        if interface in self.attached:
            raise Conflict(f"{interface} is already attached ({self.attached[interface]})", field="interface")
        self.attached[interface] = mode
        return {"interface": interface, "mode": mode}

    def detach(self, who: Principal, interface: str) -> None:
        self._enter("detach")
        require_admin(who)
        if self.attached.pop(interface, None) is None:
            raise NotFound(f"{interface} is not attached", field="interface")

    def reload_dataplane(self, who: Principal) -> dict[str, Any]:
        self._enter("reload_dataplane")
        require_admin(who)
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


class FakeIntentService(
    FakeIntents, FakeSlices, FakeAlternatives, FakeCpus, FakeDataplane, FakePolicers, IntentService
):
    """Every domain's fake over one set of dicts, as the real service composes its domains."""

    def health(self) -> Health:
        self._enter("health")
        if self.ready:
            return Health(ready=True, checks={"store": "ok", "dataplane": "ok"})
        return Health(ready=False, checks={"store": "ok", "dataplane": "pinned maps are missing"})


def _matches(record: IntentRecord, flt: IntentFilter) -> bool:
    return (
        (flt.tenant is None or record.tenant == flt.tenant)
        and (flt.slice_id is None or record.slice_id == flt.slice_id)
        and (flt.action is None or record.intent.action.type == flt.action)
        and (flt.source is None or record.source == flt.source)
    )


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
