"""The workload module without ops: settings and systemd unit written to a tmp dir (commands
recorded, never run), and its REST client against a real uvicorn serving the NetApp API."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from charm_config import CharmConfig
from netapp_workload import (
    ApiError,
    InterfaceAddress,
    NetApp,
    NetAppClient,
    Paths,
    WorkloadError,
)

INTENT = {
    "id": "video",
    "match": {"protocol": "udp", "dst_port": 5004},
    "action": {"type": "steer", "cpu": 1},
}


class Commands:
    """Records argv lists; `netapp tokens add` prints a token like the real one, `ip -j addr` prints
    `ip_addr`."""

    def __init__(self, fail: str = "") -> None:
        self.argv: list[list[str]] = []
        self.fail = fail
        self.ip_addr = "[]"
        self.version = ""

    def __call__(self, argv, **kwargs) -> subprocess.CompletedProcess:
        self.argv.append(argv)
        out = ""
        if argv[1:3] == ["tokens", "add"]:
            out = "tok-123\n"
        elif argv[:3] == ["ip", "-j", "addr"]:
            out = self.ip_addr
        elif argv[1:] == ["--version"]:
            out = self.version
        code = 1 if self.fail and self.fail in " ".join(argv) else 0
        return subprocess.CompletedProcess(argv, code, out, "boom" if code else "")


@pytest.fixture
def commands() -> Commands:
    return Commands()


@pytest.fixture
def workload(tmp_path: Path, commands: Commands) -> NetApp:
    return NetApp(root=tmp_path, run=commands)


def test_given_full_config_when_configure_then_settings_load_as_netapp_settings(workload, commands, tmp_path):
    from netapp.core.config import Settings

    config = CharmConfig(
        interfaces="ens4,ens5",
        xdp_mode="generic",
        cpus="2-3",
        max_rules=4096,
        api_host="0.0.0.0",
        api_port=8443,
        tls_cert="CERT",
        tls_key="KEY",
        influxdb_url="http://influx:8086",
        influxdb_token="tok",
        influxdb_bucket="dpp",
        telemetry_interval=2.5,
    )
    assert workload.configure(config) is True
    settings = yaml.safe_load(workload.paths.settings.read_text())
    assert settings["interfaces"] == [
        {"name": "ens4", "mode": "generic"},
        {"name": "ens5", "mode": "generic"},
    ]
    assert settings["tokens_file"] == "/etc/dpp-netapp/tokens.yaml"
    assert settings["tls_cert"] == "/etc/dpp-netapp/tls.crt"
    assert settings["telemetry"]["influxdb"]["bucket"] == "dpp"
    # The NetApp itself accepts the file (paths as on the host; validation does not open them).
    parsed = Settings(**settings)
    assert parsed.max_rules == 4096 and parsed.telemetry.interval_s == 2.5
    assert (
        workload.paths.tls_key.read_text() == "KEY" and workload.paths.tls_key.stat().st_mode & 0o777 == 0o600
    )
    assert workload.paths.settings.stat().st_mode & 0o777 == 0o600
    assert workload.paths.charm_token.read_text() == "tok-123\n"
    assert ["systemctl", "daemon-reload"] in commands.argv


def test_given_metrics_listener_when_configure_then_rendered_and_loads_as_netapp_settings(workload):
    from netapp.core.config import Settings

    workload.configure(CharmConfig(metrics_host="192.0.2.7", metrics_port=9100))
    settings = yaml.safe_load(workload.paths.settings.read_text())
    assert settings["telemetry"]["metrics_listener"] == {"enabled": True, "host": "192.0.2.7", "port": 9100}
    listener = Settings(**settings).telemetry.metrics_listener
    assert listener.enabled and str(listener.host) == "192.0.2.7" and listener.port == 9100


def test_given_callback_allow_when_configure_then_the_netapp_allows_those_callbacks(workload):
    from netapp.core.config import Settings

    workload.configure(CharmConfig(callback_allow=" 127.0.0.1/32, receiver.mgmt.example ,"))
    settings = yaml.safe_load(workload.paths.settings.read_text())
    assert settings["telemetry"]["subscriptions"] == {"callback_allow": ["127.0.0.1/32", "receiver.mgmt.example"]}
    assert Settings(**settings).telemetry.subscriptions.callback_allow


def test_given_no_metrics_host_when_configure_then_listener_off_not_on_every_address(workload):
    workload.configure(CharmConfig())
    settings = yaml.safe_load(workload.paths.settings.read_text())
    assert settings["telemetry"]["metrics_listener"] == {"enabled": False}


def test_given_metrics_port_0_when_configure_then_listener_off(workload):
    from netapp.core.config import Settings

    workload.configure(CharmConfig(metrics_port=0))
    settings = yaml.safe_load(workload.paths.settings.read_text())
    assert settings["telemetry"]["metrics_listener"] == {"enabled": False}
    assert Settings(**settings).telemetry.metrics_listener.enabled is False


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"alt_interface": "ens6", "alt_group": 12}, 12),
        ({"alt_interface": "ens6", "alt_group": 12, "alt_default": False}, None),
        ({"alt_group": 12}, None),  # no alt-interface: the group has no members, so no default
    ],
)
def test_given_alt_options_when_configure_then_default_alternative_follows(workload, options, expected):
    from netapp.core.config import Settings

    workload.configure(CharmConfig(**options))
    settings = yaml.safe_load(workload.paths.settings.read_text())
    assert settings.get("default_alternative") == expected
    assert Settings(**settings).default_alternative == expected


def test_given_cpus_when_configure_then_unit_pins_them(workload):
    workload.configure(CharmConfig(cpus="1,3-4"))
    unit = workload.paths.unit.read_text()
    assert "CPUAffinity=1 3 4" in unit
    assert "ExecStart=/opt/dpp-netapp/bin/netapp serve" in unit
    assert "Environment=NETAPP_CONFIG=/etc/dpp-netapp/settings.yaml" in unit


def test_given_configured_when_configure_again_then_unchanged_and_token_kept(workload, commands):
    workload.configure(CharmConfig())
    commands.argv.clear()
    assert workload.configure(CharmConfig()) is False
    assert commands.argv == []


def test_given_tls_dropped_when_configure_then_tls_files_removed(workload):
    workload.configure(CharmConfig(tls_cert="C", tls_key="K"))
    assert workload.configure(CharmConfig()) is True
    assert not workload.paths.tls_cert.exists() and "tls_cert" not in workload.paths.settings.read_text()


@pytest.fixture
def wheels(tmp_path: Path) -> Path:
    """A charm's wheels/ folder: its hash-pinned list (the wheels themselves pip would read)."""
    folder = tmp_path / "charm" / "wheels"
    folder.mkdir(parents=True)
    (folder / "requirements.txt").write_text(f"dpp-netapp==0.1.0 --hash=sha256:{'a' * 64}\n")
    return folder


