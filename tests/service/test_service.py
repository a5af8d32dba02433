"""The service over FakeDpp: every change is one transaction of store and maps; tenants are kept
apart; retried creates are idempotent; collisions are refused naming both intents; slices are
created, resized and deleted atomically; a start reconciles the maps with the store."""

from __future__ import annotations

import errno
import threading
from typing import Any, Callable

import pytest
from pydantic import ValidationError

from netapp.dataplane.binding import NONE, DataplaneError, XdpMode, rule_key, rule_value, struct_bytes
from netapp.dataplane.tables import Table
from netapp.intents.compiler import compile_intent
from netapp.forwarding.models import AlternativeGroup
from netapp.intents.models import LegacyMessage
from netapp.steering.models import CpuSpec
from netapp.service import store as store_module
from netapp.service.contract import (
    Conflict,
    DataplaneFull,
    DataplaneUnavailable,
    Forbidden,
    IntentFilter,
    IntentRecord,
    InvalidInput,
    NotFound,
    ServiceError,
)
from netapp.service.service import NetAppService, rule_id
from netapp.service.store import Store, StoreError
from tests.utils.fakes import RecordingDpp
from tests.utils.intents import paper_message
from tests.utils.maps import compiled_store
from tests.utils.service import (
    ADMIN,
    ALICE,
    BOB,
    READER,
    Clock,
    fake_service,
    few_policers_fake,
    intent,
    settings_for,
    slice_spec,
)


@pytest.fixture
def fake() -> RecordingDpp:
    return few_policers_fake()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def service(tmp_path, fake, clock):
    started = fake_service(tmp_path, fake, clock)
    yield started
    started.close()


def assert_maps_hold_the_store(service: NetAppService, fake: RecordingDpp) -> None:
    keys, shapes = compiled_store(service.store)
    assert set(fake.rules) == keys
    assert [struct_bytes(shape) for shape in fake.active_shapes()] == shapes
    stored = {rule_id(r.tenant, r.intent.id) for r in service.store.all_intents()}
    assert set(service.dataplane.installed_intents) == stored


def stored(service: NetAppService) -> list[Any]:
    return [r.model_dump() for r in service.store.all_intents()] + [
        s.model_dump() for s in service.store.list_slices(None, 0, 1000).items
    ]


# --- one transaction ------------------------------------------------------------------------------


def test_given_creates_replaces_and_deletes_then_the_maps_always_hold_the_store(service, fake):
    service.create_intent(ALICE, intent("a", 1000))
    service.create_intent(ALICE, intent("b", 2000))
    service.create_intent(BOB, intent("a", 3000))
    assert_maps_hold_the_store(service, fake)

    service.replace_intent(ALICE, "a", intent("a", 1001, priority=7))
    service.delete_intent(ALICE, "b")
    service.create_intent(ALICE, intent("c", match={"protocol": "tcp"}, action={"type": "drop"}))

    assert_maps_hold_the_store(service, fake)
    assert service.get_intent(ALICE, "a").revision == 2


def test_one_create_writes_only_its_own_rule(service, fake):
    for n in range(20):
        service.create_intent(ALICE, intent(f"i{n}", 1000 + n))
    fake.calls.clear()

    service.create_intent(ALICE, intent("one-more", 999))

    upserted = [call[1] for call in fake.writes() if call[0] == "rules_upsert"]
    assert fake.write_names() == ["stats_rules_clear", "rules_upsert", "shapes_publish"]
    assert len(upserted[0]) == 1


def seed(service: NetAppService) -> None:
    service.create_intent(ALICE, intent("a", 1000))
    service.create_intent(ALICE, intent("b", 2000))
    service.put_slice(ALICE, slice_spec("embb"))


def create_in_a_new_shape(service: NetAppService) -> None:
    service.create_intent(ALICE, intent("new", match={"protocol": "tcp"}, action={"type": "drop"}))


def create_a_batch(service: NetAppService) -> None:
    service.create_intents(
        ALICE,
        [intent("n1", 3001), intent("n2", 3002), intent("n3", match={"protocol": "tcp"}, action={"type": "drop"})],
    )


def replace_moving_the_key(service: NetAppService) -> None:
    service.replace_intent(ALICE, "a", intent("a", 1001))


def delete_one(service: NetAppService) -> None:
    service.delete_intent(ALICE, "b")


def create_a_slice(service: NetAppService) -> None:
    service.put_slice(ALICE, slice_spec("urllc", members={"vnis": [7, 8], "dscp": [34]}, cpus=[1]))


def resize_the_slice(service: NetAppService) -> None:
    service.put_slice(ALICE, slice_spec("embb", members={"vnis": [1093, 1094], "teids": [5]}))


def delete_the_slice(service: NetAppService) -> None:
    service.delete_slice(ALICE, "embb")


def refuse(op: str) -> Callable[[RecordingDpp], None]:
    def arm(fake: RecordingDpp) -> None:
        fake.fail(op)

    arm.__name__ = f"{op} refused"
    return arm


