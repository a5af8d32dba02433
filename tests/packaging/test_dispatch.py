"""The packed charm runs: its ``dispatch`` starts ops from the charm's own venv, ops emits the
Juju event and the charm answers through the hook tools.

No Juju controller can run on these machines (no snap, no LXD), so the unit agent is played by
fake hook tools on PATH (tests/packaging/fake_juju.py) that log their calls and answer with the
charm's default config and the action's parameters. The NetApp is not installed here, so the
charm reports what charms/dpp-netapp/src/charm.py reports for that: maintenance, "NetApp not
installed".
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.packaging.fake_juju import FakeJuju, default_config

NOT_INSTALLED = ["--application=False", "maintenance", "--", "NetApp not installed"]


@pytest.fixture
def juju(tmp_path: Path, charmcraft: dict) -> FakeJuju:
    return FakeJuju(tmp_path / "juju", default_config(charmcraft))


def run(
    charm_dir: Path, juju: FakeJuju, command: str = "./dispatch", **env: str
) -> subprocess.CompletedProcess:
    """Run a hook the way the unit agent does: from the charm folder, with the JUJU_* variables."""
    done = subprocess.run(
        [command],
        cwd=charm_dir,
        env=juju.env(charm_dir, **env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stderr}"
    return done


def action_env(name: str) -> dict[str, str]:
    return {"JUJU_DISPATCH_PATH": f"actions/{name}", "JUJU_ACTION_NAME": name, "JUJU_ACTION_UUID": "7"}


def test_given_no_netapp_when_update_status_then_the_charm_sets_maintenance(charm_dir, juju):
    run(charm_dir, juju, JUJU_DISPATCH_PATH="hooks/update-status")
    assert ["--format=json"] in juju.calls("config-get")
    assert juju.calls("status-set") == [NOT_INSTALLED]
    logged = " ".join(" ".join(args) for args in juju.calls("juju-log"))
    assert "Emitting Juju event update_status" in logged


def test_given_a_juju_without_dispatch_when_it_runs_hooks_start_then_the_copy_dispatches(charm_dir, juju):
    """Juju before 2.8 runs hooks/<name> itself; dispatch then takes the event from $0."""
    run(charm_dir, juju, command="./hooks/start")
    logged = " ".join(" ".join(args) for args in juju.calls("juju-log"))
    assert "Emitting Juju event start" in logged
    assert juju.calls("status-set") == [NOT_INSTALLED]


def test_given_invalid_config_when_update_status_then_blocked_names_the_option(charm_dir, juju, charmcraft):
    juju.set_state(config={**default_config(charmcraft), "xdp-mode": "turbo"})
    run(charm_dir, juju, JUJU_DISPATCH_PATH="hooks/update-status")
    ((app_flag, state, _, message),) = juju.calls("status-set")
    assert (app_flag, state) == ("--application=False", "blocked")
    assert message.startswith("invalid config: xdp-mode")


def test_given_no_service_when_remove_intent_then_the_action_fails_and_says_why(charm_dir, juju):
    juju.set_state(params={"intent-id": "video"})
    run(charm_dir, juju, **action_env("remove-intent"))
    assert juju.calls("action-get") == [["--format=json"]]
    assert juju.calls("action-fail") == [["--", "the NetApp service is not running"]]
    assert juju.calls("action-set") == []
    assert "is-active --quiet dpp-netapp" in juju.systemctl_log.read_text().splitlines()


def test_given_a_bad_parameter_when_an_action_runs_then_action_fail_names_the_parameter(charm_dir, juju):
    juju.set_state(params={"intent": "{not json"})
    run(charm_dir, juju, **action_env("add-intent"))
    ((separator, message),) = juju.calls("action-fail")
    assert separator == "--"
    assert message.startswith("intent:"), message
    assert juju.calls("action-set") == []


def test_given_an_invalid_option_when_an_action_runs_then_action_fail_names_the_option(
    charm_dir, juju, charmcraft
):
    juju.set_state(config={**default_config(charmcraft), "api-port": 0}, params={})
    run(charm_dir, juju, **action_env("remove-intent"))
    ((separator, message),) = juju.calls("action-fail")
    assert separator == "--"
    assert message.startswith("invalid config: api-port")


SECRET = "secret:cs3j1r7mp25c7ag3m7o0"
INFLUX = {"influxdb-url": "http://influx:8086", "influxdb-token": SECRET, "influxdb-bucket": "dpp"}


@pytest.mark.parametrize(
    "answer, status",
    [
        (None, f"invalid config: influxdb-token: no secret {SECRET} visible here"),
        ("ERROR permission denied", f"invalid config: influxdb-token: cannot read secret {SECRET} (permission denied)"),
        ({"password": "x"}, f"invalid config: influxdb-token: secret {SECRET} has no 'token' key (it holds password)"),
    ],
    ids=["missing", "not-granted", "wrong-key"],
)
def test_given_an_unusable_secret_when_update_status_then_secret_get_is_asked_and_blocked_names_the_option(
    charm_dir, juju, charmcraft, answer, status
):
    secrets = {} if answer is None else {SECRET: answer}
    juju.set_state(config={**default_config(charmcraft), **INFLUX}, secrets=secrets)
    run(charm_dir, juju, JUJU_DISPATCH_PATH="hooks/update-status")
    assert juju.calls("secret-get") == [["--format=json", SECRET, "--refresh"]]
    ((app_flag, state, _, message),) = juju.calls("status-set")
    assert (app_flag, state) == ("--application=False", "blocked")
    assert message.startswith(status), message
