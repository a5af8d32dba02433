"""Where a confined tenant's rules may send its traffic (netapp.tenancy.destinations), through the real
server (uvicorn) over a started service on the real data plane (tests/mec/conftest.py): native
intents, a batch, and MEC 011 traffic rules are refused naming the destination field (for MEC, its
dstInterface member), a refused rule leaves nothing in the maps, an allowed one is installed with its
dpp_tunnels entry; a tunnel's source must be an address of the node (the service's namespace); a
narrowing of the destinations, or a change of an alternative group, that an intent would then
violate is refused, naming it.

tenant-b owns UDP to 192.0.2.0/24; the data plane's interfaces are VETH and PEER.

Needs root and libdpp (tests/utils/kernel.py: skipped outside CI, a failure under CI)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from netapp.core.addresses import node_addresses
from netapp.intents.models import Intent
from netapp.mec.tunnels import tunnel_entry
from tests.api.problems import assert_problem, invalid_param
from tests.mec.conftest import PEER, VETH
from tests.utils.mec import traffic_rule

TENANT, APP_B = "tenant-b", "app-b"
INTENTS, TENANTS = "/api/v1/intents", "/api/v1/tenants"
GRANT = [{"dst": "192.0.2.0/24"}]
ALLOWED = {"interfaces": [PEER], "peers": ["198.51.100.0/24"]}
OUTSIDE, INSIDE = "203.0.113.9", "198.51.100.9"  # a peer not allowed, one allowed
OWN_SOURCE = "198.18.0.1"  # given to VETH by the test of sources


def intent(intent_id: str, action: dict[str, Any], port: int = 5000) -> dict[str, Any]:
    return {"id": intent_id, "match": {"dst": "192.0.2.0/24", "protocol": "udp", "dst_port": port}, "action": action}


def encapsulate(peer: str) -> dict[str, Any]:
    return {"type": "tunnel", "encapsulate": {"peer": peer}}


def refused_at(response: Any, field: str, status: int = 400) -> str:
    """The problem's one invalid parameter is `field`; its reason."""
    problem = assert_problem(response, status)
    names = [param["name"] for param in problem.get("invalid-params", [])] or [problem.get("field")]
    assert names == [field], problem
    return problem["detail"]


@pytest.fixture(scope="module")
def tenant_b(mec_site):
    admin = mec_site.client("admin")
    assert admin.put(f"{TENANTS}/{TENANT}", json={"traffic": GRANT}).status_code in (200, 201)
    return mec_site.client(TENANT)


def test_without_destinations_a_confined_tenant_sends_out_of_no_interface_its_grants_do_not_name(mec_site, tenant_b):
    detail = refused_at(tenant_b.post(INTENTS, json=intent("out", {"type": "redirect", "interface": PEER})),
                        "action.interface")
    assert f"interface {PEER!r} is not a destination of tenant 'tenant-b'" in detail and "out of none" in detail
    detail = refused_at(tenant_b.post(INTENTS, json=intent("tun", encapsulate(INSIDE))), "action.encapsulate.peer")
    assert "towards none" in detail
    assert mec_site.client("admin").put(f"{TENANTS}/{TENANT}", json={"traffic": [{**GRANT[0], "interface": PEER}]}
                                        ).status_code == 200
    try:
        created = tenant_b.post(INTENTS, json=intent("out", {"type": "redirect", "interface": PEER}))
        assert created.status_code == 201, created.text  # the interface its grant names
        assert tenant_b.delete(f"{INTENTS}/out").status_code == 204
    finally:
        assert mec_site.client("admin").put(f"{TENANTS}/{TENANT}", json={"traffic": GRANT}).status_code == 200