def upsert_fails_midway(fake: RecordingDpp) -> None:
    fake.fail_upsert_after = 1


def publish_after_the_deletes_fails(fake: RecordingDpp) -> None:
    fake.fail_publish_after = 1


FAILURES = [
    # (change, what fails)
    (create_in_a_new_shape, refuse("rules_upsert")),
    (create_in_a_new_shape, refuse("shapes_publish")),
    (create_a_batch, upsert_fails_midway),
    (create_a_batch, refuse("shapes_publish")),
    (replace_moving_the_key, refuse("rules_upsert")),
    (replace_moving_the_key, refuse("shapes_publish")),
    (replace_moving_the_key, refuse("rules_delete")),
    (replace_moving_the_key, publish_after_the_deletes_fails),
    (delete_one, refuse("rules_delete")),
    (delete_one, refuse("shapes_publish")),  # its one publish comes after the delete
    (create_a_slice, upsert_fails_midway),
    (create_a_slice, refuse("shapes_publish")),
    (resize_the_slice, upsert_fails_midway),
    (resize_the_slice, refuse("rules_delete")),
    (resize_the_slice, publish_after_the_deletes_fails),
    (delete_the_slice, refuse("rules_delete")),
    (delete_the_slice, refuse("shapes_publish")),
]


@pytest.mark.parametrize(
    "change, arm", FAILURES, ids=[f"{change.__name__}, {arm.__name__}" for change, arm in FAILURES]
)
def test_given_a_map_failure_midway_then_store_and_maps_are_unchanged_and_the_reason_is_given(
    service, fake, change, arm
):
    seed(service)
    store_before, maps_before = stored(service), fake.state()
    arm(fake)

    with pytest.raises(DataplaneUnavailable) as refused:
        change(service)

    assert refused.value.detail.startswith("the data plane refused the change: dpp_")  # names the call
    assert stored(service) == store_before
    assert fake.state() == maps_before
    assert service.health().ready
    change(service)  # the same change goes through once the maps take it ...
    assert_maps_hold_the_store(service, fake)  # ... and the shadow was right all along


def test_given_a_commit_failure_then_the_map_change_is_undone(service, fake, monkeypatch):
    seed(service)
    store_before, maps_before = stored(service), fake.state()

    def refuse_commit(self):
        raise StoreError("commit: disk I/O error")

    monkeypatch.setattr(store_module.Transaction, "commit", refuse_commit)
    with pytest.raises(ServiceError, match="undone"):
        resize_the_slice(service)
    monkeypatch.undo()

    assert stored(service) == store_before
    assert fake.state() == maps_before
    resize_the_slice(service)
    assert_maps_hold_the_store(service, fake)


def test_given_the_undo_fails_too_then_not_ready_and_the_next_change_reconciles_first(service, fake):
    seed(service)
    fake.fail("shapes_publish", times=2)  # the publish after the delete, then the undo's

    with pytest.raises(DataplaneUnavailable):
        delete_one(service)

    assert not service.health().ready
    assert "failed" in service.health().checks["reconcile"]
    service.create_intent(ALICE, intent("c", 3000))
    assert service.health().ready
    assert {r.intent.id for r in service.store.all_intents()} >= {"a", "b", "c"}
    assert_maps_hold_the_store(service, fake)


def test_given_every_rule_slot_taken_then_a_change_is_a_409_naming_max_rules_and_nothing_changes(tmp_path):
    # It used to be a 503, as if the data plane were broken: the maps are fine, only full.
    service = fake_service(tmp_path, max_rules=2)
    service.create_intent(ALICE, intent("a", 1000))
    service.create_intent(ALICE, intent("b", 2000))
    before = stored(service)

    for change in (lambda: service.create_intent(ALICE, intent("c", 3000)), lambda: create_a_slice(service)):
        with pytest.raises(DataplaneFull) as full:
            change()
        assert full.value.status == 409
        assert "all 2 rule slots are in use (setting max_rules)" in full.value.detail

    assert stored(service) == before
    assert service.health().ready
    service.delete_intent(ALICE, "a")
    service.create_intent(ALICE, intent("c", 3000))  # a freed slot is taken again
    service.close()


# --- tenants --------------------------------------------------------------------------------------


def test_two_tenants_may_use_the_same_id_and_each_sees_only_its_own(service, fake):
    service.create_intent(ALICE, intent("video", 1000))
    service.create_intent(BOB, intent("video", 2000))

    assert service.get_intent(ALICE, "video").intent.match.dst_port == 1000
    assert service.get_intent(BOB, "video").intent.match.dst_port == 2000
    assert [r.tenant for r in service.list_intents(BOB, IntentFilter()).items] == ["bob"]
    assert [r.tenant for r in service.list_intents(ADMIN, IntentFilter()).items] == ["alice", "bob"]
    assert set(service.dataplane.installed_intents) == {"alice/video", "bob/video"}


