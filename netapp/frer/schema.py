"""The store's table of the protected streams (a migration of netapp.service.schema): one row a
stream, by tenant and name, with the handle the node gave it (unique: a slot of the FRER maps)."""

from __future__ import annotations

FRER_TABLES = (
    """CREATE TABLE frer_streams (
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        handle INTEGER NOT NULL UNIQUE,
        body TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        revision INTEGER NOT NULL,
        PRIMARY KEY (tenant, name)
    ) WITHOUT ROWID""",
)
