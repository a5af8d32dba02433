"""The stored MEC 011 application instances and traffic rules (netapp.mec.schema; their DNS rules,
state and subscriptions: netapp.mec.app_store), read and written in the caller's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from netapp.mec import app_store
from netapp.mec.models import MecApplication, TrafficRule
from netapp.service.store import Store


def get_application(store: Store, app_instance_id: str) -> Optional[MecApplication]:
    row = store.execute(
        "SELECT tenant, app_name, revision, state, termination, termination_deadline FROM mec_applications "
        "WHERE app_instance_id = ?",
        (app_instance_id,),
    ).fetchone()
    if row is None:
        return None
    tenant, app_name, revision, state, termination, deadline = row
    return MecApplication(
        appInstanceId=app_instance_id,
        tenant=tenant,
        appName=app_name,
        trafficRules=list_rules(store, app_instance_id),
        dnsRules=app_store.list_dns_rules(store, app_instance_id),
        revision=revision,
        state=state,
        termination=termination,
        terminationDeadline=None if deadline is None else datetime.fromisoformat(deadline),
    )


def get_tenant(store: Store, app_instance_id: str) -> Optional[str]:
    """The tenant of an application instance (None: there is none), its rules left unread."""
    row = store.execute("SELECT tenant FROM mec_applications WHERE app_instance_id = ?", (app_instance_id,)).fetchone()
    return None if row is None else row[0]


def list_applications(store: Store, tenant: Optional[str]) -> list[MecApplication]:
    """Every application (tenant None) or a tenant's, by id."""
    sql = "SELECT app_instance_id FROM mec_applications"
    rows = store.execute(sql + " ORDER BY app_instance_id" if tenant is None else
                         sql + " WHERE tenant = ? ORDER BY app_instance_id", () if tenant is None else (tenant,))
    found = (get_application(store, app_instance_id) for (app_instance_id,) in rows.fetchall())
    return [application for application in found if application is not None]


def insert_application(store: Store, application: MecApplication, now: datetime) -> None:
    store.execute(
        "INSERT INTO mec_applications (app_instance_id, tenant, app_name, revision, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (application.appInstanceId, application.tenant, application.appName, application.revision,
         now.isoformat(), now.isoformat()),
    )
    for position, rule in enumerate(application.trafficRules):
        put_rule(store, application.appInstanceId, rule, now, position)
    app_store.insert_dns_rules(store, application.appInstanceId, application.dnsRules, now)


def delete_application(store: Store, app_instance_id: str) -> bool:
    store.execute("DELETE FROM mec_traffic_rules WHERE app_instance_id = ?", (app_instance_id,))
    app_store.delete_application_rows(store, app_instance_id)
    cursor = store.execute("DELETE FROM mec_applications WHERE app_instance_id = ?", (app_instance_id,))
    return cursor.rowcount > 0


def list_rules(store: Store, app_instance_id: str) -> list[TrafficRule]:
    """An application's rules in the order they were declared."""
    rows = store.execute(
        "SELECT body FROM mec_traffic_rules WHERE app_instance_id = ? ORDER BY position", (app_instance_id,)
    ).fetchall()
    return [TrafficRule.model_validate_json(body) for (body,) in rows]


def get_rule(store: Store, app_instance_id: str, traffic_rule_id: str) -> Optional[TrafficRule]:
    row = store.execute(
        "SELECT body FROM mec_traffic_rules WHERE app_instance_id = ? AND traffic_rule_id = ?",
        (app_instance_id, traffic_rule_id),
    ).fetchone()
    return None if row is None else TrafficRule.model_validate_json(row[0])


def put_rule(
    store: Store, app_instance_id: str, rule: TrafficRule, now: datetime, position: Optional[int] = None
) -> None:
    """Insert a rule at `position`, or replace its body where it is."""
    body = rule.model_dump_json(exclude_none=True)
    if position is None:
        store.execute(
            "UPDATE mec_traffic_rules SET body = ?, updated_at = ? WHERE app_instance_id = ? AND traffic_rule_id = ?",
            (body, now.isoformat(), app_instance_id, rule.trafficRuleId),
        )
        return
    store.execute(
        "INSERT INTO mec_traffic_rules (app_instance_id, traffic_rule_id, position, body, updated_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (app_instance_id, rule.trafficRuleId, position, body, now.isoformat()),
    )
