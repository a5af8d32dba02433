"""Tenant records through the service: grants that must stay apart, intents kept inside them on
every path (create, batch, replace, legacy, dry run, slices), quotas, and the store's migration."""

from __future__ import annotations

import sqlite3

import pytest

from netapp.intents.models import Intent, LegacyMessage
from netapp.service.contract import (
    Conflict,
    Forbidden,
    IntentFilter,
    InvalidInput,
    NotFound,
    Principal,
    QuotaExceeded,
)
from netapp.service.schema import SCHEMA_V1, SCHEMA_VERSION
from netapp.service.store import Store
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.utils.intents import paper_message
from tests.utils.service import ADMIN, WRITER_SCOPES, fake_service, intent, slice_spec

CAROL = Principal("carol", WRITER_SCOPES, "carol-token")
DAVE = Principal("dave", WRITER_SCOPES, "dave-token")


def spec(**fields) -> TenantSpec:
    return TenantSpec.model_validate(fields)


@pytest.fixture
def service(tmp_path):
    service = fake_service(tmp_path)
    yield service
    service.close()


@pytest.fixture
def tenants(service) -> TenantService:
    tenants = TenantService(lambda: service.store)
    tenants.put_tenant(ADMIN, "carol", spec(traffic=[{"overlay": "vxlan", "vni": 1093}], quotas={"intents": 3}))
    return tenants


def test_a_tenant_without_a_record_installs_nothing_and_is_told_why(service):
    with pytest.raises(InvalidInput, match="tenant 'dave' owns no traffic yet") as refused:
        service.create_intent(DAVE, intent("x"))
    assert refused.value.field == "match"


def test_an_admins_own_tenant_is_site_wide_without_a_record(service):
    record = service.create_intent(ADMIN, intent("site-rule", match={})).record
    assert record.intent.match.model_dump(exclude_none=True) == {}
    assert TenantService(lambda: service.store).get_tenant(ADMIN, ADMIN.tenant).spec.site is True


def test_every_write_path_keeps_the_intent_inside_the_tenants_traffic(service, tenants):
    created = service.create_intent(CAROL, intent("one")).record.intent
    batch = service.create_intents(CAROL, [intent("two", 5005)]).records[0].intent
    replaced = service.replace_intent(CAROL, "one", intent("one", 5006))
    report = service.dry_run(CAROL, [intent("three", 5007)])
    for match in (created.match, batch.match, replaced.intent.match):
        assert (match.overlay, match.vni) == ("vxlan", 1093)
    assert report.rules[0].match["vni"] == 1093
    legacy = service.apply_legacy(CAROL, LegacyMessage.model_validate(paper_message()))
    assert legacy is not None and legacy.intent.match.vni == 1093  # the paper's message names VNI 0x445


def test_a_batch_names_the_intent_that_falls_outside(service, tenants):
    outside = intent("far", match={"overlay": "vxlan", "vni": 7})
    with pytest.raises(InvalidInput) as refused:
        service.create_intents(CAROL, [intent("near"), outside])
    assert refused.value.field == "intents[1].match.vni"
    assert service.list_intents(CAROL, IntentFilter()).total == 0


def test_slices_are_kept_inside_and_limited_to_granted_snssais(service, tenants):
    tenants.put_tenant(
        ADMIN,
        "carol",
        spec(traffic=[{"overlay": "vxlan", "vni": 1093}], snssais=[{"sst": 1, "sd": "00A1B2"}], quotas={"intents": 8}),
    )
    members = {"vnis": [1093], "teids": [7], "ue_prefixes": [], "dscp": []}
    record, _ = service.put_slice(CAROL, slice_spec(members=members))
    assert {i.intent.match.vni for i in service.list_intents(CAROL, IntentFilter()).items} == {1093}
    assert record.spec.id == "embb"
    with pytest.raises(InvalidInput, match="S-NSSAI 2 is not granted to tenant 'carol'"):
        service.put_slice(CAROL, slice_spec("other", snssai={"sst": 2}, members=members))
    with pytest.raises(InvalidInput, match="vni 5 is not the granted 1093") as refused:
        service.put_slice(CAROL, slice_spec("far", members={**members, "vnis": [5]}))
    assert refused.value.field == "members"


def test_quotas_refuse_the_change_that_would_exceed_them_and_nothing_is_kept(service, tenants):
    for port in (1, 2, 3):
        service.create_intent(CAROL, intent(f"i{port}", port))
    with pytest.raises(QuotaExceeded) as refused:
        service.create_intent(CAROL, intent("i4", 4))
    assert refused.value.status == 403
    assert refused.value.extra == {"quota": "intents", "limit": 3, "used": 4}
    with pytest.raises(QuotaExceeded):
        service.create_intents(CAROL, [intent("i5", 5)])
    assert service.list_intents(CAROL, IntentFilter()).total == 3
    assert tenants.get_tenant(CAROL, "carol").usage.intents == 3
    service.delete_intent(CAROL, "i1")
    service.create_intent(CAROL, intent("i4", 4))


