"""Intents: create (single, batch, idempotent), replace, delete, legacy messages, dry runs.

Single creates go through a writer thread (netapp.service.group_commit): a commit syncs the disk,
and one sync per change would cap single creates at the disk's syncs per second. Those queued while
a transaction was in flight become the parts of the next one (netapp.service.transaction): one store
transaction, one map delta, one fsync, and still an answer of its own for each, sent only once its
change is in the maps and durable. Should the transaction fail as a whole, each create is made alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from concurrent.futures import Future
from datetime import datetime, timedelta
from typing import Callable, Optional, Union

from netapp.intents.errors import IntentError
from netapp.intents.index import IndexChange
from netapp.intents.models import Intent, LegacyMessage, legacy_to_native, legacy_update
from netapp.mec.bwm_compiler import BWM_SOURCE
from netapp.mec.compiler import MEC_SOURCE
from netapp.service.contract import (
    MAX_BATCH_INTENTS,
    BatchCreateResult,
    CompiledRuleView,
    Conflict,
    CreateResult,
    DataplaneUnavailable,
    DryRunReport,
    Forbidden,
    IntentFilter,
    IntentRecord,
    IntentResult,
    IntentsContract,
    IntentWarning,
    InvalidInput,
    NotFound,
    Page,
    Principal,
    Scope,
    batch_field,
)
from netapp.service.group_commit import GroupWriter, WriterClosed
from netapp.service.rules import rule_id
from netapp.service.state import ServiceState
from netapp.service.transaction import Part, RuleChange, Where, invalid_input

log = logging.getLogger("netapp.service")

IDEMPOTENCY_TTL = timedelta(hours=24)
LEGACY_SOURCE, NATIVE_SOURCE = "legacy", "native"


def request_hash(intent: Intent) -> str:
    """What an idempotent retry must repeat: the intent as validated (defaults filled in)."""
    return batch_hash([intent])


def batch_hash(intents: list[Intent]) -> str:
    """The same for a batch, in order; a batch of one hashes like that one intent."""
    digest = hashlib.sha256()
    for n, intent in enumerate(intents):
        digest.update((b"\n" if n else b"") + intent.model_dump_json().encode())
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class _CreateRequest:
    """A single create waiting for its group (`IntentsService._create_group`)."""

    who: Principal
    intent: Intent
    source: str
    key: Optional[str]


class IntentsService(IntentsContract):
    """The intents of every tenant, in the store and as rules in the maps."""

    def __init__(self, state: ServiceState):
        self._state = state
        self._rules = state.rules
        self._creates: Optional[GroupWriter[_CreateRequest, CreateResult]] = None  # while started

    def start(self) -> None:
        self._creates = GroupWriter(self._create_group, name="intent-creates", max_group=MAX_BATCH_INTENTS)

    def close(self) -> None:
        """Creates already queued are made first."""
        if self._creates is not None:
            self._creates.close()

    # --- reads -----------------------------------------------------------------------------------

    def list_intents(self, who: Principal, flt: IntentFilter) -> Page[IntentRecord]:
        self._state.require(who, Scope.READ)
        if not who.is_admin:
            if flt.tenant not in (None, who.tenant):
                raise Forbidden("filtering by another tenant needs scope 'admin'", field="tenant")
            flt = IntentFilter(**{**vars(flt), "tenant": who.tenant})
        return self._state.store.list_intents(flt)

    def get_intent(self, who: Principal, intent_id: str) -> IntentRecord:
        return self._state.read_owned(
            who, intent_id, "intent", lambda tenant, local: self._state.store.get_intent(tenant, local)
        )

    # --- changes ---------------------------------------------------------------------------------

    def create_intent(
        self, who: Principal, intent: Intent, *, idempotency_key: Optional[str] = None
    ) -> CreateResult:
        return self.submit_create(who, intent, idempotency_key=idempotency_key).result()

    def submit_create(
        self, who: Principal, intent: Intent, *, idempotency_key: Optional[str] = None
    ) -> "Future[CreateResult]":
        self._state.require(who, Scope.INTENTS_WRITE)
        return self._submit_create(_CreateRequest(who, intent, NATIVE_SOURCE, idempotency_key))

    def replace_intent(self, who: Principal, intent_id: str, intent: Intent) -> IntentResult:
        self._state.require(who, Scope.INTENTS_WRITE)
        tenant, local = self._state.owner(who, intent_id, "intent")
        return self._replace(who, tenant, local, intent, None)

    def delete_intent(self, who: Principal, intent_id: str) -> None:
        self._state.require(who, Scope.INTENTS_WRITE)
        tenant, local = self._state.owner(who, intent_id, "intent")
        self._delete(who, tenant, local)

    def apply_legacy(self, who: Principal, message: LegacyMessage) -> Optional[IntentResult]:
        self._state.require(who, Scope.INTENTS_WRITE)
        try:
            action_type, intent = legacy_to_native(message)
        except IntentError as exc:
            raise invalid_input(exc) from exc
        if action_type == "INSERT":
            created = self._submit_create(_CreateRequest(who, intent, LEGACY_SOURCE, None)).result()
            return IntentResult.of(created.record, created.warnings)
        if action_type == "UPDATE":
            return self._replace(who, who.tenant, intent.id, intent, LEGACY_SOURCE)
        self._delete(who, who.tenant, intent.id)
        return None

    def create_intents(
        self, who: Principal, intents: list[Intent], *, idempotency_key: Optional[str] = None
    ) -> BatchCreateResult:
        """Create intents in one transaction; errors name the intent by its position."""
        self._state.require(who, Scope.INTENTS_WRITE)
        if not intents:
            raise InvalidInput("a batch needs at least one intent", field="intents")
        if len(intents) > MAX_BATCH_INTENTS:
            raise InvalidInput(
                f"a batch takes at most {MAX_BATCH_INTENTS} intents (got {len(intents)}): split it",
                field="intents",
                max_items=MAX_BATCH_INTENTS,
            )
        work, where = self._create_work(who, intents, NATIVE_SOURCE, idempotency_key, batch=True)
        return self._state.change(who, work, where)

    # --- single creates, in groups ---------------------------------------------------------------

    def _submit_create(self, request: _CreateRequest) -> "Future[CreateResult]":
        """Queue a single create for the next group (netapp.service.group_commit)."""
        if self._creates is None:
            raise DataplaneUnavailable("the service is not started")
        try:
            return self._creates.submit(request)
        except WriterClosed as exc:
            raise DataplaneUnavailable("the service is not started") from exc

    def _create_group(self, requests: list[_CreateRequest]) -> list[Union[CreateResult, Exception]]:
        """Single creates that queued up together, as the parts of one transaction: each gets its own
        answer, and one that fails does not fail the others. Should the transaction fail as a whole
        (the maps refuse the delta, the commit fails), each is made alone, so that it gets the answer
        it would have got alone."""
        parts = [self._create_part(request) for request in requests]
        try:
            self._state.transactions.run(parts, self._state.rule_change)
        except Exception as exc:  # noqa: BLE001 - an answer for each caller, whatever it was
            if len(parts) == 1:
                return [exc]
            log.warning("a group of %d creates failed as a whole (%s): making each alone", len(parts), exc)
            return [self._create_alone(request) for request in requests]
        return [_create_outcome(part) for part in parts]

    def _create_part(self, request: _CreateRequest) -> Part[BatchCreateResult]:
        who = request.who
        work, where = self._create_work(who, [request.intent], request.source, request.key, batch=False)
        return Part(who, work, where)

    def _create_alone(self, request: _CreateRequest) -> Union[CreateResult, Exception]:
        part = self._create_part(request)
        try:
            self._state.transactions.run([part], self._state.rule_change)
        except Exception as exc:  # noqa: BLE001 - the caller's answer
            return exc
        return _create_outcome(part)

    def _create_work(
        self, who: Principal, intents: list[Intent], source: str, key: Optional[str], *, batch: bool
    ) -> tuple[Callable[[RuleChange], BatchCreateResult], Where]:
        """The transaction's work of a create, and where in the batch a rule id is."""
        tenant = who.tenant
        fingerprint = batch_hash(intents) if key is not None else ""
        positions = {rule_id(tenant, intent.id): n for n, intent in enumerate(intents)}
        where: Where = positions.get if batch else lambda _: None

        narrowed: list[IntentWarning] = []

        def work(change: RuleChange) -> BatchCreateResult:
            now = self._state.now()
            narrowed.clear()
            if key is not None:
                earlier = self._earlier_create(tenant, key, fingerprint, now)
                if earlier is not None:
                    return earlier
            store = self._state.store
            records = []
            for n, intent in enumerate(intents):
                at = n if batch else None
                self._rules.require_free_intent_id(tenant, intent.id, at, positions)
                try:
                    intent = self._rules.confined(who, tenant, intent, narrowed)
                    change.add(self._rules.compile(tenant, intent))
                except IntentError as exc:
                    raise exc.prefixed(batch_field(n)) if batch else exc
                record = IntentRecord(intent=intent, tenant=tenant, source=source, created_at=now, updated_at=now)
                store.insert_intent(record)
                try:
                    self._state.protection.follow(change, who, tenant, None, intent)
                except IntentError as exc:
                    raise exc.prefixed(batch_field(n)) if batch else exc
                records.append(record)
            self._state.tenancy.check_quotas(tenant)
            if key is not None:
                store.purge_idempotency(now)
                store.remember_idempotent(tenant, key, fingerprint, records, now, now + IDEMPOTENCY_TTL)
            return BatchCreateResult(records, created=True)

        def warned(change: RuleChange) -> BatchCreateResult:
            result = work(change)
            result.warnings = narrowed + self._rules.warnings(who, list(positions))
            return result

        return warned, where

    def _earlier_create(
        self, tenant: str, key: str, fingerprint: str, now: datetime
    ) -> Optional[BatchCreateResult]:
        earlier = self._state.store.find_idempotent(tenant, key, now)
        if earlier is None:
            return None
        if earlier.request_hash != fingerprint:
            what = (
                f"intent {earlier.record.intent.id!r}"
                if len(earlier.records) == 1
                else f"a batch of {len(earlier.records)} intents"
            )
            raise Conflict(
                f"Idempotency-Key {key!r} was used for another request ({what}): "
                "use a new key for a new create",
                field="Idempotency-Key",
            )
        return BatchCreateResult(list(earlier.records), created=False)

    # --- replace and delete ----------------------------------------------------------------------

    def _replace(
        self, who: Principal, tenant: str, intent_id: str, intent: Intent, source: Optional[str]
    ) -> IntentResult:
        if intent.id != intent_id:
            raise InvalidInput(
                f"id {intent.id!r} differs from the intent being replaced ({intent_id!r})", field="id"
            )
        qualified = rule_id(tenant, intent_id)

        def work(change: RuleChange) -> IntentResult:
            old = self._changeable_intent(tenant, intent_id)
            # A legacy UPDATE says what the paper's message can say: the rest (its protection) is kept.
            wanted = legacy_update(old.intent, intent) if source == LEGACY_SOURCE else intent
            narrowed: list[IntentWarning] = []
            confined = self._rules.confined(who, tenant, wanted, narrowed)
            record = old.model_copy(
                update={
                    "intent": confined,
                    "source": source or old.source,
                    "updated_at": self._state.now(),
                    "revision": old.revision + 1,
                }
            )
            self._state.store.update_intent(record)
            self._state.protection.follow(change, who, tenant, old.intent, confined)
            if qualified in self._state.index:
                change.remove(qualified)
            change.add(self._rules.compile(tenant, confined))
            return IntentResult.of(record, narrowed + self._rules.warnings(who, [qualified]))

        record = self._state.change(who, work)
        self._state.uncompiled.pop(qualified, None)
        return record

    def _delete(self, who: Principal, tenant: str, intent_id: str) -> None:
        qualified = rule_id(tenant, intent_id)

        def work(change: RuleChange) -> None:
            old = self._changeable_intent(tenant, intent_id)
            self._state.store.delete_intent(tenant, intent_id)
            self._state.protection.follow(change, who, tenant, old.intent, None)
            if qualified in self._state.index:
                change.remove(qualified)

        self._state.change(who, work)
        self._state.uncompiled.pop(qualified, None)

    def _changeable_intent(self, tenant: str, intent_id: str) -> IntentRecord:
        record = self._state.store.get_intent(tenant, intent_id)
        if record is None:
            raise NotFound(f"no intent {intent_id!r}")
        if record.slice_id is not None:
            raise Conflict(
                f"intent {intent_id!r} belongs to slice {record.slice_id!r}: change the slice instead",
                field="id",
            )
        if record.source == MEC_SOURCE:
            raise Conflict(
                f"intent {intent_id!r} is a MEC 011 traffic rule's ({record.intent.label}): change the rule "
                "through /mec_app_support/v1 instead",
                field="id",
            )
        if record.source == BWM_SOURCE:
            raise Conflict(
                f"intent {intent_id!r} is a MEC 015 bandwidth allocation's ({record.intent.label}): change the "
                "allocation through /bwm/v1 instead",
                field="id",
            )
        return record

    # --- dry runs --------------------------------------------------------------------------------

    def dry_run(self, who: Principal, intents: list[Intent]) -> DryRunReport:
        """Compile against the current index, report, and roll the index back: nothing is written."""
        self._state.require(who, Scope.INTENTS_WRITE)
        with self._state.exclusive():
            self._state.require_started()
            change = self._state.index.track()
            try:
                narrowed: list[IntentWarning] = []
                qualified = [self._stage(change, who, intent, narrowed) for intent in intents]
                return self._report(who, qualified, narrowed)
            except IntentError as exc:
                raise invalid_input(exc) from exc
            finally:
                change.roll_back()

    def dry_run_legacy(self, who: Principal, message: LegacyMessage) -> DryRunReport:
        """dry_run of a legacy INSERT or UPDATE; an UPDATE's intent keeps the stored one's protection,
        as applying it would (legacy_update), and is refused where that would refuse it."""
        self._state.require(who, Scope.INTENTS_WRITE)
        try:
            action_type, intent = legacy_to_native(message)
            if action_type == "DELETE":
                raise IntentError.at(
                    "Action.actionType", "a dry run compiles INSERT and UPDATE messages; a DELETE has nothing to compile")
            stored = self._state.store.get_intent(who.tenant, intent.id)
            if action_type == "UPDATE" and stored is not None:
                intent = legacy_update(stored.intent, intent)
        except IntentError as exc:
            raise invalid_input(exc) from exc
        return self.dry_run(who, [intent])

    def _stage(self, change: IndexChange, who: Principal, intent: Intent, notes: list[IntentWarning]) -> str:
        """Add an intent to the change, replacing the caller's intent of that id if there is one; its
        protection checked as applying it would check it (nothing stored)."""
        tenant = who.tenant
        intent = self._rules.confined(who, tenant, intent, notes)
        stored = self._state.store.get_intent(tenant, intent.id)
        self._state.protection.check(who, tenant, stored.intent if stored is not None else None, intent)
        qualified = rule_id(tenant, intent.id)
        if qualified in self._state.index and qualified not in {rule.intent_id for rule in change.added()}:
            change.remove(qualified)
        change.add(self._rules.compile(tenant, intent))
        return qualified

    def _report(self, who: Principal, qualified: list[str], narrowed: list[IntentWarning]) -> DryRunReport:
        index = self._state.index
        rules, conflicts, seen = [], [], set()
        interface_names = {ifindex: name for name, ifindex in index.interfaces.items()}
        for name in qualified:
            rule = index.get(name)
            assert rule is not None
            rules.append(CompiledRuleView.of(rule, self._rules.display(who, rule.intent_id), interface_names))
            for conflict in index.collisions(name):
                if (conflict.intent_a, conflict.intent_b) not in seen:
                    seen.add((conflict.intent_a, conflict.intent_b))
                    conflicts.append(self._rules.conflict_view(who, conflict))
        warnings = narrowed + self._rules.warnings(who, qualified)
        return DryRunReport(rules=rules, conflicts=conflicts, warnings=warnings)


def _create_outcome(part: Part[BatchCreateResult]) -> Union[CreateResult, Exception]:
    if part.error is not None:
        return part.error
    assert part.result is not None
    return CreateResult(part.result.records[0], created=part.result.created, warnings=part.result.warnings)
