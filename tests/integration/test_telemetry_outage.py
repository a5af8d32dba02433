"""InfluxDB down for 30 s under a running `netapp serve` (a child process, as deployed, with the
XDP program pinned in the kernel): the API answers throughout, at its usual speed, changes go on
being made, and once InfluxDB is back every poll made during the outage arrives, none dropped.

Needs root, libdpp and influxd (skipped outside CI, a failure under CI)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from netapp.telemetry.influxd import LocalInfluxd, bucket
from tests.utils.influxd import FAST_RETRIES, rows, start_influxd
from tests.utils.kernel import require_kernel
from tests.utils.maps import pinned_instance
from tests.utils.serve import ServeProcess, free_port, write_admin_tokens, write_settings

OUTAGE_S = 30.0
INTERVAL_S = 0.5
DATABASE = "dpp"
# A blocked API would take the whole outage: a third of it tells the two apart and leaves a loaded
# 2-core machine's slowest answers well inside.
SLOWEST_ANSWER_S = OUTAGE_S / 3
# The polls written, of the intervals the run lasted: a collector that waited for InfluxDB would poll
# a handful of times in the outage; one on a loaded machine skips an interval now and then (a poll
# that overran, counted as late), never half of them.
POLLED_SHARE = 0.5
INTENT_NUMBERS = itertools.count(1)


@pytest.fixture
def influxd(tmp_path: Path) -> Iterator[LocalInfluxd]:
    server = start_influxd(tmp_path / "influxd")
    server.create_database(DATABASE)
    yield server
    server.stop()


@pytest.fixture
def serve(tmp_path: Path, influxd: LocalInfluxd) -> Iterator[tuple[ServeProcess, str]]:
    require_kernel()
    token = write_admin_tokens(tmp_path / "tokens.yaml", tenant="operator")
    influx = {"url": influxd.url, "token": "netapp:unused", "bucket": bucket(DATABASE), **FAST_RETRIES}
    with pinned_instance("out") as instance:
        config = write_settings(
            tmp_path / "netapp.yaml",
            state_dir=tmp_path / "state",
            instance=instance,
            tokens_file=tmp_path / "tokens.yaml",
            telemetry={"interval_s": INTERVAL_S, "node": "edge-1", "influxdb": influx},
        )
        process = ServeProcess(config, free_port(), tmp_path)
        try:
            process.start()
            yield process, token
        finally:
            process.stop()


def slowest_answer_during(api: httpx.Client, seconds: float) -> float:
    """Read stats and metrics and create an intent, over and over for `seconds`; the slowest."""
    slowest = 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        n = next(INTENT_NUMBERS)
        for request in (
            lambda: api.get("/api/v1/stats"),
            lambda: api.get("/metrics"),
            lambda: api.post("/api/v1/intents", json=steer_intent(n)),
        ):
            started = time.monotonic()
            response = request()
            slowest = max(slowest, time.monotonic() - started)
            assert response.status_code in (200, 201), response.text
        time.sleep(0.2)
    return slowest


def steer_intent(n: int) -> dict:
    return {
        "id": f"outage-{n}",
        "match": {"protocol": "udp", "dst_port": 20000 + n},
        "action": {"type": "pass"},
    }


def sink_metric(api: httpx.Client, name: str) -> float:
    for line in api.get("/metrics").text.splitlines():
        if line.startswith(f"{name}{{") and 'component="influxdb"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} for the influxdb sink in /metrics")


def wait_until_delivered(api: httpx.Client, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while sink_metric(api, "dpp_telemetry_points_queued") > 0:
        assert time.monotonic() < deadline, "the sink did not empty its buffer after the outage"
        time.sleep(0.5)


@pytest.mark.slow
def test_with_influxdb_down_for_30s_the_api_stays_responsive_and_no_poll_is_lost(serve, influxd):
    process, token = serve
    with httpx.Client(base_url=process.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as api:
        before = slowest_answer_during(api, 3.0)
        influxd.stop()
        during = slowest_answer_during(api, OUTAGE_S)
        influxd.restart()
        wait_until_delivered(api, timeout_s=60)

        assert sink_metric(api, "dpp_telemetry_points_dropped_total") == 0
    assert during < SLOWEST_ANSWER_S, (before, during)
    collector_points = [
        r for r in rows(influxd, DATABASE, "dpp_telemetry") if r.get("component") == "collector"
    ]
    polls = sorted(int(r["polls"]) for r in collector_points)
    # Every poll from the first to the last written one is there, the outage's included.
    assert polls == list(range(1, polls[-1] + 1))
    assert polls[-1] >= (OUTAGE_S + 3.0) / INTERVAL_S * POLLED_SHARE
