"""MEC 011 applications and traffic rules through the service (netapp.mec.service) over the recording
fake data plane (tests/utils/fakes.py; the kernel's part is tests/mec/test_mec_kernel.py): a rule is
an intent of its application's tenant in the store and the index, INACTIVE takes it out, tenants
see only their applications, a rule stays inside its tenant's traffic, and what a rule installed is
changed through the rule only."""

from __future__ import annotations


import pytest

from netapp.mec.compiler import MEC_SOURCE, intent_ids
from netapp.mec.models import MecApplicationSpec, TrafficRule
from netapp.mec.service import RuleRefused
from netapp.service.contract import Conflict, InvalidInput, NotFound
from netapp.service.service import NetAppService, rule_id
from netapp.service.store import Store
from netapp.tenancy.models import TenantSpec, TrafficGrant
from netapp.tenancy.service import TenantService
from tests.utils.fakes import RecordingDpp
from tests.utils.mec import rule_model as rule
from tests.utils.service import ADMIN, ALICE, BOB, Clock, fake_service

APP = "video-analytics-1"


def application(*rules: TrafficRule, tenant: str = "alice", app: str = APP) -> MecApplicationSpec:
    return MecApplicationSpec(appInstanceId=app, tenant=tenant, trafficRules=list(rules))


def installed(service: NetAppService, tenant: str, app: str, traffic_rule: str) -> list[str]:
    """The ids of the rule's intents in the index (what the maps hold)."""
    return [i for i in intent_ids(app, traffic_rule) if rule_id(tenant, i) in service._state.index]


@pytest.fixture
def service(tmp_path) -> NetAppService:
    started = fake_service(tmp_path)
    yield started
    started.close()


def test_a_declared_rule_is_an_intent_of_the_tenant_in_the_store_and_the_maps(service):
    service.mec.create_application(ADMIN, application(rule()))
    (intent_id,) = installed(service, "alice", APP, "r1")
    record = service.store.get_intent("alice", intent_id)
    assert record.source == MEC_SOURCE
    assert str(record.intent.match.dst) == "192.0.2.0/24" and record.intent.action.type == "drop"
    assert service.mec.get_traffic_rule(ALICE, APP, "r1") == rule()


def test_inactive_takes_the_rule_out_and_active_puts_it_back(service):
    service.mec.create_application(ADMIN, application(rule()))
    service.mec.put_traffic_rule(ALICE, APP, "r1", rule(state="INACTIVE"))
    assert installed(service, "alice", APP, "r1") == []
    assert service.store.tenant_intents("alice") == []
    assert service.mec.get_traffic_rule(ALICE, APP, "r1").state == "INACTIVE"
    service.mec.put_traffic_rule(ALICE, APP, "r1", rule(trafficFilter=[{"protocol": ["tcp"], "dstPort": ["80"]}]))
    (intent_id,) = installed(service, "alice", APP, "r1")
    assert service.store.get_intent("alice", intent_id).intent.match.dst_port == 80


def test_a_refused_put_leaves_the_rule_and_its_entries_as_they_were(service):
    service.mec.create_application(ADMIN, application(rule()))
    before = installed(service, "alice", APP, "r1")
    with pytest.raises(InvalidInput) as refused:
        service.mec.put_traffic_rule(ALICE, APP, "r1", rule(trafficFilter=[{"qCI": 9}]))
    assert refused.value.field == "trafficFilter[0].qCI"
    assert installed(service, "alice", APP, "r1") == before
    assert service.mec.get_traffic_rule(ALICE, APP, "r1") == rule()


def test_a_declaration_with_a_refused_rule_installs_none_of_its_rules(service):
    with pytest.raises(InvalidInput) as refused:
        service.mec.create_application(ADMIN, application(rule(), rule("r2", trafficFilter=[{"qCI": 1}])))
    assert refused.value.field == "trafficRules[1].trafficFilter[0].qCI"
    assert installed(service, "alice", APP, "r1") == []
    with pytest.raises(NotFound):
        service.mec.get_application(ADMIN, APP)


