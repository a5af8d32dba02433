"""`netapp sessions list/get` through typer's runner, against the real uvicorn server of the API
tests, its sessions written by a real UPF (the fixture of test_upf_sessions)."""

from __future__ import annotations

import json

from netapp.upf.routes import get_session_views
from netapp.upf.usage import UsageMonitor
from netapp.upf.views import SessionViews
from tests.api.test_cli_commands import netapp, table_rows  # noqa: F401  (a fixture, a helper)
from tests.api.test_upf_sessions import upf  # noqa: F401  (the fixture)


def test_list_shows_the_callers_sessions_one_row_each(netapp, upf):  # noqa: F811
    code, output = netapp("sessions", "list")
    assert code == 0, output
    rows = [row for row in table_rows(output) if row[0].isdigit()]
    ours = sorted((s for s in upf.sessions.values() if s.node_id == "tenant-a"), key=lambda s: s.seid)
    assert [int(row[0]) for row in rows] == [session.seid for session in ours]
    first = ours[0]
    assert rows[0][1:] == ["tenant-a", "0x1", "10.45.0.2", f"{first.pdrs[1].pdi.local_fteid.teid:#010x}", "4", "2", "1", "1",
                           "-"]
    assert "3 of 3" in output


def test_list_and_get_show_each_urrs_usage_where_a_data_path_counts(api_app, netapp, upf):  # noqa: F811
    api_app.dependency_overrides[get_session_views] = lambda: SessionViews(
        upf.store, UsageMonitor(upf, lambda seid, reports: None))
    code, output = netapp("sessions", "list")
    assert code == 0, output
    rows = [row for row in table_rows(output) if row[0].isdigit()]
    assert [row[-1] for row in rows] == ["1:300/5000"] * 3, "URR 1: 300 bytes up, 5000 down"
    code, output = netapp("sessions", "get", str(min(upf.sessions)))
    assert json.loads(output)["usage"] == [{"urr_id": 1, "ul_packets": 3, "ul_bytes": 300, "dl_packets": 5,
                                            "dl_bytes": 5000}]


def test_list_as_json_is_the_apis_page_and_admins_filter_by_node_id(netapp, upf):  # noqa: F811
    code, output = netapp("sessions", "list", "--json", "--node-id", "tenant-b", token="admin")
    assert code == 0, output
    page = json.loads(output)
    assert page["total"] == 1 and page["items"][0]["node_id"] == "tenant-b"


def test_get_prints_the_session_in_decimal_or_hex(netapp, upf):  # noqa: F811
    seid = min(seid for seid, session in upf.sessions.items() if session.node_id == "tenant-a")
    code, output = netapp("sessions", "get", str(seid))
    assert code == 0, output
    assert json.loads(output)["seid"] == seid
    assert json.loads(netapp("sessions", "get", hex(seid))[1])["seid"] == seid


def test_another_tenants_session_or_a_bad_seid_fails_with_one_line(netapp, upf):  # noqa: F811
    theirs = next(seid for seid, session in upf.sessions.items() if session.node_id == "tenant-b")
    code, output = netapp("sessions", "get", str(theirs))
    assert code != 0 and len(output.strip().splitlines()) == 1, output
    assert f"no session with SEID {theirs}" in output
    code, output = netapp("sessions", "get", "twelve")
    assert code == 2 and output.strip() == "netapp: SEID 'twelve': not a number (decimal, or hex with 0x)"
