"""ATSSS sessions stored per tenant (no data plane here: the service keeps them in the store; the
kernel's maps in test_service_pipeline.py): validation naming the field, the tenant's scope (its UE
in its grants, both ways), the atsss_sessions quota, path slots given by the node, and the store
migration that brings the tables (key 7 of MIGRATIONS, schema version 8)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from typing import Any, Iterator

import pytest
from pydantic import ValidationError

from netapp.api.problems import InvalidParam, invalid_params_of
from netapp.atsss.models import AtsssSessionSpec, SessionDefinition
from netapp.atsss import store as stored
from netapp.atsss.schema import ATSSS_MTS_FLOWS, ATSSS_SUBFLOWS, ATSSS_TABLES
from netapp.atsss.service import Atsss
from netapp.service.contract import Conflict, Forbidden, InvalidInput, NotFound, Principal, QuotaExceeded, Scope
from netapp.service.schema import MIGRATIONS, SCHEMA_V1, SCHEMA_VERSION
from netapp.service.store import Store, StoreError
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.atsss.conftest import NODE_LOCALS

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
CAROL = Principal("carol", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
DAVE = Principal("dave", frozenset({Scope.READ, Scope.INTENTS_WRITE}))
GRANTS = {"carol": [{"dst": "10.60.0.0/24"}], "dave": [{"dst": "10.70.0.0/24"}, {"interface": "wlan1", "dst": "10.70.0.0/24"}]}


def path(n: int = 1, **overrides: Any) -> dict[str, Any]:
    return {"access": "3GPP" if n == 1 else "non-3GPP", "local": f"192.0.2.{n}", "peer": f"198.51.100.{n}",
            "local_port": 5000 + n, "peer_port": 6000 + n, "source_mac": "02:00:00:00:aa:01",
            "next_hop_mac": "02:00:00:00:bb:01", **overrides}


def spec(name: str = "s1", ue: str = "10.60.0.5", mode: str = "round_robin", paths: Any = None,
         **overrides: Any) -> AtsssSessionSpec:
    return AtsssSessionSpec.model_validate({"name": name, "ue": ue, "mode": mode,
                                            "paths": paths if paths is not None else [path(1), path(2)], **overrides})


@pytest.fixture
def store(tmp_path) -> Iterator[Store]:
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    tenants = TenantService(lambda: store)
    for tenant, traffic in GRANTS.items():
        tenants.put_tenant(ADMIN, tenant, TenantSpec.model_validate({"traffic": traffic}))
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def atsss(store, node_ns) -> Atsss:
    return Atsss(store, netns=node_ns)


def problem_of(exc: ValidationError) -> InvalidParam:
    """The first invalid-params entry the API answers for `exc` (an address: one per family)."""
    return invalid_params_of({**error, "loc": ("body", *error["loc"])} for error in exc.errors())[0]


@pytest.mark.parametrize("body, field, says, allowed", [
    ({"paths": []}, "paths", "at least 1", "at least 1 items"),
    ({"paths": [path(n) for n in range(1, 6)]}, "paths", "at most 4", "at most 4 items"),
    ({"paths": [path(1, peer="2001:db8::1")]}, "paths[0].peer", "same family", None),
    ({"paths": [path(1, next_hop_mac=None)]}, "paths[0].next_hop_mac", "or an interface", None),
    ({"paths": [path(1, local_port=0)]}, "paths[0].local_port", "greater than or equal to 1", ">= 1"),
    ({"paths": [path(1, access="wifi")]}, "paths[0].access", "'3GPP' or 'non-3GPP'", "'3GPP' or 'non-3GPP'"),
    ({"mode": "fastest"}, "mode", "round_robin", "'round_robin', 'weighted', 'active_standby', 'smallest_delay', 'priority' or 'redundant'"),
    ({"mode": "weighted", "paths": [path(1, weight=0), path(2, weight=0)]}, "paths", "every weight is 0", None),
    ({"paths": [path(1), path(1)]}, "paths[1]", "as paths[0]", None),
    ({"ue": "10.60.0.0/24"}, "ue", "valid IPv4 address", None),
])  # fmt: skip
def test_a_bad_session_is_refused_naming_the_field_and_what_is_allowed(body, field, says, allowed):
    with pytest.raises(ValidationError) as refused:
        spec(**body)
    param = problem_of(refused.value)
    assert (param.name, param.allowed) == (field, allowed) and says in param.reason, param


def test_a_tenant_stores_reads_replaces_and_deletes_its_session_with_slots_given_by_the_node(atsss):
    first = atsss.create_session(CAROL, "s1", spec())
    assert (first.tenant, first.slots, first.revision, first.effective_mode.value) == ("carol", [1, 2], 1,
                                                                                        "round_robin")
    second = atsss.create_session(CAROL, "s2", spec("s2", ue="10.60.0.6", paths=[path(3)]))
    assert second.slots == [3]
    replaced, created = atsss.put_session(CAROL, "s1", spec(paths=[path(1)]))
    assert (created, replaced.slots, replaced.revision) == (False, [1], 2), "position 0 keeps its slot"
    assert atsss.create_session(CAROL, "s3", spec("s3", ue="10.60.0.7", paths=[path(4), path(5)])).slots == [5, 6], \
        "slot 2 freed, but a new session's paths take a free pair (2s - 1, 2s): the lowest is above the held"
    atsss.delete_session(CAROL, "s1")
    with pytest.raises(NotFound):
        atsss.get_session(CAROL, "s1")
    assert [s.name for s in atsss.list_sessions(CAROL)] == ["s2", "s3"]


def test_a_path_whose_subflow_is_another_sessions_is_a_conflict_naming_the_path(atsss):
    """A subflow's uplink is found by its addresses and ports alone: two sessions of one subflow,
    the later would take the earlier's uplink packets, maybe another tenant's."""
    carols = atsss.create_session(CAROL, "s1", spec())
    with pytest.raises(Conflict) as theirs:
        atsss.create_session(DAVE, "d1", spec("d1", ue="10.70.0.5", paths=[path(5), path(2)]))
    assert theirs.value.field == "paths[1]" and "a session of another tenant" in str(theirs.value)
    assert "s1" not in str(theirs.value), "another tenant's session is not named"
    with pytest.raises(Conflict) as own:
        atsss.create_session(CAROL, "s2", spec("s2", ue="10.60.0.6", paths=[path(1)]))
    assert own.value.field == "paths[0]" and "session 's1'" in str(own.value)
    assert atsss.list_sessions(DAVE) == [] and [s.name for s in atsss.list_sessions(CAROL)] == ["s1"]
    assert atsss.get_session(CAROL, "s1").paths == carols.paths

    atsss.put_session(CAROL, "s1", spec(paths=[path(2), path(1)]))  # its own subflows, reordered
    atsss.delete_session(CAROL, "s1")
    assert atsss.create_session(DAVE, "d1", spec("d1", ue="10.70.0.5", paths=[path(5), path(2)])).slots == [1, 2]


def test_a_tenant_sees_and_changes_only_its_own(atsss):
    atsss.create_session(CAROL, "s1", spec())
    assert atsss.list_sessions(DAVE) == []
    for attempt in (lambda: atsss.get_session(DAVE, "carol/s1"), lambda: atsss.delete_session(DAVE, "carol/s1")):
        with pytest.raises(NotFound):
            attempt()
    assert [s.tenant for s in atsss.list_sessions(ADMIN)] == ["carol"]
    assert atsss.get_session(ADMIN, "carol/s1").name == "s1"


@pytest.mark.parametrize("ue, paths, field", [
    ("10.70.0.5", None, "ue"),  # dave's UE
    ("10.99.0.5", None, "ue"),  # nobody's
    ("10.60.0.5", [path(1, interface="wlan1", next_hop_mac=None)], "paths[0].interface"),  # dave's interface
])  # fmt: skip
def test_a_session_outside_the_tenants_grants_is_forbidden_naming_the_field(atsss, ue, paths, field):
    with pytest.raises(Forbidden) as refused:
        atsss.create_session(CAROL, "s1", spec(ue=ue, paths=paths))
    assert refused.value.field == field
    assert atsss.list_sessions(ADMIN) == []


@pytest.mark.parametrize("local", ["198.51.100.7", "2001:db8:ff::1"])
def test_a_confined_tenants_path_whose_local_is_not_the_nodes_is_forbidden_naming_it_and_the_nodes(atsss, local):
    peer = "198.51.100.9" if "." in local else "2001:db8:99::9"
    with pytest.raises(Forbidden) as refused:
        atsss.create_session(CAROL, "s1", spec(paths=[path(1), path(2, local=local, peer=peer)]))
    assert refused.value.field == "paths[1].local"
    assert f"{local} is not an address of this node" in refused.value.detail
    family = [a for a in NODE_LOCALS if ("." in a) == ("." in local)]
    assert set(refused.value.allowed.split(", ")) >= set(family)  # the node's, of the family
    assert atsss.list_sessions(ADMIN) == []
    # the site's operator may name any: a service address may live on another box of the site
    assert atsss.create_session(ADMIN, "s1", spec(paths=[path(1, local=local, peer=peer)])).name == "s1"


def test_a_grant_of_the_uplink_or_of_an_interface_does_not_hold_a_session(store, atsss):
    for narrower in ({"src": "10.60.0.0/24", "dst": "10.60.0.0/24"}, {"dst": "10.60.0.0/24", "interface": "eth0"}):
        TenantService(lambda: store).put_tenant(ADMIN, "carol", TenantSpec.model_validate({"traffic": [narrower]}))
        with pytest.raises(Forbidden) as refused:
            atsss.create_session(CAROL, "s1", spec())
        assert "to 10.60.0.5" in refused.value.detail


def test_a_ue_has_one_session_and_a_name_one_session_per_tenant(atsss):
    atsss.create_session(ADMIN, "site", spec("site", ue="10.80.0.1", paths=[path(7), path(8)]))
    with pytest.raises(Conflict) as taken:
        atsss.create_session(ADMIN, "again", spec("again", ue="10.80.0.1"))
    assert taken.value.field == "ue" and "'site'" in taken.value.detail
    atsss.create_session(CAROL, "s1", spec())
    with pytest.raises(Conflict) as named:
        atsss.create_session(CAROL, "s1", spec(ue="10.60.0.9"))
    assert named.value.field == "name"
    with pytest.raises(InvalidInput) as differs:
        atsss.put_session(CAROL, "s2", spec("s1"))
    assert differs.value.field == "name"


def test_the_quota_counts_sessions_and_the_usage_shows_them(store, atsss):
    TenantService(lambda: store).put_tenant(ADMIN, "carol", TenantSpec.model_validate({
        "traffic": GRANTS["carol"], "quotas": {"atsss_sessions": 1}}))
    atsss.create_session(CAROL, "s1", spec())
    with pytest.raises(QuotaExceeded) as refused:
        atsss.create_session(CAROL, "s2", spec("s2", ue="10.60.0.6"))
    assert refused.value.extra["quota"] == "atsss_sessions"
    atsss.put_session(CAROL, "s1", spec(mode="active_standby"))  # a replace needs no room
    assert TenantService(lambda: store).get_tenant(ADMIN, "carol").usage.atsss_sessions == 1


def test_a_grant_cannot_be_narrowed_under_a_tenants_session(store, atsss):
    atsss.create_session(CAROL, "s1", spec())
    with pytest.raises(Conflict) as refused:
        TenantService(lambda: store).put_tenant(ADMIN, "carol", TenantSpec.model_validate({"traffic": [
            {"dst": "10.60.1.0/24"}]}))
    assert "ATSSS session 's1'" in refused.value.detail


def store_at_version(path, version: int) -> sqlite3.Connection:
    """A store at `path` as a build of that schema version made it, open for rows to go in."""
    raw = sqlite3.connect(path)
    for statement in SCHEMA_V1 + tuple(s for step in range(1, version) for s in MIGRATIONS[step]):
        raw.execute(statement)
    raw.execute("INSERT INTO schema_version VALUES (?)", (version,))
    raw.commit()
    return raw


def test_the_atsss_tables_are_migration_7_and_a_version_7_store_gets_them(tmp_path):
    assert MIGRATIONS[7] == ATSSS_TABLES and SCHEMA_VERSION >= 8
    path = tmp_path / "netapp.db"
    store_at_version(path, 7).close()
    store = Store.open(path)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        tables = {row[0] for row in store.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"atsss_sessions", "atsss_path_slots", "atsss_mts_sessions"} <= tables
        Atsss(store).create_session(ADMIN, "s1", spec())
    finally:
        store.close()


def test_the_subflows_table_is_migration_12_and_holds_the_paths_of_sessions_stored_before(tmp_path):
    """A version 12 store's sessions get their subflows in atsss_subflows, so a new session that takes
    one of their paths' subflows is refused as before (found by the key, not by reading every path)."""
    assert MIGRATIONS[12] == ATSSS_SUBFLOWS and SCHEMA_VERSION >= 13
    path_ = tmp_path / "netapp.db"
    raw = store_at_version(path_, 12)
    body = SessionDefinition.model_validate(spec().model_dump(include=set(SessionDefinition.model_fields)))
    raw.execute("INSERT INTO atsss_sessions VALUES ('operator', 's1', '10.60.0.5', ?, '2026-01-01T00:00:00+00:00', "
                "'2026-01-01T00:00:00+00:00', 1)", (body.model_dump_json(),))
    raw.commit()
    raw.close()
    store = Store.open(path_)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        rows = store.execute("SELECT local, peer, local_port, peer_port, tenant, name FROM atsss_subflows "
                             "ORDER BY local_port").fetchall()
        assert rows == [("192.0.2.1", "198.51.100.1", 5001, 6001, "operator", "s1"),
                        ("192.0.2.2", "198.51.100.2", 5002, 6002, "operator", "s1")]
        with pytest.raises(Conflict) as taken:
            Atsss(store).create_session(ADMIN, "s2", spec("s2", ue="10.60.0.6", paths=[path(3), path(2)]))
        assert taken.value.field == "paths[1]"
    finally:
        store.close()


