"""The stored ATSSS sessions, their path slots and MTS sessions, with flow filters or not (the tables of
netapp.atsss.schema):
what the maps are reconciled with when the service starts. Writes run in the caller's transaction."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Iterable, Iterator, Optional

from netapp.atsss.abi import MAX_FLOW_STATES, MAX_PATHS, MAX_SESSIONS, paired_session_slot
from netapp.atsss.models import AtsssPath, AtsssSession, SessionDefinition, SteeringMode
from netapp.service.store import Store

# A session, the MTS session without filters steering its UE (its mode), and those with filters (each
# one's id and mode, a JSON object).
_COLUMNS = ("s.tenant, s.name, s.body, s.updated_at, s.revision, m.id, m.body, (SELECT json_group_object(f.id, "
            "json_extract(f.body, '$.mode')) FROM atsss_mts_sessions f WHERE f.ue = s.ue AND f.filtered = 1)")
_JOINED = "atsss_sessions s LEFT JOIN atsss_mts_sessions m ON m.ue = s.ue AND m.filtered = 0"


def _session(row: tuple, slots: list[int]) -> AtsssSession:
    tenant, name, body, updated_at, revision, mts_id, mts_body, flows = row
    definition = SessionDefinition.model_validate_json(body)
    effective = SteeringMode(json.loads(mts_body)["mode"]) if mts_body is not None else definition.mode
    return AtsssSession(**dict(definition), name=name, tenant=tenant, slots=slots, mts_session=mts_id,
                        effective_mode=effective, mts_flows=json.loads(flows) if flows else {}, revision=revision,
                        updated_at=datetime.fromisoformat(updated_at))


def _slots(store: Store, tenant: Optional[str]) -> dict[tuple[str, str], list[int]]:
    where, args = ("WHERE tenant = ?", (tenant,)) if tenant is not None else ("", ())
    rows = store.execute(f"SELECT tenant, name, slot FROM atsss_path_slots {where} ORDER BY tenant, name, position",
                         args).fetchall()
    slots: dict[tuple[str, str], list[int]] = {}
    for owner, name, slot in rows:
        slots.setdefault((owner, name), []).append(slot)
    return slots


def load_sessions(store: Store, tenant: Optional[str] = None) -> list[AtsssSession]:
    """Every stored session (of `tenant`, when given), by tenant and name."""
    where, args = ("WHERE s.tenant = ?", (tenant,)) if tenant is not None else ("", ())
    rows = store.execute(f"SELECT {_COLUMNS} FROM {_JOINED} {where} ORDER BY s.tenant, s.name", args).fetchall()
    slots = _slots(store, tenant)
    return [_session(row, slots.get((row[0], row[1]), [])) for row in rows]


def sessions_of_ues(store: Store, ues: list[str]) -> list[AtsssSession]:
    """The stored sessions of these UE addresses (as str() writes them)."""
    found = []
    for ue in sorted(set(ues)):
        owner = session_of_ue(store, ue)
        session = stored_session(store, *owner) if owner is not None else None
        if session is not None:
            found.append(session)
    return found


def stored_session(store: Store, tenant: str, name: str) -> Optional[AtsssSession]:
    row = store.execute(f"SELECT {_COLUMNS} FROM {_JOINED} WHERE s.tenant = ? AND s.name = ?", (tenant, name)).fetchone()
    if row is None:
        return None
    slots = [slot for (slot,) in store.execute(
        "SELECT slot FROM atsss_path_slots WHERE tenant = ? AND name = ? ORDER BY position", (tenant, name))]
    return _session(row, slots)


def session_of_ue(store: Store, ue: str) -> Optional[tuple[str, str]]:
    """(tenant, name) of the session of the UE address `ue` (as str() writes it), None when none."""
    row = store.execute("SELECT tenant, name FROM atsss_sessions WHERE ue = ?", (ue,)).fetchone()
    return None if row is None else (row[0], row[1])


# A subflow: this node's address, the UE's address on the access (as str() writes them), the ports.
Subflow = tuple[str, str, int, int]


def subflow_of(path: AtsssPath) -> Subflow:
    return (str(path.local), str(path.peer), path.local_port, path.peer_port)


def subflow_holders(store: Store, subflows: list[Subflow]) -> dict[Subflow, tuple[str, str]]:
    """(tenant, name) of the stored session that has a path of each of these subflows, where one
    has: a lookup by the key of atsss_subflows for each."""
    holders = {}
    for subflow in dict.fromkeys(subflows):
        row = store.execute("SELECT tenant, name FROM atsss_subflows WHERE local = ? AND peer = ? AND local_port = ? "
                            "AND peer_port = ?", subflow).fetchone()
        if row is not None:
            holders[subflow] = (row[0], row[1])
    return holders


def count_sessions(store: Store, tenant: str) -> int:
    return store.execute("SELECT count(*) FROM atsss_sessions WHERE tenant = ?", (tenant,)).fetchone()[0]


def save_session(store: Store, session: AtsssSession) -> None:
    """Insert or replace the session of (tenant, name) with its slots (one a path, by position)."""
    body = SessionDefinition.model_validate(session.model_dump(include=set(SessionDefinition.model_fields)))
    when = session.updated_at.isoformat()
    store.execute(
        "INSERT INTO atsss_sessions (tenant, name, ue, body, created_at, updated_at, revision) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, name) DO UPDATE SET ue = excluded.ue, "
        "body = excluded.body, updated_at = excluded.updated_at, revision = excluded.revision",
        (session.tenant, session.name, str(session.ue), body.model_dump_json(), when, when, session.revision),
    )
    store.execute("DELETE FROM atsss_path_slots WHERE tenant = ? AND name = ?", (session.tenant, session.name))
    store.executemany(
        "INSERT INTO atsss_path_slots (slot, tenant, name, position) VALUES (?, ?, ?, ?)",
        [(slot, session.tenant, session.name, position) for position, slot in enumerate(session.slots)],
    )
    store.execute("DELETE FROM atsss_subflows WHERE tenant = ? AND name = ?", (session.tenant, session.name))
    store.executemany(  # OR IGNORE: a session whose two paths are one subflow holds it once
        "INSERT OR IGNORE INTO atsss_subflows (local, peer, local_port, peer_port, tenant, name) VALUES (?, ?, ?, ?, ?, ?)",
        [(*subflow_of(path), session.tenant, session.name) for path in session.paths],
    )


def remove_session(store: Store, tenant: str, name: str) -> bool:
    """Whether there was one; its slots are freed."""
    store.execute("DELETE FROM atsss_path_slots WHERE tenant = ? AND name = ?", (tenant, name))
    store.execute("DELETE FROM atsss_subflows WHERE tenant = ? AND name = ?", (tenant, name))
    return store.execute("DELETE FROM atsss_sessions WHERE tenant = ? AND name = ?", (tenant, name)).rowcount > 0


def _highest(store: Store) -> int:
    """The highest path slot ever given (held, or freed below it), 0 for none."""
    return store.execute("SELECT max(top) FROM (SELECT max(slot) AS top FROM atsss_path_slots "
                         "UNION ALL SELECT max(slot) FROM atsss_free_slots)").fetchone()[0] or 0


def _gaps(store: Store, slots: Iterable[int]) -> None:
    """`slots`, passed over above the highest slot given, made free rows: below the new highest,
    they are gaps, which the triggers keep as rows (free_slots gives them)."""
    store.executemany("INSERT OR IGNORE INTO atsss_free_slots (slot) VALUES (?)", [(slot,) for slot in slots])


def free_slots(store: Store, count: int, avoid: frozenset[int] = frozenset()) -> Optional[list[int]]:
    """The `count` lowest slots no path holds (1..MAX_PATHS - 1; slot 0 means no path) but those of
    `avoid`, None when there are not that many: the freed ones below the highest slot ever given
    (atsss_free_slots, the lowest first), then the ones above it. Lookups by the key, the slots
    avoided passed over by SQLite (a JSON array: one parameter, looked up as a list): the cost does
    not grow with the sessions. Every slot given must be taken in the caller's transaction: those
    avoided above the highest are made free rows (_gaps), and a slot given above them and not taken
    would then be neither held nor free, below the highest."""
    rows = store.execute(f"SELECT slot FROM atsss_free_slots WHERE {NOT_AVOIDED.format('slot')} ORDER BY slot "
                         "LIMIT ?2", (json.dumps(sorted(avoid)), count))
    found = [slot for (slot,) in rows]
    highest = _highest(store)
    above = (slot for slot in range(highest + 1, MAX_PATHS) if slot not in avoid)
    found += [slot for slot, _ in zip(above, range(count - len(found)))]
    if len(found) < count:
        return None
    if found and found[-1] > highest:
        _gaps(store, sorted(set(range(highest + 1, found[-1])) - set(found)))  # those avoided
    return found


NOT_AVOIDED = "{} NOT IN (SELECT value FROM json_each(?1))"
FREE_PAIR = ("SELECT slot FROM atsss_free_slots AS f WHERE slot % 2 = 1 AND (slot + 1 > ?2 OR EXISTS "
             "(SELECT 1 FROM atsss_free_slots AS g WHERE g.slot = f.slot + 1)) "
             f"AND {NOT_AVOIDED.format('slot')} AND {NOT_AVOIDED.format('slot + 1')} ORDER BY slot LIMIT 1")


def free_pair(store: Store, avoid: frozenset[int] = frozenset()) -> Optional[int]:
    """The lowest session slot s whose pair of path slots (2s - 1 and 2s, abi.paired_path_slots) no
    path holds and `avoid` does not name, None when no session slot's pair is: an odd freed slot (a
    row of atsss_free_slots) and the one after it, freed too or above the highest slot ever given;
    else the first such pair above the highest, the slots it skips made free rows (gaps below the
    highest, as the triggers keep them: free_slots gives them). `slot % 2 = 1` is the condition of
    the partial index atsss_free_odd_slots (schema.ATSSS_FREE_PAIRS): the even rows are not read."""
    highest = _highest(store)
    row = store.execute(FREE_PAIR, (json.dumps(sorted(avoid)), highest)).fetchone()
    first = row[0] if row is not None else highest + 1 + highest % 2  # or the first odd slot above the highest
    while row is None and (first in avoid or first + 1 in avoid):
        first += 2
    if paired_session_slot(first) >= MAX_SESSIONS:
        return None
    if row is None:
        _gaps(store, range(highest + 1, first))
    return paired_session_slot(first)


# --- MTS sessions (MEC 015) -------------------------------------------------------------------------


def load_mts(store: Store, tenant: Optional[str] = None) -> list[tuple[str, str, str, dict]]:
    """(tenant, id, UE, body) of every stored MTS session (of `tenant`, when given), by tenant and id."""
    where, args = ("WHERE tenant = ?", (tenant,)) if tenant is not None else ("", ())
    rows = store.execute(f"SELECT tenant, id, ue, body FROM atsss_mts_sessions {where} ORDER BY tenant, id", args)
    return [(owner, mts_id, ue, json.loads(body)) for owner, mts_id, ue, body in rows.fetchall()]


def stored_mts(store: Store, tenant: str, mts_id: str) -> Optional[tuple[str, dict]]:
    """(UE, body) of the tenant's MTS session `mts_id`."""
    row = store.execute("SELECT ue, body FROM atsss_mts_sessions WHERE tenant = ? AND id = ?", (tenant, mts_id)).fetchone()
    return None if row is None else (row[0], json.loads(row[1]))