def test_another_tenants_intent_looks_like_nothing_at_all(service):
    service.create_intent(ALICE, intent("video", 1000))

    for attempt in (
        lambda: service.get_intent(BOB, "alice/video"),
        lambda: service.replace_intent(BOB, "alice/video", intent("video", 1)),
        lambda: service.delete_intent(BOB, "alice/video"),
        lambda: service.get_intent(BOB, "video"),
    ):
        with pytest.raises(NotFound):
            attempt()
    with pytest.raises(Forbidden):
        service.list_intents(BOB, IntentFilter(tenant="alice"))
    assert service.get_intent(ALICE, "video").revision == 1


def test_an_admin_names_another_tenants_intent_by_tenant_and_id(service):
    service.create_intent(ALICE, intent("video", 1000))
    service.replace_intent(ADMIN, "alice/video", intent("video", 1001))
    assert service.get_intent(ALICE, "video").intent.match.dst_port == 1001
    service.delete_intent(ADMIN, "alice/video")
    assert service.list_intents(ADMIN, IntentFilter()).total == 0


def test_scopes_are_enforced(service):
    with pytest.raises(Forbidden):
        service.create_intent(READER, intent("x"))
    with pytest.raises(Forbidden):
        service.put_cpu(ALICE, CpuSpec(cpu=1))
    with pytest.raises(Forbidden):
        service.attach(ALICE, "lo", "generic")


# --- idempotency ----------------------------------------------------------------------------------


def test_given_a_retried_create_with_the_same_key_and_body_then_the_first_record_and_not_created(
    service, fake
):
    first = service.create_intent(ALICE, intent("video"), idempotency_key="req-1")
    fake.calls.clear()

    retry = service.create_intent(ALICE, intent("video"), idempotency_key="req-1")

    assert (first.created, retry.created) == (True, False)
    assert retry.record == first.record
    assert fake.writes() == []


def test_given_the_same_key_with_another_body_then_conflict(service):
    service.create_intent(ALICE, intent("video"), idempotency_key="req-1")
    with pytest.raises(Conflict) as refused:
        service.create_intent(ALICE, intent("video", 6000), idempotency_key="req-1")
    assert refused.value.field == "Idempotency-Key"


def test_idempotency_keys_are_per_tenant_and_expire(service, clock):
    service.create_intent(ALICE, intent("video"), idempotency_key="req-1")
    assert service.create_intent(BOB, intent("video", 6000), idempotency_key="req-1").created

    clock.advance(hours=25)
    with pytest.raises(Conflict, match="in use"):  # a new create, and the id is taken
        service.create_intent(ALICE, intent("video"), idempotency_key="req-1")


def test_a_create_without_a_key_of_an_existing_id_is_a_conflict(service):
    service.create_intent(ALICE, intent("video"))
    with pytest.raises(Conflict, match="in use"):
        service.create_intent(ALICE, intent("video", 6000))


# --- collisions -----------------------------------------------------------------------------------


COLLISIONS = [
    ("the same action: a duplicate", {}, "duplicate"),
    ("another action", {"action": {"type": "drop"}}, "conflict"),
    ("a lower priority", {"priority": 5}, "shadowed"),
    ("a higher priority", {"priority": 500}, "shadowed"),
]


@pytest.mark.parametrize("fields, kind", [c[1:] for c in COLLISIONS], ids=[c[0] for c in COLLISIONS])
def test_given_an_intent_with_an_installed_match_then_conflict_naming_both(service, fake, fields, kind):
    service.create_intent(ALICE, intent("first", 1000))
    maps_before = fake.state()

    with pytest.raises(Conflict) as refused:
        service.create_intent(ALICE, intent("second", 1000, **fields))

    assert "'second'" in refused.value.detail and "'first'" in refused.value.detail
    assert {refused.value.extra["intent_a"], refused.value.extra["intent_b"]} == {"first", "second"}
    assert refused.value.extra["kind"] == kind
    assert fake.state() == maps_before
    assert [r.intent.id for r in service.store.all_intents()] == ["first"]


def test_a_collision_with_another_tenant_does_not_name_its_intent_except_to_an_admin(service):
    service.create_intent(ALICE, intent("secret-plan", 1000))

    with pytest.raises(Conflict) as refused:
        service.create_intent(BOB, intent("mine", 1000))
    assert "secret-plan" not in refused.value.detail and "another tenant" in refused.value.detail

    with pytest.raises(Conflict) as refused:
        service.create_intent(ADMIN, intent("ops", 1000))
    assert "'alice/secret-plan'" in refused.value.detail


