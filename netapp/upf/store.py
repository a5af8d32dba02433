"""The UPF's rows in the NetApp's store (tables in netapp.upf.schema): associations, sessions and
the counters of the allocators. Written inside the caller's transaction, read once at start."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Iterable, Iterator, Optional

from pydantic import BaseModel, ConfigDict, Field

from netapp.service.store import Store
from netapp.upf.models import Session

NTP_EPOCH_OFFSET = 2_208_988_800  # seconds from 1900-01-01 (NTP, the Recovery Time Stamp) to 1970


def ntp_now() -> int:
    return int(time.time()) + NTP_EPOCH_OFFSET


class Association(BaseModel):
    """A PFCP association with a CP function: its node id (the tenant), where it sends from, and
    the Recovery Time Stamp it gave last."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    node_id: str
    address: str = Field(description="the peer's IP address (where requests to it go)")
    port: int = Field(ge=0, le=65535)
    recovery_time_stamp: int = Field(ge=0, le=(1 << 32) - 1)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


def put_association(store: Store, association: Association) -> None:
    store.execute(
        "INSERT OR REPLACE INTO upf_associations (node_id, body, updated_at) VALUES (?, ?, ?)",
        (association.node_id, association.model_dump_json(), _now()),
    )


def delete_association(store: Store, node_id: str) -> None:
    store.execute("DELETE FROM upf_associations WHERE node_id = ?", (node_id,))


def put_session(store: Store, session: Session, body: Optional[str] = None) -> None:
    """Write the session's row; `body`: its JSON, when the caller has it already."""
    store.execute(
        "INSERT OR REPLACE INTO upf_sessions (seid, node_id, body, updated_at) VALUES (?, ?, ?, ?)",
        (_signed(session.seid), session.node_id, session.stored_json() if body is None else body, _now()),
    )


class SessionRows:
    """The session rows and counters a transaction changes (netapp.upf.sessions), written once its
    changes are made: a statement for all its rows put, one for those deleted, one for the counters
    that moved (`counters`: their values when it began), with one time of writing; not a statement
    per row and its counters per change. A row put and deleted is as it was last."""

    def __init__(self, counters: dict[str, int]):
        self._counters = counters
        self._rows: dict[int, Optional[tuple[str, str]]] = {}  # SEID -> (node id, JSON), or None: deleted

    def put(self, session: Session, body: str) -> None:
        self._rows[session.seid] = (session.node_id, body)

    def delete(self, seid: int) -> None:
        self._rows[seid] = None

    def write(self, store: Store, counters: dict[str, int]) -> None:
        """The rows, and the `counters` that are not what they were."""
        now = _now()
        deleted = [(_signed(seid),) for seid, row in self._rows.items() if row is None]
        put = [(_signed(seid), *row, now) for seid, row in self._rows.items() if row is not None]
        if deleted:
            store.executemany("DELETE FROM upf_sessions WHERE seid = ?", deleted)
        if put:
            store.executemany("INSERT OR REPLACE INTO upf_sessions (seid, node_id, body, updated_at) VALUES (?, ?, ?, ?)",
                              put)
        put_counters(store, {name: value for name, value in counters.items() if self._counters.get(name) != value})
        self._rows.clear()


def put_counter(store: Store, name: str, value: int) -> None:
    put_counters(store, {name: value})


def put_counters(store: Store, values: dict[str, int]) -> None:
    """Several counters in one statement (none: nothing written)."""
    if values:
        rows = ", ".join(["(?, ?)"] * len(values))
        args = tuple(item for pair in values.items() for item in pair)
        store.execute(f"INSERT OR REPLACE INTO upf_counters (name, value) VALUES {rows}", args)


def get_counter(store: Store, name: str) -> Optional[int]:
    row = store.execute("SELECT value FROM upf_counters WHERE name = ?", (name,)).fetchone()
    return None if row is None else int(row[0])


# The next UR-SEQN of each URR (netapp.upf.usage), as counters named "urr_seqn:<SEID>:<URR id>":
# written before the report that used the previous one is sent, so a restart never sends one again.
SEQN_PREFIX = "urr_seqn:"
UrrKey = tuple[int, int]  # (SEID, URR id)


def load_seqns(store: Store) -> dict[UrrKey, int]:
    rows = store.execute(
        "SELECT name, value FROM upf_counters WHERE name >= ? AND name < ?", (SEQN_PREFIX, SEQN_PREFIX[:-1] + ";")
    ).fetchall()
    seqns = {}
    for name, value in rows:
        seid, urr_id = name[len(SEQN_PREFIX) :].split(":")
        seqns[(int(seid), int(urr_id))] = int(value)
    return seqns


