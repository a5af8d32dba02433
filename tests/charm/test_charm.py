"""Unit tests of the charm with ops.testing: every event and action, the workload a fake."""

from __future__ import annotations

import dataclasses
import json

import pytest
from netapp_workload import ApiError, InterfaceAddress, WorkloadError
from ops import testing

from tests.charm.conftest import private_charm_root

INTENT = {
    "id": "video",
    "match": {"protocol": "udp", "dst_port": 5004},
    "action": {"type": "steer", "cpu": 1},
}
SLICE = {"id": "embb", "snssai": {"sst": 1}, "priority_level": 10, "members": {"vnis": [1093]}}
# The secrets the secret options name (`juju add-secret`, granted to the application).
TOKEN = testing.Secret({"token": "user:password"})
TLS_KEY = testing.Secret({"key": "KEY"})


# --- lifecycle events --------------------------------------------------------------------------


NETAPP_PIN = "dpp-netapp==0.2.0 --hash=sha256:" + "a" * 64
NUMPY_PIN = "numpy==2.2.6 --hash=sha256:" + "b" * 64
FROM_INDEX = {"netapp-source": "index", "netapp-index-requirements": f"{NETAPP_PIN}\n{NUMPY_PIN}\n"}


def test_given_fresh_machine_when_install_then_installs_from_the_charms_wheels_and_is_active(ctx, netapp):
    netapp.installed, netapp.running = False, False
    out = ctx.run(ctx.on.install(), testing.State())
    assert netapp.steps == ["install charm", "configure", "restart"]
    source, wheels, requirements = netapp.installs[0]
    assert wheels == private_charm_root() / "wheels" and requirements == ""
    assert out.unit_status == testing.ActiveStatus()


def test_given_index_source_when_install_then_the_pinned_hashed_list_goes_to_the_workload(ctx, netapp):
    netapp.installed, netapp.running = False, False
    ctx.run(ctx.on.install(), testing.State(config=FROM_INDEX))
    assert netapp.installs == [("index", private_charm_root() / "wheels", f"{NETAPP_PIN}\n{NUMPY_PIN}")]


@pytest.mark.parametrize(
    "requirements, why",
    [
        ("", "netapp-index-requirements: required with netapp-source index"),
        ("dpp-netapp", "netapp-index-requirements: 'dpp-netapp' is neither name==version --hash=sha256"),
        ("dpp-netapp==0.2.0", "netapp-index-requirements: 'dpp-netapp==0.2.0' is neither"),
        ("dpp-netapp>=0.2 --hash=sha256:" + "a" * 64, "netapp-index-requirements: 'dpp-netapp>=0.2"),
        ("--extra-index-url https://x.example/simple", "netapp-index-requirements: '--extra-index-url"),
        (NUMPY_PIN, "netapp-index-requirements: names no dpp-netapp==<version>"),
    ],
)
def test_given_index_source_unpinned_or_unhashed_when_install_then_blocked_naming_the_option_and_not_installed(
    ctx, netapp, requirements, why
):
    netapp.installed, netapp.running = False, False
    config = {"netapp-source": "index", "netapp-index-requirements": requirements}
    out = ctx.run(ctx.on.install(), testing.State(config=config))
    assert netapp.steps == []
    assert out.unit_status.name == "blocked"
    assert out.unit_status.message.startswith(f"invalid config: {why}"), out.unit_status.message
    assert [event.name for event in out.deferred] == ["install"]


def test_given_install_deferred_for_config_when_the_config_is_fixed_then_installed(ctx, netapp):
    netapp.installed, netapp.running = False, False
    blocked = ctx.run(ctx.on.install(), testing.State(config={"netapp-source": "index"}))
    out = ctx.run(ctx.on.config_changed(), dataclasses.replace(blocked, config=FROM_INDEX))
    assert netapp.steps[0] == "install index"
    assert out.unit_status == testing.ActiveStatus()


def test_given_an_index_url_line_and_comments_then_the_requirements_are_valid():
    from charm_config import CharmConfig

    text = (
        f"# pinned by pip-compile\n--index-url https://pypi.example/simple\n"
        f"{NETAPP_PIN} \\\n  --hash=sha256:{'c' * 64}\n"
    )
    config = CharmConfig(netapp_source="index", netapp_index_requirements=text)
    assert config.netapp_index_requirements == (
        f"--index-url https://pypi.example/simple\n{NETAPP_PIN} --hash=sha256:{'c' * 64}"
    )


def test_given_install_fails_when_install_then_hook_fails_so_juju_retries_it(ctx, netapp, caplog):
    netapp.installed, netapp.running = False, False
    netapp.install_error = WorkloadError("pip install failed (1): no such package")
    with pytest.raises(testing.errors.UncaughtCharmError) as failed:
        ctx.run(ctx.on.install(), testing.State())
    assert isinstance(failed.value.__cause__, WorkloadError)
    assert "install failed: pip install failed (1): no such package" in caplog.text
    assert netapp.steps == ["install charm"]


def test_given_install_failed_when_juju_retries_install_then_installed_and_active(ctx, netapp):
    netapp.installed, netapp.running = False, False
    netapp.install_error = WorkloadError("apt-get update failed (100): temporary failure resolving")
    with pytest.raises(testing.errors.UncaughtCharmError):
        ctx.run(ctx.on.install(), testing.State())
    netapp.install_error = None
    out = ctx.run(ctx.on.install(), testing.State())
    assert netapp.steps == ["install charm", "install charm", "configure", "restart"]
    assert out.unit_status == testing.ActiveStatus()


def test_given_upgrade_fails_when_upgrade_charm_then_hook_fails(ctx, netapp):
    netapp.install_error = WorkloadError("pip install failed (1): no such package")
    with pytest.raises(testing.errors.UncaughtCharmError):
        ctx.run(ctx.on.upgrade_charm(), testing.State())


def test_given_install_when_done_then_workload_version_is_the_installed_netapps(ctx, netapp):
    netapp.installed_version = "0.2.1"
    out = ctx.run(ctx.on.install(), testing.State())
    assert out.workload_version == "0.2.1"


def _installed_from(source: str) -> testing.StoredState:
    return testing.StoredState(owner_path="DppNetappCharm", content={"installed_source": source})


