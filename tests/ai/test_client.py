"""The AI module's REST client against the real API over a fake service (tests/api)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from netapp.ai.client import ApiError, NetAppClient
from netapp.intents.models import Intent
from netapp.steering.models import CpuSpec
from tests.ai.fakes import ADMIN_TOKEN, READER_TOKEN, add, steer


@pytest.fixture
def client(api_server, service) -> Iterator[NetAppClient]:
    api = NetAppClient(api_server.url, ADMIN_TOKEN)
    yield api
    api.close()


def test_the_priority_steer_intents_of_every_tenant_are_listed_and_nothing_else(client, service):
    add(service, "operator", steer("prio-0", 0, 1, label="priority GTP-U service 0"))
    add(service, "tenant-a", steer("prio-a", 1, 2))
    add(service, "operator", steer("bulk", 0, 3, traffic_class="best-effort"))
    add(service, "operator", steer("member", 0, 4), source="slice", slice_id="embb")
    add(service, "operator", {"id": "drop", "match": {"teid": 5}, "action": {"type": "drop"}})
    found = sorted((record.tenant, record.id, record.cpu) for record in client.steer_intents())
    assert found == [("operator", "prio-0", 0), ("tenant-a", "prio-a", 1)]


def test_more_intents_than_a_page_are_all_listed(client, service):
    for n in range(1001):
        add(service, "operator", steer(f"prio-{n:04d}", n % 2, n))
    assert len(client.steer_intents()) == 1001


def test_moving_an_intent_replaces_only_its_cpu_in_its_owners_name(client, service):
    add(service, "tenant-a", steer("prio-a", 0, 2, priority=300, alternative=0, label="keep me"))
    (record,) = client.steer_intents()
    client.move_intent(record, 1)
    moved = service.intents[("tenant-a", "prio-a")]
    assert moved.intent.action.cpu == 1 and moved.revision == 2
    before = Intent.model_validate(record.intent)
    assert moved.intent.model_dump(exclude={"action"}) == before.model_dump(exclude={"action"})


def test_marking_a_cpu_keeps_its_capacity_and_queue(client, service):
    service.cpus[1] = CpuSpec(cpu=1, capacity_pps=1000, queue_size=512)
    client.set_overloaded(1, True)
    assert service.cpus[1] == CpuSpec(cpu=1, capacity_pps=1000, queue_size=512, overloaded=True)
    client.set_overloaded(1, False)
    assert service.cpus[1].overloaded is False and service.cpus[1].capacity_pps == 1000


def test_a_cpu_outside_the_set_is_an_error_that_names_it(client, service):
    with pytest.raises(ApiError, match="CPU 7 is not in the NetApp's CPU set"):
        client.set_overloaded(7, True)


def test_a_refusal_is_one_line_with_the_status_and_the_reason(api_server, service):
    add(service, "operator", steer("prio-0", 0, 1))
    reader = NetAppClient(api_server.url, READER_TOKEN)
    try:
        (record,) = reader.steer_intents()
        with pytest.raises(ApiError, match=r"PUT /api/v1/intents/prio-0: 403 .*lacks the scope"):
            reader.move_intent(record, 1)
    finally:
        reader.close()


def test_an_unreachable_netapp_is_an_error_that_names_the_address():
    client = NetAppClient("http://127.0.0.1:9", None, timeout_s=1)
    with pytest.raises(ApiError, match="cannot reach the NetApp at http://127.0.0.1:9"):
        client.steer_intents()
