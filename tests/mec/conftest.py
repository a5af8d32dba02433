"""The MEC front doors served for real: uvicorn over a started NetAppService on a pinned instance of
the XDP program, its interfaces a veth pair in a namespace of the module, its store in a temporary
directory. One application instance of tenant-a (site-wide) is declared with two rules; tenant-b is
another tenant with no application.

Needs root and libdpp (tests/utils/kernel.py: skipped outside CI, a failure under CI)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

from netapp.api.auth import write_tokens_file
from netapp.api.main import create_app
from netapp.core.config import InterfaceSetting, Settings, SubscriptionSettings, TelemetrySettings
from netapp.core.netns import entered
from netapp.routing.neighbours import device_mac
from netapp.service.service import NetAppService
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.api.conftest import CALLERS, token_of, tokens_file_for
from tests.api.server import ServerThread
from tests.utils.kernel import require_kernel, veth_namespace
from tests.utils.maps import pinned_instance
from tests.utils.mec import traffic_rule
from tests.utils.service import ADMIN

VETH, PEER = "dppmec0", "dppmec1"
APP, TENANT = "app-1", "tenant-a"
RULE_IDS = ("r1", "r2")
MAX_RULES = 64
CALLBACKS_ALLOWED = "127.0.0.1/32"


@dataclass(frozen=True)
class MecSite:
    url: str
    service: NetAppService
    peer_mac: str  # the MAC of PEER, an interface of the data plane a rule may forward to
    client: Callable[[str], httpx.Client]  # a caller's client, by name (tests/api/conftest.py CALLERS)


def declared_rules() -> list[dict[str, Any]]:
    """The application's rules as declared: r1 active, r2 inactive (and so not in the maps)."""
    return [traffic_rule("r1", state="INACTIVE"), traffic_rule("r2", state="INACTIVE", priority=2,
                                                               trafficFilter=[{"protocol": ["tcp"]}])]


@pytest.fixture(scope="module")
def mec_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MecSite]:
    require_kernel()
    state_dir = tmp_path_factory.mktemp("mec")
    tokens = Path(state_dir / "tokens.yaml")
    write_tokens_file(tokens, tokens_file_for(CALLERS))
    with pinned_instance("mec") as instance, veth_namespace("mec", VETH, PEER) as netns:
        settings = Settings(
            state_dir=state_dir,
            instance=instance,
            max_rules=MAX_RULES,
            tokens_file=tokens,
            netns=netns,
            interfaces=[InterfaceSetting(name=VETH, mode="generic")],
            # Service availability notifications go to the tests' receivers on loopback.
            telemetry=TelemetrySettings(subscriptions=SubscriptionSettings(callback_allow=[CALLBACKS_ALLOWED])),
        )
        service = NetAppService(settings)
        service.start()
        try:
            TenantService(lambda: service.store).put_tenant(ADMIN, TENANT, TenantSpec(site=True))
            with entered(netns):
                peer_mac = device_mac(service._state.index.interfaces[PEER])
            assert peer_mac is not None
            with ServerThread(create_app(settings, service)) as server:
                opened: list[httpx.Client] = []

                def client(name: str) -> httpx.Client:
                    made = httpx.Client(base_url=server.url, timeout=30,
                                        headers={"Authorization": f"Bearer {token_of(name)}"})
                    opened.append(made)
                    return made

                declared = client("admin").post("/api/v1/mec/applications", json={
                    "appInstanceId": APP, "tenant": TENANT, "trafficRules": declared_rules()})
                assert declared.status_code == 201, declared.text
                try:
                    yield MecSite(server.url, service, peer_mac, client)
                finally:
                    for made in opened:
                        made.close()
        finally:
            service.close()
