"""The SQLite store: what it keeps across a reopen, its journal and sync modes, its schema version,
transactions that commit or roll back as a whole, idempotency keys that expire."""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import timedelta

import pytest

from netapp.forwarding.models import AlternativeGroup
from netapp.steering.models import CpuSpec
from netapp.service.contract import IntentFilter, IntentRecord, SliceRecord
from netapp.service.schema import SCHEMA_VERSION
from netapp.service.store import CHECKPOINT_EVERY, WAL_BACKSTOP_PAGES, Attachment, SchemaTooNew, Store
from tests.utils.service import Clock, intent, slice_spec

NOW = Clock().now


def record(intent_id: str, tenant: str = "alice", **fields) -> IntentRecord:
    return IntentRecord(intent=intent(intent_id), tenant=tenant, created_at=NOW, updated_at=NOW, **fields)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "state" / "netapp.db"


@pytest.fixture
def store(path):
    opened = Store.open(path)
    yield opened
    opened.close()


def fill(store: Store) -> None:
    with store.transaction():
        store.insert_intent(record("a"))
        store.insert_intent(record("a", tenant="bob", source="legacy"))
        store.insert_intent(record("embb-vni-1093", slice_id="embb", source="slice"))
        spec = slice_spec()
        store.put_slice(SliceRecord(spec=spec, tenant="alice", intent_ids=[], created_at=NOW, updated_at=NOW))
        store.put_alternative(
            AlternativeGroup.model_validate({"id": 3, "members": [{"mac": "02:00:00:00:00:09"}]}), NOW
        )
        store.put_cpu(CpuSpec(cpu=1, capacity_pps=1000), NOW)
        store.remember_idempotent("alice", "key-1", "hash", record("a"), NOW, NOW + timedelta(hours=1))
        store.put_setting("snapshot", {"instance": "default"}, NOW)
        store.put_attachment(Attachment("n3", "native", "node"), NOW)


def test_given_a_filled_store_when_reopened_then_everything_is_still_there(path):
    first = Store.open(path)
    fill(first)
    first.close()

    again = Store.open(path)

    assert [(r.tenant, r.intent.id, r.source) for r in again.all_intents()] == [
        ("alice", "a", "native"),
        ("alice", "embb-vni-1093", "slice"),
        ("bob", "a", "legacy"),
    ]
    assert again.get_intent("alice", "a") == record("a")
    assert again.get_slice("alice", "embb").intent_ids == ["embb-vni-1093"]
    assert [group.id for group in again.list_alternatives()] == [3]
    assert again.list_cpus() == [CpuSpec(cpu=1, capacity_pps=1000)]
    assert again.find_idempotent("alice", "key-1", NOW).record == record("a")
    assert again.get_setting("snapshot") == {"instance": "default"}
    assert again.list_attachments() == [Attachment("n3", "native", "node")]
    again.close()


def test_the_store_runs_in_wal_mode_with_full_sync_by_default(path):
    full = Store.open(path)
    assert (full.pragma("journal_mode"), full.pragma("synchronous")) == ("wal", 2)
    assert full.pragma("wal_autocheckpoint") == WAL_BACKSTOP_PAGES, "a commit checkpoints only as a backstop"
    full.close()
    normal = Store.open(path, synchronous="NORMAL")
    assert normal.pragma("synchronous") == 1
    normal.close()
    with pytest.raises(ValueError, match="synchronous"):
        Store.open(path, synchronous="OFF")


def settings_without_wal(path, tmp_path) -> list[str]:
    """The settings' names in the database file alone, without its WAL: what checkpoints copied
    back into it (none while not even the schema was)."""
    copy = tmp_path / "alone.db"
    copy.write_bytes(path.read_bytes())
    with contextlib.closing(sqlite3.connect(str(copy))) as alone:
        if not alone.execute("SELECT 1 FROM sqlite_master WHERE name = 'settings'").fetchall():
            return []
        return [name for (name,) in alone.execute("SELECT name FROM settings ORDER BY name")]


