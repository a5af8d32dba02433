"""The stored MEC 015 bandwidth allocations (netapp.mec.schema), read and written in the caller's
transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from netapp.mec.bwm_models import BwAllocation, BwInfo
from netapp.service.store import Store

_COLUMNS = "allocation_id, tenant, body"


def _allocation(row: tuple[str, str, str]) -> BwAllocation:
    allocation_id, tenant, body = row
    return BwAllocation(allocationId=allocation_id, tenant=tenant, info=BwInfo.model_validate_json(body))


def get_allocation(store: Store, allocation_id: str) -> Optional[BwAllocation]:
    row = store.execute(f"SELECT {_COLUMNS} FROM mec_bw_allocations WHERE allocation_id = ?", (allocation_id,)).fetchone()
    return None if row is None else _allocation(row)


def list_allocations(store: Store, tenant: Optional[str]) -> list[BwAllocation]:
    """Every allocation (tenant None) or a tenant's, oldest first."""
    sql = f"SELECT {_COLUMNS} FROM mec_bw_allocations"
    if tenant is None:
        rows = store.execute(sql + " ORDER BY created_at, allocation_id")
    else:
        rows = store.execute(sql + " WHERE tenant = ? ORDER BY created_at, allocation_id", (tenant,))
    return [_allocation(row) for row in rows.fetchall()]


def application_allocations(store: Store, app_instance_id: str) -> list[BwAllocation]:
    rows = store.execute(
        f"SELECT {_COLUMNS} FROM mec_bw_allocations WHERE app_instance_id = ? ORDER BY created_at, allocation_id",
        (app_instance_id,),
    )
    return [_allocation(row) for row in rows.fetchall()]


def put_allocation(store: Store, allocation: BwAllocation, now: datetime) -> None:
    """Insert an allocation or replace its body."""
    body = allocation.info.model_dump_json(exclude_none=True)
    store.execute(
        "INSERT INTO mec_bw_allocations (allocation_id, app_instance_id, tenant, body, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (allocation_id) DO UPDATE SET body = excluded.body, "
        "updated_at = excluded.updated_at",
        (allocation.allocationId, allocation.info.appInsId, allocation.tenant, body, now.isoformat(), now.isoformat()),
    )


def delete_allocation(store: Store, allocation_id: str) -> bool:
    return store.execute("DELETE FROM mec_bw_allocations WHERE allocation_id = ?", (allocation_id,)).rowcount > 0