def test_grants_of_two_tenants_must_not_share_packets(tenants):
    with pytest.raises(Conflict, match="meets the grant 'vxlan vni 1093' of tenant 'carol'") as refused:
        tenants.put_tenant(ADMIN, "dave", spec(traffic=[{"src": "10.0.0.0/8"}]))
    assert refused.value.field == "traffic[0]"
    tenants.put_tenant(ADMIN, "dave", spec(traffic=[{"overlay": "vxlan", "vni": 1094}]))
    tenants.put_tenant(ADMIN, "erin", spec(site=True))  # site tenants are not confined: nothing to meet


def test_a_grant_cannot_shrink_away_from_the_tenants_intents(service, tenants):
    service.create_intent(CAROL, intent("held"))
    with pytest.raises(Conflict, match=r"1 intents of tenant 'carol' would lie outside this traffic \('held'\)"):
        tenants.put_tenant(ADMIN, "carol", spec(traffic=[{"overlay": "vxlan", "vni": 1093, "src": "10.0.0.0/8"}]))
    with pytest.raises(Conflict, match="holds 1 intents, 0 slices and 0 FRER streams"):
        tenants.delete_tenant(ADMIN, "carol")
    service.delete_intent(CAROL, "held")
    tenants.delete_tenant(ADMIN, "carol")
    with pytest.raises(NotFound):
        tenants.delete_tenant(ADMIN, "carol")


def test_tenants_read_only_their_own_record_and_only_admins_write(tenants):
    assert tenants.get_tenant(CAROL, "carol").spec.traffic[0].vni == 1093
    with pytest.raises(NotFound):
        tenants.get_tenant(CAROL, "dave")
    with pytest.raises(Forbidden):
        tenants.put_tenant(CAROL, "carol", spec(site=True))
    assert [r.tenant for r in tenants.list_tenants(ADMIN) if r.tenant == "carol"] == ["carol"]


def test_a_version_1_store_is_migrated_with_its_tenants_usage_counted(tmp_path):
    path = tmp_path / "netapp.db"
    raw = sqlite3.connect(path)
    for statement in SCHEMA_V1:
        raw.execute(statement)
    raw.execute("INSERT INTO schema_version VALUES (1)")
    body = Intent.model_validate({"id": "old", "match": {"teid": 1}, "action": {"type": "pass"}}).model_dump_json()
    raw.execute(
        "INSERT INTO intents VALUES ('carol', 'old', ?, NULL, 'native', '2025-01-01', '2025-01-01', 1)", (body,)
    )
    raw.commit()
    raw.close()
    store = Store.open(path)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.tenant_usage("carol") == (1, 0)
        assert store.get_tenant("carol") is None
    finally:
        store.close()



def test_a_confined_tenant_colliding_with_a_site_rule_learns_no_tenant(service, tenants):
    site = intent("guard", match={"overlay": "vxlan", "vni": 1093, "protocol": "udp", "dst_port": 5004})
    service.create_intent(ADMIN, site)
    with pytest.raises(Conflict) as refused:
        service.create_intent(CAROL, intent("mine"))  # udp 5004, narrowed to vni 1093: the same key
    assert refused.value.extra["intent_b"] == "a site-wide rule"
    assert ADMIN.tenant not in refused.value.detail and "guard" not in refused.value.detail


def test_a_narrowed_match_comes_with_a_narrowed_warning_on_every_answer(service, tenants):
    wide = intent("wide", match={"protocol": "udp", "dst_port": 7000})
    created = service.create_intent(CAROL, wide)
    replaced = service.replace_intent(CAROL, "wide", wide)
    report = service.dry_run(CAROL, [intent("dry", match={})])
    for warnings, intent_id in ((created.warnings, "wide"), (replaced.warnings, "wide"), (report.warnings, "dry")):
        narrowed = [w for w in warnings if w.kind == "narrowed"]
        assert [(w.intent_a, w.reason) for w in narrowed] == [
            (intent_id, "the match was narrowed to the grant vxlan vni 1093 (set overlay vxlan, vni 1093)")
        ]
    inside = service.create_intent(CAROL, intent("inside", match={"overlay": "vxlan", "vni": 1093, "teid": 1}))
    assert not [w for w in inside.warnings if w.kind == "narrowed"]