def test_each_destination_field_of_an_intent_is_kept_inside_the_destinations(mec_site, tenant_b):
    admin = mec_site.client("admin")
    assert admin.put(f"{TENANTS}/{TENANT}", json={"traffic": GRANT, "destinations": ALLOWED}).status_code == 200
    cases = [
        ({"type": "redirect", "interface": VETH}, "action.interface"),
        ({"type": "tunnel", "decapsulate": True, "interface": VETH}, "action.interface"),
        ({"type": "tunnel", "towards": OUTSIDE}, "action.towards"),
        (encapsulate(OUTSIDE), "action.encapsulate.peer"),
        ({"type": "duplicate", "interfaces": [PEER, VETH]}, "action.interfaces[1]"),
    ]
    for action, field in cases:
        detail = refused_at(tenant_b.post(INTENTS, json=intent("x", action)), field)
        assert "is not a destination of tenant 'tenant-b'" in detail and ("198.51.100.0/24" in detail or PEER in detail)
    batch = tenant_b.post(f"{INTENTS}/batch", json={"intents": [intent("ok", encapsulate(INSIDE)),
                                                                intent("far", {"type": "tunnel", "towards": OUTSIDE}, 5001)]})
    refused_at(batch, "intents[1].action.towards")
    assert tenant_b.get(INTENTS).json()["items"] == [], "a refused batch installs nothing"

    group = {"id": 7, "members": [{"mac": "02:00:00:00:00:07", "ip4": OUTSIDE}]}
    assert admin.put("/api/v1/alternatives/7", json=group).status_code in (200, 201)
    detail = refused_at(tenant_b.post(INTENTS, json=intent("fwd", {"type": "forward", "alternative": 7})),
                        "action.alternative")
    assert "alternative group 7, members[0]" in detail
    inside = {"id": 8, "members": [{"mac": "02:00:00:00:00:08", "ip4": INSIDE}]}
    assert admin.put("/api/v1/alternatives/8", json=inside).status_code in (200, 201)
    assert tenant_b.post(INTENTS, json=intent("fwd", {"type": "forward", "alternative": 8}, 5002)).status_code == 201
    moved = admin.put("/api/v1/alternatives/8", json={"id": 8, "members": [{"mac": "02:00:00:00:00:08", "ip4": OUTSIDE}]})
    problem = assert_problem(moved, 409)
    assert problem["tenant"] == TENANT and "intent 'fwd'" in problem["detail"], problem
    assert admin.get("/api/v1/alternatives/8").json()["members"][0]["ip4"] == INSIDE
    assert tenant_b.delete(f"{INTENTS}/fwd").status_code == 204

    created = tenant_b.post(INTENTS, json=intent("ok", encapsulate(INSIDE)))
    assert created.status_code == 201, created.text
    entry = tunnel_entry(Intent.model_validate(intent("ok", encapsulate(INSIDE))).action, {})  # type: ignore[arg-type]
    assert mec_site.service.dataplane.table("dpp_tunnels").get(entry.entry_id) is not None
    try:
        narrowed = admin.put(f"{TENANTS}/{TENANT}", json={"traffic": GRANT, "destinations": {"interfaces": [PEER]}})
        problem = assert_problem(narrowed, 409)
        assert invalid_param(problem)["name"] == "destinations" and problem["intents"] == ["ok"], problem
        assert "send outside these destinations" in problem["detail"], problem
        assert "action.encapsulate.peer" in problem["detail"], problem
        assert admin.get(f"{TENANTS}/{TENANT}").json()["spec"]["destinations"]["peers"] == ALLOWED["peers"]
    finally:
        assert tenant_b.delete(f"{INTENTS}/ok").status_code == 204
    tunnels = mec_site.service.dataplane.tunnel_entries
    assert tunnels.references(entry.entry_id) == 0 and tunnels.pending() == 0, "freed with its rule's delete"
    assert mec_site.service.dataplane.table("dpp_tunnels").get(entry.entry_id) is None
    assert admin.put(f"{TENANTS}/{TENANT}", json={"traffic": GRANT, "destinations": {"interfaces": [PEER]}}
                     ).status_code == 200


