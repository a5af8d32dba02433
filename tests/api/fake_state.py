"""TEST DOUBLE: what the domain fakes of `FakeIntentService` (tests.api.fake_service) share: the
intents and slices in dicts, failure injection, the calls made. A network function's fake
(tests/<function>/fake.py) derives from `FakeState` and keeps its own objects."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from netapp.intents.models import Intent
from netapp.service.contract import Conflict, Forbidden, IntentRecord, NotFound, Principal, Scope, SliceRecord
from netapp.service.store import Store


class FakeState:
    """What the domain fakes share: dicts instead of a store and maps (a domain with objects of its
    own keeps them in its fake: `FakeCpus.cpus`), failure injection, the calls made. Not
    thread-safe beyond what the tests need (one client)."""

    def __init__(self) -> None:
        self.intents: dict[tuple[str, str], IntentRecord] = {}  # (tenant, id) -> record
        self.slices: dict[tuple[str, str], SliceRecord] = {}
        self.attached: dict[str, str] = {}
        self.program_id = 1
        self.clock: dict[str, Any] = {"state": "none", "word_age_us": None}  # programs without the policers' clock
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
        record = self.intents.get(owner_and_id(who, name))
        if record is None:
            raise NotFound(f"no intent {name!r}")
        return record

    def _own_slice(self, who: Principal, name: str) -> SliceRecord:
        record = self.slices.get(owner_and_id(who, name))
        if record is None:
            raise NotFound(f"no slice {name!r}")
        return record

    def _insert(self, who: Principal, intent: Intent, source: str) -> IntentRecord:
        if (who.tenant, intent.id) in self.intents:
            raise Conflict(f"intent id {intent.id!r} is in use", field="id")
        self._refuse_same_match(intent)
        now = utc_now()
        record = IntentRecord(intent=intent, tenant=who.tenant, source=source, created_at=now, updated_at=now)
        self.intents[(who.tenant, intent.id)] = record
        return record

    def _refuse_same_match(self, intent: Intent, ignore: Optional[tuple[str, str]] = None) -> None:
        for other in self.intents.values():
            if intent_key(other) != ignore and same_match(other.intent, intent):
                raise Conflict(
                    f"intent {intent.id!r} has the same match as {other.intent.id!r}",
                    field="match",
                    conflicts=[{"kind": "duplicate", "intent_a": other.intent.id, "intent_b": intent.id}],
                )


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def owner_and_id(who: Principal, name: str) -> tuple[str, str]:
    """(tenant, id) a caller means: its own for a bare id; `<tenant>/<id>` is for admins only (for
    others it names nothing, like another tenant's object)."""
    tenant, _, object_id = name.rpartition("/")
    if not tenant:
        return who.tenant, object_id
    return (tenant, object_id) if who.is_admin else ("", name)


def intent_key(record: IntentRecord) -> tuple[str, str]:
    return record.tenant, record.intent.id


def same_match(a: Intent, b: Intent) -> bool:
    return a.match.model_dump() == b.match.model_dump()


def require_admin(who: Principal) -> None:
    # The API checks scopes first; a service must not rely on that.
    if not who.allows(Scope.ADMIN):
        raise Forbidden("needs scope 'admin'")