def test_given_source_changed_when_config_changed_then_reinstalled_and_restarted(ctx, netapp):
    netapp.installed_version = "0.2.0"
    state = testing.State(config=FROM_INDEX, stored_states={_installed_from("charm")})
    out = ctx.run(ctx.on.config_changed(), state)
    assert netapp.steps == ["install index", "configure", "restart"]
    assert out.workload_version == "0.2.0"
    again = ctx.run(ctx.on.config_changed(), out)
    assert netapp.steps[3:] == ["configure"]
    assert again.unit_status == testing.ActiveStatus()


def test_given_new_index_requirements_when_config_changed_then_reinstalled(ctx, netapp):
    state = testing.State(config=FROM_INDEX, stored_states={_installed_from(f"index\n{NETAPP_PIN}")})
    ctx.run(ctx.on.config_changed(), state)
    assert netapp.steps == ["install index", "configure", "restart"]


def test_given_same_source_when_config_changed_then_not_reinstalled(ctx, netapp):
    state = testing.State(stored_states={_installed_from("charm")})
    ctx.run(ctx.on.config_changed(), state)
    assert netapp.steps == ["configure"]


def test_given_new_source_fails_when_config_changed_then_hook_fails_and_old_source_kept(ctx, netapp):
    netapp.install_error = WorkloadError("pip install failed (1): hash mismatch")
    state = testing.State(config=FROM_INDEX, stored_states={_installed_from("charm")})
    with pytest.raises(testing.errors.UncaughtCharmError):
        ctx.run(ctx.on.config_changed(), state)
    assert netapp.steps == ["install index"]


def test_given_installed_when_upgrade_charm_then_reinstalls(ctx, netapp):
    ctx.run(ctx.on.upgrade_charm(), testing.State())
    assert netapp.steps[0] == "install charm"


def test_given_good_config_when_config_changed_then_settings_written_and_restarted(ctx, netapp):
    netapp.changed = True
    config = {
        "interfaces": "ens4, ens5",
        "xdp-mode": "generic",
        "cpus": "2-4,7",
        "max-rules": 1024,
        "influxdb-url": "http://influx:8086",
        "influxdb-token": TOKEN.id,
        "influxdb-bucket": "dpp",
        "telemetry-interval": 5.0,
    }
    out = ctx.run(ctx.on.config_changed(), testing.State(config=config, secrets={TOKEN}))
    written = netapp.configs[-1]
    assert written.influxdb_token == "user:password"
    assert written.interfaces == ["ens4", "ens5"] and written.xdp_mode == "generic"
    assert written.cpus == [2, 3, 4, 7] and written.max_rules == 1024 and written.telemetry_interval == 5.0
    assert netapp.steps == ["configure", "restart"]
    assert out.unit_status == testing.ActiveStatus()
    assert out.opened_ports == frozenset({testing.TCPPort(9464)})


def test_given_unchanged_config_and_running_when_config_changed_then_no_restart(ctx, netapp):
    ctx.run(ctx.on.config_changed(), testing.State())
    assert netapp.steps == ["configure"]


def test_given_public_api_with_tls_when_config_changed_then_port_opened(ctx, netapp):
    config = {"api-host": "0.0.0.0", "api-port": 8443, "tls-cert": "CERT", "tls-key": TLS_KEY.id}
    out = ctx.run(ctx.on.config_changed(), testing.State(config=config, secrets={TLS_KEY}))
    assert netapp.configs[-1].tls_key == "KEY"
    assert out.opened_ports == frozenset({testing.TCPPort(8443), testing.TCPPort(9464)})
    assert out.unit_status == testing.ActiveStatus()


@pytest.mark.parametrize(
    "config, ports",
    [
        ({}, {9464}),
        ({"metrics-port": 9100, "metrics-host": "192.0.2.7"}, {9100}),
        ({"metrics-host": "127.0.0.1"}, set()),
        ({"metrics-port": 0}, set()),
    ],
)
def test_given_metrics_listener_config_when_config_changed_then_its_port_follows(ctx, netapp, config, ports):
    out = ctx.run(ctx.on.config_changed(), testing.State(config=config))
    assert out.opened_ports == frozenset(testing.TCPPort(port) for port in ports)


MGMT = testing.Network("juju-info", bind_addresses=[testing.BindAddress([testing.Address("10.10.0.5")])])


def test_given_no_metrics_host_when_config_changed_then_listener_binds_the_management_address(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), testing.State(networks={MGMT}))
    assert netapp.configs[-1].metrics_host == "10.10.0.5"
    assert out.opened_ports == frozenset({testing.TCPPort(9464)})
    assert out.unit_status == testing.ActiveStatus()


def test_given_explicit_metrics_host_when_config_changed_then_it_wins_over_the_binding(ctx, netapp):
    ctx.run(ctx.on.config_changed(), testing.State(config={"metrics-host": "192.0.2.7"}, networks={MGMT}))
    assert netapp.configs[-1].metrics_host == "192.0.2.7"


def test_given_no_management_address_when_config_changed_then_listener_off_and_blocked(ctx, netapp):
    no_address = testing.Network("juju-info", bind_addresses=[])
    out = ctx.run(ctx.on.config_changed(), testing.State(networks={no_address}))
    assert netapp.configs[-1].metrics_host == ""
    assert out.opened_ports == frozenset()
    assert isinstance(out.unit_status, testing.BlockedStatus)
    assert out.unit_status.message.startswith("metrics-host: ")
    again = ctx.run(ctx.on.update_status(), out)
    assert isinstance(again.unit_status, testing.BlockedStatus)


