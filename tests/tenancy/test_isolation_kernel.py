"""Tenant isolation in the packets: random grants and intents for three tenants, written through
the service as each tenant, then random packets through the real XDP program. A rule of a tenant
may act only on a packet that tenant owns."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from netapp.intents.models import Intent
from netapp.service.contract import Principal, ServiceError
from netapp.service.service import NetAppService, split_rule_id
from netapp.service.store import Store
from netapp.tenancy.models import TenantSpec, TrafficGrant
from netapp.tenancy.service import TenantService
from tests.utils import packets
from tests.utils.dataplane import Lent, traced_dataplane
from tests.utils.service import ADMIN, WRITER_SCOPES, settings_for

TENANTS = ("t0", "t1", "t2")
VNIS = (1, 2, 3)
TEIDS = range(0x100, 0x106)
PREFIXES = ("10.0.0.0/8", "10.1.0.0/16", "10.2.0.0/16", "10.1.2.0/24")
SOURCES = ("10.1.2.3", "10.1.9.9", "10.2.0.1", "10.3.0.1", "172.16.0.1")
DESTINATIONS = ("192.168.1.1", "192.168.2.1")
MAX_RULES = 1024


@st.composite
def grant(draw) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if draw(st.booleans()):
        fields.update(overlay="vxlan", vni=draw(st.sampled_from(VNIS)))
    if draw(st.booleans()):
        first = draw(st.sampled_from(TEIDS))
        fields["teids"] = {"first": first, "last": draw(st.sampled_from([t for t in TEIDS if t >= first]))}
    if draw(st.booleans()) or not fields:
        fields["src"] = draw(st.sampled_from(PREFIXES))
    return fields


@st.composite
def intent(draw, number: int) -> dict[str, Any]:
    match: dict[str, Any] = {}
    if draw(st.booleans()):
        match.update(overlay="vxlan", vni=draw(st.sampled_from(VNIS)))
    if draw(st.booleans()):
        match["teid"] = draw(st.sampled_from(TEIDS))
    if draw(st.booleans()):
        match["src"] = draw(st.sampled_from(PREFIXES + SOURCES))
    if draw(st.booleans()):
        match.update(protocol="udp", dst_port=draw(st.sampled_from([5000, 5001])))
    return {
        "id": f"i{number}",
        "priority": draw(st.sampled_from([1, 100, 65535])),
        "match": match,
        "action": {"type": draw(st.sampled_from(["drop", "pass"]))},
    }


@st.composite
def packet(draw) -> dict[str, Any]:
    return {
        "vni": draw(st.sampled_from(VNIS + (4,))),
        "teid": draw(st.sampled_from([None, *TEIDS, 0x200])),
        "src": draw(st.sampled_from(SOURCES)),
        "dst": draw(st.sampled_from(DESTINATIONS)),
        "dport": draw(st.sampled_from([5000, 5001, 80])),
    }


def frame(fields: dict[str, Any]) -> bytes:
    """VXLAN (vni) / inner Ethernet / [IPv4 / UDP 2152 / GTP-U (teid)] / UE IPv4 / UDP."""
    ue = packets.ue_udp(fields["src"], fields["dst"], 40000, fields["dport"])
    if fields["teid"] is None:
        inner = packets.ether(ue)
    else:
        inner = packets.inner_gtpu_frame(packets.gtpu(fields["teid"], inner=ue))
    return bytes(packets.outer_udp(packets.vxlan(fields["vni"], inner), dport=packets.VXLAN_PORT))


def owns(grants: list[TrafficGrant], key: dict[str, Any]) -> bool:
    """Whether a packet (the key the program parsed) is in one of the grants."""
    return any(_in_grant(g, key) for g in grants)


def _in_grant(g: TrafficGrant, key: dict[str, Any]) -> bool:
    gtp = "gtp" in key["flags"]
    return (
        (g.overlay is None or key["overlay"] == g.overlay)
        and (g.vni is None or ("vni" in key["flags"] and key["vni"] == g.vni))
        and (g.teids is None or (gtp and key["teid"] in g.teids))
        and (g.src is None or (key["src"] is not None and ipaddress.ip_address(key["src"]) in g.src))
    )


@pytest.fixture(scope="module")
def dataplane():
    """One anonymous traced instance for the module: each service reconciles it to its own store."""
    dp = traced_dataplane(max_rules=MAX_RULES)
    yield dp
    dp.close()


def traced_service(state_dir: Path, dataplane: Any) -> NetAppService:
    """A service with a new store over the module's instance (left open by the service's close)."""
    store = Store.open(state_dir / "netapp.db")
    service = NetAppService(settings_for(state_dir), dataplane=Lent(dataplane), store=store)
    service.start()
    return service


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_tenants_rule_acts_on_a_packet_another_tenant_owns(tmp_path_factory, dataplane, data):
    service = traced_service(tmp_path_factory.mktemp("isolation"), dataplane)
    tenants = TenantService(lambda: service.store)
    try:
        granted: dict[str, list[TrafficGrant]] = {}
        for tenant in TENANTS:
            spec = TenantSpec.model_validate({"traffic": data.draw(st.lists(grant(), min_size=1, max_size=2))})
            try:
                tenants.put_tenant(ADMIN, tenant, spec)
                granted[tenant] = spec.traffic
            except ServiceError:
                granted[tenant] = []  # it meets an earlier tenant's traffic: refused, owns nothing
        installed = 0
        for tenant in TENANTS:
            who = Principal(tenant, WRITER_SCOPES, tenant)
            for number in range(data.draw(st.integers(0, 6))):
                try:
                    service.create_intent(who, Intent.model_validate(data.draw(intent(number))))
                    installed += 1
                except ServiceError:
                    pass  # outside its traffic, spanning grants, or colliding with its own intent
        for fields in data.draw(st.lists(packet(), min_size=10, max_size=30)):
            outcome = dataplane.test_run(frame(fields))
            if outcome.intent is None:
                continue
            owner, _ = split_rule_id(outcome.intent)
            assert owns(granted[owner], outcome.key), (
                f"rule {outcome.intent} acted on {fields}, which tenant {owner} does not own "
                f"(its grants: {[g.describe() for g in granted[owner]]})"
            )
    finally:
        service.close()


def test_a_tenants_catch_all_drop_no_longer_drops_another_tenants_traffic(tmp_path, dataplane):
    """What an adversarial tenant tried: {"match": {}, "action": drop} at priority 65535."""
    service = traced_service(tmp_path, dataplane)
    tenants = TenantService(lambda: service.store)
    try:
        tenants.put_tenant(ADMIN, "a", TenantSpec.model_validate({"traffic": [{"overlay": "vxlan", "vni": 1}]}))
        tenants.put_tenant(ADMIN, "b", TenantSpec.model_validate({"traffic": [{"overlay": "vxlan", "vni": 2}]}))
        a, b = Principal("a", WRITER_SCOPES, "a"), Principal("b", WRITER_SCOPES, "b")
        service.create_intent(a, Intent.model_validate({"id": "mine", "match": {"teid": 0x100}, "action": {"type": "pass"}}))
        created = service.create_intent(
            b, Intent.model_validate({"id": "all", "priority": 65535, "match": {}, "action": {"type": "drop"}})
        )
        assert created.record.intent.match.vni == 2  # narrowed to b's traffic, and shown so
        a_packet = frame({"vni": 1, "teid": 0x100, "src": "10.1.2.3", "dst": "192.168.1.1", "dport": 80})
        b_packet = frame({"vni": 2, "teid": 0x100, "src": "10.1.2.3", "dst": "192.168.1.1", "dport": 80})
        for sent, verdict, rule in ((a_packet, "PASS", "a/mine"), (b_packet, "DROP", "b/all")):
            outcome = dataplane.test_run(sent)
            assert (outcome.verdict, outcome.intent) == (verdict, rule)
    finally:
        service.close()

