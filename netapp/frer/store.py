"""The stored protected streams (the `frer_streams` table, netapp.frer.schema): what the maps are
reconciled with when the service starts. Writes run in the caller's transaction."""

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


def save_stream(store: Store, stream: StreamStatus) -> None:
    """Insert or replace the stream of (tenant, name)."""
    body = StreamDefinition.model_validate(stream.model_dump(include=set(StreamDefinition.model_fields)))
    when = stream.updated_at.isoformat()
    store.execute(
        "INSERT INTO frer_streams (tenant, name, handle, body, created_at, updated_at, revision, intent) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, name) DO UPDATE SET handle = excluded.handle, "
        "body = excluded.body, updated_at = excluded.updated_at, revision = excluded.revision, "
        "intent = excluded.intent",
        (stream.tenant, stream.name, stream.handle, body.model_dump_json(), when, when, stream.revision,
         stream.intent),
    )


def remove_stream(store: Store, tenant: str, name: str) -> bool:
    """Whether there was one."""
    return store.execute("DELETE FROM frer_streams WHERE tenant = ? AND name = ?", (tenant, name)).rowcount > 0
