"""The store's tables of MEC 011 and MEC 015 BWM (migrations of netapp.service.schema): application
instances, their traffic rules, DNS rules and bandwidth allocations as ETSI bodies. What a rule installs is in the intents table, as intents of the
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

# Schema version 9 (migration key 8): MEC 015 bandwidth allocations (their intents are in the
# intents table: a session's with source `mec015`, an application's are its rules' intents,
# policed), MEC 011 DNS rules, the application's lifecycle state (confirm_ready, a termination
# asked and not yet confirmed) and its termination subscriptions.
MEC_BWM_TABLES = (
    """CREATE TABLE mec_bw_allocations (
        allocation_id TEXT PRIMARY KEY,
        app_instance_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX mec_bw_allocations_by_application ON mec_bw_allocations (app_instance_id)",
    """CREATE TABLE mec_dns_rules (
        app_instance_id TEXT NOT NULL,
        dns_rule_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        body TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (app_instance_id, dns_rule_id)
    ) WITHOUT ROWID""",
    "ALTER TABLE mec_applications ADD COLUMN state TEXT NOT NULL DEFAULT 'INSTANTIATED'",
    "ALTER TABLE mec_applications ADD COLUMN termination TEXT",
    """CREATE TABLE mec_app_subscriptions (
        subscription_id TEXT PRIMARY KEY,
        app_instance_id TEXT NOT NULL,
        callback TEXT NOT NULL,
        created_at TEXT NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX mec_app_subscriptions_by_application ON mec_app_subscriptions (app_instance_id)",
)

# Schema version 11 (migration key 10): the AppD applied to each application instance, and which of
# its traffic rules, DNS rules and services came from it (netapp.mec.onboarding): applying the same
# AppD again changes nothing, a changed one replaces those and leaves the API's.
MEC_APPD_TABLES = (
    """CREATE TABLE mec_appds (
        app_instance_id TEXT PRIMARY KEY,
        appd_id TEXT NOT NULL,
        appd_version TEXT NOT NULL,
        digest TEXT NOT NULL,
        origin TEXT NOT NULL,
        applied_at TEXT NOT NULL
    ) WITHOUT ROWID""",
)

# Schema version 12 (migration key 11): when the graceful timeout of a termination or stop an
# administrator asked passes (netapp.mec.app_service), so that a restart of the NetApp resumes it
# instead of leaving the application's rules in force for ever.
MEC_GRACEFUL_DEADLINE = (
    "ALTER TABLE mec_applications ADD COLUMN termination_deadline TEXT",
)
