"""`netapp openstack prepare` against a recorded OpenStack API (tests/openstack/fake_cloud.py).

No OpenStack runs here: openstacksdk speaks real HTTP to a loopback server that answers with the
documents in recordings/ (written from the API references, not captured from a live cloud) and
applies writes to them as Nova, Glance and Neutron would, refusals included. The tests check the
write calls (method, path, body), that a second run and a dry run make none, and the text.
"""

from __future__ import annotations

import json

import pytest

from tests.openstack.conftest import SERVER_ARGS

FLAVOR_ID = "5f0e2a9c-8d4b-4c7e-b1a3-6e9d2c4f8b57"
IMAGE_ID = "b7d3e9a2-4c1f-4e8b-a6d5-0f2c9e3b7a14"
ALT_PORT = "5f1b3d9e-8a4c-4b0f-97e3-1c9a5b3f7d4a"
N6_PORT = "4e0a2c8d-7f3b-4a9e-86d2-0b8f4a2e6c39"
SPECS = {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate", "hw:mem_page_size": "large"}
PORT_OFF = {"port": {"port_security_enabled": False, "security_groups": []}}


def calls(cloud):
    return [(request.method, request.path, request.body) for request in cloud.writes]


@pytest.mark.parametrize("cloud", ["unmet"], indirect=True)
def test_given_a_stock_cloud_when_prepared_then_flavor_image_and_ports_change_and_a_second_run_changes_nothing(cloud, netapp):
    first = netapp("prepare", *SERVER_ARGS)

    assert first.exit_code == 0, first.output
    assert calls(cloud) == [
        ("POST", f"/compute/v2.1/flavors/{FLAVOR_ID}/os-extra_specs", {"extra_specs": SPECS}),
        ("PATCH", f"/image/v2/images/{IMAGE_ID}", [{"op": "add", "path": "/hw_vif_multiqueue_enabled", "value": "true"}]),
        ("PUT", f"/network/v2.0/ports/{ALT_PORT}", PORT_OFF),
        ("PUT", f"/network/v2.0/ports/{N6_PORT}", PORT_OFF),
    ]
    lines = first.stdout.splitlines()
    assert lines[:4] == [
        "changed flavor dpp.pinned: set hw:cpu_policy=dedicated, hw:cpu_thread_policy=isolate, hw:mem_page_size=large",
        "changed image ubuntu-24.04-server-cloudimg-amd64: set hw_vif_multiqueue_enabled=true",
        "changed port dpp-alt (network altnet): disable port security, remove its security groups",
        "changed port dpp-n6 (network core-n6): disable port security, remove its security groups",
    ]
    # The server booted with the old flavor and Nova never resizes onto the same one: say what to do.
    assert any(line.startswith("note: server dpp-netapp-1 keeps the copy of flavor dpp.pinned") for line in lines)
    assert "note: port dpp-alt (network altnet): the network's MTU is left alone (shared): see netapp openstack check" in lines
    written = len(cloud.writes)

    second = netapp("prepare", *SERVER_ARGS)

    assert second.exit_code == 0, second.output
    assert len(cloud.writes) == written
    assert second.stdout.splitlines()[0] == (
        "no changes: flavor, image and ports already meet the preconditions prepare manages"
    )


@pytest.mark.parametrize("cloud", ["unmet"], indirect=True)
def test_given_dry_run_then_it_lists_the_changes_and_makes_none(cloud, netapp):
    result = netapp("prepare", *SERVER_ARGS, "--dry-run")

    assert result.exit_code == 0, result.output
    assert cloud.writes == []
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:5]] == [
        "would change flavor dpp.pinned",
        "would change image ubuntu-24.04-server-cloudimg-amd64",
        "would change port dpp-alt (network altnet)",
        "would change port dpp-n6 (network core-n6)",
        "dry run",
    ]
    assert lines[4] == "dry run: 4 change(s) not made"


@pytest.mark.parametrize("cloud", ["unmet"], indirect=True)
def test_given_address_pairs_strategy_then_ports_keep_port_security_and_gain_pairs_and_check_passes_them(cloud, netapp):
    result = netapp("prepare", *SERVER_ARGS, "--port-security", "allow-address-pairs")

    assert result.exit_code == 0, result.output
    puts = [(r.path, r.body) for r in cloud.writes if r.method == "PUT"]
    pairs = {"port": {"allowed_address_pairs": [{"ip_address": "0.0.0.0/0"}, {"ip_address": "::/0"}]}}
    assert puts == [(f"/network/v2.0/ports/{ALT_PORT}", pairs), (f"/network/v2.0/ports/{N6_PORT}", pairs)]
    assert "changed port dpp-alt (network altnet): add allowed address pairs 0.0.0.0/0, ::/0" in result.stdout
    # The ports keep their security group, which must let the liveness probe in from the other units.
    rules = [r.body["security_group_rule"] for r in cloud.writes if r.path == "/network/v2.0/security-group-rules"]
    assert rules == [_probe_rule("192.168.70.0/24"), _probe_rule("192.168.60.0/24")]
    assert (
        "changed security group dpp-netapp: allow UDP 2152 (GTP-U echo, the liveness probe) in from 192.168.70.0/24"
        in result.stdout.splitlines()
    )

    check = netapp("check", *SERVER_ARGS, "--json")

    findings = {(f["check"], f["subject"]): f["status"] for f in json.loads(check.stdout)["findings"]}
    assert findings[("port-security", "port dpp-alt (network altnet)")] == "ok"
    assert findings[("port-security", "port dpp-n6 (network core-n6)")] == "ok"
    assert findings[("liveness-probe", "port dpp-alt (network altnet)")] == "ok"
    assert findings[("liveness-probe", "port dpp-n6 (network core-n6)")] == "ok"
    written = len(cloud.writes)

    again = netapp("prepare", *SERVER_ARGS, "--port-security", "allow-address-pairs")

    assert again.exit_code == 0, again.output
    assert len(cloud.writes) == written