def test_given_the_charms_wheels_when_install_then_a_fresh_venv_and_pip_offline(workload, commands, wheels):
    workload.install("charm", wheels)
    assert commands.argv[0] == ["apt-get", "update"]
    assert commands.argv[1] == [
        "apt-get", "install", "-y", "--no-install-recommends", "python3-venv", "iproute2", "libbpf1"
    ]  # fmt: skip
    assert commands.argv[2] == ["python3", "-m", "venv", "--clear", str(workload.paths.venv)]
    assert commands.argv[3] == [
        str(workload.paths.venv / "bin" / "pip"), "install", "--require-hashes", "--only-binary=:all:",
        "--no-index", "--find-links", str(wheels), "-r", str(workload.paths.requirements),
    ]  # fmt: skip
    assert workload.paths.requirements.read_text() == (wheels / "requirements.txt").read_text()


def test_given_the_index_when_install_then_pip_takes_the_hashed_list_from_the_index(workload, commands, wheels):
    pinned = f"dpp-netapp==0.1.0 --hash=sha256:{'b' * 64}"
    workload.install("index", wheels, pinned)
    assert "--no-index" not in commands.argv[3] and "--require-hashes" in commands.argv[3]
    assert commands.argv[3][-2:] == ["-r", str(workload.paths.requirements)]
    assert workload.paths.requirements.read_text() == pinned


def test_given_a_charm_without_wheels_when_install_then_workload_error_before_any_step(workload, commands):
    with pytest.raises(WorkloadError, match=r"wheels/requirements\.txt: not found"):
        workload.install("charm", workload.paths.root / "bare-charm" / "wheels")
    assert commands.argv == []


def test_given_apt_update_fails_when_install_then_workload_error_and_nothing_installed(tmp_path, wheels):
    commands = Commands(fail="apt-get update")
    with pytest.raises(WorkloadError, match="apt-get update failed"):
        NetApp(root=tmp_path, run=commands).install("charm", wheels)
    assert commands.argv == [["apt-get", "update"]]


def test_given_installed_when_version_then_netapps_version(workload, commands):
    commands.version = "netapp 0.1.0\n"
    assert workload.version() == "0.1.0"
    assert commands.argv[-1] == [str(workload.paths.netapp_bin), "--version"]


