"""What the AI module reads from InfluxDB (Flux): the load series of each CPU of one node, the
latest packet rate of each intent, and the mean RTT of each ATSSS path. Schema: the collector's
`dpp_cpu`, `dpp_intent` and `dpp_atsss_path` points (netapp.telemetry.poll, api/telemetry.md).

Works with InfluxDB 2.x and with 1.8 when flux-enabled (bucket "database/retention-policy").
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from influxdb_client import InfluxDBClient

from netapp.core.config import InfluxSettings

CPU_MEASUREMENT = "dpp_cpu"
INTENT_MEASUREMENT = "dpp_intent"
ATSSS_PATH_MEASUREMENT = "dpp_atsss_path"
CPU_FIELDS = ("load", "enabled", "overloaded", "capacity_pps")
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class ReadError(Exception):
    """InfluxDB could not answer a query (down, wrong bucket, Flux disabled)."""


@dataclass(frozen=True)
class CpuSeries:
    """One CPU's polls in the window, oldest first: its load (NaN where the poll had none: no
    rate yet, or no capacity) and its state at the last poll."""

    cpu: int
    times_ns: tuple[int, ...]
    loads: tuple[float, ...]
    enabled: bool
    overloaded: bool
    capacity_pps: int

    @property
    def last_load(self) -> float:
        known = [load for load in self.loads if not math.isnan(load)]
        return known[-1] if known else math.nan


def influx_client(settings: InfluxSettings) -> InfluxDBClient:
    """A client for the InfluxDB the collector writes to (same settings, same credentials)."""
    return InfluxDBClient(
        url=settings.url,
        token=settings.token.get_secret_value(),
        org=settings.org,
        timeout=settings.timeout_ms,
    )


def flux_string(text: str) -> str:
    """`text` as a Flux string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("${", "\\${")
    return f'"{escaped}"'


def flux_duration(seconds: float) -> str:
    """A Flux duration literal of at least one millisecond."""
    return f"{max(1, math.ceil(seconds * 1000))}ms"


def cpu_query(bucket: str, node: str, window_s: float) -> str:
    """Each CPU's load and state per poll in the last `window_s` seconds, one row per poll."""
    fields = " or ".join(f"r._field == {flux_string(name)}" for name in CPU_FIELDS)
    return (
        f"from(bucket: {flux_string(bucket)})\n"
        f"  |> range(start: -{flux_duration(window_s)})\n"
        f"  |> filter(fn: (r) => r._measurement == {flux_string(CPU_MEASUREMENT)}"
        f" and r.node == {flux_string(node)})\n"
        f"  |> filter(fn: (r) => {fields})\n"
        '  |> pivot(rowKey: ["_time"], columnKey: ["_field"], valueColumn: "_value")'
    )


def intent_rate_query(bucket: str, node: str, window_s: float) -> str:
    """The last packet rate of each intent seen in the last `window_s` seconds."""
    return (
        f"from(bucket: {flux_string(bucket)})\n"
        f"  |> range(start: -{flux_duration(window_s)})\n"
        f"  |> filter(fn: (r) => r._measurement == {flux_string(INTENT_MEASUREMENT)}"
        f' and r.node == {flux_string(node)} and r._field == "packets_rate")\n'
        "  |> last()"
    )


def path_rtt_query(bucket: str, node: str, window_s: float) -> str:
    """The mean RTT of each ATSSS path over the last `window_s` seconds, from the polls that knew one
    (0: unknown)."""
    return (
        f"from(bucket: {flux_string(bucket)})\n"
        f"  |> range(start: -{flux_duration(window_s)})\n"
        f"  |> filter(fn: (r) => r._measurement == {flux_string(ATSSS_PATH_MEASUREMENT)}"
        f' and r.node == {flux_string(node)} and r._field == "rtt_us" and r._value > 0)\n'
        '  |> group(columns: ["tenant", "session", "path"])\n'
        "  |> mean()"
    )


class InfluxReader:
    """Flux queries of one node's series in one bucket."""

    def __init__(self, client: InfluxDBClient, bucket: str, node: str):
        self.client = client
        self.bucket = bucket
        self.node = node

    def cpu_series(self, window_s: float) -> dict[int, CpuSeries]:
        """CPU number -> its series over the last `window_s` seconds (CPUs with no poll absent)."""
        rows = self._rows(cpu_query(self.bucket, self.node, window_s))
        return cpu_series_of(rows)

    def intent_rates(self, window_s: float) -> dict[tuple[str, str], float]:
        """(tenant, intent) -> its last packets per second within `window_s` seconds."""
        rows = self._rows(intent_rate_query(self.bucket, self.node, window_s))
        return {(row["tenant"], row["intent"]): float(row["_value"]) for row in rows}

    def path_rtts(self, window_s: float) -> dict[tuple[str, str, int], float]:
        """(tenant, session, path index) -> its mean RTT in µs within `window_s` seconds (paths with
        none known absent)."""
        rows = self._rows(path_rtt_query(self.bucket, self.node, window_s))
        return {(row["tenant"], row["session"], int(row["path"])): float(row["_value"]) for row in rows}

    def _rows(self, flux: str) -> list[dict[str, Any]]:
        try:
            tables = self.client.query_api().query(flux)
        except Exception as exc:  # urllib3 errors and ApiException alike: one kind for the loop
            raise ReadError(f"InfluxDB query failed: {_one_line(exc)}") from exc
        return [record.values for table in tables for record in table.records]


def cpu_series_of(rows: Iterable[dict[str, Any]]) -> dict[int, CpuSeries]:
    """Pivoted dpp_cpu rows (one per CPU and poll, in any order) as a series per CPU."""
    by_cpu: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_cpu[int(row["cpu"])].append(row)
    series = {}
    for cpu, polls in sorted(by_cpu.items()):
        polls.sort(key=lambda row: row["_time"])
        last = polls[-1]
        series[cpu] = CpuSeries(
            cpu=cpu,
            times_ns=tuple(_time_ns(row["_time"]) for row in polls),
            loads=tuple(_float_or_nan(row.get("load")) for row in polls),
            enabled=bool(last.get("enabled")),
            overloaded=bool(last.get("overloaded")),
            capacity_pps=int(last.get("capacity_pps") or 0),
        )
    return series


def _float_or_nan(value: Optional[Any]) -> float:
    return math.nan if value is None else float(value)


def _time_ns(stamp: Any) -> int:
    """Flux times arrive as datetimes (microseconds); integers pass through."""
    if isinstance(stamp, int):
        return stamp
    return (stamp - EPOCH) // timedelta(microseconds=1) * 1000


def _one_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {text[0] if text else ''}"
