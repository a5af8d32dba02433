"""The stored MEC 011 DNS rules, lifecycle state and termination subscriptions of application
instances (netapp.mec.schema), read and written in the caller's transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from netapp.mec.models import DnsRule
from netapp.service.store import Store


def list_dns_rules(store: Store, app_instance_id: str) -> list[DnsRule]:
    """An application's DNS rules in the order they were declared."""
    rows = store.execute(
        "SELECT body FROM mec_dns_rules WHERE app_instance_id = ? ORDER BY position", (app_instance_id,)
    ).fetchall()
    return [DnsRule.model_validate_json(body) for (body,) in rows]


def get_dns_rule(store: Store, app_instance_id: str, dns_rule_id: str) -> Optional[DnsRule]:
    row = store.execute(
        "SELECT body FROM mec_dns_rules WHERE app_instance_id = ? AND dns_rule_id = ?", (app_instance_id, dns_rule_id)
    ).fetchone()
    return None if row is None else DnsRule.model_validate_json(row[0])


def insert_dns_rules(store: Store, app_instance_id: str, rules: list[DnsRule], now: datetime, first: int = 0) -> None:
    """Insert DNS rules at the positions from `first` on."""
    store.executemany(
        "INSERT INTO mec_dns_rules (app_instance_id, dns_rule_id, position, body, updated_at) VALUES (?, ?, ?, ?, ?)",
        [(app_instance_id, rule.dnsRuleId, position, rule.model_dump_json(exclude_none=True), now.isoformat())
         for position, rule in enumerate(rules, start=first)],
    )


def replace_dns_rule(store: Store, app_instance_id: str, rule: DnsRule, now: datetime) -> None:
    store.execute(
        "UPDATE mec_dns_rules SET body = ?, updated_at = ? WHERE app_instance_id = ? AND dns_rule_id = ?",
        (rule.model_dump_json(exclude_none=True), now.isoformat(), app_instance_id, rule.dnsRuleId),
    )


def get_state(store: Store, app_instance_id: str) -> tuple[str, Optional[str]]:
    """(lifecycle state, the operationAction of a termination asked and not confirmed, or None)."""
    row = store.execute(
        "SELECT state, termination FROM mec_applications WHERE app_instance_id = ?", (app_instance_id,)
    ).fetchone()
    return row[0], row[1]


def set_state(
    store: Store, app_instance_id: str, state: str, termination: Optional[str], deadline: Optional[datetime] = None
) -> None:
    """The lifecycle state, and the termination asked with when its graceful timeout passes (None
    with no termination, or for one asked before deadlines were kept)."""
    store.execute(
        "UPDATE mec_applications SET state = ?, termination = ?, termination_deadline = ? WHERE app_instance_id = ?",
        (state, termination, None if deadline is None else deadline.isoformat(), app_instance_id),
    )


def pending_terminations(store: Store) -> list[tuple[str, datetime]]:
    """(application instance, when its graceful timeout passes) of every termination or stop asked
    and not yet done, soonest first."""
    rows = store.execute(
        "SELECT app_instance_id, termination_deadline FROM mec_applications "
        "WHERE termination IS NOT NULL AND termination_deadline IS NOT NULL ORDER BY termination_deadline"
    )
    return [(app_instance_id, datetime.fromisoformat(deadline)) for app_instance_id, deadline in rows.fetchall()]


def list_subscriptions(store: Store, app_instance_id: str) -> list[tuple[str, str]]:
    """(subscription id, callback) of an application's termination subscriptions, oldest first."""
    rows = store.execute(
        "SELECT subscription_id, callback FROM mec_app_subscriptions WHERE app_instance_id = ? "
        "ORDER BY created_at, subscription_id", (app_instance_id,)
    )
    return [(subscription_id, callback) for subscription_id, callback in rows.fetchall()]


def insert_subscription(store: Store, subscription_id: str, app_instance_id: str, callback: str, now: datetime) -> None:
    store.execute(
        "INSERT INTO mec_app_subscriptions (subscription_id, app_instance_id, callback, created_at) VALUES (?, ?, ?, ?)",
        (subscription_id, app_instance_id, callback, now.isoformat()),
    )


def delete_subscription(store: Store, app_instance_id: str, subscription_id: str) -> bool:
    cursor = store.execute(
        "DELETE FROM mec_app_subscriptions WHERE app_instance_id = ? AND subscription_id = ?",
        (app_instance_id, subscription_id),
    )
    return cursor.rowcount > 0


def delete_application_rows(store: Store, app_instance_id: str) -> None:
    """The application's DNS rules and subscriptions, as it goes."""
    store.execute("DELETE FROM mec_dns_rules WHERE app_instance_id = ?", (app_instance_id,))
    store.execute("DELETE FROM mec_app_subscriptions WHERE app_instance_id = ?", (app_instance_id,))
