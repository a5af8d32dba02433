"""Fixtures of the API tests: one real uvicorn server for the session, a fresh fake service and
tenant records per test (swapped in with dependency_overrides and the app's state), and clients
holding the tokens of a few callers."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import httpx
import numpy
import pytest

from netapp.api.auth import TokenEntry, TokensFile, token_hash, write_tokens_file
from netapp.api.deps import get_service
from netapp.api.main import create_app
from netapp.core.config import Settings
from netapp.service.contract import Scope
from netapp.service.store import Store
from netapp.tenancy.service import TenantService
from netapp.telemetry.runtime import Telemetry
from netapp.telemetry.sample import Counters, IntentTable
from tests.api.fake_service import FakeIntentService
from tests.api.server import ServerThread

ALL_TENANT_SCOPES = [Scope.READ, Scope.INTENTS_WRITE, Scope.SLICES_WRITE]

# name -> (tenant, scopes). Tokens are the names with a suffix; only their hashes go to the file.
CALLERS = {
    "admin": ("operator", [Scope.ADMIN]),
    "tenant-a": ("tenant-a", ALL_TENANT_SCOPES),
    "tenant-b": ("tenant-b", ALL_TENANT_SCOPES),
    "reader-a": ("tenant-a", [Scope.READ]),
    "writer-a": ("tenant-a", [Scope.INTENTS_WRITE]),
}


def token_of(name: str) -> str:
    return f"{name}-test-token"


def tokens_file_for(callers: dict[str, tuple[str, list[Scope]]]) -> TokensFile:
    return TokensFile(
        tokens=[
            TokenEntry(name=name, sha256=token_hash(token_of(name)), tenant=tenant, scopes=scopes)
            for name, (tenant, scopes) in callers.items()
        ]
    )


@pytest.fixture(scope="session")
def tokens_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auth") / "tokens.yaml"
    write_tokens_file(path, tokens_file_for(CALLERS))
    return path


class NoCounters:
    """A CounterSource with nothing installed: the telemetry routes answer, with empty data."""

    def counters(self) -> Counters:
        return Counters(1, 1, IntentTable.empty(), numpy.zeros((0, 2), dtype=numpy.uint64))


@pytest.fixture(scope="session")
def api_app(tokens_path: Path, tmp_path_factory: pytest.TempPathFactory):
    settings = Settings(tokens_file=tokens_path, state_dir=tmp_path_factory.mktemp("state"))
    # Tenant records in a store of their own: the fake service has none.
    store = Store.open(settings.state_dir / "tenants.db")
    tenants = TenantService(lambda: store)
    return create_app(settings, FakeIntentService(), Telemetry.from_settings(settings, NoCounters()), tenants)


@pytest.fixture(scope="session")
def server(api_app) -> Iterator[ServerThread]:
    with ServerThread(api_app) as running:
        yield running


@pytest.fixture
def service(api_app, tmp_path: Path) -> Iterator[FakeIntentService]:
    """A fresh fake service, and tenant records of this test only."""
    fake = FakeIntentService()
    api_app.dependency_overrides[get_service] = lambda: fake
    session_tenants = api_app.state.tenants
    store = Store.open(tmp_path / "tenants.db")
    api_app.state.tenants = TenantService(lambda: store)
    yield fake
    api_app.state.tenants = session_tenants
    store.close()
    api_app.dependency_overrides.clear()


@pytest.fixture
def client_for(server: ServerThread, service: FakeIntentService) -> Iterator[Callable[..., httpx.Client]]:
    """client_for("tenant-a") -> an httpx client with that caller's token (None: no token)."""
    opened: list[httpx.Client] = []

    def make(name: str | None, **kwargs) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token_of(name)}"} if name else {}
        client = httpx.Client(base_url=server.url, headers=headers, timeout=10, **kwargs)
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()


@pytest.fixture
def admin(client_for) -> httpx.Client:
    return client_for("admin")


@pytest.fixture
def tenant_a(client_for) -> httpx.Client:
    return client_for("tenant-a")


@pytest.fixture
def tenant_b(client_for) -> httpx.Client:
    return client_for("tenant-b")