@pytest.mark.parametrize(
    "config, option",
    [
        ({"xdp-mode": "turbo"}, "xdp-mode"),
        ({"interfaces": "ens4,a/b"}, "interfaces"),
        ({"interfaces": "ens4,ens4"}, "interfaces"),
        ({"cpus": "4-2"}, "cpus"),
        ({"cpus": "x"}, "cpus"),
        ({"max-rules": 0}, "max-rules"),
        ({"api-port": 70000}, "api-port"),
        ({"default-verdict": "reject"}, "default-verdict"),
        ({"telemetry-interval": 0.0}, "telemetry-interval"),
        ({"tls-cert": "CERT"}, "tls-key"),
        ({"api-host": "10.0.0.5"}, "tls-cert"),
        ({"influxdb-url": "influx:8086", "influxdb-token": TOKEN.id, "influxdb-bucket": "b"}, "influxdb-url"),
        ({"influxdb-url": "http://influx:8086"}, "influxdb-token"),
        ({"metrics-host": "metrics.example"}, "metrics-host"),
        ({"metrics-port": 65536}, "metrics-port"),
        ({"metrics-port": 8080}, "metrics-port"),
        ({"alt-interface": "ens 6"}, "alt-interface"),
        ({"alt-group": 64}, "alt-group"),
        ({"alt-group": -1}, "alt-group"),
        ({"steer-cpus": "2,x"}, "steer-cpus"),
        ({"steer-cpus": "2:-5"}, "steer-cpus"),
        ({"steer-cpus": "128"}, "steer-cpus"),
        ({"steer-cpus": "2:4294967296"}, "steer-cpus"),
        ({"steer-cpus": "2,2:100"}, "steer-cpus"),
    ],
)
def test_given_bad_config_when_config_changed_then_blocked_naming_option_and_nothing_written(
    ctx, netapp, config, option
):
    out = ctx.run(ctx.on.config_changed(), testing.State(config=config, secrets={TOKEN}))
    assert isinstance(out.unit_status, testing.BlockedStatus)
    assert option in out.unit_status.message
    assert netapp.steps == []


# --- secret options ------------------------------------------------------------------------------

INFLUX = {"influxdb-url": "http://influx:8086", "influxdb-token": TOKEN.id, "influxdb-bucket": "dpp"}


def test_given_granted_secrets_when_config_changed_then_their_content_is_written(ctx, netapp):
    config = {**INFLUX, "api-host": "0.0.0.0", "tls-cert": "CERT", "tls-key": TLS_KEY.id}
    out = ctx.run(ctx.on.config_changed(), testing.State(config=config, secrets={TOKEN, TLS_KEY}))
    written = netapp.configs[-1]
    assert (written.influxdb_token, written.tls_key) == ("user:password", "KEY")
    assert out.unit_status == testing.ActiveStatus()


def test_given_a_secret_that_does_not_exist_when_config_changed_then_blocked_naming_the_option(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), testing.State(config=INFLUX))
    assert out.unit_status == testing.BlockedStatus(
        f"invalid config: influxdb-token: no secret {TOKEN.id} visible here; create it and "
        "juju grant-secret <name> dpp-netapp"
    )
    assert netapp.steps == []


def test_given_a_secret_not_granted_when_config_changed_then_blocked_saying_to_grant_it(
    ctx, netapp, monkeypatch
):
    """ops.testing does not model grants: the refusal Juju's secret-get gives an application the
    secret is not granted to (ops raises it as a ModelError) is played by the mocked backend."""
    from ops.model import ModelError
    from scenario.mocking import _MockModelBackend

    def refuse(self, **kwargs):
        raise ModelError("ERROR permission denied\n")

    monkeypatch.setattr(_MockModelBackend, "secret_get", refuse)
    config = {"tls-cert": "CERT", "tls-key": TLS_KEY.id}
    out = ctx.run(ctx.on.config_changed(), testing.State(config=config, secrets={TLS_KEY}))
    assert out.unit_status == testing.BlockedStatus(
        f"invalid config: tls-key: cannot read secret {TLS_KEY.id} (permission denied); "
        "juju grant-secret <name> dpp-netapp"
    )
    assert netapp.steps == []


@pytest.mark.parametrize(
    "option, content, held",
    [("influxdb-token", {"password": "x"}, "password"), ("tls-key", {"tls-key": "K", "cert": "C"}, "cert, tls-key")],
)
def test_given_a_secret_without_the_expected_key_when_config_changed_then_blocked_naming_key_and_option(
    ctx, netapp, option, content, held
):
    secret = testing.Secret(content)
    config = {**INFLUX, "tls-cert": "CERT", "tls-key": TLS_KEY.id, option: secret.id}
    out = ctx.run(ctx.on.config_changed(), testing.State(config=config, secrets={TOKEN, TLS_KEY, secret}))
    key = {"influxdb-token": "token", "tls-key": "key"}[option]
    assert out.unit_status == testing.BlockedStatus(
        f"invalid config: {option}: secret {secret.id} has no {key!r} key (it holds {held})"
    )
    assert netapp.steps == []


def test_given_a_new_revision_when_secret_changed_then_reconfigured_with_it_and_restarted(ctx, netapp):
    rotated = testing.Secret({"token": "user:old"}, latest_content={"token": "user:new"})
    state = testing.State(config={**INFLUX, "influxdb-token": rotated.id}, secrets={rotated})
    netapp.changed = True  # the settings file changes with the token
    out = ctx.run(ctx.on.secret_changed(rotated), state)
    assert netapp.configs[-1].influxdb_token == "user:new"
    assert netapp.steps == ["configure", "restart"]
    assert out.get_secret(id=rotated.id).tracked_content == {"token": "user:new"}
    assert out.unit_status == testing.ActiveStatus()


def test_given_secret_gone_after_a_good_config_when_read_only_action_then_runs_and_others_fail(ctx, netapp):
    good = ctx.run(ctx.on.config_changed(), testing.State(config=INFLUX, secrets={TOKEN}))
    gone = ctx.run(ctx.on.update_status(), dataclasses.replace(good, secrets=set()))
    assert isinstance(gone.unit_status, testing.BlockedStatus) and "influxdb-token" in gone.unit_status.message
    ctx.run(ctx.on.action("get-stats"), gone)
    assert netapp.api.calls[-1][0] == "stats"
    with pytest.raises(testing.ActionFailed, match="invalid config: influxdb-token: no secret"):
        ctx.run(ctx.on.action("add-intent", params={"intent": json.dumps(INTENT)}), gone)


def test_given_configure_fails_when_config_changed_then_blocked(ctx, netapp):
    netapp.configure_error = WorkloadError("systemctl daemon-reload failed (1)")
    out = ctx.run(ctx.on.config_changed(), testing.State())
    assert out.unit_status == testing.BlockedStatus("systemctl daemon-reload failed (1)")


def test_given_configure_failed_when_unrelated_hook_or_action_then_still_blocked(ctx, netapp):
    netapp.configure_error = WorkloadError("systemctl daemon-reload failed (1)")
    out = ctx.run(ctx.on.config_changed(), testing.State())
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    joined = ctx.run(ctx.on.relation_joined(rel, remote_unit=0), dataclasses.replace(out, relations={rel}))
    assert joined.unit_status == testing.BlockedStatus("systemctl daemon-reload failed (1)")
    acted = ctx.run(ctx.on.action("get-stats"), joined)
    assert acted.unit_status == testing.BlockedStatus("systemctl daemon-reload failed (1)")
    netapp.configure_error = None
    fixed = ctx.run(ctx.on.update_status(), acted)
    assert fixed.unit_status == testing.ActiveStatus()


