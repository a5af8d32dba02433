"""`netapp openstack check` against a recorded OpenStack API (tests/openstack/fake_cloud.py).

No OpenStack runs here: openstacksdk speaks real HTTP to a loopback server that answers with the
Keystone, Nova, Glance and Neutron documents in recordings/ (written from the API references, not
captured from a live cloud). The tests check the report's text, the exit code and the calls made.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from typer.testing import CliRunner

from netapp.cli.main import app
from tests.openstack.conftest import SERVER_ARGS

FIXES = {
    "cpu-pinning": "fix: openstack flavor set --property hw:cpu_policy=dedicated "
    "--property hw:cpu_thread_policy=isolate dpp.pinned",
    "huge-pages": "fix: openstack flavor set --property hw:mem_page_size=large dpp.pinned",
    "multiqueue": "fix: openstack image set --property hw_vif_multiqueue_enabled=true "
    "ubuntu-24.04-server-cloudimg-amd64",
    "mtu": "fix: openstack network set --mtu 3506 altnet  (or in the guest: ip link set dev <dev> mtu 3506)",
    "port-security dpp-alt": "fix: openstack port set --no-security-group --disable-port-security dpp-alt  "
    "(or keep port security: openstack port set --allowed-address ip-address=0.0.0.0/0 "
    "--allowed-address ip-address=::/0 dpp-alt)",
    "port-security dpp-n6": "fix: openstack port set --no-security-group --disable-port-security dpp-n6  "
    "(or keep port security: openstack port set --allowed-address ip-address=0.0.0.0/0 "
    "--allowed-address ip-address=::/0 dpp-n6)",
    "liveness-probe dpp-alt": "fix: openstack security group rule create --protocol udp --dst-port 2152 "
    "--remote-ip 192.168.70.0/24 dpp-netapp",
    "liveness-probe dpp-n6": "fix: openstack security group rule create --protocol udp --dst-port 2152 "
    "--remote-ip 192.168.60.0/24 dpp-netapp",
}


def statuses(output: str) -> dict[str, str]:
    """`<check> <subject>` -> status, from the report's lines."""
    found = {}
    for line in output.splitlines():
        words = line.split()
        if words and words[0] in ("ok", "UNMET", "guest"):
            subject = line.split(":", 1)[0].split(maxsplit=1)[1]
            found[subject] = words[0]
    return found


def test_given_a_vm_that_meets_everything_when_checked_then_every_line_is_ok_and_it_exits_0(cloud, netapp):
    result = netapp("check", *SERVER_ARGS)

    assert result.exit_code == 0, result.output
    assert statuses(result.stdout) == {
        "cpu-pinning flavor dpp.pinned": "ok",
        "huge-pages flavor dpp.pinned": "ok",
        "multiqueue image ubuntu-24.04-server-cloudimg-amd64": "ok",
        "mtu port dpp-alt (network altnet)": "ok",
        "port-security port dpp-alt (network altnet)": "ok",
        "port-security port dpp-n6 (network core-n6)": "ok",
        "lro guest": "guest",
        "queues guest": "guest",
    }
    assert result.stdout.splitlines()[0] == (
        "server dpp-netapp-1: flavor dpp.pinned, image ubuntu-24.04-server-cloudimg-amd64, 2 data-plane port(s)"
    )
    assert "all preconditions OpenStack shows are met" in result.stdout
    assert "fix: ethtool -K <dev> lro off rx-gro-hw off" in result.stdout
    assert "fix: ethtool -L <dev> combined 8" in result.stdout
    # check only reads: the token, then GETs of the server, its flavor, image, ports and networks.
    assert cloud.writes == []
    paths = {request.path for request in cloud.requests}
    assert {
        "/identity/v3/auth/tokens",
        "/compute/v2.1/servers/detail",
        "/image/v2/images/b7d3e9a2-4c1f-4e8b-a6d5-0f2c9e3b7a14",
        "/network/v2.0/ports",
        "/network/v2.0/networks/a2c3e5f7-4d6b-4c8e-8a2f-3b5d7f9c1e4a",
    } <= paths
    ports = next(r for r in cloud.requests if r.path == "/network/v2.0/ports")
    assert ports.query == {"device_id": ["1c6a4b8e-7f2d-4e0a-9b3c-5d8e2f1a7c90"]}