def test_checkpoints_are_made_by_the_checkpointer_not_by_a_commit(path, tmp_path):
    store = Store.open(path)

    def commit(name: str) -> None:
        with store.transaction():
            store.put_setting(name, 1, NOW)

    for index in range(CHECKPOINT_EVERY - 1):
        commit(f"s{index}")
    assert store.checkpointer.runs == 0, "fewer commits than CHECKPOINT_EVERY: no checkpoint yet"
    assert settings_without_wal(path, tmp_path) == []
    commit("last")  # the CHECKPOINT_EVERY-th commit wakes the checkpointer
    assert store.checkpointer.wait_runs(1, timeout_s=30), "the checkpointer did not run"
    assert settings_without_wal(path, tmp_path) == sorted(["last", *(f"s{index}" for index in range(CHECKPOINT_EVERY - 1))])
    assert store.checkpointer.failures == 0
    store.close()


def test_a_new_store_has_the_current_schema_version(store):
    assert store.schema_version() == SCHEMA_VERSION


def test_given_a_database_from_a_newer_netapp_then_opening_it_is_refused_with_both_versions(path):
    Store.open(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))

    with pytest.raises(SchemaTooNew) as refused:
        Store.open(path)

    assert f"schema version {SCHEMA_VERSION + 1}" in str(refused.value)
    assert f"({SCHEMA_VERSION})" in str(refused.value)


def test_given_an_error_inside_a_transaction_then_none_of_its_writes_stay(store):
    with pytest.raises(RuntimeError):
        with store.transaction():
            store.insert_intent(record("a"))
            store.put_cpu(CpuSpec(cpu=1), NOW)
            raise RuntimeError("midway")

    assert store.all_intents() == [] and store.list_cpus() == []


def test_given_an_error_inside_a_savepoint_then_only_its_writes_go(store):
    with store.transaction():
        with store.savepoint():
            store.insert_intent(record("a"))
        with pytest.raises(RuntimeError):
            with store.savepoint():
                store.insert_intent(record("b"))
                raise RuntimeError("midway")
        with store.savepoint():
            store.insert_intent(record("c"))

    assert [r.intent.id for r in store.all_intents()] == ["a", "c"]


def test_a_transaction_holds_the_write_lock_from_its_begin(store, path):
    """BEGIN IMMEDIATE: another writer cannot start while a change is in progress."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    with store.transaction():
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")
    other.execute("BEGIN IMMEDIATE")
    other.execute("ROLLBACK")
    other.close()


def test_intents_are_unique_per_tenant(store):
    with store.transaction():
        store.insert_intent(record("a"))
        store.insert_intent(record("a", tenant="bob"))
    with pytest.raises(Exception, match="UNIQUE"):
        with store.transaction():
            store.insert_intent(record("a"))


def test_listing_filters_by_tenant_slice_action_and_source_and_pages(store):
    fill(store)
    with store.transaction():
        for n in range(5):
            dropping = intent(f"drop-{n}", action={"type": "drop"})
            store.insert_intent(IntentRecord(intent=dropping, tenant="alice", created_at=NOW, updated_at=NOW))

    def ids(**conditions) -> list[str]:
        return [r.intent.id for r in store.list_intents(IntentFilter(**conditions)).items]

    assert ids(tenant="bob") == ["a"]
    assert ids(tenant="alice", slice_id="embb") == ["embb-vni-1093"]
    assert ids(action="drop", limit=2, offset=1) == ["drop-1", "drop-2"]
    assert store.list_intents(IntentFilter(action="drop", limit=2)).total == 5
    assert ids(source="legacy") == ["a"]


def test_an_idempotency_key_expires_and_is_purged(store):
    with store.transaction():
        store.remember_idempotent("alice", "k", "hash", record("a"), NOW, NOW + timedelta(hours=1))
    later = NOW + timedelta(hours=1, seconds=1)

    assert store.find_idempotent("alice", "k", NOW + timedelta(minutes=59)) is not None
    assert store.find_idempotent("bob", "k", NOW) is None
    assert store.find_idempotent("alice", "k", later) is None
    with store.transaction():
        assert store.purge_idempotency(later) == 1