def test_given_an_intent_that_does_not_compile_then_invalid_input_names_the_field(service):
    with pytest.raises(InvalidInput) as refused:
        service.create_intent(ALICE, intent("x", match={"interface": "no-such-if0"}))
    assert refused.value.field == "match.interface"
    # The field's reason does not say again what its name and the detail say.
    assert refused.value.reason.startswith("unknown interface 'no-such-if0' (known: ")
    assert refused.value.detail == f"intent 'x': match.interface: {refused.value.reason}"
    assert service.store.all_intents() == []


# --- batch create ---------------------------------------------------------------------------------


def test_a_batch_is_one_transaction_and_one_map_delta(service, fake):
    service.create_intent(ALICE, intent("installed", 999))
    fake.calls.clear()

    result = service.create_intents(ALICE, [intent(f"b{n}", 1000 + n) for n in range(50)])

    assert result.created and [r.intent.id for r in result.records] == [f"b{n}" for n in range(50)]
    assert fake.write_names() == ["stats_rules_clear", "rules_upsert", "shapes_publish"]
    assert len([call for call in fake.writes() if call[0] == "rules_upsert"][0][1]) == 50
    assert_maps_hold_the_store(service, fake)


BATCH_REFUSALS = [
    # (case, the batch's third intent, error, field)
    ("collides with an installed one", intent("c", 1000), Conflict, "intents[2].match"),
    ("has an id in use", intent("installed", 4000), Conflict, "intents[2].id"),
    ("does not compile", intent("c", match={"interface": "no-such-if0"}), InvalidInput, "intents[2].match.interface"),
    ("collides with the first of the batch", intent("c", 3000), Conflict, "intents[2].match"),
    ("repeats the first one's id", intent("a", 4000), Conflict, "intents[0].id"),
]


@pytest.mark.parametrize(
    "third, error, field", [c[1:] for c in BATCH_REFUSALS], ids=[c[0] for c in BATCH_REFUSALS]
)
def test_given_a_batch_whose_third_intent_is_refused_then_nothing_is_stored_or_installed(
    service, fake, third, error, field
):
    service.create_intent(ALICE, intent("installed", 1000))
    store_before, maps_before = stored(service), fake.state()

    with pytest.raises(error) as refused:
        service.create_intents(ALICE, [intent("a", 3000), intent("b", 3001), third, intent("d", 3003)])

    assert refused.value.field == field
    assert refused.value.detail.startswith(field.split(".")[0])  # "intents[2]: ..." names the position
    assert stored(service) == store_before
    assert fake.state() == maps_before
    assert service.health().ready


def test_a_collision_within_a_batch_names_both_positions(service):
    with pytest.raises(Conflict) as refused:
        service.create_intents(ALICE, [intent("a", 3000), intent("b", 3000, action={"type": "drop"})])

    assert refused.value.field in ("intents[0].match", "intents[1].match")
    assert "intents[0]" in refused.value.detail and "intents[1]" in refused.value.detail
    assert refused.value.extra["kind"] == "conflict"
    assert service.store.all_intents() == []


def test_a_batch_is_limited_and_not_empty(service):
    with pytest.raises(InvalidInput, match="at most 1000") as refused:
        service.create_intents(ALICE, [intent(f"i{n}", 1000 + n) for n in range(1001)])
    assert refused.value.field == "intents"
    with pytest.raises(InvalidInput):
        service.create_intents(ALICE, [])
    with pytest.raises(Forbidden):
        service.create_intents(READER, [intent("a")])
    assert service.store.all_intents() == []


def test_given_a_retried_batch_with_the_same_key_then_the_same_records_and_not_created(service, fake, clock):
    batch = [intent("a", 3000), intent("b", 3001)]
    first = service.create_intents(ALICE, batch, idempotency_key="batch-1")
    fake.calls.clear()
    clock.advance(hours=1)

    retry = service.create_intents(ALICE, batch, idempotency_key="batch-1")

    assert (first.created, retry.created) == (True, False)
    assert retry.records == first.records
    assert fake.writes() == []
    with pytest.raises(Conflict) as refused:
        service.create_intents(ALICE, [intent("a", 3000), intent("c", 3002)], idempotency_key="batch-1")
    assert refused.value.field == "Idempotency-Key"
    with pytest.raises(Conflict):  # a single create is another request
        service.create_intent(ALICE, intent("c", 3002), idempotency_key="batch-1")


def test_a_batch_is_the_callers_own_and_tenants_may_reuse_ids(service, fake):
    service.create_intents(ALICE, [intent("a", 3000), intent("b", 3001)])
    service.create_intents(BOB, [intent("a", 4000), intent("b", 4001)])

    assert {r.tenant for r in service.list_intents(BOB, IntentFilter()).items} == {"bob"}
    assert service.get_intent(BOB, "a").intent.match.dst_port == 4000
    assert_maps_hold_the_store(service, fake)


# --- legacy messages, dry runs --------------------------------------------------------------------


def legacy(action_type: str, port: str = "5004") -> LegacyMessage:
    message = paper_message()
    del message["Params"]  # the paper's eth0 need not exist here
    message["Action"]["actionType"] = action_type
    message["Resources"][2]["dstPort"] = port
    return LegacyMessage.model_validate(message)