def test_given_pip_fails_when_install_then_workload_error(tmp_path, wheels):
    with pytest.raises(WorkloadError, match="failed"):
        NetApp(root=tmp_path, run=Commands(fail="pip")).install("charm", wheels)


def test_given_service_when_restart_stop_remove_then_systemctl(workload, commands):
    workload.configure(CharmConfig())
    workload.restart()
    assert workload.is_running()
    workload.stop()
    workload.remove()
    assert ["systemctl", "restart", "dpp-netapp"] in commands.argv
    assert ["systemctl", "disable", "--now", "dpp-netapp"] in commands.argv
    assert not workload.paths.unit.exists()


def _installed(workload: NetApp) -> None:
    """The `netapp` command in place, as install leaves it."""
    workload.paths.netapp_bin.parent.mkdir(parents=True)
    workload.paths.netapp_bin.write_text("#!/bin/sh\n")


def test_given_installed_and_configured_when_remove_then_stopped_unloaded_and_then_files_removed(
    tmp_path, commands
):
    settings_at_unload = []  # whether the settings file was there at each command

    def run(argv, **kwargs):
        settings_at_unload.append(Paths(tmp_path).settings.exists())
        return commands(argv, **kwargs)

    workload = NetApp(root=tmp_path, run=run)
    workload.configure(CharmConfig(interfaces="ens4"))
    _installed(workload)
    commands.argv.clear()
    settings_at_unload.clear()

    workload.remove()

    assert commands.argv == [
        ["systemctl", "disable", "--now", "dpp-netapp"],
        [str(workload.paths.netapp_bin), "dataplane", "unload", "--config", str(workload.paths.settings)],
        ["systemctl", "daemon-reload"],
    ]
    assert settings_at_unload == [True, True, True]  # nothing was removed before the unload ran
    for gone in (workload.paths.unit, workload.paths.etc, workload.paths.venv):
        assert not gone.exists(), gone
    assert workload.paths.state_dir.is_dir()  # the store stays, as a package's data does


def test_given_unload_fails_when_remove_then_workload_error_and_everything_kept_for_the_retry(tmp_path):
    commands = Commands(fail="dataplane unload")
    workload = NetApp(root=tmp_path, run=commands)
    workload.configure(CharmConfig())
    _installed(workload)

    with pytest.raises(WorkloadError, match="dataplane unload failed"):
        workload.remove()

    for kept in (workload.paths.unit, workload.paths.settings, workload.paths.netapp_bin):
        assert kept.exists(), kept


def test_given_never_installed_when_remove_then_no_unload_and_no_failure(workload, commands):
    workload.remove()
    assert [argv[0] for argv in commands.argv] == ["systemctl", "systemctl"]


def test_given_no_token_when_client_then_api_error(workload):
    with pytest.raises(ApiError, match="no API token"):
        workload.client(CharmConfig())


def test_given_token_when_client_then_local_url(workload):
    config = CharmConfig(api_host="localhost", api_port=9080)
    workload.configure(config)
    assert workload.client(config).base_url == "http://localhost:9080"


# --- an interface's addresses ------------------------------------------------------------------

ENS6 = [
    {
        "ifindex": 4,
        "ifname": "ens6",
        "address": "fa:16:3e:5d:7a:10",
        "addr_info": [
            {"family": "inet", "local": "10.0.20.5", "prefixlen": 24, "scope": "global"},
            {"family": "inet", "local": "10.0.20.6", "prefixlen": 24, "scope": "global", "secondary": True},
            {
                "family": "inet6",
                "local": "2001:db8::9",
                "prefixlen": 64,
                "scope": "global",
                "tentative": True,
            },
            {"family": "inet6", "local": "2001:db8::5", "prefixlen": 64, "scope": "global"},
            {"family": "inet6", "local": "fe80::f816:3eff:fe5d:7a10", "prefixlen": 64, "scope": "link"},
        ],
    }
]


def _interface(root: Path, name: str, mac: str) -> None:
    (root / "sys" / "class" / "net" / name).mkdir(parents=True)
    (root / "sys" / "class" / "net" / name / "address").write_text(mac + "\n")


def test_given_interface_when_interface_address_then_mac_and_first_global_addresses(
    workload, commands, tmp_path
):
    _interface(tmp_path, "ens6", "FA:16:3E:5D:7A:10")
    commands.ip_addr = json.dumps(ENS6)
    assert workload.interface_address("ens6") == InterfaceAddress(
        "fa:16:3e:5d:7a:10", "10.0.20.5", "2001:db8::5"
    )
    assert ["ip", "-j", "addr", "show", "dev", "ens6"] in commands.argv