def test_given_stopped_service_when_start_then_started(ctx, netapp):
    netapp.running = False
    out = ctx.run(ctx.on.start(), testing.State())
    assert netapp.steps == ["configure", "restart"]
    assert out.unit_status == testing.ActiveStatus()


def test_given_service_died_when_update_status_then_restarted(ctx, netapp):
    netapp.running = False
    out = ctx.run(ctx.on.update_status(), testing.State())
    assert "restart" in netapp.steps and out.unit_status == testing.ActiveStatus()


def test_given_not_installed_when_update_status_then_maintenance(ctx, netapp):
    netapp.installed, netapp.running = False, False
    out = ctx.run(ctx.on.update_status(), testing.State())
    assert out.unit_status == testing.MaintenanceStatus("NetApp not installed")


def test_given_service_will_not_stay_up_when_update_status_then_waiting(ctx, netapp, monkeypatch):
    netapp.running = False
    monkeypatch.setattr(netapp, "restart", lambda: netapp.steps.append("restart"))
    out = ctx.run(ctx.on.update_status(), testing.State())
    assert out.unit_status == testing.WaitingStatus("NetApp service not running")


def test_given_running_when_stop_then_service_stopped(ctx, netapp):
    ctx.run(ctx.on.stop(), testing.State())
    assert netapp.steps == ["stop"] and not netapp.running


def test_given_running_when_remove_then_service_removed(ctx, netapp):
    out = ctx.run(ctx.on.remove(), testing.State())
    assert netapp.steps == ["remove"]
    assert out.unit_status == testing.MaintenanceStatus("NetApp not installed")


def test_given_unload_fails_when_remove_then_hook_fails_so_juju_retries_it(ctx, netapp, caplog):
    netapp.remove_error = WorkloadError("/opt/dpp-netapp/bin/netapp dataplane unload failed (1): EPERM")
    with pytest.raises(testing.errors.UncaughtCharmError) as failed:
        ctx.run(ctx.on.remove(), testing.State())
    assert isinstance(failed.value.__cause__, WorkloadError)
    assert "remove failed: /opt/dpp-netapp/bin/netapp dataplane unload failed" in caplog.text


# --- alternatives relation ---------------------------------------------------------------------

ALT = {"alt-interface": "ens6"}
OWN = InterfaceAddress("02:00:00:00:00:0a", "10.0.20.10", "2001:db8:20::a")
OWN_DATA = {"mac": "02:00:00:00:00:0a", "ip4": "10.0.20.10", "ip6": "2001:db8:20::a"}
PEER_B = {"mac": "02:00:00:00:00:0b", "ip4": "10.0.20.11"}
PEER_C = {"mac": "02:00:00:00:00:0c", "ip4": "10.0.20.12", "ip6": "2001:db8:20::c"}


def _member(data: dict) -> dict:
    return {
        "mac": data["mac"],
        "ip4": data["ip4"],
        "ip6": data.get("ip6"),
        "interface": "ens6",
        "source_mac": OWN.mac,
        "probe": True,
    }


def _group(*peers: dict, group_id: int = 63) -> dict:
    return {"id": group_id, "members": [_member(peer) for peer in peers]}


def _applied(group: dict) -> testing.StoredState:
    """The charm's record of the group the NetApp has."""
    content = {"alt_group": json.dumps(group, sort_keys=True)}
    return testing.StoredState(owner_path="DppNetappCharm", content=content)


def _relation(endpoint: str, app: str, units: dict) -> testing.Relation:
    return testing.Relation(endpoint, remote_app_name=app, remote_units_data=units)


@pytest.fixture
def alt_netapp(netapp):
    netapp.addresses["ens6"] = OWN
    return netapp


def test_given_a_peer_when_it_joins_then_our_address_published_and_group_put(ctx, alt_netapp):
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    out = ctx.run(ctx.on.relation_joined(rel, remote_unit=0), testing.State(config=ALT, relations={rel}))
    local = out.get_relation(rel.id).local_unit_data
    assert {key: local[key] for key in OWN_DATA} == OWN_DATA
    assert alt_netapp.api.calls == [("put_alternative", (_group(PEER_B),))]
    assert out.unit_status == testing.ActiveStatus("1 alternative node (group 63)")


def test_given_peers_on_both_endpoints_when_changed_then_both_members_in_unit_order(ctx, alt_netapp):
    first = _relation("alternatives-peer", "dpp-c", {0: PEER_C})
    second = _relation("alternatives", "dpp-b", {0: PEER_B})
    state = testing.State(config=ALT, relations={first, second})
    out = ctx.run(ctx.on.relation_changed(first, remote_unit=0), state)
    assert alt_netapp.api.alternatives[63] == _group(PEER_B, PEER_C)
    assert out.unit_status == testing.ActiveStatus("2 alternative nodes (group 63)")
    for rel in (first, second):
        assert out.get_relation(rel.id).local_unit_data["mac"] == OWN.mac


def test_given_a_unit_on_both_endpoints_when_changed_then_one_member(ctx, alt_netapp):
    first = _relation("alternatives", "dpp-b", {0: PEER_B})
    second = _relation("alternatives-peer", "dpp-b", {0: PEER_B})
    ctx.run(
        ctx.on.relation_changed(first, remote_unit=0), testing.State(config=ALT, relations={first, second})
    )
    assert alt_netapp.api.alternatives[63] == _group(PEER_B)


def test_given_units_2_and_10_when_changed_then_ordered_by_unit_number(ctx, alt_netapp):
    rel = _relation("alternatives", "dpp", {10: PEER_C, 2: PEER_B})
    ctx.run(ctx.on.relation_changed(rel, remote_unit=10), testing.State(config=ALT, relations={rel}))
    assert alt_netapp.api.alternatives[63] == _group(PEER_B, PEER_C)


def test_given_two_peers_when_one_departs_then_group_holds_the_other(ctx, alt_netapp):
    rel = _relation("alternatives", "dpp", {1: PEER_B, 2: PEER_C})
    state = testing.State(config=ALT, relations={rel}, stored_states={_applied(_group(PEER_B, PEER_C))})
    out = ctx.run(ctx.on.relation_departed(rel, remote_unit=2, departing_unit=2), state)
    assert alt_netapp.api.calls == [("put_alternative", (_group(PEER_B),))]
    assert out.unit_status == testing.ActiveStatus("1 alternative node (group 63)")


