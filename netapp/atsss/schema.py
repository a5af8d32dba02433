"""The store's tables of ATSSS (a migration of netapp.service.schema): the sessions, one row a
session by tenant and name, one a UE (a UE's downlink has one scheduler); the path slots the node
gave them (unique: a slot of dpp_atsss_paths); the MEC 015 MTS sessions steering them, one a UE."""

from __future__ import annotations

ATSSS_TABLES = (
    """CREATE TABLE atsss_sessions (
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        ue TEXT NOT NULL UNIQUE,
        body TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        revision INTEGER NOT NULL,
        PRIMARY KEY (tenant, name)
    ) WITHOUT ROWID""",
    """CREATE TABLE atsss_path_slots (
        slot INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        position INTEGER NOT NULL,
        UNIQUE (tenant, name, position)
    )""",
    """CREATE TABLE atsss_mts_sessions (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        ue TEXT NOT NULL UNIQUE,
        body TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID""",
)