def test_given_link_local_only_when_interface_address_then_no_addresses(workload, commands, tmp_path):
    _interface(tmp_path, "ens6", "fa:16:3e:5d:7a:10")
    commands.ip_addr = json.dumps([{**ENS6[0], "addr_info": ENS6[0]["addr_info"][-1:]}])
    assert workload.interface_address("ens6") == InterfaceAddress("fa:16:3e:5d:7a:10")


def test_given_no_such_interface_when_interface_address_then_workload_error(workload):
    with pytest.raises(WorkloadError, match="no interface 'ens9'"):
        workload.interface_address("ens9")


def test_given_ip_answers_garbage_when_interface_address_then_workload_error(workload, commands, tmp_path):
    _interface(tmp_path, "ens6", "fa:16:3e:5d:7a:10")
    commands.ip_addr = "Device ens6: something"
    with pytest.raises(WorkloadError, match="unreadable"):
        workload.interface_address("ens6")


# --- the REST client against the real API ------------------------------------------------------


@pytest.fixture(scope="module")
def api_server(tmp_path_factory) -> Iterator[tuple[str, object]]:
    from netapp.api.auth import write_tokens_file
    from netapp.api.deps import get_service
    from netapp.api.main import create_app
    from netapp.core.config import Settings
    from netapp.service.contract import Scope
    from netapp.telemetry.runtime import Telemetry
    from tests.api.conftest import NoCounters, tokens_file_for
    from tests.api.fake_service import FakeIntentService
    from tests.api.server import ServerThread

    tokens = tmp_path_factory.mktemp("auth") / "tokens.yaml"
    write_tokens_file(tokens, tokens_file_for({"juju-charm": ("operator", [Scope.ADMIN])}))
    settings = Settings(
        tokens_file=tokens,
        state_dir=tmp_path_factory.mktemp("state"),
        telemetry={"subscriptions": {"callback_allow": ["127.0.0.1/32"]}},  # the test's callbacks
    )
    service = FakeIntentService()
    app = create_app(settings, service, Telemetry.from_settings(settings, NoCounters()))
    app.dependency_overrides[get_service] = lambda: service
    with ServerThread(app) as server:
        yield server.url, service


@pytest.fixture
def client(api_server) -> NetAppClient:
    from tests.api.conftest import token_of

    return NetAppClient(api_server[0], token_of("juju-charm"), timeout=10)


def test_given_real_api_when_intents_added_listed_removed_then_round_trip(client):
    client.add_intent(INTENT)
    assert [item["intent"]["id"] for item in client.list_intents()] == ["video"]
    with pytest.raises(ApiError) as refused:
        client.add_intent({**INTENT, "match": {"protocol": "udp", "dst_port": 6000}})
    assert refused.value.status == 409
    client.remove_intent("video")
    assert client.list_intents() == []
    with pytest.raises(ApiError) as missing:
        client.remove_intent("video")
    assert missing.value.status == 404


def test_given_real_api_when_slice_put_and_deleted_then_found_then_gone(client):
    spec = {
        "id": "embb",
        "snssai": {"sst": 1, "sd": "00A1B2"},
        "priority_level": 10,
        "members": {"vnis": [1093]},
        "cpus": [0, 1],
    }
    assert client.get_slice("embb") is None
    record, created = client.put_slice(spec)
    assert created and record["spec"]["id"] == "embb"
    assert client.put_slice({**spec, "priority_level": 5})[1] is False
    assert "embb" in str(client.get_slice("embb"))
    client.delete_slice("embb")
    assert client.get_slice("embb") is None


def test_given_real_api_when_bad_intent_then_400_naming_field(client):
    with pytest.raises(ApiError) as bad:
        client.add_intent({"id": "x", "match": {"protocol": "udp"}, "action": {"type": "warp"}})
    assert bad.value.status in (400, 422)


def test_given_real_api_when_attach_reload_detach_then_dataplane_follows(client, api_server):
    service = api_server[1]
    client.attach("ens4", "generic")
    reloaded = client.reload_dataplane()
    assert reloaded["interfaces"] == ["ens4"]
    assert reloaded["program_id"] == reloaded["previous_program_id"] + 1
    assert service.attached == {"ens4": "generic"}
    client.detach("ens4")
    assert client.reload_dataplane()["interfaces"] == []


def test_given_real_api_when_alternatives_and_stats_then_answers(client):
    group = {"id": 1, "members": [{"interface": "ens6", "mac": "02:00:00:00:00:06"}]}
    client.put_alternative(group)
    assert "intents" in client.stats()