@pytest.mark.parametrize("cloud", ["unmet"], indirect=True)
def test_given_a_stock_cloud_when_checked_then_each_unmet_precondition_has_its_exact_fix(cloud, netapp):
    result = netapp("check", *SERVER_ARGS)

    assert result.exit_code == 1, result.output
    found = statuses(result.stdout)
    assert [subject for subject, status in found.items() if status == "UNMET"] == [
        "cpu-pinning flavor dpp.pinned",
        "huge-pages flavor dpp.pinned",
        "multiqueue image ubuntu-24.04-server-cloudimg-amd64",
        "mtu port dpp-alt (network altnet)",
        "port-security port dpp-alt (network altnet)",
        "port-security port dpp-n6 (network core-n6)",
        "liveness-probe port dpp-alt (network altnet)",
        "liveness-probe port dpp-n6 (network core-n6)",
    ]
    lines = result.stdout.splitlines()
    for fix in FIXES.values():
        assert any(line.strip() == fix for line in lines), fix
    assert "8 unmet" in lines
    # port security on: the ports' security groups and subnets are read, not written
    paths = {request.path for request in cloud.requests}
    assert "/network/v2.0/security-groups/0c2e4a6b-8d1f-4e3a-b5c7-9e1d3f5a7b6c" in paths
    assert "/network/v2.0/subnets/99999999-0000-4000-8000-3b5d7f9c1e4a" in paths
    assert cloud.writes == []


def _unpin(cloud):
    cloud.state["servers"][0]["flavor"]["extra_specs"].pop("hw:cpu_policy")


def _no_huge_pages(cloud):
    cloud.state["servers"][0]["flavor"]["extra_specs"]["hw:mem_page_size"] = "small"


def _no_multiqueue(cloud):
    cloud.state["images"][0]["hw_vif_multiqueue_enabled"] = "false"


def _jumbo(cloud):
    cloud.find("networks", "name", "altnet")["mtu"] = 9000


def _secured(cloud):
    cloud.find("ports", "name", "dpp-alt").update(port_security_enabled=True, security_groups=["sg"])


def _secured_n6(cloud):
    cloud.find("ports", "name", "dpp-n6").update(port_security_enabled=True, security_groups=["sg"])


@pytest.mark.parametrize(
    "break_it, unmet, fix",
    [
        (_unpin, "cpu-pinning flavor dpp.pinned", "fix: openstack flavor set --property hw:cpu_policy=dedicated dpp.pinned"),
        (_no_huge_pages, "huge-pages flavor dpp.pinned", FIXES["huge-pages"]),
        (_no_multiqueue, "multiqueue image ubuntu-24.04-server-cloudimg-amd64", FIXES["multiqueue"]),
        (_jumbo, "mtu port dpp-alt (network altnet)", FIXES["mtu"]),
        (_secured, "port-security port dpp-alt (network altnet)", FIXES["port-security dpp-alt"]),
        (_secured_n6, "port-security port dpp-n6 (network core-n6)", FIXES["port-security dpp-n6"]),
    ],
    ids=["pinning", "huge-pages", "multiqueue", "mtu", "port-security", "port-security-sr-iov"],
)
def test_given_one_precondition_broken_when_checked_then_only_it_is_unmet_with_its_fix(cloud, netapp, break_it, unmet, fix):
    break_it(cloud)

    result = netapp("check", *SERVER_ARGS)

    assert result.exit_code == 1, result.output
    assert [subject for subject, status in statuses(result.stdout).items() if status == "UNMET"] == [unmet]
    assert fix in [line.strip() for line in result.stdout.splitlines()]
    assert "1 unmet" in result.stdout


def test_given_port_security_on_with_address_pairs_for_any_source_when_checked_then_it_is_met(cloud, netapp):
    pairs = [{"ip_address": "0.0.0.0/0", "mac_address": "fa:16:3e:11:22:03"}, {"ip_address": "::/0"}]
    cloud.find("ports", "name", "dpp-alt").update(port_security_enabled=True, security_groups=["sg"], allowed_address_pairs=pairs)

    result = netapp("check", *SERVER_ARGS)

    assert result.exit_code == 0, result.output
    assert "ok    port-security port dpp-alt (network altnet): " in result.stdout
    assert "(security groups still filter)" in result.stdout


def _alt_group(cloud):
    """dpp-alt keeps port security (address pairs for any source) in group dpp-netapp only."""
    pairs = [{"ip_address": "0.0.0.0/0"}, {"ip_address": "::/0"}]
    cloud.find("ports", "name", "dpp-alt").update(
        port_security_enabled=True, security_groups=["0c2e4a6b-8d1f-4e3a-b5c7-9e1d3f5a7b6c"], allowed_address_pairs=pairs
    )
    return cloud.find("security_groups", "name", "dpp-netapp")["security_group_rules"]