def test_given_last_peer_when_it_departs_then_group_deleted(ctx, alt_netapp):
    alt_netapp.api.alternatives[63] = _group(PEER_B)
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    state = testing.State(config=ALT, relations={rel}, stored_states={_applied(_group(PEER_B))})
    out = ctx.run(ctx.on.relation_departed(rel, remote_unit=0, departing_unit=0), state)
    assert alt_netapp.api.calls == [("delete_alternative", (63,))]
    assert 63 not in alt_netapp.api.alternatives
    assert out.unit_status == testing.ActiveStatus("no alternative nodes")


def test_given_relation_broken_when_no_peer_left_then_group_deleted_even_if_already_gone(ctx, alt_netapp):
    rel = _relation("alternatives-peer", "dpp-b", {0: PEER_B})
    state = testing.State(config=ALT, relations={rel}, stored_states={_applied(_group(PEER_B))})
    out = ctx.run(ctx.on.relation_broken(rel), state)
    assert alt_netapp.api.calls == [("delete_alternative", (63,))]
    assert out.unit_status == testing.ActiveStatus("no alternative nodes")


@pytest.mark.parametrize(
    "bad",
    [
        {**PEER_C, "mac": "02:00:00:00:0c"},
        {**PEER_C, "mac": "ff:ff:ff:ff:ff:ff"},
        {"ip4": "10.0.20.12"},
        {"mac": PEER_C["mac"]},
        {**PEER_C, "ip4": "10.0.20.300"},
        {**PEER_C, "ip6": "10.0.20.12"},
    ],
)
def test_given_a_peer_with_bad_data_when_changed_then_skipped_and_logged(ctx, alt_netapp, caplog, bad):
    rel = _relation("alternatives", "dpp", {0: PEER_B, 1: bad})
    out = ctx.run(ctx.on.relation_changed(rel, remote_unit=1), testing.State(config=ALT, relations={rel}))
    assert alt_netapp.api.alternatives[63] == _group(PEER_B)
    assert "skipping dpp/1" in caplog.text
    assert out.unit_status == testing.ActiveStatus("1 alternative node (group 63)")


def test_given_only_a_bad_peer_when_joined_then_no_group_and_no_failure(ctx, alt_netapp):
    rel = _relation("alternatives", "dpp-b", {0: {"mac": "nonsense"}})
    out = ctx.run(ctx.on.relation_joined(rel, remote_unit=0), testing.State(config=ALT, relations={rel}))
    assert alt_netapp.api.calls == []
    assert out.unit_status == testing.ActiveStatus("no alternative nodes")


def test_given_more_peers_than_a_group_holds_when_changed_then_first_eight_and_rest_logged(
    ctx, alt_netapp, caplog
):
    units = {n: {"mac": f"02:00:00:00:01:{n:02x}", "ip4": f"10.0.21.{n}"} for n in range(1, 11)}
    rel = _relation("alternatives", "dpp", units)
    ctx.run(ctx.on.relation_changed(rel, remote_unit=1), testing.State(config=ALT, relations={rel}))
    members = alt_netapp.api.alternatives[63]["members"]
    assert [m["ip4"] for m in members] == [f"10.0.21.{n}" for n in range(1, 9)]
    assert "left out dpp/9, dpp/10" in caplog.text


def test_given_no_alt_interface_when_peer_joins_then_nothing_published_and_no_group(ctx, netapp):
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    out = ctx.run(ctx.on.relation_joined(rel, remote_unit=0), testing.State(relations={rel}))
    assert not {"mac", "ip4", "ip6"} & set(out.get_relation(rel.id).local_unit_data)
    assert netapp.api.calls == []
    assert out.unit_status == testing.ActiveStatus()


def test_given_alt_interface_cleared_when_config_changed_then_address_withdrawn_and_group_deleted(
    ctx, alt_netapp
):
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    rel = dataclasses.replace(rel, local_unit_data=OWN_DATA)
    state = testing.State(relations={rel}, stored_states={_applied(_group(PEER_B))})
    out = ctx.run(ctx.on.config_changed(), state)
    assert "mac" not in out.get_relation(rel.id).local_unit_data
    assert alt_netapp.api.calls == [("delete_alternative", (63,))]


def test_given_alt_group_changed_when_config_changed_then_old_group_deleted_and_new_put(ctx, alt_netapp):
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    config = {**ALT, "alt-group": 7}
    state = testing.State(config=config, relations={rel}, stored_states={_applied(_group(PEER_B))})
    ctx.run(ctx.on.config_changed(), state)
    assert alt_netapp.api.calls == [
        ("delete_alternative", (63,)),
        ("put_alternative", (_group(PEER_B, group_id=7),)),
    ]


def test_given_group_applied_when_update_status_then_not_sent_again(ctx, alt_netapp):
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    state = testing.State(config=ALT, relations={rel}, stored_states={_applied(_group(PEER_B))})
    out = ctx.run(ctx.on.update_status(), state)
    assert alt_netapp.api.calls == []
    assert out.unit_status == testing.ActiveStatus("1 alternative node (group 63)")


def test_given_api_unreachable_when_peer_joins_then_no_failure_and_sent_on_next_event(
    ctx, alt_netapp, caplog
):
    alt_netapp.api.fail_with = ApiError(None, "cannot reach the NetApp at http://127.0.0.1:8080")
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    out = ctx.run(ctx.on.relation_joined(rel, remote_unit=0), testing.State(config=ALT, relations={rel}))
    assert out.unit_status == testing.ActiveStatus("no alternative nodes")
    assert "trying again on the next event" in caplog.text
    assert out.get_relation(rel.id).local_unit_data["mac"] == OWN.mac
    alt_netapp.api.fail_with = None
    again = ctx.run(ctx.on.update_status(), out)
    assert alt_netapp.api.alternatives[63] == _group(PEER_B)
    assert again.unit_status == testing.ActiveStatus("1 alternative node (group 63)")


def test_given_service_down_when_peer_joins_then_published_and_group_waits(ctx, alt_netapp):
    alt_netapp.running = False
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    out = ctx.run(ctx.on.relation_joined(rel, remote_unit=0), testing.State(config=ALT, relations={rel}))
    assert alt_netapp.api.calls == []
    assert out.get_relation(rel.id).local_unit_data["mac"] == OWN.mac


