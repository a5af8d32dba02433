"""The store's table of the protected streams (migrations of netapp.service.schema): one row a
stream, by tenant and name, with the handle the node gave it (unique: a slot of the FRER maps), and
the intent that owns it when it is an intent's protection (netapp.frer.protect)."""

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

# The intent (of the stream's tenant, by id) whose action.protect the stream is; null: made directly.
FRER_INTENT_OWNER = ("ALTER TABLE frer_streams ADD COLUMN intent TEXT",)