@pytest.mark.parametrize(
    "rule",
    [
        {"protocol": "udp", "port_range_min": 2152, "port_range_max": 2152, "remote_ip_prefix": "192.168.70.0/24"},
        {"protocol": "17", "port_range_min": 2000, "port_range_max": 3000, "remote_ip_prefix": "192.168.0.0/16"},
        {"protocol": None, "remote_ip_prefix": None},
        {"protocol": "udp", "remote_group_id": "0c2e4a6b-8d1f-4e3a-b5c7-9e1d3f5a7b6c"},
    ],
    ids=["exact", "range-and-wider-prefix", "any", "remote-group"],
)
def test_given_port_security_kept_and_a_rule_letting_the_probe_in_when_checked_then_it_is_met(cloud, netapp, rule):
    _alt_group(cloud).append({"direction": "ingress", "ethertype": "IPv4", **rule})

    result = netapp("check", *SERVER_ARGS)

    assert result.exit_code == 0, result.output
    assert statuses(result.stdout)["liveness-probe port dpp-alt (network altnet)"] == "ok"


@pytest.mark.parametrize(
    "rule",
    [
        {"direction": "egress", "ethertype": "IPv4", "protocol": "udp"},
        {"direction": "ingress", "ethertype": "IPv4", "protocol": "tcp", "port_range_min": 2152, "port_range_max": 2152},
        {"direction": "ingress", "ethertype": "IPv4", "protocol": "udp", "port_range_min": 2123, "port_range_max": 2123},
        {"direction": "ingress", "ethertype": "IPv4", "protocol": "udp", "remote_ip_prefix": "192.168.70.0/25"},
        {"direction": "ingress", "ethertype": "IPv6", "protocol": "udp", "remote_ip_prefix": "::/0"},
    ],
    ids=["egress", "tcp", "other-port", "narrower-prefix", "ipv6-only"],
)
def test_given_port_security_kept_and_no_rule_for_the_probe_when_checked_then_unmet_with_the_rule_to_add(
    cloud, netapp, rule
):
    _alt_group(cloud).append(rule)

    result = netapp("check", *SERVER_ARGS)

    assert result.exit_code == 1, result.output
    assert [subject for subject, status in statuses(result.stdout).items() if status == "UNMET"] == [
        "liveness-probe port dpp-alt (network altnet)"
    ]
    assert FIXES["liveness-probe dpp-alt"] in [line.strip() for line in result.stdout.splitlines()]


def test_given_port_security_on_and_no_security_group_when_checked_then_the_fix_creates_and_attaches_one(cloud, netapp):
    pairs = [{"ip_address": "0.0.0.0/0"}, {"ip_address": "::/0"}]
    cloud.find("ports", "name", "dpp-alt").update(port_security_enabled=True, allowed_address_pairs=pairs)

    result = netapp("check", *SERVER_ARGS)

    assert result.exit_code == 1
    assert (
        "fix: openstack security group create dpp-gtpu-echo && openstack security group rule create --protocol udp "
        "--dst-port 2152 --remote-ip 192.168.70.0/24 dpp-gtpu-echo && openstack port set --security-group "
        "dpp-gtpu-echo dpp-alt"
    ) in [line.strip() for line in result.stdout.splitlines()]


def test_given_address_pairs_for_ipv4_only_when_checked_then_ipv6_sources_are_unmet(cloud, netapp):
    cloud.find("ports", "name", "dpp-alt").update(port_security_enabled=True, allowed_address_pairs=[{"ip_address": "0.0.0.0/0"}])

    result = netapp("check", *SERVER_ARGS)

    assert result.exit_code == 1
    assert "openstack port set --allowed-address ip-address=::/0 dpp-alt)" in result.stdout


def test_given_data_networks_named_when_checked_then_only_their_ports_are_judged(cloud, netapp):
    cloud.find("ports", "name", "dpp-mgmt").update(port_security_enabled=True)

    result = netapp("check", "--server", "dpp-netapp-1", "--data-network", "altnet")

    assert result.exit_code == 0, result.output
    assert "1 data-plane port(s)" in result.stdout
    assert "dpp-n6" not in result.stdout and "dpp-mgmt" not in result.stdout


def test_given_no_server_when_flavor_image_and_ports_are_named_then_those_are_judged(cloud, netapp):
    result = netapp("check", "--flavor", "dpp.pinned", "--image", "ubuntu-24.04-server-cloudimg-amd64", "--port", "dpp-alt")

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("flavor dpp.pinned, image ubuntu-24.04-server-cloudimg-amd64, 1 data-plane port(s)")
    assert not any(request.path.startswith("/compute/v2.1/servers") for request in cloud.requests)


