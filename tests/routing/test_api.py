"""/api/v1/routes and `netapp routes`, through the real server (uvicorn): admin only, routes checked
against the node (instance private, device present) with the field at fault named, stored, written
to the maps (a fake data plane here; the kernel's in test_datapath.py) and kept over a restart."""

from __future__ import annotations

import ipaddress
from typing import Iterator

import pytest
from typer.testing import CliRunner

from netapp.cli.main import app as cli
from netapp.core.config import UpfSettings
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.fake import FakeDpp
from netapp.routing.routes import get_routing
from netapp.routing.service import Routing
from netapp.routing.table import RoutingTable
from netapp.service.store import Store
from tests.api.conftest import token_of
from tests.api.problems import assert_problem, invalid_param

ROUTES = "/api/v1/routes"
UPF = UpfSettings(n6_interfaces={"n6a": "internet", "n6b": "ims"}, routing={"internet": "private"})
INTERNET = 2  # the instances are numbered in the order of their names: ims 1, internet 2
ROUTE = {"instance": "internet", "prefix": "192.0.2.0/24", "gateway": "10.6.0.2", "device": "lo"}


class Node:
    """A store and a fake data plane's maps, and the Routing over them (made anew by restart())."""

    def __init__(self, path):
        self.path = path
        self.dataplane = Dataplane(FakeDpp())
        self.bumps = 0
        self.open()

    def open(self) -> None:
        self.store = Store.open(self.path, synchronous="NORMAL")
        self.routing = Routing(self.store, UPF, RoutingTable(self.dataplane.table, self._bump))

    def _bump(self) -> None:
        self.bumps += 1

    def restart(self) -> None:
        self.store.close()
        self.open()
        self.routing.reconcile()

    def map_routes(self) -> set:
        return {(instance, str(network)) for instance, network in self.routing._table.route_keys()}


@pytest.fixture
def node(api_app, service, tmp_path) -> Iterator[Node]:
    node = Node(tmp_path / "netapp.db")
    api_app.dependency_overrides[get_routing] = lambda: node.routing
    try:
        yield node
    finally:
        api_app.dependency_overrides.pop(get_routing, None)
        node.store.close()


def test_an_admin_adds_lists_and_deletes_a_route(node, admin):
    response = admin.post(ROUTES, json=ROUTE)
    assert response.status_code == 201, response.text
    assert response.json() == {**ROUTE, "resolved": None}
    assert node.map_routes() == {(INTERNET, "192.0.2.0/24")} and node.bumps == 1, "in the map, the cache's generation moved"
    assert admin.get(ROUTES).json() == [{**ROUTE, "resolved": None}]
    response = admin.delete(ROUTES, params={"instance": "internet", "prefix": "192.0.2.0/24"})
    assert response.status_code == 204, response.text
    assert admin.get(ROUTES).json() == [] and node.map_routes() == set()
    assert_problem(admin.delete(ROUTES, params={"instance": "internet", "prefix": "192.0.2.0/24"}), 404)


def test_a_route_replaces_the_one_of_its_prefix(node, admin):
    admin.post(ROUTES, json=ROUTE)
    onlink = {**ROUTE, "gateway": None}
    assert admin.post(ROUTES, json=onlink).status_code == 201
    assert admin.get(ROUTES).json() == [{**onlink, "resolved": None}]


def test_routes_are_kept_over_a_restart(node, admin):
    admin.post(ROUTES, json=ROUTE)
    admin.post(ROUTES, json={**ROUTE, "prefix": "2001:db8::/32", "gateway": "fe80::1"})
    node.dataplane = Dataplane(FakeDpp())  # the maps lost as well: a new instance
    node.restart()
    assert node.map_routes() == {(INTERNET, "192.0.2.0/24"), (INTERNET, "2001:db8::/32")}
    assert [route["prefix"] for route in admin.get(ROUTES).json()] == ["192.0.2.0/24", "2001:db8::/32"]


def test_a_restart_takes_out_of_the_maps_what_is_not_stored(node):
    node.routing._table.put_route(INTERNET, ipaddress.ip_network("198.51.100.0/24"), None, 1)
    node.restart()
    assert node.map_routes() == set()


def test_tenants_may_not_see_or_change_routes(node, tenant_a):
    assert_problem(tenant_a.get(ROUTES), 403)
    assert_problem(tenant_a.post(ROUTES, json=ROUTE), 403)


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"prefix": "192.0.2.1/24"}, "prefix", "host bits"),
        ({"prefix": "banana"}, "prefix", "not an IP prefix"),
        ({"gateway": "2001:db8::1"}, "gateway", "must be of the prefix's family"),
        ({"gateway": "10.6.0"}, "gateway", "not an IP address"),
        ({"device": "x" * 16}, "device", "at most 15"),
    ],
)
def test_a_malformed_route_names_its_field(node, admin, change, field, says):
    param = invalid_param(assert_problem(admin.post(ROUTES, json={**ROUTE, **change}), 400))
    assert param["name"].endswith(field) and says in param["reason"], param
    assert node.map_routes() == set()


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"instance": "enterprise"}, "instance", "no such instance (known: ims, internet)"),
        ({"instance": "ims"}, "instance", "routed by the host's FIB"),
        ({"device": "nosuchdev0"}, "device", "no such interface"),
    ],
)
def test_a_route_the_node_cannot_serve_is_refused_naming_its_field(node, admin, change, field, says):
    problem = assert_problem(admin.post(ROUTES, json={**ROUTE, **change}), 400)
    assert invalid_param(problem)["name"] == field and says in problem["detail"], problem
    assert admin.get(ROUTES).json() == [] and node.map_routes() == set()


def test_the_cli_adds_lists_and_deletes(node, server):
    runner = CliRunner()
    options = ["--url", server.url, "--token", token_of("admin")]
    result = runner.invoke(cli, ["routes", "add", "internet", "192.0.2.0/24", "--via", "10.6.0.2", "--dev", "lo",
                                 *options])
    assert result.exit_code == 0, result.output
    assert "internet: 192.0.2.0/24 via 10.6.0.2 dev lo" in result.output
    result = runner.invoke(cli, ["routes", "list", "--json", *options])
    assert result.exit_code == 0 and '"prefix": "192.0.2.0/24"' in result.output, result.output
    result = runner.invoke(cli, ["routes", "add", "ims", "192.0.2.0/24", "--dev", "lo", *options])
    assert result.exit_code == 2 and "routed by the host's FIB" in result.output, result.output
    result = runner.invoke(cli, ["routes", "delete", "internet", "192.0.2.0/24", *options])
    assert result.exit_code == 0, result.output
    assert node.map_routes() == set()


def test_the_setting_names_the_instances_that_exist():
    with pytest.raises(ValueError, match=r"upf.routing.enterprise: no such network instance \(known: ims, internet\)"):
        UpfSettings(n6_interfaces={"n6a": "internet", "n6b": "ims"}, routing={"enterprise": "private"})
    with pytest.raises(ValueError, match="private routing needs upf.output fib"):
        UpfSettings(n6_interfaces={"n6a": "internet"}, routing={"internet": "private"}, output="tx")
    assert UpfSettings(n6_interfaces={"n6a": "internet"}).private_instances() == {}
