"""The `netapp` client commands (intents, slices, status, stats) through typer's runner, against
the real uvicorn server of the API tests (backed by the fake service)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from netapp.cli.client_config import ClientConfig, write_client_config
from netapp.cli.main import app
from netapp.service.contract import Conflict, InvalidInput
from tests.api.conftest import token_of
from tests.utils.intents import PAPER_MESSAGE_JSON, native_intent, paper_message

runner = CliRunner()


@pytest.fixture
def netapp(server, service, monkeypatch):
    """Run `netapp ...` as tenant-a against the test server; returns (exit code, output)."""

    def run(*args: str, token: str | None = "tenant-a") -> tuple[int, str]:
        # Wide enough that no table cell is folded.
        env = {"NETAPP_URL": server.url, "NETAPP_TOKEN": token_of(token) if token else "", "COLUMNS": "200"}
        result = runner.invoke(app, list(args), env=env)
        return result.exit_code, result.output

    return run


def write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def table_rows(output: str) -> list[list[str]]:
    """The cells of every row of the tables in `output` (rich's box drawing)."""
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in output.splitlines()
            if line.startswith("│")]


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


def test_the_papers_legacy_message_goes_through_its_own_door_and_is_named_as_stored(netapp, tmp_path):
    path = write(tmp_path, "legacy.json", PAPER_MESSAGE_JSON)
    code, output = netapp("intents", "apply", "-f", str(path))
    assert (code, output) == (0, "created legacy-e918d704\n")
    code, shown = netapp("intents", "get", "legacy-e918d704")
    assert code == 0 and json.loads(shown)["intent"]["match"]["vni"] == 0x445

    for action_type, outcome in (("UPDATE", "replaced"), ("DELETE", "deleted")):
        message = {**paper_message(), "Action": {**paper_message()["Action"], "actionType": action_type}}
        path = write(tmp_path, f"{action_type}.json", message)
        assert netapp("intents", "apply", "-f", str(path)) == (0, f"{outcome} legacy-e918d704\n")


def test_a_legacy_insert_of_an_intent_that_exists_is_applied_as_an_update(netapp, tmp_path, service):
    path = write(tmp_path, "legacy.json", PAPER_MESSAGE_JSON)
    assert netapp("intents", "apply", "-f", str(path))[0] == 0
    moved = json.loads(PAPER_MESSAGE_JSON)
    moved["Action"]["rx_queue"] = "0"

    code, output = netapp("intents", "apply", "-f", str(write(tmp_path, "moved.json", moved)))

    assert (code, output) == (0, "replaced legacy-e918d704\n")
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


def test_list_shows_teids_in_hex_as_everything_else_does(netapp, tmp_path):
    tunnel = native_intent("tunnel", match={"overlay": "vxlan", "vni": 1093, "teid": 0x8894D0D4})
    assert netapp("intents", "apply", "-f", str(write(tmp_path, "tunnel.json", tunnel)))[0] == 0

    code, listing = netapp("intents", "list")

    assert code == 0 and "teid=0x8894d0d4" in listing and str(0x8894D0D4) not in listing


# --- dry runs ------------------------------------------------------------------------------------

# Two intents with one match and different actions (a conflict), and a tunnel intent of another
# shape that shares packets with them (an overlap), on interfaces this host need not have.
DRY_RUN_SITE = {
    "intents": [
        native_intent("video", match={"interface": "n3", "protocol": "udp", "dst_port": 5004}, priority=200),
        native_intent("video-drop", match={"interface": "n3", "protocol": "udp", "dst_port": 5004}, priority=200,
                      action={"type": "drop"}),
        native_intent("tunnel", match={"overlay": "vxlan", "vni": 1093, "teid": 0x8894D0D4}, priority=300),
    ]
}
NO_SERVER = {"NETAPP_URL": "http://127.0.0.1:9", "NETAPP_TOKEN": "x", "COLUMNS": "200"}


def test_an_offline_dry_run_compiles_without_a_server_and_names_interfaces(tmp_path):
    path = write(tmp_path, "site.json", DRY_RUN_SITE)

    result = runner.invoke(app, ["intents", "apply", "--dry-run", "--offline", "-f", str(path)], env=NO_SERVER)

    assert result.exit_code == 0, result.output
    summary, *report = result.stdout.splitlines()
    assert summary.startswith("dry run, nothing applied: 3 rules, 1 conflict; offline")
    assert summary.endswith("interfaces taken as named: n3")
    rules = {row[0]: row[1:] for row in table_rows("\n".join(report)) if len(row) == 4}
    assert rules["video"] == ["200", "interface=n3 protocol=udp dst_port=5004", "steer cpu 1"]
    assert rules["tunnel"] == ["300", "overlay=vxlan vni=1093 teid=0x8894d0d4", "steer cpu 1"]
    assert "conflict: video / video-drop: same match and priority 200 but different actions" in result.stdout
    assert result.stderr.splitlines() == [
        "netapp: warning: overlap: video and tunnel both match udp packets to port 5004 in vxlan VNI 1093 "
        "in GTP-U TEID 0x8894d0d4 on n3; tunnel gets them (priority 300 over 200)"
    ]


