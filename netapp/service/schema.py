"""The store's schema (netapp.service.store): version 1, and the migrations from each version to the
next. A network function's tables come in a migration of their own, their statements in its package
(e.g. netapp.upf.schema)."""

from __future__ import annotations

from netapp.atsss.schema import (ATSSS_FREE_PAIRS, ATSSS_FREE_SLOTS, ATSSS_MTS_FLOWS, ATSSS_MTS_STATES, ATSSS_SUBFLOWS,
                                 ATSSS_TABLES)  # fmt: skip
from netapp.frer.schema import FRER_INTENT_OWNER, FRER_TABLES
from netapp.mec.schema import MEC_APPD_TABLES, MEC_BWM_TABLES, MEC_GRACEFUL_DEADLINE, MEC_TABLES
from netapp.mec.service_schema import SERVICE_TABLES
from netapp.routing.schema import ROUTING_TABLES
from netapp.upf.schema import UPF_TABLES

# Version 1. A later version adds a migration to MIGRATIONS instead of editing this.
SCHEMA_V1 = (
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    """CREATE TABLE intents (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        body TEXT NOT NULL,
        slice_id TEXT,
        source TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        revision INTEGER NOT NULL,
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID""",
    "CREATE INDEX intents_by_slice ON intents (tenant, slice_id) WHERE slice_id IS NOT NULL",
    """CREATE TABLE slices (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        spec TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        revision INTEGER NOT NULL,
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID""",
    "CREATE TABLE alternatives (id INTEGER PRIMARY KEY, body TEXT NOT NULL, updated_at TEXT NOT NULL)",
    "CREATE TABLE cpus (cpu INTEGER PRIMARY KEY, body TEXT NOT NULL, updated_at TEXT NOT NULL)",
    """CREATE TABLE idempotency_keys (
        tenant TEXT NOT NULL,
        key TEXT NOT NULL,
        intent_id TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        response TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        PRIMARY KEY (tenant, key)
    ) WITHOUT ROWID""",
    "CREATE INDEX idempotency_by_expiry ON idempotency_keys (expires_at)",
    "CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL, updated_at TEXT NOT NULL)",
    """CREATE TABLE attachments (
        interface TEXT PRIMARY KEY,
        mode TEXT NOT NULL,
        netns TEXT,
        updated_at TEXT NOT NULL
    )""",
)

# version -> statements that take the schema from that version to the next.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 2: what each tenant may install (netapp.tenancy), and what it holds, counted by triggers in
    # the same transactions as the rows (quotas are checked without counting rows).
    1: (
        """CREATE TABLE tenants (
            tenant TEXT PRIMARY KEY,
            spec TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            revision INTEGER NOT NULL
        ) WITHOUT ROWID""",
        """CREATE TABLE tenant_usage (
            tenant TEXT PRIMARY KEY,
            intents INTEGER NOT NULL DEFAULT 0,
            slices INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID""",
        """INSERT INTO tenant_usage (tenant, intents, slices)
            SELECT tenant, sum(intents), sum(slices) FROM (
                SELECT tenant, count(*) AS intents, 0 AS slices FROM intents GROUP BY tenant
                UNION ALL SELECT tenant, 0, count(*) FROM slices GROUP BY tenant
            ) GROUP BY tenant""",
        *(
            f"""CREATE TRIGGER {table}_counted_{event} AFTER {event} ON {table} BEGIN
                INSERT INTO tenant_usage (tenant, {table}) VALUES ({row}.tenant, {step})
                ON CONFLICT (tenant) DO UPDATE SET {table} = {table} + {step};
            END"""
            for table in ("intents", "slices")
            for event, row, step in (("insert", "new", 1), ("delete", "old", -1))
        ),
    ),
    2: UPF_TABLES,  # 3: the UPF's associations, sessions and allocators (netapp.upf.store)
    3: ROUTING_TABLES,  # 4: the routes of the private routing tables (netapp.routing.store)
    4: FRER_TABLES,  # 5: the protected streams of FRER (netapp.frer.store)
    5: MEC_TABLES,  # 6: MEC 011 application instances and their traffic rules (netapp.mec.store)
    6: FRER_INTENT_OWNER,  # 7: the intent a protected stream is the protection of (netapp.frer.protect)
    7: ATSSS_TABLES,  # 8: ATSSS sessions, their path slots and MEC 015 MTS sessions (netapp.atsss.store)
    8: MEC_BWM_TABLES,  # 9: MEC 015 bandwidth allocations, MEC 011 DNS rules, lifecycle, subscriptions (netapp.mec)
    9: SERVICE_TABLES,  # 10: MEC 011 services of applications, their subscriptions (netapp.mec.service_store)
    10: MEC_APPD_TABLES,  # 11: the AppD applied to each MEC application instance (netapp.mec.appd_store)
    11: MEC_GRACEFUL_DEADLINE,  # 12: when a MEC 011 termination's graceful timeout passes (netapp.mec.app_service)
    12: ATSSS_SUBFLOWS,  # 13: each ATSSS session path's subflow, by its key (netapp.atsss.store)
    13: ATSSS_FREE_SLOTS,  # 14: the ATSSS path slots freed below the highest given (netapp.atsss.store)
    14: ATSSS_MTS_FLOWS,  # 15: MTS sessions with flow filters, several a UE (netapp.atsss.flows)
    15: ATSSS_MTS_STATES,  # 16: the scheduler state slot of each MTS session's flows (netapp.atsss.flows)
    16: ATSSS_FREE_PAIRS,  # 17: the odd free ATSSS path slots, where a free pair starts (netapp.atsss.store)
}

SCHEMA_VERSION = len(MIGRATIONS) + 1