def test_given_netapp_refuses_the_delete_when_last_peer_departs_then_blocked_with_its_reason(ctx, alt_netapp):
    alt_netapp.api.fail_with = ApiError(409, "alternative group 63 is used by 1 intents ('video')")
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    state = testing.State(config=ALT, relations={rel}, stored_states={_applied(_group(PEER_B))})
    out = ctx.run(ctx.on.relation_departed(rel, remote_unit=0, departing_unit=0), state)
    assert isinstance(out.unit_status, testing.BlockedStatus)
    assert "409: alternative group 63 is used" in out.unit_status.message


def test_given_netapp_refused_the_group_when_action_then_still_blocked(ctx, alt_netapp):
    alt_netapp.api.fail_with = ApiError(409, "alternative group 63 is used by 1 intents ('video')")
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    state = testing.State(config=ALT, relations={rel}, stored_states={_applied(_group(PEER_B))})
    out = ctx.run(ctx.on.relation_departed(rel, remote_unit=0, departing_unit=0), state)
    alt_netapp.api.fail_with = None
    acted = ctx.run(ctx.on.action("list-intents"), out)
    assert isinstance(acted.unit_status, testing.BlockedStatus)
    assert "409: alternative group 63 is used" in acted.unit_status.message


def test_given_alt_interface_missing_when_peer_joins_then_blocked_naming_option_and_nothing_published(
    ctx, netapp
):
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    out = ctx.run(ctx.on.relation_joined(rel, remote_unit=0), testing.State(config=ALT, relations={rel}))
    assert out.unit_status == testing.BlockedStatus("alt-interface: no interface 'ens6' on this machine")
    assert "mac" not in out.get_relation(rel.id).local_unit_data
    assert netapp.api.calls == []


def test_given_alt_interface_without_address_when_peer_joins_then_blocked(ctx, netapp):
    netapp.addresses["ens6"] = InterfaceAddress("02:00:00:00:00:0a")
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    out = ctx.run(ctx.on.relation_joined(rel, remote_unit=0), testing.State(config=ALT, relations={rel}))
    assert out.unit_status == testing.BlockedStatus("alt-interface: ens6 has no global IPv4 or IPv6 address")


def test_given_bad_config_when_peer_joins_then_nothing_done(ctx, alt_netapp):
    rel = _relation("alternatives", "dpp-b", {0: PEER_B})
    config = {**ALT, "alt-group": 99}
    out = ctx.run(ctx.on.relation_joined(rel, remote_unit=0), testing.State(config=config, relations={rel}))
    assert isinstance(out.unit_status, testing.BlockedStatus) and "alt-group" in out.unit_status.message
    assert alt_netapp.api.calls == [] and "mac" not in out.get_relation(rel.id).local_unit_data


# --- steer-cpus: the steering set on day 1 -----------------------------------------------------

STEER = {"steer-cpus": "2, 3:500000"}


def _puts(netapp) -> list[dict]:
    return [args[0] for name, args in netapp.api.calls if name == "put_cpu"]


def test_given_steer_cpus_when_config_changed_then_each_cpu_put_once_the_api_answers(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), testing.State(config=STEER))
    assert [name for name, _ in netapp.api.calls][:1] == ["wait_answering"]
    assert _puts(netapp) == [{"cpu": 2, "capacity_pps": 0}, {"cpu": 3, "capacity_pps": 500000}]
    assert out.unit_status == testing.ActiveStatus()


def test_given_steer_cpus_applied_when_update_status_then_not_sent_again(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), testing.State(config=STEER))
    netapp.api.calls.clear()
    ctx.run(ctx.on.update_status(), out)
    assert netapp.api.calls == []


def _deletes(netapp) -> list[int]:
    return [args[0] for name, args in netapp.api.calls if name == "delete_cpu"]


def test_given_steer_cpus_changed_then_a_dropped_cpu_removed_first_and_only_new_and_changed_cpus_put(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), testing.State(config=STEER))
    netapp.api.calls.clear()
    changed = ctx.run(ctx.on.config_changed(), dataclasses.replace(out, config={"steer-cpus": "3:600000,4"}))
    assert [name for name, _ in netapp.api.calls] == ["wait_answering", "delete_cpu", "put_cpu", "put_cpu"]
    assert _deletes(netapp) == [2]
    assert _puts(netapp) == [{"cpu": 3, "capacity_pps": 600000}, {"cpu": 4, "capacity_pps": 0}]
    netapp.api.calls.clear()
    ctx.run(ctx.on.update_status(), changed)
    assert netapp.api.calls == []  # removed once: the charm forgot it


def test_given_a_cpu_only_set_cpu_added_when_steer_cpus_changes_then_it_stays(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), testing.State(config=STEER))
    ctx.run(ctx.on.action("set-cpu", params={"cpu": 7}), out)
    netapp.api.calls.clear()
    ctx.run(ctx.on.config_changed(), dataclasses.replace(out, config={"steer-cpus": ""}))
    assert _deletes(netapp) == [2, 3]


def test_given_a_dropped_cpu_not_in_the_set_any_more_then_no_error_and_forgotten(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), testing.State(config=STEER))
    netapp.api.absent_cpus.add(2)  # remove-cpu took it out already
    changed = ctx.run(ctx.on.config_changed(), dataclasses.replace(out, config={"steer-cpus": "3:500000"}))
    assert changed.unit_status == testing.ActiveStatus()
    netapp.api.calls.clear()
    ctx.run(ctx.on.config_changed(), dataclasses.replace(changed, config={"steer-cpus": ""}))
    assert _deletes(netapp) == [3]


def test_given_netapp_refuses_to_remove_a_cpu_then_blocked_naming_it_and_retried(ctx, netapp):
    out = ctx.run(ctx.on.config_changed(), testing.State(config=STEER))
    netapp.api.fail_with = ApiError(503, "the data plane refused the change: dpp_cpu_disable(cpu 2): EIO")
    blocked = ctx.run(ctx.on.config_changed(), dataclasses.replace(out, config={"steer-cpus": "4"}))
    assert blocked.unit_status == testing.BlockedStatus(
        "steer-cpus: the NetApp refused to remove CPU 2: 503: the data plane refused the change: "
        "dpp_cpu_disable(cpu 2): EIO"
    )
    assert _puts(netapp)[-1] != {"cpu": 4, "capacity_pps": 0}, "nothing put after a refused removal"
    netapp.api.fail_with = None
    netapp.api.calls.clear()
    again = ctx.run(ctx.on.update_status(), blocked)
    assert (_deletes(netapp), _puts(netapp)) == ([2, 3], [{"cpu": 4, "capacity_pps": 0}])
    assert again.unit_status == testing.ActiveStatus()


