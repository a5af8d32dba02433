"""Integration: deploy the charm with jubilant on a Juju model and run every action. Skipped
unless jubilant is installed, a Juju controller answers, and DPP_CHARM names a packed .charm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

INTENT = {
    "id": "video",
    "match": {"protocol": "udp", "dst_port": 5004},
    "action": {"type": "steer", "cpu": 1},
}
SLICE = {"id": "embb", "snssai": {"sst": 1}, "priority_level": 10, "members": {"vnis": [1093]}}


def _skip_reason() -> str | None:
    try:
        import jubilant  # noqa: F401
    except ImportError:
        return "jubilant is not installed (pip install jubilant)"
    if shutil.which("juju") is None:
        return "no juju CLI on PATH, so no Juju controller is reachable"
    try:
        subprocess.run(["juju", "show-controller"], capture_output=True, check=True, timeout=30)
    except (subprocess.SubprocessError, OSError):
        return "no Juju controller is reachable (juju show-controller failed)"
    if not os.environ.get("DPP_CHARM"):
        return "DPP_CHARM is not set to the packed dpp-netapp .charm to deploy"
    return None


pytestmark = pytest.mark.timeout(1800)
SKIP = _skip_reason()


@pytest.fixture(scope="module")
def juju():
    if SKIP:
        pytest.skip(SKIP)
    import jubilant

    with jubilant.temp_model() as juju:
        juju.wait_timeout = 1200
        juju.deploy(os.environ["DPP_CHARM"], "dpp-netapp", config={"xdp-mode": "generic", "callback-allow": "127.0.0.1/32"})
        juju.wait(jubilant.all_active)
        yield juju


def _run(juju, action: str, **params):
    return juju.run("dpp-netapp/0", action, params)


def test_given_deployed_charm_when_actions_run_then_netapp_follows(juju):
    added = _run(juju, "add-intent", intent=json.dumps(INTENT))
    assert added.results["intent-id"] == "video"
    assert _run(juju, "list-intents").results["count"] == "1"
    assert _run(juju, "create-slice", slice=json.dumps(SLICE)).results["slice-id"] == "embb"
    assert _run(juju, "update-slice", slice=json.dumps({**SLICE, "priority_level": 5})).success
    assert _run(juju, "get-stats").success
    assert _run(juju, "attach", interface="lo", mode="generic").success
    assert _run(juju, "reload-dataplane").results["count"] == "1"
    assert _run(juju, "detach", interface="lo").success
    sub = _run(juju, "subscribe-telemetry", **{"callback-uri": "http://127.0.0.1:9/n", "period": 5})
    assert _run(juju, "unsubscribe-telemetry", **{"subscription-id": sub.results["subscription-id"]}).success
    assert _run(juju, "delete-slice", **{"slice-id": "embb"}).success
    assert _run(juju, "remove-intent", **{"intent-id": "video"}).success


def test_given_deployed_charm_when_bad_parameter_then_action_fails_naming_it(juju):
    import jubilant

    with pytest.raises(jubilant.TaskError, match="intent"):
        _run(juju, "add-intent", intent="{not json")


def test_given_deployed_charm_when_bad_config_then_blocked(juju):
    import jubilant

    juju.config("dpp-netapp", {"xdp-mode": "turbo"})
    juju.wait(jubilant.all_blocked)
    juju.config("dpp-netapp", reset="xdp-mode")
    juju.wait(jubilant.all_active)
