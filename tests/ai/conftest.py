"""What the AI module's tests run against: a real InfluxDB 1.8 (netapp.telemetry.influxd), one
server for the session and a fresh database per test; the real REST API over a fake service."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from influxdb_client import InfluxDBClient

from netapp.api.deps import get_service
from netapp.api.main import create_app
from netapp.core.config import Settings
from netapp.telemetry.influxd import LocalInfluxd, bucket
from tests.ai.fakes import write_tokens
from tests.utils.influxd import require_influxd
from tests.api.fake_service import FakeIntentService
from tests.api.server import ServerThread


@pytest.fixture(scope="session")
def influxd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalInfluxd]:
    binary = require_influxd()
    with LocalInfluxd(tmp_path_factory.mktemp("influxd"), binary=binary) as server:
        yield server


@pytest.fixture
def database(influxd: LocalInfluxd) -> Iterator[str]:
    name = f"ai_{secrets.token_hex(4)}"
    influxd.create_database(name)
    yield name
    influxd.query(f'DROP DATABASE "{name}"')


@pytest.fixture
def influx_client(influxd: LocalInfluxd, database: str) -> Iterator[InfluxDBClient]:
    """A v2 client on the test's database (InfluxDB 1.8: token user:password, org "-")."""
    with InfluxDBClient(url=influxd.url, token="netapp:unused", org="-") as client:
        yield client


@pytest.fixture
def test_bucket(database: str) -> str:
    return bucket(database)


@pytest.fixture(scope="session")
def api_app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tokens = write_tokens(tmp_path_factory.mktemp("auth") / "tokens.yaml")
    return create_app(Settings(tokens_file=tokens), FakeIntentService())


@pytest.fixture(scope="session")
def api_server(api_app: Any) -> Iterator[ServerThread]:
    """The real API on loopback; each test swaps in its own fake service (`service`)."""
    with ServerThread(api_app) as running:
        yield running


@pytest.fixture
def service(api_app: Any) -> Iterator[FakeIntentService]:
    fake = FakeIntentService()
    api_app.dependency_overrides[get_service] = lambda: fake
    yield fake
    api_app.dependency_overrides.clear()