def test_given_netapp_refuses_a_cpu_when_config_changed_then_blocked_naming_option_and_retried(ctx, netapp):
    netapp.api.fail_with = ApiError(400, "CPU 3 is not one of this machine's CPUs")
    out = ctx.run(ctx.on.config_changed(), testing.State(config=STEER))
    assert out.unit_status == testing.BlockedStatus(
        "steer-cpus: the NetApp refused CPU 2: 400: CPU 3 is not one of this machine's CPUs"
    )
    netapp.api.fail_with = None
    again = ctx.run(ctx.on.update_status(), out)
    assert _puts(netapp)[-2:] == [{"cpu": 2, "capacity_pps": 0}, {"cpu": 3, "capacity_pps": 500000}]
    assert again.unit_status == testing.ActiveStatus()


def test_given_api_does_not_answer_when_config_changed_then_no_failure_and_sent_on_next_event(
    ctx, netapp, caplog
):
    netapp.api.fail_with = ApiError(None, "cannot reach the NetApp at http://127.0.0.1:8080")
    out = ctx.run(ctx.on.config_changed(), testing.State(config=STEER))
    assert out.unit_status == testing.ActiveStatus()
    assert "steer-cpus: cannot reach the NetApp" in caplog.text and "trying again on the next event" in caplog.text
    netapp.api.fail_with = None
    ctx.run(ctx.on.update_status(), out)
    assert len(_puts(netapp)) == 2


# --- actions: good inputs ----------------------------------------------------------------------

GOOD = [
    ("add-intent", {"intent": json.dumps(INTENT)}, ("add_intent", (INTENT,)), {"intent-id": "video"}),
    ("remove-intent", {"intent-id": "video"}, ("remove_intent", ("video",)), {"intent-id": "video"}),
    ("list-intents", {}, ("list_intents", ()), {"count": "2"}),
    ("delete-slice", {"slice-id": "embb"}, ("delete_slice", ("embb",)), {"slice-id": "embb"}),
    (
        "set-alternatives",
        {"groups": json.dumps([{"id": 1, "members": [{"interface": "ens6"}]}])},
        ("put_alternative", ({"id": 1, "members": [{"interface": "ens6"}]},)),
        {"count": "1"},
    ),
    ("get-stats", {}, ("stats", ()), {}),
    (
        "attach",
        {"interface": "ens4", "mode": "generic"},
        ("attach", ("ens4", "generic")),
        {"mode": "generic"},
    ),
    ("attach", {"interface": "ens4"}, ("attach", ("ens4", "native")), {"mode": "native"}),
    ("detach", {"interface": "ens4"}, ("detach", ("ens4",)), {"interface": "ens4"}),
    (
        "subscribe-telemetry",
        {"callback-uri": "https://a.example/n", "measurements": "dpp_intent, dpp_cpu", "period": 10},
        ("subscribe", ("https://a.example/n", ["dpp_intent", "dpp_cpu"], 10)),
        {"subscription-id": "sub-1"},
    ),
    (
        "unsubscribe-telemetry",
        {"subscription-id": "sub-1"},
        ("unsubscribe", ("sub-1",)),
        {"subscription-id": "sub-1"},
    ),
    (
        "set-cpu",
        {"cpu": 3, "capacity-pps": 500000, "queue-size": 4096, "overloaded": True},
        ("put_cpu", ({"cpu": 3, "capacity_pps": 500000, "queue_size": 4096, "overloaded": True},)),
        {"cpu": "3"},
    ),
    ("set-cpu", {"cpu": 0}, ("put_cpu", ({"cpu": 0, "capacity_pps": 0, "queue_size": 0, "overloaded": False},)), {}),
    ("remove-cpu", {"cpu": 3}, ("delete_cpu", (3,)), {"cpu": "3"}),
    ("reload-dataplane", {}, ("reload_dataplane", ()), {"count": "1", "program-id": "8"}),
]


@pytest.mark.parametrize(
    "action, params, call, results", GOOD, ids=[g[0] + str(i) for i, g in enumerate(GOOD)]
)
def test_given_running_netapp_when_action_then_api_called_and_results_returned(
    ctx, netapp, action, params, call, results
):
    ctx.run(ctx.on.action(action, params=params), testing.State())
    assert netapp.api.calls[-1] == call
    for key, value in results.items():
        assert ctx.action_results[key] == value
    json.loads(ctx.action_results["result"])


def test_given_no_slice_when_create_slice_then_one_put_and_created(ctx, netapp):
    ctx.run(ctx.on.action("create-slice", params={"slice": json.dumps(SLICE)}), testing.State())
    assert netapp.api.calls == [("put_slice", (SLICE,))]
    assert json.loads(ctx.action_results["result"]) == SLICE
    assert ctx.action_results["outcome"] == "created"


def test_given_slice_exists_when_create_slice_then_one_put_and_replaced(ctx, netapp):
    netapp.api.slices["embb"] = SLICE
    changed = {**SLICE, "priority_level": 5}
    ctx.run(ctx.on.action("create-slice", params={"slice": json.dumps(changed)}), testing.State())
    assert netapp.api.calls == [("put_slice", (changed,))]
    assert ctx.action_results["outcome"] == "replaced"


def test_given_slice_exists_when_update_slice_then_put(ctx, netapp):
    netapp.api.slices["embb"] = SLICE
    changed = {**SLICE, "priority_level": 5}
    ctx.run(ctx.on.action("update-slice", params={"slice": json.dumps(changed)}), testing.State())
    assert netapp.api.calls[-1] == ("put_slice", (changed,))


def test_given_no_slice_when_update_slice_then_fails_naming_slice(ctx, netapp):
    with pytest.raises(testing.ActionFailed, match="^slice: no slice 'embb'"):
        ctx.run(ctx.on.action("update-slice", params={"slice": json.dumps(SLICE)}), testing.State())


# --- actions: bad inputs -----------------------------------------------------------------------