def put_seqns(store: Store, seqns: dict[UrrKey, int]) -> None:
    for (seid, urr_id), seqn in seqns.items():
        put_counter(store, f"{SEQN_PREFIX}{seid}:{urr_id}", seqn)


def delete_seqns(store: Store, keys: Iterable[UrrKey]) -> None:
    for seid, urr_id in keys:
        store.execute("DELETE FROM upf_counters WHERE name = ?", (f"{SEQN_PREFIX}{seid}:{urr_id}",))


# What each URR's last report measured up to (netapp.upf.usage): its counts (netapp.upf.abi.Usage's
# fields) and its time (Unix seconds), as counters "urr_base:<SEID>:<URR id>:<field>", written with
# its next UR-SEQN, so that after a restart its next report measures from there.
BASE_PREFIX = "urr_base:"
BASE_FIELDS = ("ul_packets", "ul_bytes", "dl_packets", "dl_bytes", "at")
Base = tuple[int, ...]  # the values of BASE_FIELDS


def load_bases(store: Store) -> dict[UrrKey, Base]:
    rows = store.execute(
        "SELECT name, value FROM upf_counters WHERE name >= ? AND name < ?", (BASE_PREFIX, BASE_PREFIX[:-1] + ";")
    ).fetchall()
    fields: dict[UrrKey, dict[str, int]] = {}
    for name, value in rows:
        seid, urr_id, field = name[len(BASE_PREFIX) :].split(":")
        fields.setdefault((int(seid), int(urr_id)), {})[field] = int(value)
    return {key: tuple(values[field] for field in BASE_FIELDS) for key, values in fields.items()
            if set(values) == set(BASE_FIELDS)}


def put_bases(store: Store, bases: dict[UrrKey, Base]) -> None:
    put_counters(store, {f"{BASE_PREFIX}{seid}:{urr_id}:{field}": value for (seid, urr_id), base in bases.items()
                         for field, value in zip(BASE_FIELDS, base)})


def delete_bases(store: Store, keys: Iterable[UrrKey]) -> None:
    for seid, urr_id in keys:
        prefix = f"{BASE_PREFIX}{seid}:{urr_id}:"
        store.execute("DELETE FROM upf_counters WHERE name >= ? AND name < ?", (prefix, prefix[:-1] + ";"))


def load_associations(store: Store) -> list[Association]:
    rows = store.execute("SELECT body FROM upf_associations ORDER BY node_id").fetchall()
    return [Association.model_validate_json(row[0]) for row in rows]


def load_sessions(store: Store) -> Iterator[tuple[Session, str]]:
    """Every session, with its JSON, one at a time."""
    for (body,) in store.execute("SELECT body FROM upf_sessions ORDER BY seid"):
        yield Session.model_validate_json(body), body


def _signed(seid: int) -> int:
    """SQLite integers are signed 64-bit: a SEID above 2^63 is stored as its two's complement."""
    return seid - (1 << 64) if seid >= 1 << 63 else seid


# --- reads for the views (netapp.upf.views): committed rows only, in SEID order ------------------


def count_sessions(store: Store, node_id: Optional[str]) -> int:
    where, args = _by_node(node_id)
    return int(store.execute(f"SELECT COUNT(*) FROM upf_sessions{where}", args).fetchone()[0])


def page_of_sessions(store: Store, node_id: Optional[str], offset: int, limit: int) -> list[tuple[Session, str]]:
    """(session, updated_at) of a page; `node_id` None: every association's."""
    where, args = _by_node(node_id)
    rows = store.execute(
        f"SELECT body, updated_at FROM upf_sessions{where} ORDER BY seid LIMIT ? OFFSET ?", (*args, limit, offset)
    ).fetchall()
    return sorted(
        ((Session.model_validate_json(body), updated_at) for body, updated_at in rows), key=lambda row: row[0].seid
    )


def get_session(store: Store, seid: int) -> Optional[tuple[Session, str]]:
    row = store.execute("SELECT body, updated_at FROM upf_sessions WHERE seid = ?", (_signed(seid),)).fetchone()
    return None if row is None else (Session.model_validate_json(row[0]), row[1])


def _by_node(node_id: Optional[str]) -> tuple[str, tuple[str, ...]]:
    return ("", ()) if node_id is None else (" WHERE node_id = ?", (node_id,))
