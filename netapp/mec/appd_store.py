"""The AppD applied to each MEC application instance (netapp.mec.schema, mec_appds): its id,
version and digest, and the ids of the traffic rules, DNS rules and services it made, read and
written in the caller's transaction."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Optional

from pydantic import BaseModel

from netapp.service.store import Store


class AppdOrigin(BaseModel):
    """What an applied AppD made of an application: the ids of its rules and services."""

    trafficRuleIds: list[str] = []
    dnsRuleIds: list[str] = []
    serInstanceIds: list[str] = []


class AppliedAppd(BaseModel):
    appDId: str
    appDVersion: str
    digest: str
    origin: AppdOrigin


def get_applied(store: Store, app_instance_id: str) -> Optional[AppliedAppd]:
    row = store.execute(
        "SELECT appd_id, appd_version, digest, origin FROM mec_appds WHERE app_instance_id = ?", (app_instance_id,)
    ).fetchone()
    if row is None:
        return None
    appd_id, version, digest, origin = row
    return AppliedAppd(appDId=appd_id, appDVersion=version, digest=digest,
                       origin=AppdOrigin.model_validate(json.loads(origin)))


def put_applied(store: Store, app_instance_id: str, applied: AppliedAppd, now: datetime) -> None:
    store.execute(
        "INSERT INTO mec_appds (app_instance_id, appd_id, appd_version, digest, origin, applied_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (app_instance_id) DO UPDATE SET appd_id = excluded.appd_id, "
        "appd_version = excluded.appd_version, digest = excluded.digest, origin = excluded.origin, "
        "applied_at = excluded.applied_at",
        (app_instance_id, applied.appDId, applied.appDVersion, applied.digest, applied.origin.model_dump_json(),
         now.isoformat()),
    )


def delete_applied(store: Store, app_instance_id: str) -> None:
    store.execute("DELETE FROM mec_appds WHERE app_instance_id = ?", (app_instance_id,))


def next_rule_position(store: Store, table: str, app_instance_id: str) -> int:
    """The position after the application's last traffic rule (table mec_traffic_rules) or DNS rule
    (mec_dns_rules), so that the AppD's come after those declared before them."""
    if table not in ("mec_traffic_rules", "mec_dns_rules"):
        raise ValueError(f"{table}: not a table of an application's rules")
    row = store.execute(f"SELECT MAX(position) FROM {table} WHERE app_instance_id = ?", (app_instance_id,)).fetchone()
    return 0 if row[0] is None else row[0] + 1


def delete_traffic_rule(store: Store, app_instance_id: str, traffic_rule_id: str) -> None:
    store.execute("DELETE FROM mec_traffic_rules WHERE app_instance_id = ? AND traffic_rule_id = ?",
                  (app_instance_id, traffic_rule_id))


def delete_dns_rule(store: Store, app_instance_id: str, dns_rule_id: str) -> None:
    store.execute("DELETE FROM mec_dns_rules WHERE app_instance_id = ? AND dns_rule_id = ?",
                  (app_instance_id, dns_rule_id))