BAD = [
    ("add-intent", {"intent": "{not json"}, "intent"),
    ("add-intent", {"intent": "[1, 2]"}, "intent"),
    ("add-intent", {"intent": json.dumps({"match": {}})}, "intent"),
    ("add-intent", {}, "intent"),
    ("remove-intent", {"intent-id": "  "}, "intent-id"),
    ("create-slice", {"slice": "nope"}, "slice"),
    ("update-slice", {"slice": json.dumps({"snssai": {}})}, "slice"),
    ("delete-slice", {}, "slice-id"),
    ("delete-slice", {"slice-id": "a/b"}, "slice-id"),
    ("delete-slice", {"slice-id": "x" * 49}, "slice-id"),
    ("remove-intent", {"intent-id": "video/1"}, "intent-id"),
    ("create-slice", {"slice": json.dumps({**SLICE, "id": "embb/1"})}, "slice"),
    ("update-slice", {"slice": json.dumps({**SLICE, "id": "e mbb"})}, "slice"),
    ("set-alternatives", {"groups": "{}"}, "groups"),
    ("set-alternatives", {"groups": "[]"}, "groups"),
    ("set-alternatives", {"groups": json.dumps([{"id": "one"}])}, "groups"),
    ("attach", {"interface": "ens4", "mode": "turbo"}, "mode"),
    ("attach", {"mode": "native"}, "interface"),
    ("detach", {"interface": ""}, "interface"),
    ("subscribe-telemetry", {"callback-uri": "ftp://x", "period": 5}, "callback-uri"),
    ("subscribe-telemetry", {"callback-uri": "http://x", "period": 0}, "period"),
    ("subscribe-telemetry", {"callback-uri": "http://x"}, "period"),
    ("unsubscribe-telemetry", {"subscription-id": ""}, "subscription-id"),
    ("set-cpu", {}, "cpu"),
    ("set-cpu", {"cpu": 128}, "cpu"),
    ("set-cpu", {"cpu": 1, "capacity-pps": -1}, "capacity-pps"),
    ("set-cpu", {"cpu": 1, "queue-size": 16385}, "queue-size"),
    ("remove-cpu", {}, "cpu"),
    ("remove-cpu", {"cpu": 128}, "cpu"),
]


@pytest.mark.parametrize("action, params, param", BAD, ids=[b[0] + str(i) for i, b in enumerate(BAD)])
def test_given_bad_parameter_when_action_then_fails_naming_it_and_api_untouched(
    ctx, netapp, action, params, param
):
    with pytest.raises(testing.ActionFailed) as failed:
        ctx.run(ctx.on.action(action, params=params), testing.State())
    assert failed.value.message.startswith(f"{param}: ")
    assert netapp.api.calls == []


def test_given_slice_id_with_a_slash_when_delete_slice_then_fails_saying_what_an_id_may_hold(ctx, netapp):
    with pytest.raises(testing.ActionFailed) as failed:
        ctx.run(ctx.on.action("delete-slice", params={"slice-id": "embb/1"}), testing.State())
    assert failed.value.message == (
        "slice-id: 'embb/1' is not an id: 1 to 48 letters, digits, '.', '_' or '-' (no '/' or space)"
    )


def test_given_api_refuses_when_action_then_fails_with_its_reason(ctx, netapp):
    netapp.api.fail_with = ApiError(409, "intent 'video' exists already")
    with pytest.raises(
        testing.ActionFailed, match="add-intent: the NetApp refused: 409: intent 'video' exists"
    ):
        ctx.run(ctx.on.action("add-intent", params={"intent": json.dumps(INTENT)}), testing.State())


def test_given_a_cpu_not_in_the_set_when_remove_cpu_then_fails_with_the_netapps_404(ctx, netapp):
    netapp.api.absent_cpus.add(3)
    with pytest.raises(testing.ActionFailed, match="remove-cpu: the NetApp refused: 404: CPU 3 is not in the CPU set"):
        ctx.run(ctx.on.action("remove-cpu", params={"cpu": 3}), testing.State())


def test_given_service_down_when_action_then_fails(ctx, netapp):
    netapp.running = False
    with pytest.raises(testing.ActionFailed, match="not running"):
        ctx.run(ctx.on.action("get-stats"), testing.State())
    assert netapp.api.calls == []


def test_given_service_down_when_action_has_bad_params_then_fails_naming_the_param(ctx, netapp):
    netapp.running = False
    with pytest.raises(testing.ActionFailed, match="intent"):
        ctx.run(ctx.on.action("add-intent", params={"intent": "{not json"}), testing.State())
    assert netapp.api.calls == []


def test_given_bad_config_when_action_then_fails_naming_option(ctx, netapp):
    with pytest.raises(testing.ActionFailed, match="invalid config: xdp-mode"):
        ctx.run(ctx.on.action("list-intents"), testing.State(config={"xdp-mode": "x"}))


@pytest.fixture
def bad_config_after_good(ctx, netapp) -> testing.State:
    """The NetApp took a config on port 8443; the new one is invalid, so it runs on that."""
    good = ctx.run(ctx.on.config_changed(), testing.State(config={"api-port": 8443}))
    bad = ctx.run(ctx.on.config_changed(), dataclasses.replace(good, config={"api-port": 8443, "xdp-mode": "x"}))
    assert isinstance(bad.unit_status, testing.BlockedStatus) and "xdp-mode" in bad.unit_status.message
    return bad


@pytest.mark.parametrize("action, call", [("list-intents", "list_intents"), ("get-stats", "stats")])
def test_given_bad_config_after_a_good_one_when_read_only_action_then_runs_on_the_applied_settings(
    ctx, netapp, monkeypatch, bad_config_after_good, action, call
):
    used = []
    monkeypatch.setattr(netapp, "client", lambda config: used.append(config) or netapp.api)
    out = ctx.run(ctx.on.action(action), bad_config_after_good)
    assert netapp.api.calls[-1][0] == call
    assert used[-1].api_port == 8443 and not used[-1].tls
    assert isinstance(out.unit_status, testing.BlockedStatus)


def test_given_bad_config_after_a_good_one_when_changing_action_then_fails_naming_option(
    ctx, netapp, bad_config_after_good
):
    with pytest.raises(testing.ActionFailed, match="invalid config: xdp-mode"):
        ctx.run(ctx.on.action("add-intent", params={"intent": json.dumps(INTENT)}), bad_config_after_good)
    assert netapp.api.calls == []
