"""Factories for service tests: principals, intents and slice specs as models, a service over FakeDpp,
and one over the real data plane on a pinned instance of the test's own."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional

from netapp.core.config import Settings
from netapp.dataplane import binding
from netapp.dataplane.facade import Dataplane
from netapp.intents.models import Intent
from netapp.service.contract import Principal, Scope, SliceSpec
from netapp.service.service import NetAppService
from netapp.service.store import Store
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.utils.fakes import RecordingDpp
from tests.utils.intents import native_intent
from tests.utils.kernel import require_kernel

WRITER_SCOPES = frozenset({Scope.READ, Scope.INTENTS_WRITE, Scope.SLICES_WRITE})
ALICE = Principal("alice", WRITER_SCOPES, "alice-token")
BOB = Principal("bob", WRITER_SCOPES, "bob-token")
READER = Principal("alice", frozenset({Scope.READ}), "alice-reader")
ADMIN = Principal("operator", frozenset({Scope.ADMIN}), "admin-token")

FAKE_SLOTS = 4096
# The tenants of the service and API tests, site-wide in fake_service (see grant_site).
SITE_TENANTS = (ALICE.tenant, BOB.tenant, "tenant-a", "tenant-b", "tenant-c")


def intent(intent_id: str, port: int = 5004, **fields: Any) -> Intent:
    """Steer UDP to `port` to CPU 1, with the given parts replaced."""
    match = fields.pop("match", {"protocol": "udp", "dst_port": port})
    return Intent.model_validate(native_intent(intent_id, match=match, **fields))


def slice_spec(slice_id: str = "embb", **fields: Any) -> SliceSpec:
    """A slice with one member of each kind on CPUs 0 and 1, with the given parts replaced."""
    spec: dict[str, Any] = {
        "id": slice_id,
        "snssai": {"sst": 1, "sd": "00A1B2"},
        "priority_level": 10,
        "gbr_kbps": 10_000,
        "mbr_kbps": 50_000,
        "members": {"vnis": [1093], "teids": [0x8894D0D4], "ue_prefixes": ["10.60.0.0/16"], "dscp": [46]},
        "cpus": [0, 1],
    }
    spec.update(fields)
    return SliceSpec.model_validate(spec)


def settings_for(state_dir: Path, **fields: Any) -> Settings:
    return Settings(state_dir=state_dir, auth_disabled=True, **fields)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def fake_service(
    state_dir: Path,
    fake: Optional[RecordingDpp] = None,
    clock: Optional[Clock] = None,
    peer_echo_port: Optional[int] = None,
    **settings: Any,
) -> NetAppService:
    """A started service over a RecordingDpp (a new one unless given: a restart passes the old one),
    with FAKE_SLOTS rule slots unless the settings give max_rules, and FAKE_POLICERS policer slots
    unless the fake given says otherwise."""
    slots = settings.setdefault("max_rules", FAKE_SLOTS)
    fake = fake if fake is not None else few_policers_fake(slots)
    service = NetAppService(
        settings_for(state_dir, **settings),
        dataplane=Dataplane(fake, max_rules=slots),
        store=Store.open(state_dir / "netapp.db"),
        clock=clock or Clock(),
        echo_port=0,  # GTP-U echo on any free port: services of parallel tests must not meet on 2152
        peer_echo_port=peer_echo_port,
    )
    service.start()
    grant_site(service, *SITE_TENANTS)
    return service


def grant_site(service: NetAppService, *tenants: str) -> None:
    """Make the tenants site-wide: tests of object isolation give them overlapping matches (tests of
    traffic isolation grant traffic instead)."""
    for tenant in tenants:
        TenantService(lambda: service.store).put_tenant(ADMIN, tenant, TenantSpec(site=True))


def grant_subnets(store: Store, tenants: Mapping[str, tuple[str, Iterable[str]]]) -> None:
    """Each tenant (-> an address of its, its ports) granted the traffic to the address's /24 (IPv4),
    anywhere and on each of its ports (what a replicating function's rules identify and send out of)."""
    service = TenantService(lambda: store)
    for tenant, (address, ports) in tenants.items():
        prefix = f"{address.rsplit('.', 1)[0]}.0/24"
        traffic = [{"dst": prefix}, *({"interface": port, "dst": prefix} for port in ports)]
        service.put_tenant(ADMIN, tenant, TenantSpec.model_validate({"traffic": traffic}))


def pinned_instance(prefix: str) -> Iterator[str]:
    """A pinned instance name of one test only (a fixture's body); its pins (and links) go whatever
    happened."""
    require_kernel()
    name = f"{prefix}-{secrets.token_hex(3)}"
    yield name
    handle = binding.DppHandle.open(binding.load_libdpp(), name)
    handle.unpin()
    handle.close()


def started_on(state_dir: Path, instance: str, **settings: Any) -> NetAppService:
    """A started service on the real data plane (the pinned `instance`), alice and bob site-wide."""
    service = NetAppService(settings_for(state_dir, instance=instance, max_rules=4096, **settings))
    service.start()
    grant_site(service, ALICE.tenant, BOB.tenant)
    return service


# The policers of a fake service's map: the start's QoS reconcile reads every slot (65,536 by
# default, seconds of a FakeDpp's dump on a loaded machine) for tests that police a few rules.
FAKE_POLICERS = 4096


def few_policers_fake(max_rules: int = FAKE_SLOTS) -> RecordingDpp:
    """A RecordingDpp for fake_service whose policer maps hold FAKE_POLICERS slots (half for rules)."""
    return RecordingDpp(max_rules=max_rules,
                        map_sizes={"dpp_policers": FAKE_POLICERS})