def test_legacy_insert_update_and_delete(service, fake):
    inserted = service.apply_legacy(ALICE, legacy("INSERT"))
    assert (inserted.intent.id, inserted.source) == ("legacy-e918d704", "legacy")

    updated = service.apply_legacy(ALICE, legacy("UPDATE", "5006"))
    assert (updated.intent.match.dst_port, updated.revision) == (5006, 2)
    assert_maps_hold_the_store(service, fake)

    assert service.apply_legacy(ALICE, legacy("DELETE")) is None
    assert service.store.all_intents() == [] and fake.rules == {}


def test_a_dry_run_names_the_interface_a_rule_matches(service):
    report = service.dry_run(ALICE, [intent("on-lo", match={"interface": "lo", "protocol": "udp", "dst_port": 53})])

    assert report.rules[0].match["interface"] == "lo"


def test_a_dry_run_reports_rules_and_conflicts_and_changes_nothing(service, fake):
    service.create_intent(ALICE, intent("a", 1000))
    store_before, maps_before = stored(service), fake.state()
    fake.calls.clear()

    report = service.dry_run(ALICE, [intent("b", 1000, action={"type": "drop"}), intent("a", 1001)])

    assert [(rule.intent_id, rule.match) for rule in report.rules] == [
        ("b", {"protocol": 17, "fragment": 0, "dst_port": 1000}),
        ("a", {"protocol": 17, "fragment": 0, "dst_port": 1001}),
    ]
    assert report.conflicts == []  # a moves away from 1000 in the same run
    collide = service.dry_run(ALICE, [intent("b", 1000, action={"type": "drop"})])
    assert [(c.intent_a, c.intent_b, c.kind) for c in collide.conflicts] == [("a", "b", "conflict")]
    assert fake.writes() == [] and fake.state() == maps_before and stored(service) == store_before


# --- slices ---------------------------------------------------------------------------------------


def test_a_slice_creates_resizes_and_deletes_its_intents(service, fake):
    record, created = service.put_slice(ALICE, slice_spec("embb"))
    assert created and len(record.intent_ids) == 5
    assert {r.source for r in service.store.slice_intents("alice", "embb")} == {"slice"}
    assert_maps_hold_the_store(service, fake)

    resized, created = service.put_slice(ALICE, slice_spec("embb", members={"vnis": [1093, 7]}, cpus=[1]))
    assert not created and resized.revision == 2
    assert resized.intent_ids == ["embb-vni-1093", "embb-vni-7"]
    assert service.get_intent(ALICE, "embb-vni-1093").intent.action.cpu == 1
    assert_maps_hold_the_store(service, fake)

    service.delete_slice(ALICE, "embb")
    assert service.store.all_intents() == [] and fake.rules == {}
    with pytest.raises(NotFound):
        service.get_slice(ALICE, "embb")


def test_a_slices_intents_change_only_through_the_slice(service):
    service.put_slice(ALICE, slice_spec("embb"))
    with pytest.raises(Conflict, match="slice 'embb'"):
        service.delete_intent(ALICE, "embb-vni-1093")
    with pytest.raises(Conflict, match="slice 'embb'"):
        service.replace_intent(ALICE, "embb-vni-1093", intent("embb-vni-1093"))


def test_a_slice_whose_intent_id_is_taken_is_refused_whole(service, fake):
    service.create_intent(ALICE, intent("embb-dscp-46", match={"dscp": 12}))
    maps_before = fake.state()
    with pytest.raises(Conflict, match="embb-dscp-46"):
        service.put_slice(ALICE, slice_spec("embb"))
    assert service.store.get_slice("alice", "embb") is None and fake.state() == maps_before


def test_tenants_slices_are_apart(service):
    service.put_slice(ALICE, slice_spec("embb"))
    service.put_slice(BOB, slice_spec("embb", members={"vnis": [5]}))
    assert [s.tenant for s in service.list_slices(BOB).items] == ["bob"]
    with pytest.raises(NotFound):
        service.delete_slice(BOB, "alice/embb")


# --- site, statistics, status ---------------------------------------------------------------------


def group(group_id: int) -> AlternativeGroup:
    return AlternativeGroup.model_validate({"id": group_id, "members": [{"mac": "02:00:00:00:00:09"}]})


def test_an_alternative_group_in_use_cannot_be_deleted(service, fake):
    service.put_alternative(ADMIN, group(3))
    service.create_intent(ALICE, intent("video", alternative=3))
    assert 3 in fake.entries("dpp_alt_groups")

    with pytest.raises(Conflict, match="used by 1 intents"):
        service.delete_alternative(ADMIN, 3)
    service.delete_intent(ALICE, "video")
    service.delete_alternative(ADMIN, 3)

    assert 3 not in fake.entries("dpp_alt_groups") and service.list_alternatives(ALICE) == []


