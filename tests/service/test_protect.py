"""Intents and slices that protect their flows (netapp.service.protection), over a fake data plane
(tests/utils/fakes.py RecordingDpp; FRER's maps its generic tables, tests/frer/fake.py's calls):
the intent's stream is created, changed and removed with the intent, all or nothing across the two
stores and both sets of maps, whoever refuses. The real data plane's: tests/api/test_protect.py."""

from __future__ import annotations

from typing import Any

import pytest

from netapp.frer.models import FrerStreamSpec
from netapp.frer.protect import stream_definition
from netapp.frer.service import Frer
from netapp.frer.table import FrerMaps, TableFrerCalls
from netapp.intents.models import Intent, LegacyMessage, parse_document
from netapp.service.contract import (Conflict, DataplaneUnavailable, Forbidden, InvalidInput, NotFound,
                                     QuotaExceeded, SliceSpec)
from netapp.tenancy.models import TenantSpec
from netapp.tenancy.service import TenantService
from tests.frer.fake import INTERFACES
from tests.utils.service import ADMIN, ALICE, BOB, fake_service

REPLICATE = {"role": "replicate", "ports": [{"interface": "pa1"}, {"interface": "pa2"}]}


@pytest.fixture
def service(tmp_path):
    service = fake_service(tmp_path)
    dataplane = service.dataplane
    frer = Frer(service.store, FrerMaps(dataplane.table, TableFrerCalls(dataplane.table)), ifindex=INTERFACES.get,
                lock=service.lock)
    service.protect_with(frer)
    service.frer = frer  # for the tests' reads
    yield service
    service.close()


def protected(intent_id: str = "video", dst: str = "10.0.0.2", **protect: Any) -> Intent:
    return Intent.model_validate({
        "id": intent_id, "match": {"src": "10.0.0.1", "dst": dst, "protocol": "udp", "dst_port": 5000},
        "action": {"type": "pass", **({"protect": protect or REPLICATE} if protect != {"off": True} else {})},
    })  # fmt: skip


def frer_maps(service) -> dict[str, list]:  # noqa: ANN001
    """What FRER's maps hold, by map (bytes, comparable)."""
    return {name: sorted((bytes(k), bytes(v)) for k, v in service.dataplane.table(name).items())
            for name in ("dpp_frer_ip", "dpp_frer_streams", "dpp_frer_members", "dpp_frer_recovery")}


def rules(service) -> set[bytes]:  # noqa: ANN001
    """The keys of the rules the fake data plane holds."""
    return set(service.dataplane._dpp.rules)


def test_the_stream_is_made_changed_and_removed_with_its_intent(service):
    service.create_intent(ALICE, protected())
    [stream] = service.frer.list_streams(ALICE)
    assert (stream.name, stream.intent, stream.role) == ("video", "video", "generation")
    assert len(frer_maps(service)["dpp_frer_members"]) == 2
    service.replace_intent(ALICE, "video", protected(role="eliminate", algorithm="match"))
    [changed] = service.frer.list_streams(ALICE)
    assert (changed.handle, changed.role, changed.revision) == (stream.handle, "recovery", 2)
    assert changed.recovery.algorithm == "match" and frer_maps(service)["dpp_frer_members"] == []
    service.replace_intent(ALICE, "video", protected(off=True))
    assert service.frer.list_streams(ALICE) == [] and frer_maps(service)["dpp_frer_ip"] == []
    service.replace_intent(ALICE, "video", protected())
    service.delete_intent(ALICE, "video")
    assert service.frer.list_streams(ALICE) == [] and frer_maps(service)["dpp_frer_ip"] == []


def test_its_stream_is_not_changed_through_the_frer_api(service):
    service.create_intent(ALICE, protected())
    stream = service.frer.get_stream(ALICE, "video")
    with pytest.raises(Conflict, match="protection of intent 'video'"):
        service.frer.delete_stream(ALICE, "video")
    with pytest.raises(Conflict, match="protection of intent 'video'"):
        service.frer.put_stream(ALICE, "video", stream.model_validate(stream.model_dump()))
    assert service.frer.get_stream(ALICE, "video") == stream


def test_a_stream_of_the_intents_name_made_directly_is_left_alone_and_blocks_protection(service):
    service.create_intent(ALICE, protected("video", off=True))
    direct = protected("other").action.protect
    spec = FrerStreamSpec(name="video", **dict(stream_definition(protected().match, direct)))
    service.frer.put_stream(ALICE, "video", spec)
    with pytest.raises(Conflict, match="made through /api/v1/frer"):
        service.replace_intent(ALICE, "video", protected())
    service.delete_intent(ALICE, "video")
    assert service.frer.get_stream(ALICE, "video").intent is None, "the tenant's own stream stays"


