"""The stored protected streams (the `frer_streams` table, netapp.frer.schema): what the maps are
reconciled with when the service starts. Writes run in the caller's transaction.

`StreamCache` reads them for a change: every row is read, but only a row it has not seen is parsed
(pydantic's validation of the body is most of a load), so a change's reading costs the rows, not
their parsing. The store stays what is read: a row rolled back, written by another hand or changed
behind the cache's back is simply another row."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from netapp.frer.abi import MAX_STREAMS
from netapp.frer.models import StreamDefinition, StreamStatus
from netapp.service.store import Store

_COLUMNS = "tenant, name, handle, body, updated_at, revision, intent"


def _status(row: tuple) -> StreamStatus:
    tenant, name, handle, body, updated_at, revision, intent = row
    definition = StreamDefinition.model_validate_json(body)
    return StreamStatus(**dict(definition), name=name, tenant=tenant, handle=handle, revision=revision,
                        updated_at=datetime.fromisoformat(updated_at), intent=intent)


def load_streams(store: Store, tenant: Optional[str] = None) -> list[StreamStatus]:
    """Every stored stream (of `tenant`, when given), by tenant and name."""
    where, args = ("WHERE tenant = ?", (tenant,)) if tenant is not None else ("", ())
    rows = store.execute(f"SELECT {_COLUMNS} FROM frer_streams {where} ORDER BY tenant, name", args).fetchall()
    return [_status(row) for row in rows]


class StreamCache:
    """The stored streams, parsed once per row: a row (every column of it) that was read before gives
    the stream parsed then. The streams given are shared between loads: not to be changed."""

    def __init__(self) -> None:
        self._parsed: dict[tuple, StreamStatus] = {}

    def load(self, store: Store) -> list[StreamStatus]:
        """Every stored stream, by tenant and name, as load_streams gives them; the rows no longer
        stored are forgotten."""
        rows = store.execute(f"SELECT {_COLUMNS} FROM frer_streams ORDER BY tenant, name").fetchall()
        parsed = {row: self._parsed.get(row) or _status(row) for row in rows}
        self._parsed = parsed
        return list(parsed.values())

    def keep(self, row: tuple, stream: StreamStatus) -> None:
        """`stream` is what `row` (as save_stream wrote it) parses to: not parsed again. Should the row
        be rolled back, it is not read, and forgotten on the next load."""
        self._parsed[row] = stream

    def forget(self) -> None:
        """Every row parsed again on the next load."""
        self._parsed = {}


def stored_stream(store: Store, tenant: str, name: str) -> Optional[StreamStatus]:
    row = store.execute(f"SELECT {_COLUMNS} FROM frer_streams WHERE tenant = ? AND name = ?", (tenant, name)).fetchone()
    return None if row is None else _status(row)


def count_streams(store: Store, tenant: str) -> int:
    return store.execute("SELECT count(*) FROM frer_streams WHERE tenant = ?", (tenant,)).fetchone()[0]


def free_handle(store: Store) -> Optional[int]:
    """The lowest handle no stream holds (1..MAX_STREAMS - 1; slot 0 means no stream), None when
    every one is taken."""
    row = store.execute(
        "SELECT min(handle + 1) FROM (SELECT 0 AS handle UNION ALL SELECT handle FROM frer_streams) "
        "WHERE handle + 1 NOT IN (SELECT handle FROM frer_streams)"
    ).fetchone()
    handle = row[0]
    return handle if handle is not None and handle < MAX_STREAMS else None


def save_stream(store: Store, stream: StreamStatus) -> tuple:
    """Insert or replace the stream of (tenant, name); the row as a load reads it back."""
    body = StreamDefinition.model_validate(stream.model_dump(include=set(StreamDefinition.model_fields)))
    when = stream.updated_at.isoformat()
    row = (stream.tenant, stream.name, stream.handle, body.model_dump_json(), when, stream.revision, stream.intent)
    store.execute(
        "INSERT INTO frer_streams (tenant, name, handle, body, created_at, updated_at, revision, intent) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, name) DO UPDATE SET handle = excluded.handle, "
        "body = excluded.body, updated_at = excluded.updated_at, revision = excluded.revision, "
        "intent = excluded.intent",
        (*row[:4], when, *row[4:]),
    )
    return row


def remove_stream(store: Store, tenant: str, name: str) -> bool:
    """Whether there was one."""
    return store.execute("DELETE FROM frer_streams WHERE tenant = ? AND name = ?", (tenant, name)).rowcount > 0
