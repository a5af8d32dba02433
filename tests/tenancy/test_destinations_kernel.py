"""A confined tenant's destinations through the service on the real data plane (an anonymous traced
instance, the site a veth pair A <-> B in a namespace of its own):

- the packets of an allowed redirect leave by the allowed interface, and no other;
- an intent whose flows overflow and that names no group overflows to the site's default group,
  whose members must then be destinations of the tenant; a change of that group's members, a
  narrowing of the tenant's destinations, or a restart with another default_alternative that such
  an intent would then violate is refused, naming it.

carol owns UDP to 192.0.2.0/24 and may send out of B and towards 198.51.100.0/24 only.

Needs root and libdpp (tests/utils/kernel.py: skipped outside CI, a failure under CI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.core.netns import entered
from netapp.forwarding.models import AlternativeGroup
from netapp.intents.models import Intent
from netapp.service.contract import Conflict, InvalidInput, Principal, ServiceError
from netapp.service.service import NetAppService
from netapp.service.store import Store
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.utils.dataplane import traced_dataplane
from tests.utils.kernel import veth_namespace
from tests.utils.service import ADMIN, WRITER_SCOPES, settings_for

CAROL = Principal("carol", WRITER_SCOPES, "carol-token")
GRANT = [{"dst": "192.0.2.0/24"}]
A, B = "dppdst0", "dppdst1"
DESTINATIONS = {"interfaces": [B], "peers": ["198.51.100.0/24"]}
OUTSIDE, INSIDE = "203.0.113.9", "198.51.100.9"
DEFAULT, OTHER, NAMED = 5, 6, 8


def started(state_dir: Path, netns: str, default_alternative: int, dataplane: bool = True) -> NetAppService:
    """A service of the site in `netns` over a new anonymous traced instance (closed with the service),
    on the store of `state_dir`, with the site's default group `default_alternative`. dataplane=False:
    none, for a start refused before it would open one (the settings are checked against the store
    first)."""
    service = NetAppService(settings_for(state_dir, netns=netns, default_alternative=default_alternative),
                            dataplane=traced_dataplane(max_rules=64) if dataplane else None,
                            store=Store.open(state_dir / "netapp.db"))
    try:
        service.start()
    except ServiceError:
        service.close()
        raise
    return service


def group(group_id: int, address: str) -> AlternativeGroup:
    return AlternativeGroup.model_validate({"id": group_id, "members": [{"mac": "02:00:00:00:00:05", "ip4": address}]})


def best_effort(intent_id: str, port: int, **fields: Any) -> Intent:
    """Pass UDP to 192.0.2.1:`port` as best-effort traffic: its overflow goes to an alternative group."""
    return Intent.model_validate({"id": intent_id, "traffic_class": "best-effort", "action": {"type": "pass"},
                                  "match": {"dst": "192.0.2.1/32", "protocol": "udp", "dst_port": port}, **fields})


def in_kernel(service: NetAppService) -> int:
    """The rules the instance's map holds, as the kernel dumps them."""
    return len(service.dataplane._dpp.rules_dump())


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("destinations")


@pytest.fixture(scope="module")
def netns():
    with veth_namespace("dst", A, B) as name:
        yield name


@pytest.fixture(scope="module")
def site(state_dir, netns):
    """One service for the module (loading an instance is most of a test's time); the last test
    restarts it."""
    service = started(state_dir, netns, DEFAULT)
    TenantService(lambda: service.store).put_tenant(
        ADMIN, "carol", TenantSpec.model_validate({"traffic": GRANT, "destinations": DESTINATIONS}))
    yield service
    if service._state.started:  # a test may have closed it to restart
        service.close()


def udp_to(address: str, port: int) -> bytes:
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst=address)
                 / UDP(sport=40000, dport=port) / (b"p" * 32))


def sent(service: NetAppService, netns: str, frame: bytes) -> tuple[str, Optional[int], Optional[str]]:
    """The frame run through the program as arrived on A: verdict, the interface it leaves by, intent."""
    with entered(netns):
        out = service.dataplane.test_run(frame, service._state.index.interfaces[A])
    return out.verdict, out.egress_ifindex, out.intent


