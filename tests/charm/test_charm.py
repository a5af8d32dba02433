"""Unit tests of the charm with ops.testing: every event and action, the workload a fake."""

from __future__ import annotations

import json

import pytest
from ops import testing

from netapp_workload import ApiError, WorkloadError

INTENT = {"id": "video", "match": {"protocol": "udp", "dst_port": 5004}, "action": {"type": "steer", "cpu": 1}}
SLICE = {"id": "embb", "snssai": {"sst": 1}, "priority_level": 10, "members": {"vnis": [1093]}}


# --- lifecycle events --------------------------------------------------------------------------


def test_given_fresh_machine_when_install_then_installs_configures_and_is_active(ctx, netapp):
    netapp.installed, netapp.running = False, False
    out = ctx.run(ctx.on.install(), testing.State(config={"netapp-source": "/tmp/dpp.whl"}))
    assert netapp.steps == ["install /tmp/dpp.whl", "configure", "restart"]
    assert out.unit_status == testing.ActiveStatus()


def test_given_install_fails_when_install_then_blocked_with_reason(ctx, netapp):
    netapp.installed, netapp.running = False, False
    netapp.install_error = WorkloadError("pip install failed (1): no such package")
    out = ctx.run(ctx.on.install(), testing.State())
    assert isinstance(out.unit_status, testing.BlockedStatus)
    assert "no such package" in out.unit_status.message


def test_given_installed_when_upgrade_charm_then_reinstalls(ctx, netapp):
    ctx.run(ctx.on.upgrade_charm(), testing.State())
    assert netapp.steps[0] == "install dpp-netapp"


def test_given_good_config_when_config_changed_then_settings_written_and_restarted(ctx, netapp):
    netapp.changed = True
    config = {
        "interfaces": "ens4, ens5",
        "xdp-mode": "generic",
        "cpus": "2-4,7",
        "max-rules": 1024,
        "influxdb-url": "http://influx:8086",
        "influxdb-token": "t",
        "influxdb-bucket": "dpp",
        "telemetry-interval": 5.0,
    }
    out = ctx.run(ctx.on.config_changed(), testing.State(config=config))
    written = netapp.configs[-1]
    assert written.interfaces == ["ens4", "ens5"] and written.xdp_mode == "generic"
    assert written.cpus == [2, 3, 4, 7] and written.max_rules == 1024 and written.telemetry_interval == 5.0
    assert netapp.steps == ["configure", "restart"]
    assert out.unit_status == testing.ActiveStatus()
    assert out.opened_ports == frozenset()


def test_given_unchanged_config_and_running_when_config_changed_then_no_restart(ctx, netapp):
    ctx.run(ctx.on.config_changed(), testing.State())
    assert netapp.steps == ["configure"]


def test_given_public_api_with_tls_when_config_changed_then_port_opened(ctx, netapp):
    config = {"api-host": "0.0.0.0", "api-port": 8443, "tls-cert": "CERT", "tls-key": "KEY"}
    out = ctx.run(ctx.on.config_changed(), testing.State(config=config))
    assert out.opened_ports == frozenset({testing.TCPPort(8443)})
    assert out.unit_status == testing.ActiveStatus()


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
        ({"influxdb-url": "influx:8086", "influxdb-token": "t", "influxdb-bucket": "b"}, "influxdb-url"),
        ({"influxdb-url": "http://influx:8086"}, "influxdb-token"),
    ],
)
def test_given_bad_config_when_config_changed_then_blocked_naming_option_and_nothing_written(
    ctx, netapp, config, option
):
    out = ctx.run(ctx.on.config_changed(), testing.State(config=config))
    assert isinstance(out.unit_status, testing.BlockedStatus)
    assert option in out.unit_status.message
    assert netapp.steps == []