def test_a_cpu_joins_the_set_with_its_capacity(service, fake):
    service.put_cpu(ADMIN, CpuSpec(cpu=1, capacity_pps=500_000, overloaded=True))
    (view,) = service.list_cpus(ALICE)
    assert view["capacity_pps"] == 500_000
    assert view["state"]["enabled"] == 1 and view["state"]["overloaded"] == 1


def test_given_a_kernel_whose_cpumap_queues_are_smaller_then_a_larger_queue_size_is_invalid(tmp_path, fake):
    fake.qsize_max = 4096  # what the service finds at start
    service = fake_service(tmp_path, fake)
    try:
        with pytest.raises(InvalidInput) as refused:
            service.put_cpu(ADMIN, CpuSpec(cpu=1, queue_size=4097))
        service.put_cpu(ADMIN, CpuSpec(cpu=2, queue_size=4096))
        assert [spec.cpu for spec in service.store.list_cpus()] == [2]
    finally:
        service.close()

    assert refused.value.field == "queue_size"
    assert refused.value.allowed == "0 (the default, 2048 frames) to 4096"
    assert not fake.cpus[1].enabled


def test_given_a_queue_size_the_kernel_refuses_after_all_then_it_is_invalid_and_not_kept(service, fake):
    fake.qsize_max = 4096  # lower than at start: the kernel, not the service's check, refuses

    with pytest.raises(InvalidInput) as refused:
        service.put_cpu(ADMIN, CpuSpec(cpu=1, queue_size=8192))

    assert refused.value.field == "queue_size"
    assert service.store.list_cpus() == [] and not fake.cpus[1].enabled


def test_a_cpu_leaves_the_set_from_the_store_and_the_maps(service, fake):
    service.put_cpu(ADMIN, CpuSpec(cpu=1, capacity_pps=500_000, overloaded=True))
    service.put_cpu(ADMIN, CpuSpec(cpu=2))

    service.delete_cpu(ADMIN, 1)

    assert [view["cpu"] for view in service.list_cpus(ALICE)] == [2]
    assert service.store.get_cpu(1) is None
    assert (fake.cpus[1].enabled, fake.cpus[1].capacity_pps, fake.cpus[1].overloaded) == (0, 0, 0)
    assert fake.cpus[2].enabled
    with pytest.raises(NotFound, match="CPU 1 is not in the CPU set") as missing:
        service.delete_cpu(ADMIN, 1)
    assert missing.value.field == "cpu"
    with pytest.raises(Forbidden):
        service.delete_cpu(ALICE, 2)


def test_given_the_data_plane_refuses_a_cpu_delete_then_the_cpu_stays_in_store_and_maps(service, fake):
    service.put_cpu(ADMIN, CpuSpec(cpu=1, capacity_pps=500_000, overloaded=True))
    fake.fail("cpu_disable")

    with pytest.raises(DataplaneUnavailable, match="dpp_cpu_disable"):
        service.delete_cpu(ADMIN, 1)

    assert service.store.get_cpu(1) == CpuSpec(cpu=1, capacity_pps=500_000, overloaded=True)
    assert (fake.cpus[1].enabled, fake.cpus[1].capacity_pps, fake.cpus[1].overloaded) == (1, 500_000, 1)


def test_given_a_commit_failure_then_a_deleted_cpu_is_put_back_in_the_maps(service, fake, monkeypatch):
    service.put_cpu(ADMIN, CpuSpec(cpu=1, capacity_pps=500_000, queue_size=512, overloaded=True))

    def refuse_commit(self):
        raise StoreError("commit: disk I/O error")

    monkeypatch.setattr(store_module.Transaction, "commit", refuse_commit)
    with pytest.raises(ServiceError, match="undone"):
        service.delete_cpu(ADMIN, 1)
    monkeypatch.undo()

    assert service.store.get_cpu(1) is not None
    assert (fake.cpus[1].enabled, fake.cpus[1].capacity_pps, fake.cpus[1].overloaded) == (1, 500_000, 1)
    assert fake.writes()[-3:] == [
        ("cpu_disable", 1), ("cpu_enable", 1, 512, 500_000), ("cpu_set_overloaded", 1, True)
    ]


def test_given_a_stored_cpu_this_machine_lacks_then_deleting_it_clears_the_store(service, fake):
    service.put_cpu(ADMIN, CpuSpec(cpu=1))
    fake.fail("cpu_disable", code=errno.EINVAL)  # as libdpp answers a CPU past the possible ones

    service.delete_cpu(ADMIN, 1)

    assert service.store.get_cpu(1) is None


