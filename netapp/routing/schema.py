"""The store's table of the private routes (a migration of netapp.service.schema): one row a route,
by network instance and prefix."""

from __future__ import annotations

ROUTING_TABLES = (
    """CREATE TABLE routes (
        instance TEXT NOT NULL,
        prefix TEXT NOT NULL,
        gateway TEXT,
        device TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (instance, prefix)
    ) WITHOUT ROWID""",
)
