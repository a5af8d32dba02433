"""/api/v1/upf: the UPF's sessions and associations, read-only, through the real server; the rows
written by a real UPF (netapp.upf.sessions) from requests pycrate encoded."""

from __future__ import annotations

from typing import Iterator

import pytest

from netapp.service.store import Store
from netapp.upf.models import FSeid
from netapp.upf.pfcp import codec
from netapp.upf.pfcp.rules import read_rules
from netapp.upf.routes import get_session_views
from netapp.upf.abi import Usage
from netapp.upf.sessions import NoApplier, Upf
from netapp.upf.usage import UsageMonitor
from netapp.upf.store import Association
from netapp.upf.views import SessionViews
from tests.api.problems import assert_problem
from tests.upf.smf import Smf, establishment_ies

SESSIONS = "/api/v1/upf/sessions"


class CountingApplier(NoApplier):
    """A data path whose every usage slot has counted 3 packets of 100 bytes up, 5 of 1000 down."""

    urr_slots = 8

    def usage(self, slots):
        return {slot: Usage(ul_packets=3, ul_bytes=300, dl_packets=5, dl_bytes=5000) for slot in slots}


def _establish(upf: Upf, node_id: str, cp_seid: int) -> int:
    data = Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", establishment_ies(cp_seid), seid=0, seq=1)
    outcome = upf.establish(node_id, FSeid(seid=cp_seid, ipv4="10.0.0.1"), read_rules(codec.decode(data).ies))
    return outcome.session.seid


def tenants_upf(store: Store, applier: NoApplier, sessions: dict[str, tuple[int, ...]]) -> Upf:
    """A UPF over `store` and `applier`, associated with tenant-a and tenant-b, with the sessions of
    `sessions` (node id -> the CP SEIDs of its sessions)."""
    upf = Upf(store, applier, n3_ipv4="127.0.0.2")
    for node_id, port in (("tenant-a", 8805), ("tenant-b", 8806)):
        upf.setup_association(Association(node_id=node_id, address="10.0.0.1", port=port, recovery_time_stamp=1))
    for node_id, cp_seids in sessions.items():
        for cp_seid in cp_seids:
            _establish(upf, node_id, cp_seid)
    return upf


@pytest.fixture
def upf(api_app, service, tmp_path) -> Iterator[Upf]:
    """Associations tenant-a (3 sessions) and tenant-b (1), served by the API under test."""
    store = Store.open(tmp_path / "upf.db", synchronous="NORMAL")
    upf = tenants_upf(store, CountingApplier(), {"tenant-a": (1, 2, 3), "tenant-b": (9,)})
    api_app.dependency_overrides[get_session_views] = lambda: SessionViews(store)
    try:
        yield upf
    finally:
        store.close()


def test_a_tenant_lists_its_associations_sessions_only(upf, tenant_a, tenant_b):
    response = tenant_a.get(SESSIONS)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total"] == 3 and [item["node_id"] for item in body["items"]] == ["tenant-a"] * 3
    assert [item["seid"] for item in body["items"]] == sorted(s.seid for s in upf.sessions.values() if s.node_id == "tenant-a")
    assert tenant_b.get(SESSIONS).json()["total"] == 1


def test_a_session_shows_its_rules_as_stored(upf, tenant_a):
    seid = min(upf.sessions)
    body = tenant_a.get(f"{SESSIONS}/{seid}").json()
    session = upf.sessions[seid]
    assert [pdr["id"] for pdr in body["pdrs"]] == [1, 2, 3, 4]
    assert [far["id"] for far in body["fars"]] == [1, 2] and len(body["qers"]) == 1 and len(body["urrs"]) == 1
    assert body["pdrs"][0] == session.pdrs[1].model_dump(mode="json")
    assert body["pdrs"][0]["pdi"]["local_fteid"]["teid"] == session.pdrs[1].pdi.local_fteid.teid
    assert body["remote"]["seid"] == 1 and body["usage"] is None, "views over the store alone: no usage"


def test_a_session_shows_its_urrs_usage_where_a_data_path_counts(api_app, upf, tenant_a):
    api_app.dependency_overrides[get_session_views] = lambda: SessionViews(
        upf._store, UsageMonitor(upf, lambda seid, reports: None)
    )
    body = tenant_a.get(f"{SESSIONS}/{min(upf.sessions)}").json()
    assert body["usage"] == [{"urr_id": 1, "ul_packets": 3, "ul_bytes": 300, "dl_packets": 5, "dl_bytes": 5000}]


class Holding:
    """A data path that buffers: each session holds 2 packets of 300 bytes (netapp.upf.buffering)."""

    def held(self, seid: int) -> tuple[int, int]:
        return 2, 600


def test_a_session_shows_what_its_fars_buffer_where_a_data_path_buffers(api_app, upf, tenant_a):
    api_app.dependency_overrides[get_session_views] = lambda: SessionViews(upf._store, buffering=Holding())
    body = tenant_a.get(f"{SESSIONS}/{min(upf.sessions)}").json()
    assert body["buffered"] == {"packets": 2, "bytes": 600}


def test_another_tenants_session_is_not_found(upf, tenant_a, tenant_b):
    theirs = next(seid for seid, session in upf.sessions.items() if session.node_id == "tenant-b")
    assert_problem(tenant_a.get(f"{SESSIONS}/{theirs}"), 404)
    assert_problem(tenant_a.get(f"{SESSIONS}/999999"), 404)
    assert tenant_b.get(f"{SESSIONS}/{theirs}").status_code == 200


def test_an_admin_sees_every_session_and_can_filter_by_node_id(upf, admin, tenant_a):
    assert admin.get(SESSIONS).json()["total"] == 4
    assert admin.get(SESSIONS, params={"node_id": "tenant-b"}).json()["total"] == 1
    problem = assert_problem(tenant_a.get(SESSIONS, params={"node_id": "tenant-b"}), 403)
    assert problem["invalid-params"][0]["name"] == "node_id"


def test_sessions_come_in_pages_with_links(upf, tenant_a):
    first = tenant_a.get(SESSIONS, params={"limit": 2})
    second = tenant_a.get(SESSIONS, params={"limit": 2, "offset": 2}).json()
    assert len(first.json()["items"]) == 2 and len(second["items"]) == 1
    assert 'rel="next"' in first.headers["Link"]
    assert {item["seid"] for item in first.json()["items"]}.isdisjoint(item["seid"] for item in second["items"])


def test_a_bad_seid_or_limit_is_a_400_naming_it(upf, tenant_a):
    assert_problem(tenant_a.get(f"{SESSIONS}/0"), 400)
    assert_problem(tenant_a.get(SESSIONS, params={"limit": 0}), 400)


def test_associations_by_tenant(upf, tenant_a, admin):
    assert [item["node_id"] for item in tenant_a.get("/api/v1/upf/associations").json()] == ["tenant-a"]
    assert [item["node_id"] for item in admin.get("/api/v1/upf/associations").json()] == ["tenant-a", "tenant-b"]


def test_without_a_token_it_is_401(upf, client_for):
    assert_problem(client_for(None).get(SESSIONS), 401)
