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

# Each session path's subflow (this node's address, the UE's address on the access, the ports), the
# key its uplink packets are found by (dpp_atsss_uplink), so that a new session's subflows are found
# taken or free by the key (not by reading every session's paths: with 10,000 sessions that read
# made each create some 100 ms). The rows of the sessions stored before are filled in.
ATSSS_SUBFLOWS = (
    """CREATE TABLE atsss_subflows (
        local TEXT NOT NULL,
        peer TEXT NOT NULL,
        local_port INTEGER NOT NULL,
        peer_port INTEGER NOT NULL,
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        PRIMARY KEY (local, peer, local_port, peer_port)
    ) WITHOUT ROWID""",
    "CREATE INDEX atsss_subflows_by_session ON atsss_subflows (tenant, name)",
    """INSERT OR IGNORE INTO atsss_subflows (local, peer, local_port, peer_port, tenant, name)
        SELECT json_extract(p.value, '$.local'), json_extract(p.value, '$.peer'),
               json_extract(p.value, '$.local_port'), json_extract(p.value, '$.peer_port'), s.tenant, s.name
        FROM atsss_sessions s, json_each(s.body, '$.paths') p""",
)