def _probe_rule(source):
    return {
        "security_group_id": "0c2e4a6b-8d1f-4e3a-b5c7-9e1d3f5a7b6c",
        "direction": "ingress",
        "ethertype": "IPv4",
        "protocol": "udp",
        "port_range_min": 2152,
        "port_range_max": 2152,
        "remote_ip_prefix": source,
    }


def test_given_two_ports_in_one_group_on_one_subnet_when_prepared_then_one_rule_is_added(cloud, netapp):
    pairs = [{"ip_address": "0.0.0.0/0"}, {"ip_address": "::/0"}]
    for port in cloud.state["ports"]:
        port.update(port_security_enabled=True, security_groups=["0c2e4a6b-8d1f-4e3a-b5c7-9e1d3f5a7b6c"])
        port.update(allowed_address_pairs=pairs, fixed_ips=cloud.find("ports", "name", "dpp-alt")["fixed_ips"])

    result = netapp("prepare", *SERVER_ARGS, "--port-security", "allow-address-pairs")

    assert result.exit_code == 0, result.output
    assert [r.body for r in cloud.writes if r.method == "POST" and "security-group-rules" in r.path] == [
        {"security_group_rule": _probe_rule("192.168.70.0/24")}
    ]


@pytest.mark.parametrize("cloud", ["unmet"], indirect=True)
def test_given_a_new_flavor_name_then_it_is_created_with_the_servers_size_and_the_specs_once(cloud, netapp):
    result = netapp("prepare", *SERVER_ARGS, "--flavor", "dpp.xdp", "--json")

    assert result.exit_code == 0, result.output
    created = cloud.find("flavors", "name", "dpp.xdp")
    assert calls(cloud)[:2] == [
        ("POST", "/compute/v2.1/flavors", {"flavor": {"name": "dpp.xdp", "vcpus": 8, "ram": 16384, "disk": 20}}),
        ("POST", f"/compute/v2.1/flavors/{created['id']}/os-extra_specs", {"extra_specs": SPECS}),
    ]
    document = json.loads(result.stdout)
    assert document["changed"] is True
    assert document["changes"][0] == {
        "subject": "flavor dpp.xdp",
        "what": "create (8 vCPUs, 16384 MB, 20 GB) with hw:cpu_policy=dedicated, hw:cpu_thread_policy=isolate, "
        "hw:mem_page_size=large",
    }
    assert "server dpp-netapp-1 runs on its old flavor until: openstack server resize --flavor dpp.xdp dpp-netapp-1" in document["notes"]
    written = len(cloud.writes)

    again = netapp("prepare", *SERVER_ARGS, "--flavor", "dpp.xdp", "--json")

    assert len(cloud.writes) == written
    assert json.loads(again.stdout)["changes"] == []


@pytest.mark.parametrize("cloud", ["unmet"], indirect=True)
def test_given_the_flavor_already_has_some_specs_then_only_the_missing_ones_are_sent(cloud, netapp):
    cloud.find("flavors", "id", FLAVOR_ID)["extra_specs"].update({"hw:cpu_policy": "dedicated", "hw:mem_page_size": "1GB"})

    result = netapp("prepare", *SERVER_ARGS, "--no-huge-pages")

    assert result.exit_code == 0, result.output
    assert calls(cloud)[0] == (
        "POST", f"/compute/v2.1/flavors/{FLAVOR_ID}/os-extra_specs", {"extra_specs": {"hw:cpu_thread_policy": "isolate"}}
    )


@pytest.mark.parametrize("cloud", ["unmet"], indirect=True)
def test_given_glance_refuses_then_one_line_names_the_change_and_what_was_made_before(cloud, netapp):
    cloud.state["images"][0]["owner"] = "admin-project"  # a public image of the admins

    result = netapp("prepare", *SERVER_ARGS)

    assert result.exit_code == 3
    assert result.stderr == (
        "netapp: image ubuntu-24.04-server-cloudimg-amd64: set hw_vif_multiqueue_enabled=true: "
        "ForbiddenException: 403: Client Error for url: "
        f"{cloud.base}/image/v2/images/{IMAGE_ID}, You are not authorized to complete modify_image action. "
        "(1 change(s) before it were made)\n"
    )
    assert [request.method for request in cloud.writes] == ["POST", "PATCH"]  # nothing after the refusal


def test_given_a_vm_that_meets_everything_when_prepared_then_nothing_is_written(cloud, netapp):
    result = netapp("prepare", *SERVER_ARGS)

    assert result.exit_code == 0, result.output
    assert cloud.writes == []
    assert result.stdout.splitlines() == [
        "no changes: flavor, image and ports already meet the preconditions prepare manages",
        "note: image properties apply to servers booted or rebuilt from image ubuntu-24.04-server-cloudimg-amd64 afterwards",
    ]


def test_given_an_unknown_port_security_strategy_then_it_is_a_usage_error(cloud, netapp):
    result = netapp("prepare", *SERVER_ARGS, "--port-security", "off")

    assert result.exit_code == 2
    assert result.stderr == "netapp: --port-security off: must be one of full, allow-address-pairs\n"
    assert cloud.requests == []
