"""MEC 011 AppTerminationNotifications to an application's subscribers: sent in a thread of their
own (the administrator's request does not wait on callbacks), each through the notifier's pinned
transport, so a callback reaches only an address the callback policy allows at the moment it is
sent (netapp.telemetry.pinned). A callback that fails is logged, not retried: the termination does
not depend on it (the administrator's DELETE ends an instance that never confirms)."""

from __future__ import annotations

import logging
import threading
from typing import Any, Optional

import httpx

from netapp.core.destinations import Destinations
from netapp.telemetry.pinned import PinnedTransport

log = logging.getLogger("netapp.mec")

TIMEOUT_S = 5.0


class TerminationNotifier:
    """Posts notifications to callbacks, where the callback policy lets them go."""

    def __init__(self, destinations: Destinations, proxy: Optional[str] = None, timeout_s: float = TIMEOUT_S):
        self._destinations = destinations
        self._proxy = proxy
        self._timeout_s = timeout_s

    def send(self, notifications: list[tuple[str, dict[str, Any]]]) -> threading.Thread:
        """Post each (callback, body) in a thread, started and returned (tests join it)."""
        thread = threading.Thread(target=self._post_all, args=(notifications,), name="mec-termination", daemon=True)
        thread.start()
        return thread

    def _post_all(self, notifications: list[tuple[str, dict[str, Any]]]) -> None:
        transport = PinnedTransport(self._destinations, proxy=self._proxy)  # one per thread
        with httpx.Client(transport=transport, timeout=self._timeout_s, follow_redirects=False) as client:
            for callback, body in notifications:
                try:
                    client.post(callback, json=body).raise_for_status()
                except Exception as exc:  # noqa: BLE001 - any failure of one callback is logged, the rest go on
                    log.warning("MEC 011 termination notification to %s not delivered: %s", callback, exc)
