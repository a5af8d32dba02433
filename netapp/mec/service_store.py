"""The stored MEC 011 services that applications registered and their service availability
subscriptions (a migration of netapp.service.schema), read and written in the caller's transaction.

The platform's own services are not stored: they follow from the settings at each start
(netapp.mec.services)."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from netapp.mec.service_models import SerAvailabilitySubscription, ServiceInfo
from netapp.service.store import Store

def list_services(store: Store, app_instance_id: Optional[str] = None) -> list[ServiceInfo]:
    """Every registered service (app_instance_id None) or an application's, by id."""
    sql = "SELECT body FROM mec_services"
    rows = store.execute(sql + " ORDER BY ser_instance_id" if app_instance_id is None else
                         sql + " WHERE app_instance_id = ? ORDER BY ser_instance_id",
                         () if app_instance_id is None else (app_instance_id,))
    return [ServiceInfo.model_validate_json(body) for (body,) in rows.fetchall()]


def get_service(store: Store, ser_instance_id: str) -> Optional[tuple[str, ServiceInfo]]:
    """(the owning application instance, the service), or None."""
    row = store.execute(
        "SELECT app_instance_id, body FROM mec_services WHERE ser_instance_id = ?", (ser_instance_id,)
    ).fetchone()
    return None if row is None else (row[0], ServiceInfo.model_validate_json(row[1]))


def put_service(store: Store, app_instance_id: str, tenant: str, service: ServiceInfo, now: datetime) -> None:
    """Insert or replace a service (its serInstanceId is set)."""
    store.execute(
        "INSERT INTO mec_services (ser_instance_id, app_instance_id, tenant, body, updated_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (ser_instance_id) DO UPDATE SET body = excluded.body, "
        "updated_at = excluded.updated_at",
        (service.serInstanceId, app_instance_id, tenant, service.model_dump_json(exclude_none=True),
         now.isoformat()),
    )


def delete_application_rows(store: Store, app_instance_id: str) -> None:
    """An application's services and availability subscriptions, as it goes."""
    store.execute("DELETE FROM mec_services WHERE app_instance_id = ?", (app_instance_id,))
    store.execute("DELETE FROM mec_service_subscriptions WHERE app_instance_id = ?", (app_instance_id,))


def delete_service(store: Store, ser_instance_id: str) -> bool:
    cursor = store.execute("DELETE FROM mec_services WHERE ser_instance_id = ?", (ser_instance_id,))
    return cursor.rowcount > 0


def list_subscriptions(store: Store, app_instance_id: Optional[str] = None) -> list[tuple[str, SerAvailabilitySubscription]]:
    """(id, subscription) of every subscription (app_instance_id None) or an application's."""
    sql = "SELECT subscription_id, body FROM mec_service_subscriptions"
    rows = store.execute(sql + " ORDER BY subscription_id" if app_instance_id is None else
                         sql + " WHERE app_instance_id = ? ORDER BY subscription_id",
                         () if app_instance_id is None else (app_instance_id,))
    return [(sid, SerAvailabilitySubscription.model_validate_json(body)) for sid, body in rows.fetchall()]


def get_subscription(store: Store, app_instance_id: str, subscription_id: str) -> Optional[SerAvailabilitySubscription]:
    row = store.execute(
        "SELECT body FROM mec_service_subscriptions WHERE app_instance_id = ? AND subscription_id = ?",
        (app_instance_id, subscription_id),
    ).fetchone()
    return None if row is None else SerAvailabilitySubscription.model_validate_json(row[0])


def insert_subscription(
    store: Store, subscription_id: str, app_instance_id: str, tenant: str,
    subscription: SerAvailabilitySubscription, now: datetime,
) -> None:
    store.execute(
        "INSERT INTO mec_service_subscriptions (subscription_id, app_instance_id, tenant, body, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (subscription_id, app_instance_id, tenant, subscription.model_dump_json(exclude_none=True, by_alias=True),
         now.isoformat()),
    )


def delete_subscription(store: Store, app_instance_id: str, subscription_id: str) -> bool:
    cursor = store.execute(
        "DELETE FROM mec_service_subscriptions WHERE app_instance_id = ? AND subscription_id = ?",
        (app_instance_id, subscription_id),
    )
    return cursor.rowcount > 0
