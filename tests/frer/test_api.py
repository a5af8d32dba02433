"""/api/v1/frer and `netapp frer`, through the real server (uvicorn): streams tenant-scoped as intents
(a tenant sees and changes only its own, and uses only the interfaces and traffic granted to it),
errors naming their field, the 802.1CB counters. The maps are a fake data plane's here
(tests/frer/fake.py); the kernel's in test_service_pipeline.py."""

from __future__ import annotations

from ctypes import c_uint32
from typing import Any, Iterator

import pytest
from typer.testing import CliRunner

from netapp.cli.main import app as cli
from netapp.dataplane.facade import Dataplane
from netapp.frer.abi import PortStats
from netapp.frer.routes import get_frer
from tests.api import conftest as api
from tests.api.conftest import token_of
from tests.api.problems import assert_problem, invalid_param
from tests.frer.fake import INTERFACES, FakeFrerNode

admin, api_app, client_for, server, service, tenant_a, tenant_b, tokens_path = (
    api.admin, api.api_app, api.client_for, api.server, api.service, api.tenant_a, api.tenant_b, api.tokens_path)

STREAMS = "/api/v1/frer/streams"
MAC = "02:00:00:00:00:01"
IP = {"source": "10.1.0.1", "destination": "10.1.0.2", "protocol": "udp", "destination_port": 5000}
# Tenant a owns VLAN 100 and its ports pa1, pa2, la0; tenant b VLAN 200 and pb1, lb0.
GRANTS = {
    "tenant-a": [{"vlan": 100}, *({"interface": name, "vlan": 100} for name in ("pa1", "pa2", "la0"))],
    "tenant-b": [{"vlan": 200}, *({"interface": name, "vlan": 200} for name in ("pb1", "lb0"))],
}


def talker(name: str = "t1", vlan: int = 100, ports: tuple[str, ...] = ("pa1", "pa2")) -> dict[str, Any]:
    return {"name": name, "identification": [{"null": {"destination_mac": MAC, "vlan": vlan}}],
            "generation": {"ports": [{"interface": port} for port in ports]}}


def listener(name: str = "l1", vlan: int = 100, deliver: str = "la0", **recovery: Any) -> dict[str, Any]:
    return {"name": name, "identification": [{"ip": {**IP, "vlan": vlan}}],
            "recovery": {"deliver_interface": deliver, **recovery}}


@pytest.fixture
def node(api_app, service, tmp_path, admin) -> Iterator[FakeFrerNode]:
    """FRER's service over the test's store (the tenants' records are there) and a fake data plane."""
    node = FakeFrerNode(tmp_path / "unused.db", store=api_app.state.tenants.store)
    api_app.dependency_overrides[get_frer] = lambda: node.frer
    for tenant, traffic in GRANTS.items():
        assert admin.put(f"/api/v1/tenants/{tenant}", json={"traffic": traffic}).status_code in (200, 201)
    try:
        yield node
    finally:
        api_app.dependency_overrides.pop(get_frer, None)


def test_a_tenant_creates_reads_replaces_and_deletes_its_stream(node, tenant_a):
    response = tenant_a.post(STREAMS, json=listener())
    assert response.status_code == 201, response.text
    assert response.headers["location"] == f"{STREAMS}/l1"
    stream = response.json()
    assert (stream["name"], stream["tenant"], stream["handle"], stream["revision"]) == ("l1", "tenant-a", 1, 1)
    assert node.entries("dpp_frer_streams")[1].deliver_ifindex == INTERFACES["la0"]
    assert [s["name"] for s in tenant_a.get(STREAMS).json()] == ["l1"]
    assert tenant_a.get(f"{STREAMS}/l1").json() == stream
    replaced = tenant_a.put(f"{STREAMS}/l1", json=listener(history_length=8))
    assert replaced.status_code == 200 and replaced.json()["revision"] == 2, replaced.text
    assert replaced.json()["recovery"]["history_length"] == 8
    assert tenant_a.put(f"{STREAMS}/t1", json=talker()).status_code == 201, "PUT creates"
    assert node.frer_calls.ports == [INTERFACES["pa1"], INTERFACES["pa2"]]
    assert tenant_a.delete(f"{STREAMS}/l1").status_code == 204
    assert_problem(tenant_a.get(f"{STREAMS}/l1"), 404)
    assert set(node.entries("dpp_frer_streams")) == {2}