def test_given_configure_fails_when_config_changed_then_blocked(ctx, netapp):
    netapp.configure_error = WorkloadError("systemctl daemon-reload failed (1)")
    out = ctx.run(ctx.on.config_changed(), testing.State())
    assert out.unit_status == testing.BlockedStatus("systemctl daemon-reload failed (1)")


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
    ctx.run(ctx.on.remove(), testing.State())
    assert netapp.steps == ["remove"]


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
    ("attach", {"interface": "ens4", "mode": "generic"}, ("attach", ("ens4", "generic")), {"mode": "generic"}),
    ("attach", {"interface": "ens4"}, ("attach", ("ens4", "native")), {"mode": "native"}),
    ("detach", {"interface": "ens4"}, ("detach", ("ens4",)), {"interface": "ens4"}),
    (
        "subscribe-telemetry",
        {"callback-uri": "https://a.example/n", "measurements": "dpp_intent, dpp_cpu", "period": 10},
        ("subscribe", ("https://a.example/n", ["dpp_intent", "dpp_cpu"], 10)),
        {"subscription-id": "sub-1"},
    ),
    ("unsubscribe-telemetry", {"subscription-id": "sub-1"}, ("unsubscribe", ("sub-1",)), {"subscription-id": "sub-1"}),
    ("reload-dataplane", {}, ("reload_dataplane", ()), {"count": "1"}),
]


@pytest.mark.parametrize("action, params, call, results", GOOD, ids=[g[0] + str(i) for i, g in enumerate(GOOD)])
def test_given_running_netapp_when_action_then_api_called_and_results_returned(
    ctx, netapp, action, params, call, results
):
    ctx.run(ctx.on.action(action, params=params), testing.State())
    assert netapp.api.calls[-1] == call
    for key, value in results.items():
        assert ctx.action_results[key] == value
    json.loads(ctx.action_results["result"])


def test_given_no_slice_when_create_slice_then_put(ctx, netapp):
    ctx.run(ctx.on.action("create-slice", params={"slice": json.dumps(SLICE)}), testing.State())
    assert netapp.api.calls == [("get_slice", ("embb",)), ("put_slice", (SLICE,))]
    assert json.loads(ctx.action_results["result"]) == SLICE


def test_given_slice_exists_when_create_slice_then_fails_naming_slice(ctx, netapp):
    netapp.api.slices["embb"] = SLICE
    with pytest.raises(testing.ActionFailed, match="^slice: .*exists already"):
        ctx.run(ctx.on.action("create-slice", params={"slice": json.dumps(SLICE)}), testing.State())


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
]


@pytest.mark.parametrize("action, params, param", BAD, ids=[b[0] + str(i) for i, b in enumerate(BAD)])
def test_given_bad_parameter_when_action_then_fails_naming_it_and_api_untouched(ctx, netapp, action, params, param):
    with pytest.raises(testing.ActionFailed) as failed:
        ctx.run(ctx.on.action(action, params=params), testing.State())
    assert failed.value.message.startswith(f"{param}: ")
    assert not [call for call in netapp.api.calls if call[0] != "get_slice"]


def test_given_api_refuses_when_action_then_fails_with_its_reason(ctx, netapp):
    netapp.api.fail_with = ApiError(409, "intent 'video' exists already")
    with pytest.raises(testing.ActionFailed, match="add-intent: the NetApp refused: 409: intent 'video' exists"):
        ctx.run(ctx.on.action("add-intent", params={"intent": json.dumps(INTENT)}), testing.State())


def test_given_service_down_when_action_then_fails(ctx, netapp):
    netapp.running = False
    with pytest.raises(testing.ActionFailed, match="not running"):
        ctx.run(ctx.on.action("get-stats"), testing.State())
    assert netapp.api.calls == []


def test_given_bad_config_when_action_then_fails_naming_option(ctx, netapp):
    with pytest.raises(testing.ActionFailed, match="invalid config: xdp-mode"):
        ctx.run(ctx.on.action("list-intents"), testing.State(config={"xdp-mode": "x"}))
