"""The store's tables of MEC 011 service management (a migration of netapp.service.schema): the
services applications registered, as ETSI ServiceInfo bodies with the application and tenant that
own them, and the applications' service availability subscriptions (netapp.mec.service_store)."""

from __future__ import annotations

SERVICE_TABLES = (
    """CREATE TABLE mec_services (
        ser_instance_id TEXT PRIMARY KEY,
        app_instance_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        body TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX mec_services_by_app ON mec_services (app_instance_id)",
    """CREATE TABLE mec_service_subscriptions (
        subscription_id TEXT PRIMARY KEY,
        app_instance_id TEXT NOT NULL,
        tenant TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at TEXT NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX mec_service_subscriptions_by_app ON mec_service_subscriptions (app_instance_id)",
)