def test_stats_per_intent_and_slice_for_the_caller_and_per_cpu_for_admins(service, fake):
    service.create_intent(ALICE, intent("video", 1000))
    service.create_intent(BOB, intent("video", 2000))
    service.put_slice(ALICE, slice_spec("embb"))
    slots = service.dataplane.installed_intents
    fake.count(slots["alice/video"], 3, 100)
    fake.count(slots["alice/embb-vni-1093"], 2, 50)
    fake.count(slots["alice/embb-dscp-46"], 1, 50)

    mine = service.stats(ALICE)
    everyone = service.stats(ADMIN)

    assert {(s["id"], s["packets"]) for s in mine["intents"] if s["packets"]} == {
        ("video", 3),
        ("embb-vni-1093", 2),
        ("embb-dscp-46", 1),
    }
    assert {s["tenant"] for s in mine["intents"]} == {"alice"}
    assert mine["slices"] == [{"tenant": "alice", "id": "embb", "packets": 3, "bytes": 150}]
    assert "cpus" not in mine and {"cpus", "verdicts", "reasons"} <= set(everyone)
    assert {s["tenant"] for s in everyone["intents"]} == {"alice", "bob"}


def test_admin_stats_give_each_cpu_of_the_set_its_state_and_steered_packets(service, fake):
    service.put_cpu(ADMIN, CpuSpec(cpu=1, capacity_pps=500_000))
    fake.steer(1, 4, 100)

    cpus = service.stats(ADMIN)["cpus"]

    assert cpus["1"]["packets"] == 4 and cpus["1"]["bytes"] == 400
    assert cpus["1"]["enabled"] == 1 and cpus["1"]["capacity_pps"] == 500_000, "the state keeps its keys"
    assert set(cpus) == {str(spec.cpu) for spec in service.store.list_cpus()}


def test_the_status_names_program_maps_and_fill(service):
    service.create_intent(ALICE, intent("video"))
    status = service.dataplane_status(ALICE)
    assert status["program_id"] == 1
    assert status["maps"]["dpp_rules"]["entries"] == 1
    assert status["reconciled"] and "not_installed" not in status


def test_the_default_alternative_setting_reaches_the_maps_and_the_status(tmp_path, fake, clock):
    service = fake_service(tmp_path, fake, clock, default_alternative=7)
    assert fake.config.default_alt_group == 7
    assert service.dataplane_status(ALICE)["defaults"] == {"verdict": "pass", "alternative": 7}
    service.close()

    again = fake_service(tmp_path, fake, clock)  # the setting removed: nothing left of it in the maps
    assert fake.config.default_alt_group == NONE
    assert again.dataplane_status(ALICE)["defaults"]["alternative"] is None
    again.close()


@pytest.mark.parametrize("value", [-1, 64, "video"])
def test_a_default_alternative_outside_the_groups_is_refused_by_name(tmp_path, value):
    with pytest.raises(ValidationError, match="default_alternative"):
        settings_for(tmp_path, default_alternative=value)


def test_the_default_alternative_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("NETAPP_DEFAULT_ALTERNATIVE", "63")
    assert settings_for(tmp_path).default_alternative == 63


# --- starting -------------------------------------------------------------------------------------


def test_given_a_restart_then_stale_entries_go_and_missing_ones_come(tmp_path, fake, clock):
    first = fake_service(tmp_path, fake, clock)
    for name, port in (("a", 1000), ("b", 2000), ("c", 3000)):
        first.create_intent(ALICE, intent(name, port))
    first.put_alternative(ADMIN, group(5))
    first.close()
    # While the service is down, the store loses b and gains d; the maps gain a stray rule and group.
    store = Store.open(tmp_path / "netapp.db")
    with store.transaction():
        store.delete_intent("alice", "b")
        store.insert_intent(
            IntentRecord(intent=intent("d", 4000), tenant="alice", created_at=clock.now, updated_at=clock.now)
        )
    store.close()
    stray = compile_intent(intent("stray", 9000), {}, "ghost/stray")
    fake.rules_upsert([rule_key(stray)], [rule_value(stray, slot=77)])
    Table(fake, "dpp_alt_groups").update({9: fake.entries("dpp_alt_groups")[5]})

    again = fake_service(tmp_path, fake, clock)

    assert_maps_hold_the_store(again, fake)
    assert set(fake.entries("dpp_alt_groups")) == {5}
    assert again.health().ready
    again.close()


def test_a_service_that_has_not_started_is_not_ready_and_changes_nothing(tmp_path):
    service = NetAppService(settings_for(tmp_path))
    assert not service.health().ready
    with pytest.raises(DataplaneUnavailable):
        service.create_intent(ALICE, intent("video"))


# --- concurrency ----------------------------------------------------------------------------------


def test_parallel_creates_and_deletes_leave_store_and_maps_identical(service, fake):
    def client(n: int) -> None:
        for k in range(25):
            name = f"c{n}-{k}"
            service.create_intent(ALICE, intent(name, 10_000 + n * 100 + k))
            if k % 3 == 0:
                service.delete_intent(ALICE, name)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(service.store.all_intents()) == 8 * 16
    assert_maps_hold_the_store(service, fake)


