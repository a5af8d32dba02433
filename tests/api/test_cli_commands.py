"""The `netapp` client commands (intents, slices, status, stats) through typer's runner, against
the real uvicorn server of the API tests (backed by the fake service)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netapp.cli.client_config import ClientConfig, write_client_config
from netapp.cli.main import app
from tests.api.conftest import token_of
from tests.utils.intents import PAPER_MESSAGE_JSON, native_intent

runner = CliRunner()


@pytest.fixture
def netapp(server, service, monkeypatch):
    """Run `netapp ...` as tenant-a against the test server; returns (exit code, output)."""

    def run(*args: str, token: str | None = "tenant-a") -> tuple[int, str]:
        env = {"NETAPP_URL": server.url, "NETAPP_TOKEN": token_of(token) if token else ""}
        result = runner.invoke(app, list(args), env=env)
        return result.exit_code, result.output

    return run


def write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_apply_creates_then_replaces_and_list_get_delete_follow(netapp, tmp_path):
    intent = native_intent("video", match={"protocol": "udp", "dst_port": 5004},
                           action={"type": "steer", "cpu": 0})
    path = write(tmp_path, "intents.json", [intent])

    assert netapp("intents", "apply", "-f", str(path)) == (0, "created video\n")
    assert netapp("intents", "apply", "-f", str(path)) == (0, "replaced video\n")
    code, listing = netapp("intents", "list")
    assert code == 0 and "video" in listing and "1 of 1" in listing
    code, shown = netapp("intents", "get", "video")
    assert code == 0 and json.loads(shown)["intent"]["id"] == "video"
    assert netapp("intents", "delete", "video") == (0, "deleted video\n")
    code, listing = netapp("intents", "list")
    assert "0 of 0" in listing


def test_new_intents_of_a_file_are_created_in_one_batch_and_existing_ones_replaced(netapp, tmp_path, service):
    intents = [native_intent(f"flow-{n}", match={"protocol": "udp", "dst_port": 6000 + n}) for n in range(3)]
    assert netapp("intents", "apply", "-f", str(write(tmp_path, "one.json", intents[:1]))) == (0, "created flow-0\n")
    service.calls.clear()

    code, output = netapp("intents", "apply", "-f", str(write(tmp_path, "all.json", intents)))

    assert (code, output) == (0, "replaced flow-0\ncreated flow-1\ncreated flow-2\n")
    assert [call for call in service.calls if call != "get_intent"] == ["replace_intent", "create_intents"]


def test_the_papers_legacy_message_goes_through_its_own_door(netapp, tmp_path):
    path = write(tmp_path, "legacy.json", PAPER_MESSAGE_JSON)
    code, output = netapp("intents", "apply", "-f", str(path))
    assert (code, output) == (0, "legacy E918D704\n")
    code, shown = netapp("intents", "get", "legacy-e918d704")
    assert code == 0 and json.loads(shown)["intent"]["match"]["vni"] == 0x445


def test_a_legacy_insert_of_an_intent_that_exists_is_applied_as_an_update(netapp, tmp_path, service):
    path = write(tmp_path, "legacy.json", PAPER_MESSAGE_JSON)
    assert netapp("intents", "apply", "-f", str(path))[0] == 0
    moved = json.loads(PAPER_MESSAGE_JSON)
    moved["Action"]["rx_queue"] = "0"

    code, output = netapp("intents", "apply", "-f", str(write(tmp_path, "moved.json", moved)))

    assert (code, output) == (0, "replaced E918D704\n")
    code, shown = netapp("intents", "get", "legacy-e918d704")
    assert json.loads(shown)["intent"]["action"] == {"type": "steer", "cpu": 0}
    assert json.loads(shown)["revision"] == 2


def test_a_documents_site_settings_are_named_as_not_applied(netapp, tmp_path):
    document = {"intents": [native_intent("video")], "cpus": [{"cpu": 0}], "default_verdict": "pass"}
    code, output = netapp("intents", "apply", "-f", str(write(tmp_path, "site.json", document)))
    assert code == 0 and "created video\n" in output
    assert "warning: " in output and "cpus, default_verdict not applied" in output


def test_a_bad_intent_fails_with_one_line_naming_the_field(netapp, tmp_path):
    bad = native_intent("bad", match={"overlay": "vxlan", "vni": 1 << 24})
    code, output = netapp("intents", "apply", "-f", str(write(tmp_path, "bad.json", bad)))
    assert code == 2
    assert len(output.strip().splitlines()) == 1 and "match.vni" in output, output


def test_a_wrong_token_fails_with_one_line_saying_what_to_do(netapp):
    code, output = netapp("intents", "list", token="nobody")
    assert code != 0 and len(output.strip().splitlines()) == 1
    assert "401" in output and "--token" in output


def test_an_unreachable_netapp_fails_with_one_line(tmp_path):
    result = runner.invoke(app, ["intents", "list"], env={"NETAPP_URL": "http://127.0.0.1:9", "NETAPP_TOKEN": "x"})
    assert result.exit_code == 3
    assert len(result.output.strip().splitlines()) == 1 and "netapp serve" in result.output


def client_file(tmp_path: Path, url: str, token: str) -> dict[str, str | None]:
    """The environment of a terminal where only a client file says where the NetApp is."""
    path = tmp_path / "client.yaml"
    write_client_config(path, ClientConfig(url=url, token=token, written_by="netapp demo"))
    return {"NETAPP_URL": None, "NETAPP_TOKEN": None, "NETAPP_CA": None, "NETAPP_CLIENT_CONFIG": str(path)}


def test_given_only_a_client_file_then_commands_reach_the_netapp_it_names(server, tmp_path):
    env = client_file(tmp_path, server.url, token_of("admin"))
    for command in (["status"], ["intents", "list"], ["stats"]):
        result = runner.invoke(app, command, env=env)
        assert result.exit_code == 0, result.output


def test_given_a_client_file_whose_netapp_is_gone_then_the_line_names_the_file(tmp_path):
    env = client_file(tmp_path, "http://127.0.0.1:9", "x")
    result = runner.invoke(app, ["intents", "list"], env=env)
    assert result.exit_code == 3 and len(result.output.strip().splitlines()) == 1
    assert f"the URL is from {tmp_path / 'client.yaml'}, written by netapp demo" in result.output


def test_given_a_client_file_whose_token_is_refused_then_the_line_names_the_file(server, tmp_path):
    result = runner.invoke(app, ["intents", "list"], env=client_file(tmp_path, server.url, "revoked"))
    assert result.exit_code != 0 and len(result.output.strip().splitlines()) == 1
    assert "401" in result.output and f"the token is the one in {tmp_path / 'client.yaml'}" in result.output


def test_slices_apply_list_get_delete(netapp, tmp_path):
    spec = {"id": "urllc", "snssai": {"sst": 2, "sd": "00A1B2"}, "priority_level": 5,
            "members": {"teids": [0x8894D0D4]}, "cpus": [0]}
    path = write(tmp_path, "slice.json", spec)
    assert netapp("slices", "apply", "-f", str(path)) == (0, "created urllc\n")
    assert netapp("slices", "apply", "-f", str(path)) == (0, "updated urllc\n")
    code, listing = netapp("slices", "list")
    assert code == 0 and "urllc" in listing
    code, shown = netapp("slices", "get", "urllc")
    assert code == 0 and json.loads(shown)["spec"]["snssai"]["sd"] == "00A1B2"
    assert netapp("slices", "delete", "urllc") == (0, "deleted urllc\n")


def test_tenants_grant_list_get_delete(netapp, tmp_path):
    path = write(tmp_path, "tenant.json", {"traffic": [{"overlay": "vxlan", "vni": 1093}], "quotas": {"intents": 50}})
    assert netapp("tenants", "grant", "tenant-a", "-f", str(path), token="admin") == (0, "created tenant-a\n")
    assert netapp("tenants", "grant", "tenant-a", "-f", str(path), token="admin") == (0, "replaced tenant-a\n")
    code, listing = netapp("tenants", "list", token="admin")
    assert code == 0 and "tenant-a" in listing and "0/50" in listing
    code, shown = netapp("tenants", "get", "tenant-a")  # a tenant reads its own
    assert code == 0 and json.loads(shown)["spec"]["traffic"][0]["vni"] == 1093
    code, refused = netapp("tenants", "grant", "tenant-a", "-f", str(path))
    assert code != 0 and "403" in refused
    assert netapp("tenants", "delete", "tenant-a", token="admin") == (0, "deleted tenant-a\n")


def test_status_and_stats_print_tables(netapp):
    code, output = netapp("status", token="admin")
    assert code == 0 and "ready" in output and "maps" in output
    code, output = netapp("stats", token="admin")
    assert code == 0 and "intents" in output and "slices" in output