def test_an_offline_dry_run_as_json_is_the_apis_report_with_interface_names(tmp_path):
    path = write(tmp_path, "site.json", DRY_RUN_SITE)

    result = runner.invoke(
        app, ["intents", "apply", "--dry-run", "--offline", "--json", "-f", str(path)], env=NO_SERVER
    )

    report = json.loads(result.stdout)
    assert report["applied"] is False and [rule["intent_id"] for rule in report["rules"]] == [
        "video", "video-drop", "tunnel"
    ]
    assert report["rules"][0]["match"]["interface"] == "n3"
    assert [(c["kind"], c["intent_a"], c["intent_b"]) for c in report["conflicts"]] == [
        ("conflict", "video", "video-drop")
    ]
    assert [w["kind"] for w in report["warnings"]] == ["overlap"]


def test_an_offline_dry_run_of_a_file_that_does_not_compile_fails_with_one_line(tmp_path):
    bad = native_intent("bad", match={"protocol": "udp", "dst_port": 5004}, action={"type": "steer", "cpu": 999})
    path = write(tmp_path, "bad.json", bad)

    result = runner.invoke(app, ["intents", "apply", "--dry-run", "--offline", "-f", str(path)], env=NO_SERVER)

    assert result.exit_code == 2 and len(result.output.splitlines()) == 1 and "action.cpu" in result.output


@pytest.mark.parametrize("flag", ["--offline", "--json"])
def test_offline_and_json_go_with_dry_run(tmp_path, flag):
    path = write(tmp_path, "site.json", DRY_RUN_SITE)

    result = runner.invoke(app, ["intents", "apply", flag, "-f", str(path)], env=NO_SERVER)

    assert result.exit_code == 2 and result.output == f"netapp: {flag} goes with --dry-run " \
        "(it says how to show what would be done)\n"


def test_a_dry_run_against_the_server_asks_once_for_the_native_intents_and_once_per_legacy_message(
    netapp, tmp_path, service
):
    path = write(tmp_path, "site.json", {"intents": [*DRY_RUN_SITE["intents"], paper_message()]})

    code, output = netapp("intents", "apply", "--dry-run", "-f", str(path))

    assert code == 0 and output.startswith("dry run, nothing applied: 4 rules, 0 conflicts\n")
    assert "legacy-e918d704" in output and "interface=n3" in output
    assert service.calls == ["dry_run", "dry_run"] and service.intents == {}


# --- presentation --------------------------------------------------------------------------------


def test_status_says_yes_and_no_and_that_ready_is_not_attached(netapp, service):
    code, output = netapp("status", token="admin")

    assert code == 0 and output.splitlines()[:2] == [
        "ready: yes; store, dataplane ok",
        "attached: no interface, so no packet reaches the program (name interfaces in the settings, "
        "or POST /api/v1/dataplane/attach)",
    ]
    service.attached["n3"] = "native"
    code, output = netapp("status", token="admin")
    assert code == 0 and output.splitlines()[1] == "attached: n3 (native)"
    assert table_rows(output) == [["n3", "", "native", "", "yes"]]
    assert not {"None", "True", "False"} & set(output.replace("│", " ").split())


@pytest.mark.parametrize("clock, line", [
    ({"state": "running", "word_age_us": 130}, "clock: word 130 us old"),
    ({"state": "stopped", "word_age_us": 9000}, "clock: stopped: coarse policers read the helper"),
    ({"state": "none", "word_age_us": None}, "clock: none: coarse policers read the helper"),
])
def test_status_says_how_old_the_policers_clock_is_in_dppctls_words(netapp, service, clock, line):
    service.clock = clock

    code, output = netapp("status", token="admin")

    assert code == 0 and line in output.splitlines()


def test_status_of_a_netapp_that_is_not_ready_says_why_and_exits_1(netapp, service):
    service.ready = False

    assert netapp("status", token="admin") == (1, "ready: no; store ok; dataplane: pinned maps are missing\n")


@pytest.mark.parametrize(
    "error, said_once",
    [
        (InvalidInput("intent 'x': match.interface: unknown interface 'eth0' (known: lo)", field="match.interface",
                      reason="unknown interface 'eth0' (known: lo)"), "unknown interface 'eth0'"),
        (Conflict("intent 'x' belongs to slice 'embb': change the slice instead", field="id"), "belongs to slice"),
    ],
)
def test_an_error_line_says_each_thing_once(netapp, service, error, said_once):
    service.fail_next(error)

    code, output = netapp("intents", "delete", "x")

    assert code == 2 and len(output.splitlines()) == 1
    assert output.count(said_once) == 1 and output.count("match.interface") <= 1, output


def test_an_error_line_says_what_is_allowed(netapp, service):
    service.fail_next(InvalidInput("queue_size 20000 is above the kernel's limit", field="queue_size",
                                   allowed="<= 16384"))

    code, output = netapp("intents", "delete", "x")

    assert output == ("netapp: DELETE /api/v1/intents/x: 400 queue_size 20000 is above the kernel's limit "
                      "[queue_size (allowed: <= 16384)]\n")
