"""The UPF's tables in the NetApp's SQLite store (netapp.service.store adds them in its migration
to schema version 3; netapp.upf.store reads and writes them). Bodies are the models as JSON."""

UPF_TABLES = (
    """CREATE TABLE upf_associations (
        node_id TEXT PRIMARY KEY,
        body TEXT NOT NULL,
        updated_at TEXT NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE upf_sessions (
        seid INTEGER PRIMARY KEY,
        node_id TEXT NOT NULL,
        body TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    "CREATE INDEX upf_sessions_by_node ON upf_sessions (node_id)",
    # next_seid, teid_cursor, recovery_time_stamp
    "CREATE TABLE upf_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
)