def test_a_tenant_sees_and_changes_only_its_own_streams(node, tenant_a, tenant_b, admin):
    mine = tenant_a.post(STREAMS, json=listener("s")).json()
    assert tenant_b.get(STREAMS).json() == []
    assert_problem(tenant_b.get(f"{STREAMS}/s"), 404)
    assert_problem(tenant_b.get(f"{STREAMS}/s/counters"), 404)
    assert_problem(tenant_b.delete(f"{STREAMS}/s"), 404)
    assert_problem(tenant_b.get(f"{STREAMS}/s", params={"tenant": "tenant-a"}), 403)
    theirs = tenant_b.put(f"{STREAMS}/s", json=listener("s", vlan=200, deliver="lb0"))
    assert theirs.status_code == 201, "names are per tenant: b's own stream s"
    assert theirs.json()["handle"] != mine["handle"]
    assert tenant_a.get(f"{STREAMS}/s").json() == mine
    every = admin.get(STREAMS).json()
    assert sorted((s["tenant"], s["name"]) for s in every) == [("tenant-a", "s"), ("tenant-b", "s")]
    assert admin.get(f"{STREAMS}/s", params={"tenant": "tenant-a"}).json() == mine
    assert admin.delete(f"{STREAMS}/s", params={"tenant": "tenant-b"}).status_code == 204
    assert [s["tenant"] for s in admin.get(STREAMS).json()] == ["tenant-a"]


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        (talker(ports=("pa1", "pb1")), "generation.ports[1].interface", "'pb1' is not granted to tenant 'tenant-a'"),
        (listener(deliver="lb0"), "recovery.deliver_interface", "'lb0' is not granted"),
        (talker(vlan=200), "identification[0].null", "not all in the traffic of tenant 'tenant-a'"),
        (listener(vlan=None), "identification[0].ip", "not all in the traffic"),
    ],
)
def test_a_tenant_cannot_use_what_is_not_granted_to_it(node, tenant_a, body, field, says):
    problem = assert_problem(tenant_a.post(STREAMS, json=body), 403)
    assert invalid_param(problem)["name"] == field and says in problem["detail"], problem
    assert tenant_a.get(STREAMS).json() == [] and node.entries("dpp_frer_streams") == {}


def test_a_tenant_cannot_take_the_frames_of_another_tenants_stream(node, tenant_a, admin):
    assert admin.post(STREAMS, json=listener("site")).status_code == 201, "the operator's, site-wide"
    problem = assert_problem(tenant_a.post(STREAMS, json=listener()), 400)
    assert invalid_param(problem) == {"name": "identification[0]",
                                      "reason": "the same frames as a stream of another tenant"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"recovery": {"history_length": 1}}, "recovery.history_length"),
        ({"name": "a/b"}, "name"),
        ({"recovery": {"deliver_interface": "nosuch0"}}, "recovery.deliver_interface"),
    ],
)
def test_a_bad_stream_names_its_field(node, admin, change, field):
    problem = assert_problem(admin.post(STREAMS, json={**listener(), **change}), 400)
    assert any(param["name"].endswith(field) for param in problem["invalid-params"]), problem
    assert node.entries("dpp_frer_streams") == {}


def test_a_name_is_created_once_and_a_put_repeats_its_name(node, tenant_a):
    tenant_a.post(STREAMS, json=listener())
    assert invalid_param(assert_problem(tenant_a.post(STREAMS, json=listener()), 409))["name"] == "name"
    assert invalid_param(assert_problem(tenant_a.put(f"{STREAMS}/other", json=listener()), 400))["name"] == "name"


def test_counters_by_802_1cb_names(node, tenant_a):
    handle = tenant_a.post(STREAMS, json=listener()).json()["handle"]
    tenant_a.post(STREAMS, json=talker())
    recovery = Dataplane(node.dpp).table("dpp_frer_recovery")
    value = recovery.get(c_uint32(handle))
    value.passed, value.discarded, value.lost = 10, 9, 1
    recovery.update([(c_uint32(handle), value)])
    counters = tenant_a.get(f"{STREAMS}/l1/counters").json()
    assert counters["role"] == "recovery" and counters["next_sequence_number"] is None
    got = counters["recovery"]
    assert (got["frerCpsSeqRcvyPassedPackets"], got["frerCpsSeqRcvyDiscardedPackets"]) == (10, 9)
    assert got["frerCpsSeqRcvyLostPackets"] == 1 and got["frerCpsSeqRcvyRoguePackets"] == 0
    assert tenant_a.get(f"{STREAMS}/t1/counters").json()["next_sequence_number"] == 0


