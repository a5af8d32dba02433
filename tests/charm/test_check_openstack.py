"""The check-openstack action: with ops.testing and the workload faked (what the charm passes and
how it reports), and with the charm's real workload running `netapp openstack check` against a
recorded OpenStack API (tests/openstack/fake_cloud.py: a loopback server answering openstacksdk's
requests with documents written from the API references; no OpenStack runs here)."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest
from netapp_workload import NetApp
from ops import testing

from tests.charm.conftest import charm_context
from tests.charm.real_netapp import install_netapp_script

CLOUDS = "clouds:\n  edge:\n    auth: {auth_url: http://keystone.example/v3}\n"
CREDENTIALS = testing.Secret({"clouds-yaml": CLOUDS})
CONFIG = {"openstack-cloud": "edge", "openstack-credentials": CREDENTIALS.id}
SERVER_ID = "1c6a4b8e-7f2d-4e0a-9b3c-5d8e2f1a7c90"  # dpp-netapp-1 in the recordings


def _report(*unmet: tuple[str, str, str]) -> str:
    findings = [{"check": "cpu-pinning", "subject": "flavor f", "status": "ok", "what": "w", "fix": ""}]
    findings += [{"check": c, "subject": s, "status": "UNMET", "what": "w", "fix": f} for c, s, f in unmet]
    return json.dumps({"server": "dpp-netapp-1", "met": not unmet, "findings": findings})


def _run(ctx, params, config=CONFIG, secrets=frozenset({CREDENTIALS})):
    ctx.run(ctx.on.action("check-openstack", params=params), testing.State(config=config, secrets=secrets))
    return ctx.action_results


def test_given_credentials_when_check_openstack_then_the_workload_checks_this_machines_vm(ctx, netapp):
    netapp.own_instance = SERVER_ID
    netapp.openstack_answer = subprocess.CompletedProcess([], 0, _report(), "")

    results = _run(ctx, {"data-networks": "ran-n3, core-n6,altnet"})

    assert netapp.openstack_checks == [(CLOUDS, "edge", SERVER_ID, ["ran-n3", "core-n6", "altnet"])]
    assert (results["met"], results["unmet"], results["server"]) == ("true", "0", "dpp-netapp-1")
    assert json.loads(results["result"])["findings"][0]["check"] == "cpu-pinning"


def test_given_a_server_named_when_check_openstack_then_that_one_is_checked(ctx, netapp):
    netapp.own_instance = SERVER_ID
    _run(ctx, {"server": "dpp-netapp-2", "data-networks": "altnet"})
    assert netapp.openstack_checks[0][2] == "dpp-netapp-2"


def test_given_unmet_preconditions_when_check_openstack_then_fails_listing_each_with_its_fix(ctx, netapp):
    netapp.own_instance = SERVER_ID
    unmet = ("mtu", "port dpp-alt (network altnet)", "openstack network set --mtu 3506 altnet")
    netapp.openstack_answer = subprocess.CompletedProcess([], 1, _report(unmet), "")

    with pytest.raises(testing.ActionFailed) as failed:
        _run(ctx, {"data-networks": "altnet"})

    assert failed.value.message == "1 unmet: mtu port dpp-alt (network altnet): openstack network set --mtu 3506 altnet"
    assert ctx.action_results["unmet"] == "1" and ctx.action_results["met"] == "false"


def test_given_the_cloud_cannot_be_read_when_check_openstack_then_fails_with_the_commands_line(ctx, netapp):
    netapp.own_instance = SERVER_ID
    said = "error: cannot authenticate at http://keystone.example/v3: The request you have made requires authentication."
    netapp.openstack_answer = subprocess.CompletedProcess([], 3, "", said + "\n")
    with pytest.raises(testing.ActionFailed, match="^check-openstack: error: cannot authenticate at"):
        _run(ctx, {"data-networks": "altnet"})


@pytest.mark.parametrize(
    "config, secrets, message",
    [
        ({"openstack-credentials": CREDENTIALS.id}, {CREDENTIALS}, "openstack-cloud: not set"),
        ({"openstack-cloud": "edge"}, set(), "openstack-credentials: not set: a Juju secret with the key clouds-yaml"),
        (CONFIG, set(), "invalid config: openstack-credentials: no secret"),
        (
            {**CONFIG, "openstack-credentials": testing.Secret({"yaml": "x"}, id=CREDENTIALS.id).id},
            {testing.Secret({"yaml": "x"}, id=CREDENTIALS.id)},
            "invalid config: openstack-credentials: secret",
        ),
    ],
    ids=["no-cloud", "no-credentials", "secret-missing", "secret-without-clouds-yaml"],
)
def test_given_no_usable_credentials_when_check_openstack_then_fails_naming_the_option(
    ctx, netapp, config, secrets, message
):
    netapp.own_instance = SERVER_ID
    with pytest.raises(testing.ActionFailed) as failed:
        _run(ctx, {"data-networks": "altnet"}, config, frozenset(secrets))
    assert failed.value.message.startswith(message), failed.value.message
    assert netapp.openstack_checks == []


def test_given_a_secret_without_clouds_yaml_when_config_changed_then_blocked_naming_option_and_key(ctx, netapp):
    secret = testing.Secret({"yaml": "x"})
    state = testing.State(config={**CONFIG, "openstack-credentials": secret.id}, secrets={secret})
    out = ctx.run(ctx.on.config_changed(), state)
    assert out.unit_status.name == "blocked"
    assert "openstack-credentials: secret" in out.unit_status.message and "'clouds-yaml'" in out.unit_status.message


def test_given_no_instance_id_and_no_server_when_check_openstack_then_fails_naming_server(ctx, netapp):
    with pytest.raises(testing.ActionFailed, match="^server: required: this machine's instance id is unknown"):
        _run(ctx, {"data-networks": "altnet"})


# --- the workload's command, against the recorded OpenStack ------------------------------------


@pytest.fixture
def machine(tmp_path: Path) -> NetApp:
    """The charm's workload under a tmp root whose `netapp` runs this source tree's CLI and whose
    SMBIOS UUID is the recorded server's id (a Nova guest's is its instance id)."""
    workload = NetApp(root=tmp_path, run=subprocess.run)
    install_netapp_script(workload)
    workload.paths.product_uuid.parent.mkdir(parents=True)
    workload.paths.product_uuid.write_text(SERVER_ID.upper() + "\n")
    return workload


@pytest.fixture
def recorded_cloud(request):
    pytest.importorskip("openstack", reason="openstacksdk is not installed (pip install -e '.[test]')")
    from tests.openstack.fake_cloud import FakeCloud

    with FakeCloud(request.param) as fake:
        yield fake
    assert not fake.unknown, f"requests no recorded service answers: {fake.unknown}"


def _run_real(machine, cloud, monkeypatch, tmp_path):
    import charm

    monkeypatch.setattr(charm, "NetApp", lambda: machine)
    clouds = testing.Secret({"clouds-yaml": cloud.clouds_yaml(tmp_path / "given.yaml").read_text()})
    ctx = charm_context()
    state = testing.State(config={"openstack-cloud": "edge", "openstack-credentials": clouds.id}, secrets={clouds})
    ctx.run(ctx.on.action("check-openstack", params={"data-networks": "core-n6,altnet"}), state)
    return ctx


@pytest.mark.parametrize("recorded_cloud", ["met"], indirect=True)
def test_given_a_recorded_cloud_that_meets_everything_when_check_openstack_then_met(
    machine, recorded_cloud, monkeypatch, tmp_path
):
    ctx = _run_real(machine, recorded_cloud, monkeypatch, tmp_path)

    assert (ctx.action_results["met"], ctx.action_results["server"]) == ("true", "dpp-netapp-1")
    clouds = machine.paths.clouds_yaml
    assert stat.S_IMODE(clouds.stat().st_mode) == 0o600
    assert "auth_url" in clouds.read_text()
    servers = [r for r in recorded_cloud.requests if r.path.startswith("/compute/v2.1/servers")]
    assert servers and all(SERVER_ID in r.path or r.query.get("name") == [SERVER_ID] for r in servers)
    assert recorded_cloud.writes == []


@pytest.mark.parametrize("recorded_cloud", ["unmet"], indirect=True)
def test_given_a_recorded_stock_cloud_when_check_openstack_then_fails_with_the_unmet_fixes(
    machine, recorded_cloud, monkeypatch, tmp_path
):
    with pytest.raises(testing.ActionFailed) as failed:
        _run_real(machine, recorded_cloud, monkeypatch, tmp_path)

    assert failed.value.message.startswith("8 unmet: cpu-pinning flavor dpp.pinned: openstack flavor set")
    assert (
        "liveness-probe port dpp-alt (network altnet): openstack security group rule create --protocol udp "
        "--dst-port 2152 --remote-ip 192.168.70.0/24 dpp-netapp"
    ) in failed.value.message
    assert recorded_cloud.writes == []
