"""/api/v1/policers (admins), /api/v1/upf/sessions/{seid}/policers (the session's tenant) and
/api/v1/policers/intents (the tenant's intents and slices), through the real server, over a UPF whose
sessions' QERs hold policers and a data path read through a fake reader, and the fake service's
intents' policers (the kernel's counters are checked against packets sent in
tests/upf/test_police_datapath.py and tests/qos/test_intent_police.py)."""

from __future__ import annotations

from typing import Iterator

import pytest

from netapp.qos.abi import Algo, Gate, Policer, PolicerStats
from netapp.qos.views import PolicerCounters, PolicerRecord, PolicerState
from netapp.service.store import Store
from netapp.upf.routes import get_session_views
from netapp.upf.sessions import NoApplier, Upf
from netapp.upf.views import SessionViews
from tests.api.problems import assert_problem
from tests.api.test_upf_sessions import tenants_upf

POLICERS, SESSIONS = "/api/v1/policers", "/api/v1/upf/sessions"


class PolicingApplier(NoApplier):
    """A data path of 16 policers (ids 1..15)."""

    policer_slots = 16


def parent_of(policer_id: int) -> int:
    """The parent the reader gives a policer: slot 15 to the even ids, none to the odd."""
    return 15 if policer_id % 2 == 0 else 0


class Reader:
    """Every policer a token bucket at its QER's rate holding 1500 bytes, having passed (id) packets
    of 100 bytes and dropped one of 1000 on each of two CPUs, the even ones chained to slot 15."""

    def state(self, policer_id: int) -> Policer:
        return Policer(rate=100_000_000, burst=125_000, algo=Algo.TOKEN_BUCKET, gate=Gate.OPEN,
                       credit=1500 * 8 * 10**9, last_ns=42, parent=parent_of(policer_id))

    def counters(self, policer_id: int) -> PolicerStats:
        return PolicerStats(passed_packets=2 * policer_id, passed_bytes=200 * policer_id, dropped_packets=2,
                            dropped_bytes=2000)


@pytest.fixture
def upf(api_app, service, tmp_path) -> Iterator[Upf]:
    """Associations tenant-a (2 sessions) and tenant-b (1), each session's QER policing both ways."""
    store = Store.open(tmp_path / "upf.db", synchronous="NORMAL")
    upf = tenants_upf(store, PolicingApplier(), {"tenant-a": (1, 2), "tenant-b": (9,)})
    api_app.dependency_overrides[get_session_views] = lambda: SessionViews(store, policers=Reader())
    try:
        yield upf
    finally:
        api_app.dependency_overrides.pop(get_session_views, None)
        store.close()


def test_an_admin_lists_every_sessions_policers_with_their_state_and_counters(upf, admin):
    response = admin.get(POLICERS)
    assert response.status_code == 200, response.text
    body = response.json()
    expected = [(session.seid, 1, direction, policer_id) for session in sorted(upf.sessions.values(), key=lambda s: s.seid)
                for direction, policer_id in zip(("uplink", "downlink"), session.qer_policers[1])]
    assert [(item["seid"], item["qer_id"], item["direction"], item["id"]) for item in body] == expected
    assert len({item["id"] for item in body}) == 6
    first = body[0]
    assert (first["rate_bps"], first["burst_bytes"], first["algorithm"], first["gate"]) == (
        100_000_000, 125_000, "token_bucket", "open")
    assert first["state"] == {"credit_bytes": 1500, "last_ns": 42, "window_start_ns": None, "window_bytes": None,
                              "previous_window_bytes": None, "full_at_ns": None}
    assert first["counters"] == {"passed_packets": 2 * first["id"], "passed_bytes": 200 * first["id"],
                                 "dropped_packets": 2, "dropped_bytes": 2000}
    parents = {item["id"]: item["parent"] for item in body}
    assert parents == {policer_id: parent_of(policer_id) or None for policer_id in parents}
    assert set(parents.values()) == {15, None}, "both kinds among the listed"


def test_a_tenant_reads_its_own_sessions_policers_only(upf, tenant_a, tenant_b):
    assert_problem(tenant_a.get(POLICERS), 403)
    mine = min(seid for seid, session in upf.sessions.items() if session.node_id == "tenant-a")
    response = tenant_a.get(f"{SESSIONS}/{mine}/policers")
    assert response.status_code == 200, response.text
    assert [item["id"] for item in response.json()] == list(upf.sessions[mine].qer_policers[1])
    assert [item["id"] for item in tenant_a.get(f"{SESSIONS}/{mine}").json()["policers"]] == list(
        upf.sessions[mine].qer_policers[1])
    assert_problem(tenant_b.get(f"{SESSIONS}/{mine}/policers"), 404)


def test_without_a_data_path_no_policer_is_listed(api_app, upf, admin):
    api_app.dependency_overrides[get_session_views] = lambda: SessionViews(upf.store)
    assert admin.get(POLICERS).json() == []
    assert admin.get(f"{SESSIONS}/{min(upf.sessions)}/policers").json() == []
    assert admin.get(f"{SESSIONS}/{min(upf.sessions)}").json()["policers"] is None


def rule_policer(policer_id: int, tenant: str, **what: str) -> PolicerRecord:
    return PolicerRecord(id=policer_id, tenant=tenant, rate_bps=8_000, burst_bytes=3_000, algorithm="token_bucket",
                         gate="open", clock="precise", state=PolicerState(credit_bytes=0, last_ns=0), counters=PolicerCounters(
                             passed_packets=3, passed_bytes=3_000, dropped_packets=7, dropped_bytes=7_000), **what)


def test_a_tenant_reads_its_own_intents_and_slices_policers_and_an_admin_all(upf, service, admin, tenant_a, tenant_b):
    service.rule_policers = [rule_policer(40_000, "tenant-a", intent_id="capped"),
                             rule_policer(40_001, "tenant-a", slice_id="gold"),
                             rule_policer(40_002, "tenant-b", intent_id="capped")]
    mine = tenant_a.get(f"{POLICERS}/intents")
    assert mine.status_code == 200, mine.text
    assert [(item["id"], item["intent_id"], item["slice_id"], item["direction"]) for item in mine.json()] == [
        (40_000, "capped", None, None), (40_001, None, "gold", None)]
    assert [item["id"] for item in tenant_b.get(f"{POLICERS}/intents").json()] == [40_002]
    every = admin.get(POLICERS).json()
    assert [item["id"] for item in every][-3:] == [40_000, 40_001, 40_002], "after the sessions' policers"
    assert every[-1]["counters"]["dropped_packets"] == 7


@pytest.mark.parametrize(("police", "field"), [
    ({"rate_bps": 0}, "action.police.rate_bps"),
    ({"rate_bps": 10**6, "burst_bytes": 2**30 + 1}, "action.police.burst_bytes"),
    ({"rate_bps": 10**6, "algorithm": "leaky_bucket"}, "action.police.algorithm"),
])
def test_a_bad_police_option_is_a_400_naming_its_field(service, tenant_a, police, field):
    body = {"id": "capped", "match": {"protocol": "udp"}, "action": {"type": "pass", "police": police}}
    problem = assert_problem(tenant_a.post("/api/v1/intents", json=body), 400)
    assert [param["name"] for param in problem["invalid-params"]] == [field]
    assert service.intents == {}
