"""The store's tables of ATSSS (a migration of netapp.service.schema): the sessions, one row a
session by tenant and name, one a UE (a UE's downlink has one scheduler); the path slots the node
gave them (unique: a slot of dpp_atsss_paths); the MEC 015 MTS sessions steering them, one a UE;
the subflows of the paths and the slots freed (migrations 12 and 13); MTS sessions with flow filters
(14) and their flows' scheduler state slots (15)."""

from __future__ import annotations

from netapp.atsss.abi import MAX_FLOW_STATES

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

# The path slots no path holds below the highest one ever given, so that the lowest free slot is the
# first row and a new session's slots cost a lookup by the key (the search for the lowest slot
# missing from atsss_path_slots read every held slot: some 3 ms a create at 10,000 sessions). Kept
# by triggers in the transaction that takes or frees a slot, whoever writes it; the slots above the
# highest one ever given are free too (netapp.atsss.store.free_slots). The gaps of the slots held
# before are filled in.
ATSSS_FREE_SLOTS = (
    "CREATE TABLE atsss_free_slots (slot INTEGER PRIMARY KEY)",
    """WITH RECURSIVE below (slot) AS (
            SELECT 1 WHERE EXISTS (SELECT 1 FROM atsss_path_slots)
            UNION ALL SELECT slot + 1 FROM below WHERE slot < (SELECT max(slot) FROM atsss_path_slots)
        )
        INSERT INTO atsss_free_slots (slot) SELECT slot FROM below
        WHERE slot NOT IN (SELECT slot FROM atsss_path_slots)""",
    """CREATE TRIGGER atsss_slot_freed AFTER DELETE ON atsss_path_slots BEGIN
        INSERT OR IGNORE INTO atsss_free_slots (slot) VALUES (old.slot);
    END""",
    """CREATE TRIGGER atsss_slot_taken AFTER INSERT ON atsss_path_slots BEGIN
        DELETE FROM atsss_free_slots WHERE slot = new.slot;
    END""",
    """CREATE TRIGGER atsss_slot_moved AFTER UPDATE OF slot ON atsss_path_slots BEGIN
        INSERT OR IGNORE INTO atsss_free_slots (slot) VALUES (old.slot);
        DELETE FROM atsss_free_slots WHERE slot = new.slot;
    END""",
)

# MTS sessions with flow filters (netapp.atsss.flows): several may select flows of one UE, each in its
# own mode, beside at most one without (which sets the mode of the UE's other flows): `filtered`
# tells them apart, and a UE is unique among the sessions without filters only. SQLite cannot drop a
# column's UNIQUE: the table is made again, its rows copied.
ATSSS_MTS_FLOWS = (
    """CREATE TABLE atsss_mts_sessions_flows (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        ue TEXT NOT NULL,
        filtered INTEGER NOT NULL DEFAULT 0,
        body TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID""",
    """INSERT INTO atsss_mts_sessions_flows (tenant, id, ue, body, created_at, updated_at)
        SELECT tenant, id, ue, body, created_at, updated_at FROM atsss_mts_sessions""",
    "DROP TABLE atsss_mts_sessions",
    "ALTER TABLE atsss_mts_sessions_flows RENAME TO atsss_mts_sessions",
    "CREATE UNIQUE INDEX atsss_mts_whole_ue ON atsss_mts_sessions (ue) WHERE filtered = 0",
    "CREATE INDEX atsss_mts_by_ue ON atsss_mts_sessions (ue, filtered)",
)

# The slot of dpp_atsss_flow_state each MTS session with flow filters in round-robin or weighted holds
# (netapp.atsss.flows): its rules carry it, so a restart must find the slot the pinned maps' rules
# name, not another (their flows would take over another session's running weights). The slot is the
# key: the lowest free one is found by it. The sessions stored before are given slots 1, 2... by
# tenant and id, as far as the last slot of the map: any past it keep their rules on the ATSSS
# session's own state (slot 0), as before, until written again. Their slots are zeroed in the map
# before the start-up reconcile's rules name them (netapp.atsss.flow_states.stored_rules_afresh).
ATSSS_MTS_STATES = (
    """CREATE TABLE atsss_mts_states (
        slot INTEGER PRIMARY KEY,
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        UNIQUE (tenant, id)
    )""",
    f"""INSERT INTO atsss_mts_states (slot, tenant, id)
        SELECT slot, tenant, id FROM (
            SELECT row_number() OVER (ORDER BY tenant, id) AS slot, tenant, id FROM atsss_mts_sessions
            WHERE filtered = 1 AND json_extract(body, '$.mode') IN ('round_robin', 'weighted'))
        WHERE slot < {MAX_FLOW_STATES}""",
)

# The odd free path slots (netapp.atsss.store.free_pair): a pair starts at one, and the even rows the
# one-path sessions leave were read one by one before the first odd one (1.2 ms a create at 30,000
# of them). free_pair's query repeats the condition, so SQLite takes the index.
ATSSS_FREE_PAIRS = ("CREATE INDEX atsss_free_odd_slots ON atsss_free_slots (slot) WHERE slot % 2 = 1",)