def mts_of_ue(store: Store, ue: str) -> Optional[tuple[str, str]]:
    """(tenant, id) of the MTS session without flow filters steering the UE `ue`."""
    row = store.execute("SELECT tenant, id FROM atsss_mts_sessions WHERE ue = ? AND filtered = 0", (ue,)).fetchone()
    return None if row is None else (row[0], row[1])


def mts_flows_of_ue(store: Store, ue: str) -> list[tuple[str, str, dict]]:
    """(tenant, id, body) of the MTS sessions with flow filters of the UE `ue`, by id."""
    rows = store.execute("SELECT tenant, id, body FROM atsss_mts_sessions WHERE ue = ? AND filtered = 1 ORDER BY id",
                         (ue,))
    return [(tenant, mts_id, json.loads(body)) for tenant, mts_id, body in rows.fetchall()]


def mts_flows_of_tenant(store: Store, tenant: str) -> list[tuple[str, str, dict]]:
    """(id, UE, body) of the tenant's MTS sessions with flow filters, by id."""
    rows = store.execute("SELECT id, ue, body FROM atsss_mts_sessions WHERE tenant = ? AND filtered = 1 ORDER BY id",
                         (tenant,))
    return [(mts_id, ue, json.loads(body)) for mts_id, ue, body in rows.fetchall()]


