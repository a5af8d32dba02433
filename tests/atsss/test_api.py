"""/api/v1/atsss and `netapp atsss`, through the real server (uvicorn): sessions tenant-scoped as
intents (a tenant sees and changes only its own, and steers only UEs granted to it), errors naming
their field, the paths' state fed by PATCH, the paths' counters. TEST DOUBLE: the maps are a fake
data plane's here (netapp.dataplane.fake.FakeDpp), so that the API runs without root; the kernel's
in test_service_pipeline.py."""

from __future__ import annotations

import json
from ctypes import c_uint32
from ipaddress import ip_address
from typing import Any, Iterator

import pytest
from typer.testing import CliRunner

from netapp.atsss.abi import PathFlags, PathStats
from netapp.atsss.routes import get_atsss
from netapp.atsss.index import SessionIndex
from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps
from netapp.cli.main import app as cli
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from tests.api import conftest as api
from tests.api.conftest import token_of
from tests.api.problems import assert_problem, invalid_param
from tests.utils.service import ADMIN

admin, api_app, client_for, server, service, tenant_a, tenant_b, tokens_path = (
    api.admin, api.api_app, api.client_for, api.server, api.service, api.tenant_a, api.tenant_b, api.tokens_path)

SESSIONS = "/api/v1/atsss/sessions"
# tenant-a's access interfaces: where its redundant sessions' copies leave
GRANTS = {"tenant-a": [{"dst": "10.60.0.0/24"}, *({"interface": f"acc{n}", "dst": "10.60.0.0/24"} for n in range(3))],
          "tenant-b": [{"dst": "10.70.0.0/24"}]}


def path(n: int, **overrides: Any) -> dict[str, Any]:
    return {"access": "3GPP" if n == 1 else "non-3GPP", "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}",
            "local_port": 5000 + n, "peer_port": 6000 + n, "source_mac": f"02:00:00:00:aa:0{n}",
            "next_hop_mac": f"02:00:00:00:bb:0{n}", **overrides}


def body(name: str = "ue5", ue: str = "10.60.0.5", mode: str = "weighted", **overrides: Any) -> dict[str, Any]:
    return {"name": name, "ue": ue, "mode": mode, "paths": [path(1, weight=3), path(2)], **overrides}


class FakeNode:
    """The service over the test's store and a fake data plane's ATSSS maps."""

    def __init__(self, store: Any, netns: str):
        self.dataplane = Dataplane(FakeDpp())
        self.atsss = Atsss(store, AtsssMaps(self.dataplane.table), netns=netns)

    def path(self, slot: int) -> Any:
        return self.dataplane.table("dpp_atsss_paths").get(c_uint32(slot))

    def sessions(self) -> list[Any]:
        return list(SessionIndex(self.dataplane.table).items())

    def group(self, ue: str) -> int:
        """The group of ports the UE's session names (dpp_atsss_tx)."""
        value = AtsssMaps(self.dataplane.table).session(ip_address(ue))
        assert value is not None
        return value.tx_group


@pytest.fixture
def node(api_app, admin, node_ns) -> Iterator[FakeNode]:
    node = FakeNode(api_app.state.tenants.store, node_ns)
    api_app.dependency_overrides[get_atsss] = lambda: node.atsss
    for tenant, traffic in GRANTS.items():
        assert admin.put(f"/api/v1/tenants/{tenant}", json={"traffic": traffic}).status_code in (200, 201)
    try:
        yield node
    finally:
        api_app.dependency_overrides.pop(get_atsss, None)


def test_a_tenant_creates_reads_patches_and_deletes_its_session(node, tenant_a):
    created = tenant_a.post(SESSIONS, json=body())
    assert created.status_code == 201, created.text
    assert created.headers["location"] == f"{SESSIONS}/ue5"
    session = created.json()
    assert (session["tenant"], session["slots"], session["effective_mode"]) == ("tenant-a", [1, 2], "weighted")
    assert [s["name"] for s in tenant_a.get(SESSIONS).json()] == ["ue5"]
    assert tenant_a.get(f"{SESSIONS}/ue5").json() == session

    patched = tenant_a.patch(f"{SESSIONS}/ue5", json={"paths": [{"index": 1, "up": False, "rtt_us": 1800}]})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["paths"][1]["up"], patched.json()["paths"][1]["rtt_us"]) == (False, 1800)
    assert (node.path(2).flags & PathFlags.UP, node.path(2).rtt_us) == (0, 1800)
    assert node.path(1).flags & PathFlags.UP, "the other path stays up"

    replaced = tenant_a.put(f"{SESSIONS}/ue5", json=body(mode="active_standby"))
    assert replaced.status_code == 200 and replaced.json()["revision"] == 3, replaced.text
    assert tenant_a.delete(f"{SESSIONS}/ue5").status_code == 204
    assert node.sessions() == [] and tenant_a.get(SESSIONS).json() == []
    assert_problem(tenant_a.get(f"{SESSIONS}/ue5"), 404)


