"""MEC 015 bandwidth allocations through the service (netapp.mec.bwm_service) over the recording fake
data plane (tests/utils/fakes.py; the kernel's part is tests/mec/test_bwm_kernel.py): an allocation
is a police rate on intents of its application's tenant (a session's own intents, or the one intent
of each direction of the application's rules), changed and removed with the allocation; what cannot
be enforced is refused naming the ETSI field, and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from netapp.mec import bwm_store
from netapp.mec.bwm_compiler import BWM_SOURCE, allocation_intent_ids
from netapp.mec.bwm_models import BwInfo, BwInfoDeltas
from netapp.mec.compiler import intent_ids
from netapp.mec.models import MecApplicationSpec
from netapp.service.contract import Conflict, Forbidden, InvalidInput, NotFound
from netapp.service.service import NetAppService
from netapp.service.store import Store
from tests.utils.interleave import SecondChange, calling_back
from tests.utils.mec import rule_model as rule
from tests.utils.service import ADMIN, ALICE, BOB, fake_service, few_policers_fake

APP = "video-1"
SESSION = {"sourceIp": "10.0.0.1", "dstAddress": "192.0.2.10", "protocol": "UDP", "dstPort": ["5000"]}
FLOW_RULE = {"filterType": "FLOW", "action": "PASSTHROUGH", "trafficFilter": [{"dstAddress": ["198.51.100.0/24"]}]}


def bw(**fields: Any) -> BwInfo:
    body = {"appInsId": APP, "requestType": 1, "fixedAllocation": "1000000", "allocationDirection": "01",
            "sessionFilter": [SESSION]}
    body.update(fields)
    return BwInfo.model_validate({key: value for key, value in body.items() if value is not None})


def police_of(service: NetAppService, tenant: str, intent_id: str) -> Any:
    record = service.store.get_intent(tenant, intent_id)
    return None if record is None else getattr(record.intent.action, "police", None)


@pytest.fixture
def service(tmp_path) -> NetAppService:
    started = fake_service(tmp_path, few_policers_fake())
    started.mec.create_application(ADMIN, MecApplicationSpec(appInstanceId=APP, tenant="alice", appName="video",
                                                             trafficRules=[rule("r1", **FLOW_RULE)]))
    yield started
    started.close()


def test_a_session_allocation_is_a_policed_pass_intent_per_direction_asked(service):
    created = service.bwm.create_allocation(ALICE, bw(allocationDirection="10"))
    uplink, downlink = allocation_intent_ids(created.allocationId)

    records = [service.store.get_intent("alice", one) for one in (uplink, downlink)]
    assert [record.source for record in records] == [BWM_SOURCE, BWM_SOURCE]
    assert [record.intent.action.police.rate_bps for record in records] == [1_000_000, 1_000_000]
    assert str(records[0].intent.match.src) == "10.0.0.1/32" and records[0].intent.match.dst_port == 5000
    assert str(records[1].intent.match.dst) == "10.0.0.1/32" and records[1].intent.match.src_port == 5000
    assert records[0].intent.action.police.burst_bytes is not None  # stored as enforced


def test_put_and_patch_change_the_rate_and_direction_and_delete_takes_the_intents_out(service):
    created = service.bwm.create_allocation(ALICE, bw())
    uplink, downlink = allocation_intent_ids(created.allocationId)
    assert police_of(service, "alice", downlink) is None

    service.bwm.put_allocation(ALICE, created.allocationId, bw(fixedAllocation="2000000", allocationDirection="00"))
    assert service.store.get_intent("alice", uplink) is None
    assert police_of(service, "alice", downlink).rate_bps == 2_000_000

    patched = service.bwm.patch_allocation(ALICE, created.allocationId, BwInfoDeltas.model_validate(
        {"appInsId": APP, "requestType": 1, "fixedAllocation": "3000000", "fixedBWPriority": "SEE DESCRIPTION"}))
    assert patched.info.fixedBWPriority == "SEE_DESCRIPTION" and patched.info.allocationDirection == "00"
    assert police_of(service, "alice", downlink).rate_bps == 3_000_000

    service.bwm.delete_allocation(ALICE, created.allocationId)
    assert service.store.get_intent("alice", downlink) is None
    with pytest.raises(NotFound):
        service.bwm.get_allocation(ALICE, created.allocationId)


def test_two_patches_of_other_members_made_at_once_both_land(service, monkeypatch):
    """One PATCH of the rate, another of the direction begun at the first's read of the allocation:
    read and changed in the change's transaction, the second reads what the first wrote. Read
    before it, both would read the allocation before either wrote, and the later write would put
    the other's member back as it was."""
    created = service.bwm.create_allocation(ALICE, bw())
    both_ways = BwInfoDeltas.model_validate({"appInsId": APP, "requestType": 1, "allocationDirection": "10"})
    second = SecondChange(service._state.lock,
                          lambda: service.bwm.patch_allocation(ALICE, created.allocationId, both_ways))
    service._state.lock = second
    monkeypatch.setattr(bwm_store, "get_allocation", calling_back(bwm_store.get_allocation, second.at_read))

    service.bwm.patch_allocation(ALICE, created.allocationId, BwInfoDeltas.model_validate(
        {"appInsId": APP, "requestType": 1, "fixedAllocation": "3000000"}))
    second.join()

    info = service.bwm.get_allocation(ALICE, created.allocationId).info
    assert (info.fixedAllocation, info.allocationDirection) == ("3000000", "10")
    assert [police_of(service, "alice", one).rate_bps for one in allocation_intent_ids(created.allocationId)] == [
        3_000_000, 3_000_000]


