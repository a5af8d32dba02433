"""`netapp serve`: settings from a file, the environment and options; one-line failures; a real
process serving TLS over the real service and stopping cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from netapp.api.auth import TokenEntry, TokensFile, token_hash, write_tokens_file
from netapp.cli.main import app
from netapp.core.config import CONFIG_ENV
from netapp.service.contract import DataplaneUnavailable, Scope
from tests.utils.serve import free_port
from tests.utils.service import pinned_instance
from tests.utils.tls import self_signed

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60  # a start reconciles the maps; two busy cores make Python imports slow


@pytest.fixture(autouse=True)
def no_settings_from_the_environment(monkeypatch):
    for name in [name for name in os.environ if name.startswith("NETAPP_")]:
        monkeypatch.delenv(name)
    yield
    # `serve --config` names the file in this process's environment, for the Settings it makes; run
    # in-process, that would reach the tests after this one (whatever they build Settings for).
    os.environ.pop(CONFIG_ENV, None)


def serve(*args: str):
    return CliRunner().invoke(app, ["serve", *args])


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_given_settings_without_tokens_then_exit_2_says_what_is_missing():
    result = serve()

    assert result.exit_code == 2
    assert one_line(result.stderr) == (
        "netapp: settings: tokens_file: required (or set auth_disabled on a loopback api_host)"
    )


def test_given_auth_disabled_on_a_public_address_then_it_is_refused(tmp_path):
    config = tmp_path / "netapp.yaml"
    config.write_text("auth_disabled: true\n")

    result = serve("--config", str(config), "--host", "0.0.0.0")

    assert result.exit_code == 2 and "auth_disabled: refused with api_host 0.0.0.0" in one_line(result.stderr)


def test_given_a_missing_config_file_then_exit_2(tmp_path):
    result = serve("--config", str(tmp_path / "nope.yaml"))

    assert result.exit_code == 2 and "no such file" in one_line(result.stderr)


def test_given_no_service_module_then_serve_fails_with_one_line(monkeypatch):
    monkeypatch.setenv("NETAPP_AUTH_DISABLED", "1")
    monkeypatch.setitem(sys.modules, "netapp.service.service", None)  # makes the import fail

    result = serve()

    assert result.exit_code == 3 and "the NetApp service is not available" in one_line(result.stderr)


def test_given_a_service_that_cannot_start_then_exit_3_and_it_is_closed(monkeypatch):
    closed = []

    class Unstartable:
        def __init__(self, settings):
            pass

        def load_function_rules(self, name, stored):  # the functions' stored rules: none here
            pass

        def start(self):
            raise DataplaneUnavailable("open instance 'default': libdpp.so not found")

        def close(self):
            closed.append(True)

    monkeypatch.setenv("NETAPP_AUTH_DISABLED", "1")
    monkeypatch.setattr("netapp.service.service.NetAppService", Unstartable)

    result = serve()

    assert result.exit_code == 3 and closed == [True]
    assert one_line(result.stderr) == (
        "netapp: the NetApp service did not start: open instance 'default': libdpp.so not found"
    )


def test_given_a_tokens_file_that_does_not_exist_then_exit_2_says_how_to_make_one(monkeypatch, tmp_path):
    class Idle:
        def __init__(self, settings):
            pass

        def load_function_rules(self, name, stored):  # the functions' stored rules: none here
            pass

        def start(self):
            pass

        def close(self):
            pass

    monkeypatch.setenv("NETAPP_TOKENS_FILE", str(tmp_path / "missing.yaml"))
    monkeypatch.setattr("netapp.service.service.NetAppService", Idle)

    result = serve()

    assert result.exit_code == 2 and "netapp tokens add" in one_line(result.stderr)


# --- a real process ----------------------------------------------------------------------------


@pytest.fixture
def instance():
    yield from pinned_instance("srv")


def test_given_a_config_file_with_tls_then_serve_answers_over_https_and_stops_cleanly_on_sigterm(
    tmp_path, instance
):
    cert, key = self_signed(tmp_path)
    token = "serve-test-token"
    tokens = tmp_path / "tokens.yaml"
    write_tokens_file(
        tokens,
        TokensFile(tokens=[TokenEntry(name="t", sha256=token_hash(token), tenant="t", scopes=[Scope.READ])]),
    )
    config = tmp_path / "netapp.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "state_dir": str(tmp_path / "state"),
                "instance": instance,
                "max_rules": 4096,
                "tokens_file": str(tokens),
                "tls_cert": str(cert),
                "tls_key": str(key),
            }
        )
    )
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "netapp.cli.main", "serve", "--config", str(config), "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        context = ssl.create_default_context(cafile=str(cert))
        ready = wait_until_ready(f"https://127.0.0.1:{port}", context, process)
        listed = httpx.get(
            f"https://127.0.0.1:{port}/api/v1/intents",
            headers={"Authorization": f"Bearer {token}"},
            verify=context,
        )
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=START_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

    assert ready.json()["ready"] is True
    assert listed.status_code == 200 and listed.json()["total"] == 0
    assert process.returncode == 0, stderr
    assert "Shutting down" in stderr and f"https://127.0.0.1:{port}" in stderr
    assert stderr.strip().endswith("stopped; the pinned data plane keeps forwarding")


def wait_until_ready(url: str, context: ssl.SSLContext, process: subprocess.Popen) -> httpx.Response:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"netapp serve exited: {process.communicate()[1]}")
        try:
            response = httpx.get(f"{url}/readyz", verify=context, timeout=2)
            if response.status_code == 200:
                return response
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail("netapp serve did not become ready")
