"""The desired state, durably: intents, slices, alternative groups, CPUs, idempotency keys, settings.

SQLite from the standard library, one file (Settings.db_path), in WAL mode so that readers never
wait for the writer. Every change runs in `transaction()`, which begins with BEGIN IMMEDIATE: the
write lock is taken up front, so a second process on the same file waits (busy_timeout) instead of
failing halfway through a change, and the service's map writes happen while no one else can commit.

Durability: synchronous=FULL by default. WAL with NORMAL already survives the process dying at
any point (kill -9 included), but may lose the last commits on power loss; FULL syncs the WAL on
every COMMIT, so an acknowledged change survives that too. The BPF maps do not survive power loss,
so after it the store is all there is to rebuild them from: acknowledged changes must be in it.
The cost, measured on the development VM: 0.17 ms median per commit (NORMAL: 0.01 ms), well inside
the 10 ms budget of a change; concurrent single creates share one commit, so one sync
(netapp.service.group_commit). Where the disk still syncs too slowly, open the store with
synchronous="NORMAL" and accept losing the last changes on power loss.

Checkpoints (the WAL's pages copied back into the database file, then a sync of that file) are made
on a thread of their own every CHECKPOINT_EVERY commits, CHECKPOINT_INTERVAL_S apart at least
(netapp.service.checkpoint), so that no COMMIT waits for one: made in the COMMIT that found the WAL
past its mark, they took 2-6 ms where a commit takes 0.6 (bench/README.md, `bench/pfcp.py`).
SQLite's own checkpoint stays as a backstop at WAL_BACKSTOP_PAGES, should that thread fall behind.

The schema is versioned (table schema_version); a database written by a newer NetApp is refused.
Timestamps are ISO 8601 strings in UTC, which sort as they compare.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
import threading
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from netapp.forwarding.models import AlternativeGroup
from netapp.intents.models import Intent
from netapp.service.checkpoint import Checkpointer
from netapp.service.contract import IntentFilter, IntentRecord, Page, SliceRecord, SliceSpec
from netapp.service.schema import MIGRATIONS, SCHEMA_V1, SCHEMA_VERSION
from netapp.steering.models import CpuSpec
from netapp.tenancy.models import TenantRecord, TenantSpec

BUSY_TIMEOUT_MS = 5000
CHECKPOINT_EVERY = 8  # commits between the checkpointer's runs (one in a few: each syncs the file too)
CHECKPOINT_INTERVAL_S = 0.02  # and at least this long between them: 50 a second at most, however small the commits
WAL_BACKSTOP_PAGES = 2000  # a COMMIT that finds the WAL longer checkpoints it itself (see above)
SYNCHRONOUS_MODES = ("NORMAL", "FULL")

_INTENT_COLUMNS = "tenant, id, body, slice_id, source, created_at, updated_at, revision"


class StoreError(Exception):
    """The store cannot be opened or written."""


class SchemaTooNew(StoreError):
    """The database was written by a newer NetApp, whose schema this one does not know."""


@dataclass(frozen=True)
class IdempotentCreate:
    """What an earlier create with the same idempotency key asked for and answered."""

    request_hash: str
    records: tuple[IntentRecord, ...]  # one for a single create; the batch's, in order, for a batch

    @property
    def record(self) -> IntentRecord:
        return self.records[0]


@dataclass(frozen=True)
class Attachment:
    interface: str
    mode: str
    netns: Optional[str] = None


class Transaction:
    """An open BEGIN IMMEDIATE transaction; commit() ends it (raising StoreError if it cannot)."""

    def __init__(self, connection: sqlite3.Connection, committed: Callable[[], None]):
        self._connection = connection
        self._committed = committed  # told after each COMMIT (the checkpointer's wake-up)
        self.done = False

    def commit(self) -> None:
        try:
            self._connection.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"commit: {exc}") from exc
        self.done = True
        self._committed()

    def roll_back(self) -> None:
        if not self.done:
            self.done = True
            with contextlib.suppress(sqlite3.Error):  # nothing left to roll back is fine
                self._connection.execute("ROLLBACK")


class Store:
    """The SQLite store. One connection, used by one thread at a time (the store's own lock)."""

    def __init__(self, connection: sqlite3.Connection, path: Path):
        self._connection = connection
        self.path = path
        self._lock = threading.RLock()
        self.checkpointer: Optional[Checkpointer] = None  # started once the store is configured

    @classmethod
    def open(cls, path: Path, *, synchronous: str = "FULL") -> "Store":
        """Open (creating if needed) the store at `path`; SchemaTooNew when a newer NetApp wrote it."""
        if synchronous not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous: one of {', '.join(SYNCHRONOUS_MODES)}, not {synchronous!r}")
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # isolation_level None: no implicit transactions, we say BEGIN IMMEDIATE ourselves.
            connection = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"open {path}: {exc}") from exc
        store = cls(connection, path)
        try:
            store._configure(synchronous)
            store._prepare_schema()
            store.checkpointer = Checkpointer(path, BUSY_TIMEOUT_MS, CHECKPOINT_EVERY, CHECKPOINT_INTERVAL_S)
        except BaseException:
            connection.close()
            raise
        return store

    def close(self) -> None:
        with self._lock:
            if self.checkpointer is not None:
                self.checkpointer.close()
                self.checkpointer = None
            self._connection.close()

    def _configure(self, synchronous: str) -> None:
        mode = self._connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise StoreError(f"{self.path}: journal mode WAL refused (got {mode})")
        self._connection.execute(f"PRAGMA synchronous={synchronous}")
        self._connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self._connection.execute(f"PRAGMA wal_autocheckpoint={WAL_BACKSTOP_PAGES}")

    def _prepare_schema(self) -> None:
        with self.transaction():
            version = self.schema_version()
            if version is None:
                for statement in SCHEMA_V1:
                    self._connection.execute(statement)
                self._connection.execute("INSERT INTO schema_version VALUES (1)")
                version = 1
            if version > SCHEMA_VERSION:
                raise SchemaTooNew(
                    f"{self.path} has schema version {version}, newer than this NetApp's "
                    f"({SCHEMA_VERSION}): run the NetApp version that wrote it, or another state_dir"
                )
            self._migrate(version)

    def _migrate(self, version: int) -> None:
        while version < SCHEMA_VERSION:
            if version not in MIGRATIONS:
                raise StoreError(f"{self.path}: no migration from schema version {version}")
            for statement in MIGRATIONS[version]:
                self._connection.execute(statement)
            version += 1
        self._connection.execute("UPDATE schema_version SET version = ?", (version,))

    def schema_version(self) -> Optional[int]:
        with self._lock:
            exists = self._connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
            ).fetchone()
            if not exists:
                return None
            row = self._connection.execute("SELECT version FROM schema_version").fetchone()
            return None if row is None else int(row[0])

    def pragma(self, name: str) -> Any:
        with self._lock:
            return self._connection.execute(f"PRAGMA {name}").fetchone()[0]

    # --- transactions ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """BEGIN IMMEDIATE ... COMMIT (when the block ends and it did not commit itself); ROLLBACK
        on an exception. Holds the store's lock throughout, so the block sees only its own writes."""
        with self._lock:
            try:
                self._connection.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"begin: {exc}") from exc
            transaction = Transaction(self._connection, self._committed)
            try:
                yield transaction
                if not transaction.done:
                    transaction.commit()
            except BaseException:
                transaction.roll_back()
                raise

    def _committed(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.committed()

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[None]:
        """A part of the open transaction that can fail alone: on an exception its writes are undone
        and the transaction's other writes stay (SAVEPOINT ... ROLLBACK TO ... RELEASE)."""
        with self._lock:
            self.execute("SAVEPOINT part")
            try:
                yield
            except BaseException:
                self.execute("ROLLBACK TO part")
                self.execute("RELEASE part")
                raise
            self.execute("RELEASE part")

    def execute(self, sql: str, parameters: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """One statement under the store's lock, its errors as StoreError. A network function's
        store module (netapp.upf.store) runs its own tables' statements through it."""
        with self._lock:
            try:
                return self._connection.execute(sql, parameters)
            except sqlite3.Error as exc:
                raise StoreError(f"{sql.split()[0].lower()}: {exc}") from exc

    def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """One statement for each of the rows, as `execute` runs one."""
        with self._lock:
            try:
                self._connection.executemany(sql, rows)
            except sqlite3.Error as exc:
                raise StoreError(f"{sql.split()[0].lower()}: {exc}") from exc

    # --- intents ---------------------------------------------------------------------------------

    def get_intent(self, tenant: str, intent_id: str) -> Optional[IntentRecord]:
        row = self.execute(
            f"SELECT {_INTENT_COLUMNS} FROM intents WHERE tenant = ? AND id = ?", (tenant, intent_id)
        ).fetchone()
        return None if row is None else _intent_record(row)

    def list_intents(self, flt: IntentFilter) -> Page[IntentRecord]:
        """A page of intents in (tenant, id) order; flt.tenant None: every tenant's."""
        where, parameters = _intent_conditions(flt)
        total = self.execute(f"SELECT count(*) FROM intents{where}", parameters).fetchone()[0]
        rows = self.execute(
            f"SELECT {_INTENT_COLUMNS} FROM intents{where} ORDER BY tenant, id LIMIT ? OFFSET ?",
            (*parameters, flt.limit, flt.offset),
        ).fetchall()
        return Page([_intent_record(row) for row in rows], total, flt.offset, flt.limit)

    def all_intents(self) -> list[IntentRecord]:
        rows = self.execute(f"SELECT {_INTENT_COLUMNS} FROM intents ORDER BY tenant, id").fetchall()
        return [_intent_record(row) for row in rows]

    def tenant_intents(self, tenant: str) -> list[IntentRecord]:
        rows = self.execute(f"SELECT {_INTENT_COLUMNS} FROM intents WHERE tenant = ? ORDER BY id", (tenant,))
        return [_intent_record(row) for row in rows.fetchall()]

    def slice_intents(self, tenant: str, slice_id: str) -> list[IntentRecord]:
        # INDEXED BY: left to itself, SQLite scans every intent of the tenant (its primary key
        # range) rather than look rows up through the partial index, which costs O(tenant's
        # intents) per slice change: 2 ms at 15,000 intents, 0.1 ms through the index.
        rows = self.execute(
            f"SELECT {_INTENT_COLUMNS} FROM intents INDEXED BY intents_by_slice "
            "WHERE tenant = ? AND slice_id = ? ORDER BY id",
            (tenant, slice_id),
        ).fetchall()
        return [_intent_record(row) for row in rows]

    def intent_slices(self, tenant: Optional[str]) -> dict[tuple[str, str], str]:
        """(tenant, intent id) -> slice id, for the intents that belong to a slice."""
        sql = "SELECT tenant, id, slice_id FROM intents WHERE slice_id IS NOT NULL"
        parameters: tuple[Any, ...] = ()
        if tenant is not None:
            sql, parameters = sql + " AND tenant = ?", (tenant,)
        return {(row[0], row[1]): row[2] for row in self.execute(sql, parameters)}

    def count_intents(self) -> int:
        return self.execute("SELECT count(*) FROM intents").fetchone()[0]

    def insert_intent(self, record: IntentRecord) -> None:
        self.execute(
            f"INSERT INTO intents ({_INTENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", _intent_row(record)
        )

    def update_intent(self, record: IntentRecord) -> None:
        tenant, intent_id, *rest = _intent_row(record)
        self.execute(
            "UPDATE intents SET body = ?, slice_id = ?, source = ?, created_at = ?, updated_at = ?, "
            "revision = ? WHERE tenant = ? AND id = ?",
            (*rest, tenant, intent_id),
        )

    def delete_intent(self, tenant: str, intent_id: str) -> bool:
        cursor = self.execute("DELETE FROM intents WHERE tenant = ? AND id = ?", (tenant, intent_id))
        return cursor.rowcount > 0

    # --- slices ----------------------------------------------------------------------------------

    def get_slice(self, tenant: str, slice_id: str) -> Optional[SliceRecord]:
        row = self.execute(
            "SELECT tenant, id, spec, created_at, updated_at, revision FROM slices "
            "WHERE tenant = ? AND id = ?",
            (tenant, slice_id),
        ).fetchone()
        return None if row is None else self._slice_record(row)

    def list_slices(self, tenant: Optional[str], offset: int, limit: int) -> Page[SliceRecord]:
        where, parameters = (" WHERE tenant = ?", (tenant,)) if tenant is not None else ("", ())
        total = self.execute(f"SELECT count(*) FROM slices{where}", parameters).fetchone()[0]
        rows = self.execute(
            "SELECT tenant, id, spec, created_at, updated_at, revision FROM slices"
            f"{where} ORDER BY tenant, id LIMIT ? OFFSET ?",
            (*parameters, limit, offset),
        ).fetchall()
        return Page([self._slice_record(row) for row in rows], total, offset, limit)

    def put_slice(self, record: SliceRecord) -> None:
        self.execute(
            "INSERT INTO slices (tenant, id, spec, created_at, updated_at, revision) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, id) DO UPDATE SET spec = excluded.spec, "
            "updated_at = excluded.updated_at, revision = excluded.revision",
            (
                record.tenant,
                record.spec.id,
                record.spec.model_dump_json(),
                record.created_at.isoformat(),
                record.updated_at.isoformat(),
                record.revision,
            ),
        )

    def delete_slice(self, tenant: str, slice_id: str) -> bool:
        cursor = self.execute("DELETE FROM slices WHERE tenant = ? AND id = ?", (tenant, slice_id))
        return cursor.rowcount > 0

    def _slice_record(self, row: tuple[Any, ...]) -> SliceRecord:
        tenant, slice_id, spec, created_at, updated_at, revision = row
        intent_ids = [
            intent_row[0]
            for intent_row in self.execute(
                "SELECT id FROM intents WHERE tenant = ? AND slice_id = ? ORDER BY id", (tenant, slice_id)
            )
        ]
        return SliceRecord(
            spec=SliceSpec.model_validate_json(spec),
            tenant=tenant,
            intent_ids=intent_ids,
            created_at=datetime.fromisoformat(created_at),
            updated_at=datetime.fromisoformat(updated_at),
            revision=revision,
        )

    # --- alternative groups and CPUs -------------------------------------------------------------

    def list_alternatives(self) -> list[AlternativeGroup]:
        rows = self.execute("SELECT body FROM alternatives ORDER BY id").fetchall()
        return [AlternativeGroup.model_validate_json(row[0]) for row in rows]

    def get_alternative(self, group_id: int) -> Optional[AlternativeGroup]:
        row = self.execute("SELECT body FROM alternatives WHERE id = ?", (group_id,)).fetchone()
        return None if row is None else AlternativeGroup.model_validate_json(row[0])

    def put_alternative(self, group: AlternativeGroup, now: datetime) -> None:
        self.execute(
            "INSERT OR REPLACE INTO alternatives (id, body, updated_at) VALUES (?, ?, ?)",
            (group.id, group.model_dump_json(), now.isoformat()),
        )

    def delete_alternative(self, group_id: int) -> bool:
        return self.execute("DELETE FROM alternatives WHERE id = ?", (group_id,)).rowcount > 0

    # --- tenants ---------------------------------------------------------------------------------

    def get_tenant(self, tenant: str) -> Optional[TenantRecord]:
        row = self.execute(
            "SELECT tenant, spec, updated_at, revision FROM tenants WHERE tenant = ?", (tenant,)
        ).fetchone()
        return None if row is None else _tenant_record(row)

    def list_tenants(self) -> list[TenantRecord]:
        rows = self.execute("SELECT tenant, spec, updated_at, revision FROM tenants ORDER BY tenant").fetchall()
        return [_tenant_record(row) for row in rows]

    def put_tenant(self, record: TenantRecord) -> None:
        self.execute(
            "INSERT OR REPLACE INTO tenants (tenant, spec, updated_at, revision) VALUES (?, ?, ?, ?)",
            (record.tenant, record.spec.model_dump_json(), record.updated_at.isoformat(), record.revision),
        )

    def delete_tenant(self, tenant: str) -> bool:
        return self.execute("DELETE FROM tenants WHERE tenant = ?", (tenant,)).rowcount > 0

    def tenant_usage(self, tenant: str) -> tuple[int, int]:
        """(intents, slices) the tenant holds, slice members included in intents."""
        row = self.execute("SELECT intents, slices FROM tenant_usage WHERE tenant = ?", (tenant,)).fetchone()
        return (0, 0) if row is None else (row[0], row[1])

    def list_cpus(self) -> list[CpuSpec]:
        rows = self.execute("SELECT body FROM cpus ORDER BY cpu").fetchall()
        return [CpuSpec.model_validate_json(row[0]) for row in rows]

    def get_cpu(self, cpu: int) -> Optional[CpuSpec]:
        row = self.execute("SELECT body FROM cpus WHERE cpu = ?", (cpu,)).fetchone()
        return None if row is None else CpuSpec.model_validate_json(row[0])

    def put_cpu(self, spec: CpuSpec, now: datetime) -> None:
        self.execute(
            "INSERT OR REPLACE INTO cpus (cpu, body, updated_at) VALUES (?, ?, ?)",
            (spec.cpu, spec.model_dump_json(), now.isoformat()),
        )

    def delete_cpu(self, cpu: int) -> bool:
        return self.execute("DELETE FROM cpus WHERE cpu = ?", (cpu,)).rowcount > 0

    # --- idempotency keys ------------------------------------------------------------------------

    def find_idempotent(self, tenant: str, key: str, now: datetime) -> Optional[IdempotentCreate]:
        """The unexpired earlier create of this tenant with this key, if any."""
        row = self.execute(
            "SELECT request_hash, response FROM idempotency_keys "
            "WHERE tenant = ? AND key = ? AND expires_at > ?",
            (tenant, key, now.isoformat()),
        ).fetchone()
        if row is None:
            return None
        if row[1].startswith("["):  # a batch: the records as a JSON array
            records = tuple(IntentRecord.model_validate(item) for item in json.loads(row[1]))
        else:
            records = (IntentRecord.model_validate_json(row[1]),)
        return IdempotentCreate(row[0], records)

    def remember_idempotent(
        self,
        tenant: str,
        key: str,
        request_hash: str,
        records: "IntentRecord | list[IntentRecord]",
        now: datetime,
        expires: datetime,
    ) -> None:
        """Remember a create's answer: one record as before, a batch's records as a JSON array."""
        if isinstance(records, IntentRecord):
            records = [records]
        if len(records) == 1:
            response = records[0].model_dump_json()
        else:
            response = "[" + ",".join(record.model_dump_json() for record in records) + "]"
        self.execute(
            "INSERT OR REPLACE INTO idempotency_keys "
            "(tenant, key, intent_id, request_hash, response, created_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                tenant,
                key,
                records[0].intent.id,
                request_hash,
                response,
                now.isoformat(),
                expires.isoformat(),
            ),
        )

    def purge_idempotency(self, now: datetime) -> int:
        """Forget expired keys; returns how many."""
        return self.execute(
            "DELETE FROM idempotency_keys WHERE expires_at <= ?", (now.isoformat(),)
        ).rowcount

    # --- settings and attachments ----------------------------------------------------------------

    def put_setting(self, name: str, value: Any, now: datetime) -> None:
        self.execute(
            "INSERT OR REPLACE INTO settings (name, value, updated_at) VALUES (?, ?, ?)",
            (name, json.dumps(value, sort_keys=True), now.isoformat()),
        )

    def get_setting(self, name: str) -> Any:
        row = self.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()
        return None if row is None else json.loads(row[0])

    def list_attachments(self) -> list[Attachment]:
        rows = self.execute("SELECT interface, mode, netns FROM attachments ORDER BY interface").fetchall()
        return [Attachment(*row) for row in rows]

    def put_attachment(self, attachment: Attachment, now: datetime) -> None:
        self.execute(
            "INSERT OR REPLACE INTO attachments (interface, mode, netns, updated_at) VALUES (?, ?, ?, ?)",
            (attachment.interface, attachment.mode, attachment.netns, now.isoformat()),
        )

    def delete_attachment(self, interface: str) -> bool:
        return self.execute("DELETE FROM attachments WHERE interface = ?", (interface,)).rowcount > 0


def _intent_conditions(flt: IntentFilter) -> tuple[str, tuple[Any, ...]]:
    conditions, parameters = [], []
    for column, value in (("tenant", flt.tenant), ("slice_id", flt.slice_id), ("source", flt.source)):
        if value is not None:
            conditions.append(f"{column} = ?")
            parameters.append(value)
    if flt.action is not None:
        conditions.append("json_extract(body, '$.action.type') = ?")
        parameters.append(flt.action)
    where = " WHERE " + " AND ".join(conditions) if conditions else ""
    return where, tuple(parameters)


def _tenant_record(row: tuple[Any, ...]) -> TenantRecord:
    tenant, spec, updated_at, revision = row
    return TenantRecord(
        tenant=tenant,
        spec=_tenant_spec(spec),
        updated_at=datetime.fromisoformat(updated_at),
        revision=revision,
    )


@functools.lru_cache(maxsize=256)
def _tenant_spec(text: str) -> TenantSpec:
    """A tenant's record as stored, parsed once: a change reads it for its grants and again for its
    quotas, and its grants may be long. Keyed by the text, so a changed record is parsed anew; the
    spec is shared, and nothing changes a spec in place."""
    return TenantSpec.model_validate_json(text)


def _intent_row(record: IntentRecord) -> tuple[Any, ...]:
    return (
        record.tenant,
        record.intent.id,
        record.intent.model_dump_json(),
        record.slice_id,
        record.source,
        record.created_at.isoformat(),
        record.updated_at.isoformat(),
        record.revision,
    )


def _intent_record(row: tuple[Any, ...]) -> IntentRecord:
    tenant, _, body, slice_id, source, created_at, updated_at, revision = row
    return IntentRecord(
        intent=Intent.model_validate_json(body),
        tenant=tenant,
        slice_id=slice_id,
        source=source,
        created_at=datetime.fromisoformat(created_at),
        updated_at=datetime.fromisoformat(updated_at),
        revision=revision,
    )