def load_mts_flows(store: Store) -> list[tuple[str, str, str, dict]]:
    """(tenant, id, UE, body) of every MTS session with flow filters, by tenant and id."""
    rows = store.execute("SELECT tenant, id, ue, body FROM atsss_mts_sessions WHERE filtered = 1 ORDER BY tenant, id")
    return [(owner, mts_id, ue, json.loads(body)) for owner, mts_id, ue, body in rows.fetchall()]


def save_mts(store: Store, tenant: str, mts_id: str, ue: str, body: dict, when: datetime, filtered: bool = False) -> None:
    """Insert or replace; `body` holds "mode" (the SteeringMode it runs) beside what the caller keeps;
    `filtered`: its flow filters select flows of the UE (netapp.atsss.flows), not its whole downlink."""
    store.execute(
        "INSERT INTO atsss_mts_sessions (tenant, id, ue, filtered, body, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, id) DO UPDATE SET ue = excluded.ue, "
        "filtered = excluded.filtered, body = excluded.body, updated_at = excluded.updated_at",
        (tenant, mts_id, ue, int(filtered), json.dumps(body), when.isoformat(), when.isoformat()),
    )


def remove_mts(store: Store, tenant: str, mts_id: str) -> bool:
    """Whether there was one; its flow state slot is the caller's to free (netapp.atsss.flow_states:
    freed, it waits for the programs' runs that may still read it)."""
    return store.execute("DELETE FROM atsss_mts_sessions WHERE tenant = ? AND id = ?", (tenant, mts_id)).rowcount > 0


