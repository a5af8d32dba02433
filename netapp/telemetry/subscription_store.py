"""Subscriptions, with their secrets, in their own SQLite file (state_dir/subscriptions.db), so
that a restart loses none."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from netapp.telemetry.subscription_models import SubscriptionRequest

log = logging.getLogger("netapp.telemetry.subscriptions")  # the manager's: one logger for subscriptions


class SubscriptionStoreError(Exception):
    """The subscriptions file cannot be used."""


@dataclass(frozen=True)
class StoredSubscription:
    id: str
    tenant: str
    admin: bool  # its creator was an admin: it sees every tenant and the node-wide measurements
    request: SubscriptionRequest
    secret: str
    created_ns: int
    sequence: int = 0  # the highest sequence number reserved

    @property
    def deadline_ns(self) -> Optional[int]:
        deadline = self.request.expiry_deadline
        return None if deadline is None else deadline.ns()


class SubscriptionStore:
    """Subscriptions in SQLite: their own file, written on create, delete and every
    SEQUENCE_BLOCK notifications. It holds the secrets: the file is made readable by its owner
    only."""

    SCHEMA_VERSION = 1
    SCHEMA = """CREATE TABLE IF NOT EXISTS subscriptions (
        id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        admin INTEGER NOT NULL,
        request TEXT NOT NULL,
        secret TEXT NOT NULL,
        created_ns INTEGER NOT NULL,
        sequence INTEGER NOT NULL
    )"""

    def __init__(self, connection: sqlite3.Connection, path: Path):
        self._connection = connection
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path) -> "SubscriptionStore":
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.touch(mode=0o600, exist_ok=True)
            os.chmod(path, 0o600)
            connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version > cls.SCHEMA_VERSION:
                raise SubscriptionStoreError(
                    f"{path}: written by a newer NetApp (schema {version}; "
                    f"this one knows {cls.SCHEMA_VERSION})"
                )
            connection.execute(cls.SCHEMA)
            connection.execute(f"PRAGMA user_version = {cls.SCHEMA_VERSION}")
        except (OSError, sqlite3.Error) as exc:
            raise SubscriptionStoreError(f"{path}: {exc}") from exc
        return cls(connection, path)

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def add(self, stored: StoredSubscription) -> None:
        with self._lock:
            self._connection.execute(
                "INSERT INTO subscriptions (id, tenant, admin, request, secret, created_ns, sequence) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    stored.id,
                    stored.tenant,
                    int(stored.admin),
                    stored.request.model_dump_json(by_alias=True),
                    stored.secret,
                    stored.created_ns,
                    stored.sequence,
                ),
            )

    def remove(self, subscription_id: str) -> None:
        with self._lock:
            self._connection.execute("DELETE FROM subscriptions WHERE id = ?", (subscription_id,))

    def reserve(self, subscription_id: str, sequence: int) -> None:
        """Record that sequence numbers up to `sequence` may have been used."""
        with self._lock:
            self._connection.execute(
                "UPDATE subscriptions SET sequence = ? WHERE id = ?", (sequence, subscription_id)
            )

    def load(self) -> list[StoredSubscription]:
        """Every subscription whose request this NetApp still accepts (others are logged and kept)."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT id, tenant, admin, request, secret, created_ns, sequence "
                "FROM subscriptions ORDER BY created_ns"
            ).fetchall()
        loaded = []
        for subscription_id, tenant, admin, request, secret, created_ns, sequence in rows:
            try:
                parsed = SubscriptionRequest.model_validate_json(request)
            except ValueError as exc:
                log.error(
                    "telemetry: subscription %s is not valid any more, left aside: %s", subscription_id, exc
                )
                continue
            loaded.append(
                StoredSubscription(subscription_id, tenant, bool(admin), parsed, secret, created_ns, sequence)
            )
        return loaded