def test_an_application_allocation_polices_its_rules_intents_and_deleting_it_unpolices_them(service):
    uplink, downlink = intent_ids(APP, "r1")
    created = service.bwm.create_allocation(ALICE, bw(requestType=0, sessionFilter=None, allocationDirection="10"))
    assert police_of(service, "alice", uplink).rate_bps == 1_000_000
    assert police_of(service, "alice", downlink).rate_bps == 1_000_000

    # a PUT of the rule keeps it policed; the allocation follows the rule
    service.mec.put_traffic_rule(ALICE, APP, "r1", rule("r1", **{**FLOW_RULE, "priority": 3}))
    assert police_of(service, "alice", uplink).rate_bps == 1_000_000

    service.bwm.delete_allocation(ALICE, created.allocationId)
    assert police_of(service, "alice", uplink) is None and police_of(service, "alice", downlink) is None


@pytest.mark.parametrize("fields, field", [
    ({"fixedAllocation": "fast"}, "fixedAllocation"),
    ({"fixedAllocation": "10"}, "fixedAllocation"),  # below the policers' least rate
    ({"allocationDirection": "11"}, "allocationDirection"),
    ({"sessionFilter": [SESSION, SESSION]}, "sessionFilter"),
    ({"sessionFilter": [{**SESSION, "sourceIp": "10.0.0.1-10.0.0.9"}]}, "sessionFilter[0].sourceIp"),
    ({"sessionFilter": [{**SESSION, "dstPort": ["1", "2"]}]}, "sessionFilter[0].dstPort"),
    ({"sessionFilter": [{"sourceIp": "10.0.0.1", "dstPort": ["80"]}]}, "sessionFilter[0].dstPort"),  # no protocol
    ({"sessionFilter": [{"protocol": "udp"}]}, "sessionFilter[0]"),  # the same reversed
    ({"requestType": 0}, "sessionFilter"),
    ({"appInsId": "nobody"}, "appInsId"),
])
def test_what_cannot_be_enforced_is_refused_naming_the_field_and_changes_nothing(service, fields, field):
    before = service.store.tenant_intents("alice")
    with pytest.raises(InvalidInput) as refused:
        service.bwm.create_allocation(ALICE, bw(**fields))
    assert refused.value.field == field, refused.value.detail
    assert service.store.tenant_intents("alice") == before
    assert service.bwm.list_allocations(ALICE) == []


def test_an_application_allocation_needs_one_rule_per_direction(service):
    service.mec.delete_application(ADMIN, APP)
    service.mec.create_application(ADMIN, MecApplicationSpec(appInstanceId=APP, tenant="alice", trafficRules=[
        rule("r1", action="PASSTHROUGH"), rule("r2", action="PASSTHROUGH", trafficFilter=[{"protocol": ["tcp"]}])]))
    with pytest.raises(InvalidInput) as twice:
        service.bwm.create_allocation(ALICE, bw(requestType=0, sessionFilter=None))
    assert twice.value.field == "appInsId" and "'r1', 'r2'" in twice.value.detail
    with pytest.raises(InvalidInput) as none:
        service.bwm.create_allocation(ALICE, bw(requestType=0, sessionFilter=None, allocationDirection="00"))
    assert none.value.field == "allocationDirection"