def test_an_allowed_redirects_packets_leave_by_the_allowed_interface_and_no_other(site, netns):
    interfaces = site._state.index.interfaces
    with pytest.raises(InvalidInput, match=f"interface '{A}' is not a destination of tenant 'carol'"):
        site.create_intent(CAROL, Intent.model_validate({"id": "to-a", "action": {"type": "redirect", "interface": A},
                                                         "match": {"protocol": "udp", "dst_port": 5000}}))
    site.create_intent(CAROL, Intent.model_validate({"id": "to-b", "action": {"type": "redirect", "interface": B},
                                                     "match": {"protocol": "udp", "dst_port": 5000}}))
    site.create_intent(ADMIN, Intent.model_validate({"id": "site-to-a", "action": {"type": "redirect", "interface": A},
                                                     "match": {"dst": "203.0.113.0/24", "protocol": "udp",
                                                               "dst_port": 5000}}))
    try:
        assert sent(site, netns, udp_to("192.0.2.10", 5000)) == ("REDIRECT", interfaces[B], "carol/to-b")
        assert sent(site, netns, udp_to("203.0.113.10", 5000)) == ("REDIRECT", interfaces[A], "operator/site-to-a")
        assert sent(site, netns, udp_to("192.0.2.10", 5001)) == ("PASS", None, None), "no rule: not redirected"
    finally:
        site.delete_intent(CAROL, "to-b")
        site.delete_intent(ADMIN, "site-to-a")


def test_an_intent_naming_no_group_is_refused_when_the_default_group_sends_outside(site):
    site.put_alternative(ADMIN, group(DEFAULT, OUTSIDE))
    with pytest.raises(InvalidInput) as refused:
        site.create_intent(CAROL, best_effort("be", 5000))
    assert refused.value.field == "alternative"
    assert "site's default group" in refused.value.detail and f"alternative group {DEFAULT}, members[0]" in refused.value.detail
    assert f"{OUTSIDE} is not a destination of tenant 'carol'" in refused.value.detail
    assert "name an alternative group" in refused.value.detail
    assert in_kernel(site) == 0, "a refused intent installs nothing"
    site.put_alternative(ADMIN, group(NAMED, INSIDE))
    site.create_intent(CAROL, best_effort("named", 5001, alternative=NAMED))  # its own group: allowed
    pass_only = Intent.model_validate({"id": "plain", "action": {"type": "pass"},
                                       "match": {"dst": "192.0.2.1/32", "protocol": "udp", "dst_port": 5002}})
    site.create_intent(CAROL, pass_only)  # a priority pass never overflows: the default group is not its


def test_a_change_of_the_default_group_an_intent_would_leave_by_is_refused_naming_it(site, state_dir, netns):
    site.put_alternative(ADMIN, group(DEFAULT, INSIDE))
    site.put_alternative(ADMIN, group(OTHER, OUTSIDE))  # used by no one
    site.create_intent(CAROL, best_effort("be", 5000))
    with pytest.raises(Conflict) as refused:
        site.put_alternative(ADMIN, group(DEFAULT, OUTSIDE))
    assert refused.value.extra == {"tenant": "carol", "intent": "be"}, refused.value.detail
    assert site.get_alternative(ADMIN, DEFAULT).members[0].ip4 is not None
    assert str(site.get_alternative(ADMIN, DEFAULT).members[0].ip4) == INSIDE, "the group is kept"

    narrowed = TenantSpec.model_validate({"traffic": GRANT, "destinations": {"peers": ["198.51.100.128/25"]}})
    with pytest.raises(Conflict, match="'be'.*site's default group"):
        TenantService(lambda: site.store).put_tenant(ADMIN, "carol", narrowed)

    site.close()
    with pytest.raises(ServiceError, match=f"default_alternative {OTHER}.*intent 'be' of tenant 'carol'"):
        started(state_dir, netns, OTHER, dataplane=False)
    restarted = started(state_dir, netns, DEFAULT)  # the default it had: starts, the intent installed
    try:
        assert restarted.get_intent(CAROL, "be").intent.alternative is None
        assert in_kernel(restarted) == 3  # be, and the first test's named and plain
    finally:
        restarted.close()
