"""The AI module's hands: the NetApp's REST API, as an admin. It reads the priority intents that
steer to a CPU, replaces one with another CPU (PUT /api/v1/intents/{id}), sets a CPU's overload
flag (PUT /api/v1/dataplane/cpus/{cpu}) keeping the rest of its spec, reads every tenant's ATSSS
sessions and sets their paths' weights (PATCH /api/v1/atsss/sessions/{name}).

Errors raise ApiError with one line that says what failed: the loop logs it and carries on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

import httpx

from netapp.cli.client import problem_line

INTENTS = "/api/v1/intents"
CPUS = "/api/v1/dataplane/cpus"
ATSSS_SESSIONS = "/api/v1/atsss/sessions"
PAGE = 1000  # the API's largest page
TIMEOUT_S = 10.0


class ApiError(Exception):
    """The NetApp refused a request (`status`) or could not be reached (`status` None)."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SteerRecord:
    """A priority steer intent as stored, with its owner."""

    tenant: str
    intent: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.intent["id"])

    @property
    def cpu(self) -> int:
        return int(self.intent["action"]["cpu"])


class NetAppClient:
    """An admin's session with one NetApp."""

    def __init__(self, url: str, token: Optional[str], *, verify: Any = True, timeout_s: float = TIMEOUT_S):
        headers = {"Accept": "application/json, application/problem+json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s, verify=verify)

    def close(self) -> None:
        self.http.close()

    def steer_intents(self) -> list[SteerRecord]:
        """Every tenant's priority intents that steer to a CPU, except those a slice owns (the
        slice decides where its members go)."""
        return [
            SteerRecord(record["tenant"], record["intent"])
            for record in self._all_intents(action="steer")
            if record["intent"].get("traffic_class", "priority") == "priority"
            and record.get("source") != "slice"
        ]

    def move_intent(self, record: SteerRecord, cpu: int) -> dict[str, Any]:
        """Replace the intent with the same one steering to `cpu`; returns the new record."""
        intent = {**record.intent, "action": {**record.intent["action"], "cpu": cpu}}
        return self._call("PUT", f"{INTENTS}/{record.id}", json=intent, params={"tenant": record.tenant})

    def set_overloaded(self, cpu: int, overloaded: bool) -> dict[str, Any]:
        """Set the CPU's overload flag; its capacity and queue size stay as configured."""
        spec = self._cpu_spec(cpu)
        return self._call("PUT", f"{CPUS}/{cpu}", json={**spec, "overloaded": overloaded})

    def atsss_sessions(self) -> list[dict[str, Any]]:
        """Every tenant's ATSSS sessions (AtsssSession bodies)."""
        return list(self._call("GET", ATSSS_SESSIONS))

    def set_weights(self, tenant: str, session: str, weights: dict[int, int]) -> dict[str, Any]:
        """Set the weights of the session's paths by index (the others, and the rest, kept)."""
        paths = [{"index": index, "weight": weight} for index, weight in sorted(weights.items())]
        return self._call("PATCH", f"{ATSSS_SESSIONS}/{session}", json={"paths": paths}, params={"tenant": tenant})

    def _cpu_spec(self, cpu: int) -> dict[str, Any]:
        for view in self._call("GET", CPUS):
            if view["cpu"] == cpu:
                return {name: view[name] for name in ("cpu", "capacity_pps", "queue_size", "overloaded")}
        raise ApiError(f"CPU {cpu} is not in the NetApp's CPU set")

    def _all_intents(self, **filters: Any) -> Iterator[dict[str, Any]]:
        offset = 0
        while True:
            page = self._call("GET", INTENTS, params={**filters, "offset": offset, "limit": PAGE})
            yield from page["items"]
            offset += len(page["items"])
            if not page["items"] or offset >= page["total"]:
                return

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(
                f"{method} {path}: cannot reach the NetApp at {self.http.base_url} ({exc})"
            ) from exc
        if response.status_code >= 400:
            raise ApiError(problem_line(method, path, response), response.status_code)
        return response.json() if response.content else None