def test_a_session_a_traffic_rule_of_higher_priority_also_matches_is_refused(service):
    service.mec.put_traffic_rule(ALICE, APP, "r1", rule("r1", **{**FLOW_RULE, "trafficFilter": [
        {"dstAddress": ["192.0.2.0/24"]}]}))
    with pytest.raises(Forbidden) as refused:
        service.bwm.create_allocation(ALICE, bw())
    assert refused.value.field == "sessionFilter[0]"
    assert "traffic rule 'r1'" in refused.value.detail and "unpoliced" in refused.value.detail
    assert service.bwm.list_allocations(ALICE) == []
    assert [record.source for record in service.store.tenant_intents("alice")] == ["mec011", "mec011"]


def test_a_traffic_rule_that_would_take_a_policed_sessions_packets_is_refused(service):
    created = service.bwm.create_allocation(ALICE, bw())
    wider = rule("r1", **{**FLOW_RULE, "trafficFilter": [{"dstAddress": ["192.0.2.0/24"]}]})
    with pytest.raises(Forbidden) as refused:
        service.mec.put_traffic_rule(ALICE, APP, "r1", wider)
    assert refused.value.field == "trafficFilter" and created.allocationId in refused.value.detail
    assert service.mec.get_traffic_rule(ALICE, APP, "r1") == rule("r1", **FLOW_RULE)


def test_one_application_allocation_per_application(service):
    service.bwm.create_allocation(ALICE, bw(requestType=0, sessionFilter=None))
    with pytest.raises(Forbidden) as refused:
        service.bwm.create_allocation(ALICE, bw(requestType=0, sessionFilter=None))
    assert refused.value.field == "appInsId"


def test_a_put_keeps_the_application_and_request_type(service):
    created = service.bwm.create_allocation(ALICE, bw())
    with pytest.raises(InvalidInput) as refused:
        service.bwm.put_allocation(ALICE, created.allocationId, bw(requestType=0, sessionFilter=None))
    assert refused.value.field == "requestType"


def test_another_tenant_neither_sees_nor_changes_an_allocation(service):
    created = service.bwm.create_allocation(ALICE, bw())
    assert service.bwm.list_allocations(BOB) == []
    for attempt in (lambda: service.bwm.get_allocation(BOB, created.allocationId),
                    lambda: service.bwm.delete_allocation(BOB, created.allocationId),
                    lambda: service.bwm.put_allocation(BOB, created.allocationId, bw(fixedAllocation="9000")),
                    lambda: service.bwm.patch_allocation(BOB, created.allocationId, BwInfoDeltas.model_validate(
                        {"appInsId": APP, "requestType": 1, "fixedAllocation": "9000"}))):
        with pytest.raises(NotFound):
            attempt()
    with pytest.raises(InvalidInput) as refused:  # nor allocates on the application
        service.bwm.create_allocation(BOB, bw())
    assert refused.value.field == "appInsId"
    assert service.bwm.get_allocation(ALICE, created.allocationId).info == bw()


def test_the_list_filters_by_application_and_name(service):
    created = service.bwm.create_allocation(ALICE, bw())
    ids = [created.allocationId]
    assert [one.allocationId for one in service.bwm.list_allocations(ALICE, app_instance_ids=[APP])] == ids
    assert [one.allocationId for one in service.bwm.list_allocations(ALICE, app_names=["video"])] == ids
    assert service.bwm.list_allocations(ALICE, app_instance_ids=["other"]) == []
    assert service.bwm.list_allocations(ALICE, session_ids=["s1"]) == []


def test_the_intents_api_cannot_change_what_an_allocation_installed(service):
    created = service.bwm.create_allocation(ALICE, bw())
    (uplink, _) = allocation_intent_ids(created.allocationId)
    with pytest.raises(Conflict) as refused:
        service.delete_intent(ALICE, uplink)
    assert "/bwm/v1" in refused.value.detail
    assert service.store.get_intent("alice", uplink) is not None


def test_deleting_the_application_takes_its_allocations_out(service):
    created = service.bwm.create_allocation(ALICE, bw())
    service.mec.delete_application(ADMIN, APP)
    assert service.bwm.list_allocations(ADMIN) == []
    assert all(service.store.get_intent("alice", one) is None for one in allocation_intent_ids(created.allocationId))


def test_the_store_migrates_to_the_bwm_tables(tmp_path):
    store = Store.open(tmp_path / "netapp.db")
    try:
        tables = {row[0] for row in store.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = {row[1] for row in store.execute("PRAGMA table_info(mec_applications)")}
    finally:
        store.close()
    assert {"mec_bw_allocations", "mec_dns_rules", "mec_app_subscriptions"} <= tables
    assert {"state", "termination"} <= columns