@pytest.mark.parametrize("refusal", ["frer_maps", "rule_maps"])
def test_whoever_refuses_neither_the_intent_nor_its_stream_stays_and_the_maps_are_as_before(service, refusal):
    service.create_intent(ALICE, protected("first"))
    before, rules_before = frer_maps(service), rules(service)
    if refusal == "frer_maps":  # after the new stream's slots and members are written
        service.dataplane._dpp.fail("table_update dpp_frer_ip")
    else:
        service.dataplane._dpp.fail("rules_upsert")  # the rules' delta comes after FRER's maps
    with pytest.raises(DataplaneUnavailable):
        service.create_intent(ALICE, protected("second", dst="10.0.0.3"))
    with pytest.raises(NotFound):
        service.get_intent(ALICE, "second")
    assert [stream.name for stream in service.frer.list_streams(ALICE)] == ["first"]
    assert frer_maps(service) == before and rules(service) == rules_before


def test_the_quota_and_a_ninth_set_of_fields_refuse_the_intent(service):
    TenantService(lambda: service.store).put_tenant(ADMIN, ALICE.tenant, TenantSpec(site=True,
                                                                                     quotas={"frer_streams": 1}))
    service.create_intent(ALICE, protected("one"))
    with pytest.raises(QuotaExceeded, match="frer_streams"):
        service.create_intent(ALICE, protected("two", dst="10.0.0.3"))
    service.create_intent(BOB, protected("mine", dst="10.1.0.0/31"))  # another tenant: its own quota
    for bits in range(30, 24, -1):  # 8 sets of compared fields in all
        service.create_intent(BOB, protected(f"p{bits}", dst=f"10.2.0.0/{bits}"))
    before = frer_maps(service)
    with pytest.raises(InvalidInput) as refused:
        service.create_intent(BOB, protected("ninth", dst="10.3.0.0/24"))
    assert refused.value.field == "match" and "at most 8 different sets" in refused.value.detail
    assert frer_maps(service) == before
    with pytest.raises(NotFound):
        service.get_intent(BOB, "ninth")


def test_a_member_port_not_on_the_node_or_not_granted_is_named(service):
    ports = {"role": "replicate", "ports": [{"interface": "pa1"}, {"interface": "gone0"}]}
    with pytest.raises(InvalidInput) as refused:
        service.create_intent(ALICE, protected(**ports))
    assert refused.value.field == "action.protect.ports[1].interface"
    TenantService(lambda: service.store).put_tenant(ADMIN, BOB.tenant, TenantSpec.model_validate(
        {"traffic": [{"dst": "10.0.0.0/24"}, {"interface": "pa1"}]}))
    with pytest.raises(Forbidden) as forbidden:
        service.create_intent(BOB, protected(**REPLICATE))
    assert forbidden.value.field == "action.protect.ports[1].interface"
    assert service.frer.list_streams(ADMIN) == []


def test_a_slice_protects_each_of_its_flows_and_refuses_members_frer_cannot_identify(service):
    spec = {"id": "urllc", "snssai": {"sst": 2}, "priority_level": 5,
            "members": {"ue_prefixes": ["10.9.0.0/24"]}, "protect": {"role": "eliminate", "history_length": 8}}
    service.put_slice(ALICE, SliceSpec.model_validate(spec))
    streams = service.frer.list_streams(ALICE)
    assert sorted(stream.intent[:9] for stream in streams) == ["urllc-dl-", "urllc-ul-"]
    assert {stream.recovery.history_length for stream in streams} == {8}
    with pytest.raises(InvalidInput) as refused:
        service.put_slice(ALICE, SliceSpec.model_validate({**spec, "members": {"ue_prefixes": ["10.9.0.0/24"],
                                                                               "vnis": [7]}}))
    assert refused.value.field == "protect" and "VNI 7" in refused.value.detail
    assert len(service.frer.list_streams(ALICE)) == 2, "the refused resize changed nothing"
    service.put_slice(ALICE, SliceSpec.model_validate({k: v for k, v in spec.items() if k != "protect"}))
    assert service.frer.list_streams(ALICE) == []
    service.put_slice(ALICE, SliceSpec.model_validate(spec))
    service.delete_slice(ALICE, "urllc")
    assert service.frer.list_streams(ALICE) == [] and frer_maps(service)["dpp_frer_ip"] == []


def test_a_dry_run_refuses_a_match_frer_cannot_identify(service):
    body = protected().model_dump(mode="json")
    body["match"]["teid"] = 7
    with pytest.raises(InvalidInput) as refused:
        service.dry_run(ALICE, [Intent.model_validate(body)])
    assert refused.value.field == "match.teid" and "inside GTP-U" in refused.value.detail


def legacy(action_type: str, action_name: str = "PASS", port: str = "5000") -> dict:
    """The paper's message for intent legacy-0000abcd: a flow FRER can identify."""
    return {
        "Resources": [{"resourceId": "00000001", "srcIP": "10.0.0.1", "dstIP": "10.0.0.2", "protocol": "udp",
                       "dstPort": port}],
        "Action": {"actionType": action_type, "actionName": action_name, "flow_hash": "0000ABCD",
                   **({"rx_queue": "1"} if action_name == "PRIO_QUEUE" else {})},
    }  # fmt: skip


def apply(service, message: dict):  # noqa: ANN001, ANN201
    return service.apply_legacy(ALICE, LegacyMessage.model_validate(message))