def test_a_version_14_store_s_mts_session_is_kept_as_whole_downlink_and_stays_the_ue_s_only_one(tmp_path):
    """Migration 14 (ATSSS_MTS_FLOWS) makes atsss_mts_sessions again without the UE's UNIQUE: a row
    of a version 14 store is copied as filtered 0 (it steers the UE's whole downlink), so a second
    whole-downlink MTS session of its UE is still refused, while one with flow filters may join it."""
    assert MIGRATIONS[14] == ATSSS_MTS_FLOWS and SCHEMA_VERSION >= 15
    raw = store_at_version(tmp_path / "netapp.db", 14)
    raw.execute("INSERT INTO atsss_mts_sessions VALUES ('tenant-a', 'video', '10.60.0.5', ?, "
                "'2026-01-01T00:00:00+00:00', '2026-01-02T00:00:00+00:00')", ('{"mode": "weighted"}',))
    raw.commit()
    raw.close()
    store = Store.open(tmp_path / "netapp.db")
    try:
        when = datetime.now(timezone.utc)
        assert store.execute("SELECT tenant, id, ue, filtered, created_at, updated_at FROM atsss_mts_sessions"
                             ).fetchall() == [("tenant-a", "video", "10.60.0.5", 0, "2026-01-01T00:00:00+00:00",
                                               "2026-01-02T00:00:00+00:00")]
        assert stored.load_mts(store) == [("tenant-a", "video", "10.60.0.5", {"mode": "weighted"})]
        assert stored.mts_of_ue(store, "10.60.0.5") == ("tenant-a", "video")
        with pytest.raises(StoreError, match="UNIQUE"), store.transaction():
            stored.save_mts(store, "tenant-b", "again", "10.60.0.5", {"mode": "redundant"}, when)
        with store.transaction():
            stored.save_mts(store, "tenant-a", "web", "10.60.0.5", {"mode": "redundant"}, when, filtered=True)
        assert [mts_id for _, mts_id, _ in stored.mts_flows_of_ue(store, "10.60.0.5")] == ["web"]
    finally:
        store.close()


def test_a_session_s_subflows_follow_its_paths_and_leave_with_it(store):
    service = Atsss(store)
    service.create_session(ADMIN, "s1", spec())
    service.put_session(ADMIN, "s1", spec(paths=[path(1), path(3)]))
    service.create_session(ADMIN, "s2", spec("s2", ue="10.60.0.6", paths=[path(2)]))  # s1 gave path 2's subflow up
    with pytest.raises(Conflict):
        service.create_session(ADMIN, "s3", spec("s3", ue="10.60.0.7", paths=[path(3)]))
    service.delete_session(ADMIN, "s1")
    service.create_session(ADMIN, "s3", spec("s3", ue="10.60.0.7", paths=[path(3)]))
    held = store.execute("SELECT name, local_port FROM atsss_subflows ORDER BY local_port").fetchall()
    assert held == [("s2", 5002), ("s3", 5003)]