def test_another_tenant_neither_sees_nor_changes_the_application(service):
    service.mec.create_application(ADMIN, application(rule()))
    with pytest.raises(NotFound):
        service.mec.list_traffic_rules(BOB, APP)
    with pytest.raises(NotFound):
        service.mec.put_traffic_rule(BOB, APP, "r1", rule(state="INACTIVE"))
    assert service.mec.list_applications(BOB) == []
    assert installed(service, "alice", APP, "r1")


def test_the_rule_and_path_ids_must_agree_and_the_rule_must_exist(service):
    service.mec.create_application(ADMIN, application(rule()))
    with pytest.raises(InvalidInput) as refused:
        service.mec.put_traffic_rule(ALICE, APP, "r1", rule("r2"))
    assert refused.value.field == "trafficRuleId"
    with pytest.raises(NotFound):
        service.mec.put_traffic_rule(ALICE, APP, "r2", rule("r2"))


def test_a_rule_that_collides_with_an_installed_one_is_a_403_and_changes_nothing(service):
    service.mec.create_application(ADMIN, application(rule(), rule("r2", state="INACTIVE", priority=1)))
    with pytest.raises(RuleRefused) as refused:
        service.mec.put_traffic_rule(ALICE, APP, "r2", rule("r2", action="PASSTHROUGH"))
    assert refused.value.status == 403 and refused.value.field == "trafficFilter"
    assert refused.value.detail.startswith("traffic rule 'r2': ") and "collides" in refused.value.detail
    assert installed(service, "alice", APP, "r2") == []


def test_the_intents_api_cannot_change_what_a_rule_installed(service):
    service.mec.create_application(ADMIN, application(rule()))
    (intent_id,) = installed(service, "alice", APP, "r1")
    record = service.store.get_intent("alice", intent_id)
    with pytest.raises(Conflict) as refused:
        service.delete_intent(ALICE, intent_id)
    assert "MEC 011 traffic rule" in refused.value.detail
    with pytest.raises(Conflict):
        service.replace_intent(ALICE, intent_id, record.intent)


def test_deleting_the_application_takes_its_rules_out(service):
    service.mec.create_application(ADMIN, application(rule(), rule("r2", trafficFilter=[{"protocol": ["tcp"]}])))
    service.mec.delete_application(ADMIN, APP)
    assert service.store.tenant_intents("alice") == []
    assert not installed(service, "alice", APP, "r1") and not installed(service, "alice", APP, "r2")


def test_a_restart_puts_the_rules_back_from_the_store(tmp_path):
    fake = RecordingDpp(max_rules=64)
    first = fake_service(tmp_path, fake, max_rules=64)
    first.mec.create_application(ADMIN, application(rule()))
    first.close()
    again = fake_service(tmp_path, fake, max_rules=64, clock=Clock())
    try:
        assert installed(again, "alice", APP, "r1")
        assert again.mec.get_traffic_rule(ALICE, APP, "r1") == rule()
    finally:
        again.close()


def test_a_rule_stays_inside_its_tenants_traffic(service):
    tenants = TenantService(lambda: service.store)
    tenants.put_tenant(ADMIN, "alice", TenantSpec(traffic=[TrafficGrant(dst="192.0.2.0/24")]))
    inside = rule(trafficFilter=[{"dstAddress": ["192.0.2.128/25"]}])
    service.mec.create_application(ADMIN, application(inside))
    assert installed(service, "alice", APP, "r1")
    for wider in ("192.0.0.0/16", "198.51.100.0/24"):  # narrowed, disjoint
        with pytest.raises(InvalidInput) as refused:
            service.mec.put_traffic_rule(ALICE, APP, "r1", rule(trafficFilter=[{"dstAddress": [wider]}]))
        assert refused.value.field.startswith("trafficFilter[0]"), refused.value.field
    assert service.mec.get_traffic_rule(ALICE, APP, "r1") == inside


def test_declaring_is_for_administrators(service):
    from netapp.service.contract import Forbidden

    with pytest.raises(Forbidden):
        service.mec.create_application(ALICE, application(rule()))


def test_the_store_migrates_to_the_mec_tables(tmp_path):
    store = Store.open(tmp_path / "netapp.db")
    try:
        tables = {row[0] for row in store.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        store.close()
    assert {"mec_applications", "mec_traffic_rules"} <= tables