def test_the_counters_are_each_paths_sent_and_received_summed_over_the_cpus_with_its_share(node, tenant_a):
    slots = tenant_a.post(SESSIONS, json=body()).json()["slots"]
    paths, stats = node.dataplane.table("dpp_atsss_paths"), node.dataplane.table("dpp_atsss_path_stats")
    sent = []
    for slot, (packets, octets) in zip(slots, [(6, 600), (2, 150)]):
        value = paths.get(c_uint32(slot))
        value.packets, value.bytes = packets, octets
        sent.append((c_uint32(slot), value))
    paths.update(sent)
    stats.update([(c_uint32(slots[0]), [PathStats(3, 300, 1), PathStats(3, 300)] + [PathStats()] * (stats.cpus - 2)),
                  (c_uint32(slots[1]), [PathStats(2, 150)] + [PathStats()] * (stats.cpus - 1))])
    counters = tenant_a.get(f"{SESSIONS}/ue5/counters").json()
    assert [(p["index"], p["packets"], p["bytes"], p["share"]) for p in counters["paths"]] == [
        (0, 6, 600, 0.75), (1, 2, 150, 0.25)]
    assert [(p["rx_packets"], p["rx_bytes"], p["rx_acks"]) for p in counters["paths"]] == [(6, 600, 1), (2, 150, 0)]


def test_a_tenant_sees_and_changes_only_its_own_sessions(node, tenant_a, tenant_b, admin):
    tenant_a.post(SESSIONS, json=body())
    assert tenant_b.get(SESSIONS).json() == []
    for response in (tenant_b.get(f"{SESSIONS}/ue5"), tenant_b.patch(f"{SESSIONS}/ue5", json={"mode": "round_robin"}),
                     tenant_b.delete(f"{SESSIONS}/ue5"), tenant_b.get(f"{SESSIONS}/ue5/counters")):
        assert_problem(response, 404)
    problem = assert_problem(tenant_b.post(SESSIONS, json=body("mine")), 403)  # tenant-a's UE
    assert invalid_param(problem)["name"] == "ue"
    assert [s["tenant"] for s in admin.get(SESSIONS).json()] == ["tenant-a"]
    assert admin.get(f"{SESSIONS}/ue5", params={"tenant": "tenant-a"}).status_code == 200


@pytest.mark.parametrize("change, field", [
    ({"paths": []}, "paths"),
    ({"mode": "fastest"}, "mode"),
    ({"paths": [path(1, local="2001:db8::1")]}, "paths[0].peer"),
    ({"paths": [path(1, next_hop_mac=None)]}, "paths[0].next_hop_mac"),
    ({"ue": "not an address"}, "ue"),
    ({"mode": "redundant"}, "paths[0].interface"),  # its copies leave by each path's interface
    ({"mode": "priority", "paths": [path(1, priority=256)]}, "paths[0].priority"),
])  # fmt: skip
def test_a_bad_session_is_a_problem_naming_its_field(node, tenant_a, change, field):
    problem = assert_problem(tenant_a.post(SESSIONS, json=body(**change)), 400)
    assert {param["name"] for param in problem["invalid-params"]} == {field}  # an address: one per family
    assert node.sessions() == []


def test_redundant_sessions_of_the_same_ports_share_a_group_and_of_other_ports_get_their_own(node, tenant_a):
    first = body(mode="redundant", paths=[path(1, interface="acc0"), path(2, interface="acc1")])
    other = body("ue6", ue="10.60.0.6", mode="redundant", paths=[path(3, interface="acc0"), path(4, interface="acc2")])
    same = body("ue7", ue="10.60.0.7", mode="redundant", paths=[path(5, interface="acc0"), path(6, interface="acc1")])
    for session in (first, other, same):
        assert tenant_a.post(SESSIONS, json=session).status_code == 201

    shared = node.group("10.60.0.5")
    assert node.group("10.60.0.7") == shared != node.group("10.60.0.6")
    assert tenant_a.delete(f"{SESSIONS}/ue5").status_code == 204
    assert node.group("10.60.0.7") == shared, "a group stays while a session names it"


@pytest.mark.parametrize("patch, status, field", [
    ({"paths": [{"index": 3, "up": False}]}, 400, "paths"),
    ({"paths": [{"index": 0}]}, 400, "paths[0].index"),
    ({}, 400, "paths"),
    ({"paths": [{"index": 0, "weight": 0}, {"index": 1, "weight": 0}]}, 400, "paths"),
])  # fmt: skip
def test_a_patch_the_session_cannot_take_is_refused_and_changes_nothing(node, tenant_a, patch, status, field):
    before = tenant_a.post(SESSIONS, json=body()).json()
    problem = assert_problem(tenant_a.patch(f"{SESSIONS}/ue5", json=patch), status)
    assert invalid_param(problem)["name"] == field
    assert tenant_a.get(f"{SESSIONS}/ue5").json() == before


