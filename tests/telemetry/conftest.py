"""InfluxDB fixtures: one influxd shared by the session (a database per test), and a server of a
test's own for the tests that stop or suspend it."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator

import pytest

from netapp.core.config import InfluxSettings
from netapp.telemetry.influx import InfluxSink
from netapp.telemetry.influxd import LocalInfluxd
from tests.utils.influxd import start_influxd

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def influxd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalInfluxd]:
    server = start_influxd(tmp_path_factory.mktemp("influxd"))
    yield server
    server.stop()


@pytest.fixture
def own_influxd(tmp_path) -> Iterator[LocalInfluxd]:
    """An influxd for this test alone: it may stop, restart or suspend it."""
    server = start_influxd(tmp_path / "influxd")
    yield server
    server.stop()


@pytest.fixture
def database(influxd: LocalInfluxd, request: pytest.FixtureRequest) -> str:
    """A new database in the session's influxd, named after the test."""
    name = f"{re.sub(r'[^A-Za-z0-9_]', '_', request.node.name)[:40]}_{next(_databases)}"
    influxd.create_database(name)
    return name


@pytest.fixture
def make_sink() -> Iterator[Callable[[InfluxSettings], InfluxSink]]:
    """InfluxSink(settings), closed after the test whatever happened."""
    sinks: list[InfluxSink] = []

    def make(settings: InfluxSettings) -> InfluxSink:
        sinks.append(InfluxSink(settings))
        return sinks[-1]

    yield make
    for sink in sinks:
        sink.close(timeout_s=1.0)