# --- the MTS sessions' flow state slots (dpp_atsss_flow_state, netapp.atsss.flows) -----------------


def state_slot(store: Store, tenant: str, mts_id: str) -> int:
    """The flow state slot the MTS session holds; 0: none."""
    row = store.execute("SELECT slot FROM atsss_mts_states WHERE tenant = ? AND id = ?", (tenant, mts_id)).fetchone()
    return 0 if row is None else row[0]


def state_slots(store: Store) -> dict[tuple[str, str], int]:
    """(tenant, id) -> the flow state slot of every MTS session holding one."""
    return {(tenant, mts_id): slot for slot, tenant, mts_id in store.execute("SELECT slot, tenant, id FROM atsss_mts_states")}


def free_state_slots(store: Store, start: int = 1) -> Iterator[int]:
    """The flow state slots from `start` no MTS session holds (1..MAX_FLOW_STATES - 1; 0 means
    none), lowest first: the gaps between the held ones, read by the key as far as the caller goes."""
    rows = store.execute("SELECT slot FROM atsss_mts_states WHERE slot >= ? ORDER BY slot", (start,))
    try:
        for (held,) in rows:
            yield from range(start, min(held, MAX_FLOW_STATES))
            start = held + 1
        yield from range(start, MAX_FLOW_STATES)
    finally:
        rows.close()  # a caller that stops early leaves no statement open


def hold_state_slot(store: Store, slot: int, tenant: str, mts_id: str) -> None:
    """The flow state slot `slot` (free: free_state_slots) the MTS session's, which holds none."""
    store.execute("INSERT INTO atsss_mts_states (slot, tenant, id) VALUES (?, ?, ?)", (slot, tenant, mts_id))


def free_state_slot(store: Store, tenant: str, mts_id: str) -> int:
    """The MTS session's flow state slot freed: that slot, 0 when it held none."""
    row = store.execute("DELETE FROM atsss_mts_states WHERE tenant = ? AND id = ? RETURNING slot",
                        (tenant, mts_id)).fetchone()
    return 0 if row is None else row[0]