def test_the_cli_applies_lists_feeds_a_path_counts_and_deletes(node, server, tmp_path):
    runner = CliRunner()
    options = ["--url", server.url, "--token", token_of("tenant-a")]
    file = tmp_path / "sessions.json"
    ue6 = body("ue6", ue="10.60.0.6", mode="smallest_delay", paths=[path(1, peer="198.51.100.6"), path(4)])
    file.write_text(json.dumps({"sessions": [body(), ue6]}))
    result = runner.invoke(cli, ["atsss", "sessions", "apply", str(file), *options])
    assert result.exit_code == 0, result.output
    assert "created ue5 (UE 10.60.0.5, slots [1, 2])" in result.output
    result = runner.invoke(cli, ["atsss", "sessions", "path", "ue6", "0", "--rtt-us", "900", "--down", *options])
    assert result.exit_code == 0 and "3GPP 198.51.100.6 (down)" in result.output, result.output
    result = runner.invoke(cli, ["atsss", "sessions", "list", "--json", *options])
    assert [s["name"] for s in json.loads(result.output)] == ["ue5", "ue6"]
    result = runner.invoke(cli, ["atsss", "sessions", "counters", "ue5", *options])
    assert result.exit_code == 0 and "non-3GPP" in result.output, result.output
    result = runner.invoke(cli, ["atsss", "sessions", "path", "ue5", "0", *options])
    assert result.exit_code == 2 and "--up/--down, --rtt-us, --weight, --loss or --congested" in result.output
    result = runner.invoke(cli, ["atsss", "sessions", "path", "ue5", "1", "--loss", "0.25", *options])
    assert result.exit_code == 0, result.output
    assert [p.loss for p in node.atsss.get_session(ADMIN, "tenant-a/ue5").paths] == [None, 0.25], "stored"
    result = runner.invoke(cli, ["atsss", "sessions", "path", "ue5", "1", "--loss", "1.5", *options])
    assert result.exit_code != 0 and "loss" in result.output, result.output
    assert [p.loss for p in node.atsss.get_session(ADMIN, "tenant-a/ue5").paths] == [None, 0.25], "kept"
    result = runner.invoke(cli, ["atsss", "sessions", "path", "ue6", "1", "--congested", *options])
    assert result.exit_code == 0 and "198.51.100.4 (congested)" in result.output, result.output
    slots = node.atsss.get_session(ADMIN, "tenant-a/ue6").slots
    assert [bool(node.path(slot).flags & PathFlags.CONGESTED) for slot in slots] == [False, True], "in the map"
    result = runner.invoke(cli, ["atsss", "sessions", "path", "ue6", "1", "--not-congested", *options])
    assert result.exit_code == 0 and "(congested)" not in result.output, result.output
    result = runner.invoke(cli, ["atsss", "sessions", "delete", "ue5", *options])
    assert result.exit_code == 0 and [s.name for s in node.atsss.list_sessions(ADMIN)] == ["ue6"]


def test_a_redundant_session_whose_paths_share_an_interface_is_refused_naming_the_second(node, tenant_a):
    # the kernel runs a broadcast's devmap program once per interface, so both copies would leave
    # with the first path's headers: refused, and nothing is written
    shared = body(mode="redundant", paths=[path(1, interface="acc0"), path(2, interface="acc0")])
    problem = assert_problem(tenant_a.post(SESSIONS, json=shared), 400)
    assert invalid_param(problem)["name"] == "paths[1].interface" and "paths[0]" in problem["detail"], problem
    assert node.sessions() == []
    shared["mode"] = "round_robin"  # one copy a packet: sharing an interface is fine
    assert tenant_a.post(SESSIONS, json=shared).status_code == 201


def test_a_path_leaves_by_the_tenants_destinations_and_a_narrowing_that_strands_one_is_refused(node, admin, tenant_a):
    destinations = {"interfaces": ["acc0", "acc1"]}  # no longer every interface its grants name
    assert admin.put("/api/v1/tenants/tenant-a", json={"traffic": GRANTS["tenant-a"], "destinations": destinations}
                     ).status_code == 200
    stray = body(mode="redundant", paths=[path(1, interface="acc0"), path(2, interface="acc2")])
    problem = assert_problem(tenant_a.post(SESSIONS, json=stray), 403)
    assert invalid_param(problem)["name"] == "paths[1].interface" and invalid_param(problem)["allowed"] == "acc0, acc1"
    assert node.sessions() == []
    session = body(mode="redundant", paths=[path(1, interface="acc0"), path(2, interface="acc1")])
    assert tenant_a.post(SESSIONS, json=session).status_code == 201
    narrowed = admin.put("/api/v1/tenants/tenant-a", json={"traffic": GRANTS["tenant-a"],
                                                           "destinations": {"interfaces": ["acc0"]}})
    problem = assert_problem(narrowed, 409)
    assert invalid_param(problem)["name"] == "destinations" and problem["session"] == "ue5", problem
