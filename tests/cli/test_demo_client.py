"""`netapp demo` offers other terminals its API: the client file while it runs (gone when it ends,
however it ends) and the export line. The session is a stand-in here: the demo's site, service and
traffic are tested in tests/integration (test_examples.py runs the examples through this file)."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from netapp.cli import demo as demo_command
from netapp.cli.client_config import CLIENT_CONFIG_ENV, TOKEN_ENV, URL_ENV, client_config_path
from netapp.cli.main import app

URL, TOKEN = "http://127.0.0.1:47001", "dpp_demo-session-token"


class Session:
    """What the command needs of netapp.testbed.demo.Demo to start, publish and close."""

    url, token = URL, TOKEN

    def __init__(self) -> None:
        self.closed = False

    def start(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def session(tmp_path, monkeypatch) -> Session:
    monkeypatch.delenv(CLIENT_CONFIG_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    if demo_command.os.geteuid() != 0:
        pytest.skip("the demo command refuses to start without root")
    stand_in = Session()
    monkeypatch.setattr(demo_command, "Demo", lambda: stand_in)
    monkeypatch.setattr(demo_command, "intro", lambda session: "")
    monkeypatch.setattr(demo_command, "prometheus_line", lambda session: "")
    monkeypatch.setattr(demo_command, "_interrupt_on", lambda *signals: None)  # this process's handlers stay
    return stand_in


def test_while_the_demo_runs_the_client_file_names_its_api_and_it_is_gone_afterwards(session, monkeypatch):
    seen = {}
    monkeypatch.setattr(demo_command, "watch",
                        lambda *args: seen.update(yaml.safe_load(client_config_path().read_text())))

    result = CliRunner().invoke(app, ["demo", "--duration", "1"])

    assert result.exit_code == 0, result.output
    assert seen == {"url": URL, "token": TOKEN, "written_by": "netapp demo"}
    assert f"export {URL_ENV}={URL} {TOKEN_ENV}={TOKEN}\n" in result.output
    assert result.output.count(TOKEN) == 1, "the token is printed once, in the export line"
    assert session.closed and not client_config_path().exists()


def test_given_the_demo_fails_while_running_then_the_client_file_is_gone_too(session, monkeypatch):
    def fail(*args):
        assert client_config_path().exists()
        raise RuntimeError("the RAN-side sender failed")

    monkeypatch.setattr(demo_command, "watch", fail)

    result = CliRunner().invoke(app, ["demo", "--duration", "1"])

    assert result.exit_code == 1 and "the RAN-side sender failed" in result.output
    assert session.closed and not client_config_path().exists()


def test_the_intro_says_where_the_upfs_n4_endpoint_answered():
    class Started:
        """What intro() reads of a started Demo."""

        url, instance, cpus, influxd, node = URL, "demo-x", 2, None, "demo-x"
        pfcp_address, n4_recovery_time_stamp = "127.0.0.1:48805", 3_900_000_000

        class site:  # noqa: N801 - stands in for an attribute
            tag = "x"

            class n3:  # noqa: N801
                ip = "10.10.0.2"

    text = str(demo_command.intro(Started()))
    assert "UPF: N4 (PFCP) at 127.0.0.1:48805 answers a heartbeat (recovery time stamp 3900000000)" in text
    assert "N3 TEIDs on 10.10.0.2" in text