def test_json_has_one_entry_per_finding(cloud, netapp):
    _jumbo(cloud)

    result = netapp("check", *SERVER_ARGS, "--json")

    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert (document["server"], document["met"], document["ports"]) == ("dpp-netapp-1", False, ["dpp-alt", "dpp-n6"])
    mtu = next(finding for finding in document["findings"] if finding["check"] == "mtu")
    assert mtu == {
        "check": "mtu",
        "subject": "port dpp-alt (network altnet)",
        "status": "UNMET",
        "what": "MTU 9000 leaves room for native XDP on virtio_net (at most 3506 with 4 KiB pages)",
        "fix": FIXES["mtu"][len("fix: "):],
    }


def test_given_a_wrong_password_then_one_line_says_authentication_failed_and_it_exits_3(cloud, netapp):
    result = netapp("check", *SERVER_ARGS, password="wrong")

    assert result.exit_code == 3
    assert result.stderr.startswith(f"netapp: cannot authenticate at {cloud.base}/identity/v3: ")
    assert "requires authentication" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert not any(request.path.startswith("/compute") for request in cloud.requests)


def test_given_an_unknown_server_then_it_says_so_and_exits_3(cloud, netapp):
    result = netapp("check", "--server", "no-such-vm", "--mgmt-network", "mgmt")

    assert (result.exit_code, result.stderr) == (3, "netapp: server no-such-vm: not found\n")


def test_given_a_cloud_not_in_clouds_yaml_then_it_says_so(cloud, netapp, tmp_path):
    clouds = cloud.clouds_yaml(tmp_path / "other.yaml")
    result = CliRunner().invoke(app, ["openstack", "check", *SERVER_ARGS, "--cloud", "nowhere", "--clouds-file", str(clouds)])

    assert result.exit_code == 3
    assert result.stderr.startswith("netapp: cloud nowhere: ")
    assert cloud.requests == []


def test_given_neither_data_nor_mgmt_network_then_it_asks_which_ports_carry_the_data_plane(cloud, netapp):
    result = netapp("check", "--server", "dpp-netapp-1")

    assert result.exit_code == 3
    assert result.stderr == (
        "netapp: server dpp-netapp-1 has ports on altnet, core-n6, mgmt: say which carry the data plane "
        "(--data-network NAME, repeated) or which is management (--mgmt-network NAME)\n"
    )


def test_given_a_data_network_the_server_is_not_on_then_it_names_the_servers_networks(cloud, netapp):
    result = netapp("check", "--server", "dpp-netapp-1", "--data-network", "n3net")

    assert result.exit_code == 3
    assert result.stderr == (
        "netapp: --data-network n3net: server dpp-netapp-1 has no port on it (its networks: altnet, core-n6, mgmt)\n"
    )


def test_given_a_bad_source_prefix_then_it_is_a_usage_error(cloud, netapp):
    result = netapp("check", *SERVER_ARGS, "--source", "10.0.0.0/33")

    assert result.exit_code == 2
    assert "--source 10.0.0.0/33: not an IPv4 or IPv6 prefix" in result.stderr
    assert cloud.requests == []


def test_given_no_openstacksdk_then_it_says_how_to_install_it(cloud, netapp, monkeypatch):
    monkeypatch.setitem(sys.modules, "openstack", None)  # import openstack now raises ImportError

    result = netapp("check", *SERVER_ARGS)

    assert (result.exit_code, result.stderr) == (
        3,
        "netapp: openstacksdk is not installed (pip install 'dpp-netapp[openstack]')\n",
    )


def test_given_no_cloud_and_no_openrc_then_it_says_where_credentials_come_from(cloud, tmp_path, monkeypatch):
    for name in [name for name in os.environ if name.startswith("OS_")]:
        monkeypatch.delenv(name)
    empty = tmp_path / "clouds.yaml"
    empty.write_text("clouds: {}\n")

    result = CliRunner().invoke(app, ["openstack", "check", *SERVER_ARGS, "--clouds-file", str(empty)])

    assert result.exit_code == 3
    assert result.stderr.startswith("netapp: cloud (none named): ")
    assert result.stderr.endswith(": name a cloud of clouds.yaml (--cloud, OS_CLOUD) or source an openrc (OS_AUTH_URL, ...)\n")
    assert cloud.requests == []