# Single creates that queue up while another is in flight, as (who, intent, idempotency key).
GROUP = [
    (ALICE, intent("g1", 2001), None),
    (ALICE, intent("g2", 2001, action={"type": "drop"}), None),  # collides with g1, which came first
    (ALICE, intent("g3", match={"interface": "no-such-if0"}), None),  # does not compile
    (ALICE, intent("g1", 2004), None),  # g1's id again
    (BOB, intent("g1", 2005), None),  # another tenant's g1
    (ALICE, intent("first", 2006), None),  # the id of the create in flight
    (ALICE, intent("g7", 2007), "key-7"),
    (ALICE, intent("g7", 2007), "key-7"),  # its retry: the first record, not created
    (ALICE, intent("g9", 2009), None),
]
GROUP_ANSWERS = [
    "created", "Conflict", "InvalidInput", "Conflict", "created", "Conflict", "created", "earlier", "created"
]


def answer(create: Callable[[], Any]) -> tuple:
    """What a caller learns from a create: its record and whether it was new, or its error."""
    try:
        result = create()
    except ServiceError as exc:
        return (type(exc).__name__, exc.field, exc.detail)
    return ("created" if result.created else "earlier", result.record.model_dump())


def hold_the_first_upsert(fake: RecordingDpp, monkeypatch, refuse_the_next: bool = False):
    """(in_flight, release): the first rule upsert waits, inside its transaction, for `release`;
    `refuse_the_next`: the upsert after it then fails once."""
    in_flight, release = threading.Event(), threading.Event()
    upsert = fake.rules_upsert

    def held(keys, rules):
        if in_flight.is_set():
            return upsert(keys, rules)
        in_flight.set()
        release.wait()
        upsert(keys, rules)
        if refuse_the_next:
            fake.fail("rules_upsert")

    monkeypatch.setattr(fake, "rules_upsert", held)
    return in_flight, release


@pytest.mark.parametrize("refused_once", [False, True], ids=["the group's map write taken", "refused once"])
def test_given_creates_queued_behind_one_in_flight_then_each_gets_the_answer_it_would_get_alone(
    tmp_path, service, fake, monkeypatch, refused_once
):
    in_flight, release = hold_the_first_upsert(fake, monkeypatch, refuse_the_next=refused_once)
    fake.calls.clear()
    first = service.submit_create(ALICE, intent("first", 2000))
    in_flight.wait()
    queued = [service.submit_create(who, body, idempotency_key=key) for who, body, key in GROUP]
    release.set()

    answers = [answer(future.result) for future in [first, *queued]]

    alone = fake_service(tmp_path / "alone", few_policers_fake(), Clock())
    expected = [answer(lambda: alone.create_intent(ALICE, intent("first", 2000)))]
    for who, body, key in GROUP:
        expected.append(answer(lambda: alone.create_intent(who, body, idempotency_key=key)))
    assert answers == expected
    assert [kind for kind, *_ in answers[1:]] == GROUP_ANSWERS
    if not refused_once:  # the queued creates were one transaction: one map write
        assert fake.write_names().count("rules_upsert") == 2
    assert stored(service) == stored(alone)
    assert_maps_hold_the_store(service, fake)
    alone.close()


def test_an_interface_is_attached_remembered_and_detached(tmp_path, fake, clock):
    service = fake_service(tmp_path, fake, clock)
    attached = service.attach(ADMIN, "lo", "generic")
    assert attached["ifindex"] == 1 and list(fake.links) == [1]
    service.close()

    again = fake_service(tmp_path, fake, clock)  # the link survived the restart: not attached twice
    assert [call for call in fake.calls if call[0] == "attach"] == [("attach", 1, XdpMode.GENERIC)]
    assert again.health().checks["interface lo"] == "ok"
    again.detach(ADMIN, "lo")
    assert fake.links == {} and again.store.list_attachments() == []
    with pytest.raises(NotFound):
        again.detach(ADMIN, "lo")
    with pytest.raises(NotFound, match="no-such-if0"):
        again.attach(ADMIN, "no-such-if0", "native")
    again.close()


@pytest.mark.parametrize(
    ("code", "mode"), [(errno.EOPNOTSUPP, "native"), (errno.EINVAL, "offload")], ids=["EOPNOTSUPP", "EINVAL"]
)
def test_given_a_mode_the_driver_does_not_run_then_attach_is_invalid_input_naming_mode(
    service, fake, monkeypatch, code, mode
):
    # It used to be a 503, as if the data plane were broken: the caller can ask for another mode.
    def refuse(ifindex, mode):
        raise DataplaneError(code, "dpp_attach")

    monkeypatch.setattr(fake, "attach", refuse)
    with pytest.raises(InvalidInput) as refused:
        service.attach(ADMIN, "lo", mode)

    assert refused.value.field == "mode"
    assert f"the driver does not run XDP in {mode} mode: try mode generic" in refused.value.detail
    assert service.store.list_attachments() == []