def test_a_legacy_update_keeps_the_protection_a_legacy_message_cannot_say(service):
    apply(service, legacy("INSERT"))
    body = service.get_intent(ALICE, "legacy-0000abcd").intent.model_dump(mode="json")
    body["action"]["protect"] = REPLICATE  # protected the native way
    service.replace_intent(ALICE, "legacy-0000abcd", Intent.model_validate(body))
    [stream] = service.frer.list_streams(ALICE)
    updated = apply(service, legacy("UPDATE", port="5001"))
    assert updated.intent.match.dst_port == 5001 and updated.intent.action.protect.role == "replicate"
    [kept] = service.frer.list_streams(ALICE)
    assert (kept.handle, kept.intent, kept.revision) == (stream.handle, "legacy-0000abcd", 2)
    assert kept.identification[0].ip.destination_port == 5001, "the stream follows the updated match"
    assert len(frer_maps(service)["dpp_frer_ip"]) == 1 and len(frer_maps(service)["dpp_frer_members"]) == 2


@pytest.mark.parametrize("action_name", ["DROP", "PRIO_QUEUE"])
def test_a_legacy_update_whose_action_cannot_keep_the_protection_is_refused_naming_it(service, action_name):
    body = {"id": "legacy-0000abcd", "match": {"src": "10.0.0.1", "dst": "10.0.0.2", "protocol": "udp",
                                               "dst_port": 5000}, "action": {"type": "pass", "protect": REPLICATE}}
    service.create_intent(ALICE, Intent.model_validate(body))
    before, record = frer_maps(service), service.get_intent(ALICE, "legacy-0000abcd")
    with pytest.raises(InvalidInput) as refused:
        apply(service, legacy("UPDATE", action_name))
    assert refused.value.field == "Action.actionName"
    assert "PUT /api/v1/intents/legacy-0000abcd" in refused.value.detail and "replicate" in refused.value.detail
    assert service.get_intent(ALICE, "legacy-0000abcd") == record and frer_maps(service) == before


def test_a_legacy_update_in_a_document_keeps_the_protection_too():
    native = {"id": "legacy-0000abcd", "match": {"src": "10.0.0.1", "dst": "10.0.0.2", "protocol": "udp",
                                                 "dst_port": 5000},
              "action": {"type": "pass", "protect": {"role": "eliminate", "algorithm": "match"}}}
    [intent] = parse_document({"intents": [native, legacy("UPDATE", "PRIO_QUEUE")]}).intents
    assert (intent.action.type, intent.action.protect.algorithm) == ("steer", "match")


def protected_legacy(service) -> None:  # noqa: ANN001
    """Intent legacy-0000abcd (legacy()'s flow), protected the native way."""
    body = {"id": "legacy-0000abcd", "match": {"src": "10.0.0.1", "dst": "10.0.0.2", "protocol": "udp",
                                               "dst_port": 5000}, "action": {"type": "pass", "protect": REPLICATE}}
    service.create_intent(ALICE, Intent.model_validate(body))


@pytest.mark.parametrize("action_name", ["DROP", "PRIO_QUEUE"])
def test_a_legacy_update_s_dry_run_refuses_an_action_that_cannot_keep_the_protection(service, action_name):
    protected_legacy(service)
    before, record = frer_maps(service), service.get_intent(ALICE, "legacy-0000abcd")
    with pytest.raises(InvalidInput) as refused:
        service.dry_run_legacy(ALICE, LegacyMessage.model_validate(legacy("UPDATE", action_name)))
    assert refused.value.field == "Action.actionName" and "PUT /api/v1/intents/legacy-0000abcd" in refused.value.detail
    assert service.get_intent(ALICE, "legacy-0000abcd") == record and frer_maps(service) == before


def test_a_legacy_update_s_dry_run_compiles_the_kept_protection_as_applying_it_does(service):
    protected_legacy(service)
    other = Intent.model_validate({"id": "other", "match": {"src": "10.0.0.1", "dst": "10.0.0.2", "protocol": "udp",
                                                            "dst_port": 5001}, "action": {"type": "pass"}})
    spec = FrerStreamSpec(name="taken", **dict(stream_definition(other.match, protected().action.protect)))
    service.frer.put_stream(ALICE, "taken", spec)  # the flow of port 5001 is another stream's already
    update = LegacyMessage.model_validate(legacy("UPDATE", port="5001"))
    before, streams = frer_maps(service), service.frer.list_streams(ALICE)
    with pytest.raises(InvalidInput) as dry:
        service.dry_run_legacy(ALICE, update)
    with pytest.raises(InvalidInput) as applied:
        service.apply_legacy(ALICE, update)
    assert dry.value.field == applied.value.field == "match" and "FRER cannot take" in dry.value.detail
    assert frer_maps(service) == before and service.frer.list_streams(ALICE) == streams
    report = service.dry_run_legacy(ALICE, LegacyMessage.model_validate(legacy("UPDATE", port="5002")))
    assert [rule.intent_id for rule in report.rules] == ["legacy-0000abcd"]
    assert frer_maps(service) == before and service.frer.list_streams(ALICE) == streams, "a dry run writes nothing"