def test_port_counters_are_summed_over_the_cpus_for_admins(node, tenant_a, admin):
    stats = Dataplane(node.dpp).table("dpp_frer_port_stats")
    stats.update([(INTERFACES["pa1"], [PortStats(encode_errors=cpu + 1, ungrouped=2 * cpu + 5) for cpu in range(stats.cpus)])])
    assert_problem(tenant_a.get("/api/v1/frer/ports"), 403)
    expected = stats.cpus * (stats.cpus + 1) // 2
    assert admin.get("/api/v1/frer/ports").json() == [
        {"interface": "pa1", "ifindex": INTERFACES["pa1"], "frerCpsSeqEncErroredPackets": expected,
         "ungroupedPackets": stats.cpus * (stats.cpus - 1) + 5 * stats.cpus}]


def test_the_cli_applies_lists_counts_and_deletes(node, server, tmp_path):
    runner = CliRunner()
    options = ["--url", server.url, "--token", token_of("tenant-a")]
    file = tmp_path / "streams.yaml"
    file.write_text("streams:\n"
                    f"  - {{name: t1, identification: [{{null: {{destination_mac: '{MAC}', vlan: 100}}}}],"
                    " generation: {ports: [{interface: pa1}, {interface: pa2, vlan: 7}]}}\n"
                    "  - {name: l1, identification: [{ip: {source: 10.1.0.1, destination: 10.1.0.2, protocol: udp,"
                    " vlan: 100}}], recovery: {deliver_interface: la0}}\n")
    result = runner.invoke(cli, ["frer", "streams", "apply", str(file), *options])
    assert result.exit_code == 0, result.output
    assert "created t1 (handle 1, replicated to pa1, pa2)" in result.output
    assert "created l1 (handle 2, delivered to la0)" in result.output
    result = runner.invoke(cli, ["frer", "streams", "apply", str(file), *options])
    assert result.exit_code == 0 and "replaced t1" in result.output, result.output
    result = runner.invoke(cli, ["frer", "streams", "list", "--json", *options])
    assert result.exit_code == 0 and '"name": "l1"' in result.output, result.output
    result = runner.invoke(cli, ["frer", "streams", "counters", "l1", *options])
    assert result.exit_code == 0 and "frerCpsSeqRcvyPassedPackets" in result.output, result.output
    result = runner.invoke(cli, ["frer", "streams", "delete", "t1", *options])
    assert result.exit_code == 0 and [s.name for s in node.frer.list_streams(admin_principal())] == ["l1"]
    file.write_text("streams:\n  - {name: t2, identification: [{null: {destination_mac: '02:00:00:00:00:02',"
                    " vlan: 100}}], generation: {ports: [{interface: pb1}]}}\n")
    result = runner.invoke(cli, ["frer", "streams", "apply", str(file), *options])
    assert result.exit_code == 1, result.output
    assert "403" in result.output and "'pb1' is not granted" in result.output and "lacks the scope" not in result.output
    file.write_text("[{identification: []}]\n")
    result = runner.invoke(cli, ["frer", "streams", "apply", str(file), *options])
    assert result.exit_code == 2 and "every stream must be an object with a name" in result.output, result.output


def admin_principal() -> Any:
    from netapp.service.contract import Principal, Scope

    return Principal("operator", frozenset({Scope.ADMIN}))


def test_a_tenants_grants_and_record_cannot_leave_its_streams_outside(node, tenant_a, admin):
    tenant_a.post(STREAMS, json=talker())
    narrowed = [grant for grant in GRANTS["tenant-a"] if grant.get("interface") != "pa2"]
    problem = assert_problem(admin.put("/api/v1/tenants/tenant-a", json={"traffic": narrowed}), 409)
    assert "FRER stream 't1'" in problem["detail"] and "generation.ports[1].interface" in problem["detail"], problem
    assert "FRER streams" in assert_problem(admin.delete("/api/v1/tenants/tenant-a"), 409)["detail"]
    tenant_a.delete(f"{STREAMS}/t1")
    assert admin.put("/api/v1/tenants/tenant-a", json={"traffic": narrowed}).status_code == 200


def test_a_tenant_holds_at_most_its_quota_of_streams(node, tenant_a, admin):
    assert admin.put("/api/v1/tenants/tenant-a", json={"traffic": GRANTS["tenant-a"], "quotas": {"frer_streams": 1}}
                     ).status_code == 200
    tenant_a.post(STREAMS, json=listener())
    problem = assert_problem(tenant_a.post(STREAMS, json=talker()), 403)
    assert (problem["quota"], problem["limit"], problem["used"]) == ("frer_streams", 1, 2), problem
    assert tenant_a.put(f"{STREAMS}/l1", json=listener(history_length=4)).status_code == 200, "a replace holds no more"
    assert admin.get("/api/v1/tenants/tenant-a").json()["usage"]["frer_streams"] == 1