def tunnel_rule(peer: str) -> dict[str, Any]:
    """FORWARD_ENCAPSULATED into GTP-U to `peer`, for UDP to tenant-b's 192.0.2.0/24 port 5000."""
    return traffic_rule("t1", action="FORWARD_ENCAPSULATED", dstInterface={
        "interfaceType": "TUNNEL", "tunnelInfo": {"tunnelType": "GTP_U", "tunnelDstAddress": peer}})


def test_a_mec_rule_names_its_refused_destination_by_its_dst_interface_member(mec_site, tenant_b):
    admin = mec_site.client("admin")
    assert admin.put(f"{TENANTS}/{TENANT}", json={"traffic": GRANT, "destinations": ALLOWED}).status_code == 200
    declared = admin.post("/api/v1/mec/applications", json={"appInstanceId": APP_B, "tenant": TENANT,
                                                             "trafficRules": [tunnel_rule(OUTSIDE)]})
    refused_at(declared, "trafficRules[0].dstInterface.tunnelInfo.tunnelDstAddress")
    declared = admin.post("/api/v1/mec/applications", json={"appInstanceId": APP_B, "tenant": TENANT,
                                                             "trafficRules": [tunnel_rule(INSIDE)]})
    assert declared.status_code == 201, declared.text
    try:
        rule = f"/mec_app_support/v1/applications/{APP_B}/traffic_rules/t1"
        detail = refused_at(tenant_b.put(rule, json=tunnel_rule(OUTSIDE)), "dstInterface.tunnelInfo.tunnelDstAddress")
        assert f"{OUTSIDE} is not a destination of tenant 'tenant-b'" in detail
        assert tenant_b.get(rule).json()["dstInterface"]["tunnelInfo"]["tunnelDstAddress"] == INSIDE
    finally:
        assert admin.delete(f"/api/v1/mec/applications/{APP_B}").status_code == 204


def test_a_site_tenant_takes_no_destinations(mec_site):
    refused_at(mec_site.client("admin").put(f"{TENANTS}/tenant-c", json={"site": True, "destinations": ALLOWED}),
               "destinations")


def test_a_tunnels_source_is_an_address_of_the_node_or_refused_naming_it(mec_site, tenant_b):
    """The node is the service's namespace: an address given to its interface VETH becomes a source
    the tenant may use; the host's own addresses, outside that namespace, and other hosts' may not."""
    admin, netns = mec_site.client("admin"), mec_site.service.settings.netns
    assert admin.put(f"{TENANTS}/{TENANT}", json={"traffic": GRANT, "destinations": ALLOWED}).status_code == 200
    from_ = lambda source: {"type": "tunnel", "encapsulate": {"peer": INSIDE, "source": source}}  # noqa: E731
    host = sorted(str(a) for a in node_addresses() if a.version == 4 and not a.is_loopback)
    for source in [OWN_SOURCE, *host[:1]]:
        detail = refused_at(tenant_b.post(INTENTS, json=intent("src", from_(source))), "action.encapsulate.source")
        assert f"{source} is not an address of this node" in detail
    rule = tunnel_rule(INSIDE)
    rule["dstInterface"]["tunnelInfo"]["tunnelSrcAddress"] = OWN_SOURCE
    declared = admin.post("/api/v1/mec/applications", json={"appInstanceId": APP_B, "tenant": TENANT,
                                                             "trafficRules": [rule]})
    refused_at(declared, "trafficRules[0].dstInterface.tunnelInfo.tunnelSrcAddress")
    subprocess.run(["ip", "-n", netns, "addr", "add", f"{OWN_SOURCE}/32", "dev", VETH], check=True)
    try:
        created = tenant_b.post(INTENTS, json=intent("src", from_(OWN_SOURCE)))
        assert created.status_code == 201, created.text
        assert tenant_b.delete(f"{INTENTS}/src").status_code == 204
    finally:
        subprocess.run(["ip", "-n", netns, "addr", "del", f"{OWN_SOURCE}/32", "dev", VETH], check=True)
