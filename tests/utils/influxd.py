"""A real InfluxDB 1.8 for the telemetry tests: starting one (or skipping without the binary),
settings pointing at it, and reading back what was written.

Outside CI a missing influxd skips the test with the reason; under CI (CI=true) it is a failure,
so a green CI always means the InfluxDB tests ran (as tests/utils/kernel.py does for root).
"""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any, Optional

import pytest

from netapp.core.config import InfluxSettings
from netapp.telemetry.influxd import (
    InfluxdNotFoundError,
    LocalInfluxd,
    bucket,
    find_influxd,
    quote_identifier,
)

# Quick retries: a test's outage lasts seconds, not minutes. A write's timeout far above what a
# healthy influxd on a loaded machine takes to answer, so that a slow answer is never an error and a
# retry the test did not ask for (an outage here is a stopped influxd: refused at once). A test of
# the timeout itself sets its own.
FAST_RETRIES = {
    "retry_interval_ms": 100,
    "max_retry_delay_ms": 1000,
    "timeout_ms": 10_000,
    "flush_interval_ms": 100,
}


def require_influxd() -> Path:
    try:
        return find_influxd()
    except InfluxdNotFoundError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the InfluxDB tests, but: {exc}")
        pytest.skip(f"needs influxd 1.8: {exc}")


def start_influxd(data_dir: Path) -> LocalInfluxd:
    """A started influxd over `data_dir`. No Flux: it costs ~5 s per start and we ask InfluxQL."""
    return LocalInfluxd(data_dir, binary=require_influxd(), flux=False).start()


def influx_settings(server: LocalInfluxd, database: str, **overrides: Any) -> InfluxSettings:
    """Settings for writing into `database` of `server` through the v2 API, as production does."""
    fields: dict[str, Any] = {
        "url": server.url,
        "token": "netapp:unused",
        "org": "-",
        "bucket": bucket(database),
    }
    fields.update(FAST_RETRIES)
    fields.update(overrides)
    return InfluxSettings(**fields)


def measurements(server: LocalInfluxd, database: str) -> list[str]:
    answer = server.query("SHOW MEASUREMENTS", db=database)
    return [values[0] for series in answer["results"][0].get("series", ()) for values in series["values"]]


def rows(server: LocalInfluxd, database: str, measurement: Optional[str] = None) -> list[dict[str, Any]]:
    """Every point of `measurement` (None: of every one), one dict each: time (ns), tags and
    fields, with "_measurement" and "_tags" (the names of the tags the point has). One query per
    measurement: a regex over several loses points whose field types differ between them."""
    if measurement is None:
        return [row for name in measurements(server, database) for row in rows(server, database, name)]
    answer = server.query(f"SELECT * FROM {quote_identifier(measurement)} GROUP BY *", db=database)
    found = []
    for series in answer["results"][0].get("series", ()):
        tags = {key: value for key, value in series.get("tags", {}).items() if value != ""}
        for values in series["values"]:
            point = {name: value for name, value in zip(series["columns"], values) if value is not None}
            found.append({"_measurement": series["name"], "_tags": frozenset(tags), **tags, **point})
    return found


def points_per_time(server: LocalInfluxd, database: str) -> Counter[int]:
    """How many points each timestamp has, over every measurement."""
    return Counter(row["time"] for row in rows(server, database))


def field_types(server: LocalInfluxd, database: str, measurement: str) -> dict[str, str]:
    answer = server.query(f"SHOW FIELD KEYS FROM {quote_identifier(measurement)}", db=database)
    return {name: kind for name, kind in answer["results"][0]["series"][0]["values"]}


def write_lines(server: LocalInfluxd, database: str, lines: str) -> None:
    """Write line protocol (ns timestamps) straight through 1.8's /write, bypassing the sink."""
    request = urllib.request.Request(
        f"{server.url}/write?db={urllib.parse.quote(database)}&precision=ns",
        data=lines.encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 204, response.status