def test_given_real_api_when_alternative_group_put_and_deleted_then_gone(client, api_server):
    service = api_server[1]
    member = {
        "mac": "02:00:00:00:00:0b",
        "ip4": "10.0.20.11",
        "ip6": None,
        "interface": "ens6",
        "source_mac": None,
    }
    client.put_alternative({"id": 63, "members": [member]})
    assert str(service.alternatives[63].members[0].ip4) == "10.0.20.11"
    client.delete_alternative(63)
    assert 63 not in service.alternatives
    with pytest.raises(ApiError) as missing:
        client.delete_alternative(63)
    assert missing.value.status == 404
    client.delete_alternative(63, missing_ok=True)


def test_given_real_api_when_subscribe_then_id_and_unsubscribe(client):
    body = client.subscribe("http://127.0.0.1:9/notify", ["dpp_intent"], 5)
    sub_id = body.get("subscriptionId") or body.get("id")
    assert sub_id
    client.unsubscribe(sub_id)
    with pytest.raises(ApiError) as gone:
        client.unsubscribe(sub_id)
    assert gone.value.status == 404


def test_given_wrong_token_when_call_then_401(api_server):
    with pytest.raises(ApiError) as refused:
        NetAppClient(api_server[0], "not-a-token", timeout=10).stats()
    assert refused.value.status == 401


def test_given_nothing_listening_when_call_then_api_error_says_so():
    with pytest.raises(ApiError, match="cannot reach the NetApp"):
        NetAppClient("http://127.0.0.1:9", "t", timeout=2).stats()


@pytest.fixture(scope="module")
def tls_api(tmp_path_factory) -> Iterator[tuple[int, Path, Path]]:
    from netapp.api.auth import write_tokens_file
    from netapp.api.main import create_app
    from netapp.core.config import Settings
    from netapp.service.contract import Scope
    from netapp.telemetry.runtime import Telemetry
    from tests.api.conftest import NoCounters, tokens_file_for
    from tests.api.fake_service import FakeIntentService
    from tests.api.server import ServerThread
    from tests.utils.tls import self_signed

    tokens = tmp_path_factory.mktemp("tls-auth") / "tokens.yaml"
    write_tokens_file(tokens, tokens_file_for({"juju-charm": ("operator", [Scope.ADMIN])}))
    cert, key = self_signed(tmp_path_factory.mktemp("tls"))
    settings = Settings(tokens_file=tokens, tls_cert=cert, tls_key=key)
    app = create_app(settings, FakeIntentService(), Telemetry.from_settings(settings, NoCounters()))
    with ServerThread(app, certfile=cert, keyfile=key) as server:
        yield server.socket.getsockname()[1], cert, key


def _tls_workload(root: Path, port: int, cert: Path, key: Path) -> tuple[NetApp, CharmConfig]:
    from tests.api.conftest import token_of

    config = CharmConfig(
        api_host="0.0.0.0", api_port=port, tls_cert=cert.read_text(), tls_key=key.read_text()
    )
    workload = NetApp(root=root, run=Commands())
    workload.configure(config)
    workload.paths.charm_token.write_text(token_of("juju-charm") + "\n")
    return workload, config


def test_given_public_tls_api_when_client_then_local_https_trusting_the_configured_cert(tmp_path, tls_api):
    port, cert, key = tls_api
    workload, config = _tls_workload(tmp_path, port, cert, key)
    client = workload.client(config)
    assert client.base_url == f"https://127.0.0.1:{port}"
    assert client.list_intents() == []


def test_given_other_cert_configured_when_client_then_tls_refused(tmp_path, tls_api):
    from tests.utils.tls import self_signed

    port, _, _ = tls_api
    (tmp_path / "other").mkdir()
    other_cert, other_key = self_signed(tmp_path / "other")
    workload, config = _tls_workload(tmp_path / "root", port, other_cert, other_key)
    with pytest.raises(ApiError, match="cannot reach"):
        workload.client(config).stats()


def test_given_dispatchs_python_path_when_a_command_runs_then_it_is_not_inherited(tmp_path, wheels, monkeypatch):
    """dispatch runs the charm with PYTHONPATH=lib:venv; pip would take the charm's packages as
    installed (and skip them) and the NetApp's commands would import them."""
    monkeypatch.setenv("PYTHONPATH", "lib:venv")
    seen: list[dict[str, str]] = []

    def run(argv, **kwargs):
        seen.append(kwargs["env"])
        return subprocess.CompletedProcess(argv, 0, "", "")

    NetApp(root=tmp_path, run=run).install("charm", wheels)
    assert seen and all("PYTHONPATH" not in env and env["PATH"] for env in seen)
