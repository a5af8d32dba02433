"""The store's tables of MEC 011 (a migration of netapp.service.schema): application instances and
their traffic rules as ETSI bodies. What a rule installs is in the intents table, as intents of the
application's tenant with source `mec011` (netapp.mec.compiler), so that the reconcile puts them
back like any intent's."""

from __future__ import annotations

MEC_TABLES = (
    """CREATE TABLE mec_applications (
        app_instance_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        app_name TEXT,
        revision INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX mec_applications_by_tenant ON mec_applications (tenant)",
    """CREATE TABLE mec_traffic_rules (
        app_instance_id TEXT NOT NULL,
        traffic_rule_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        body TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (app_instance_id, traffic_rule_id)
    ) WITHOUT ROWID""",
)
