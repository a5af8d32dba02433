"""The stored routes (the `routes` table, netapp.routing.schema): what the maps are reconciled with
when the service starts."""

from __future__ import annotations

import datetime
from typing import Optional

from netapp.routing.models import Route
from netapp.service.store import Store


def load_routes(store: Store) -> list[Route]:
    """Every stored route, by instance and prefix."""
    rows = store.execute("SELECT instance, prefix, gateway, device FROM routes ORDER BY instance, prefix").fetchall()
    return [Route(instance=instance, prefix=prefix, gateway=gateway, device=device)
            for instance, prefix, gateway, device in rows]


def stored_route(store: Store, instance: str, prefix: str) -> Optional[Route]:
    row = store.execute(
        "SELECT gateway, device FROM routes WHERE instance = ? AND prefix = ?", (instance, prefix)
    ).fetchone()
    return None if row is None else Route(instance=instance, prefix=prefix, gateway=row[0], device=row[1])


def save_route(store: Store, route: Route) -> None:
    """Insert or replace the route of (instance, prefix); in the caller's transaction."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat()
    store.execute(
        "INSERT INTO routes (instance, prefix, gateway, device, updated_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (instance, prefix) DO UPDATE SET gateway = excluded.gateway, device = excluded.device, "
        "updated_at = excluded.updated_at",
        (route.instance, route.prefix, route.gateway, route.device, now),
    )


def remove_route(store: Store, instance: str, prefix: str) -> bool:
    """Whether there was one; in the caller's transaction."""
    return store.execute("DELETE FROM routes WHERE instance = ? AND prefix = ?", (instance, prefix)).rowcount > 0
