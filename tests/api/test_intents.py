"""/api/v1/intents over a real server: create (native, legacy), read, list, replace, delete, dry
runs, idempotent retries, conflicts, tenants."""

from __future__ import annotations

import pytest

from netapp.service.contract import DataplaneUnavailable
from tests.api.problems import assert_problem
from tests.utils.intents import native_intent, paper_message

INTENTS = "/api/v1/intents"


def legacy(action_type: str, **action: str) -> dict:
    """The paper's message with another actionType (and action fields)."""
    message = paper_message()
    message["Action"].update(actionType=action_type, **action)
    return message


def created(client, body, **kwargs):
    response = client.post(INTENTS, json=body, **kwargs)
    assert response.status_code == 201, response.text
    return response.json()


# --- create ----------------------------------------------------------------------------------------


def test_given_a_native_intent_when_posted_then_201_with_the_record_and_its_location(tenant_a, service):
    response = tenant_a.post(INTENTS, json=native_intent("video", label="RTP"))

    assert response.status_code == 201
    assert response.headers["location"] == f"{INTENTS}/video"
    record = response.json()
    assert record["intent"]["id"] == "video"
    assert record["intent"]["action"] == {"type": "steer", "cpu": 1}
    assert record["tenant"] == "tenant-a" and record["source"] == "native" and record["revision"] == 1
    assert service.calls == ["create_intent"]


def test_given_the_papers_message_when_posted_to_intents_then_it_is_recognised_as_legacy(tenant_a, service):
    response = tenant_a.post(INTENTS, json=paper_message())

    assert response.status_code == 201
    record = response.json()
    assert record["source"] == "legacy"
    assert record["intent"]["id"] == "legacy-e918d704"
    assert record["intent"]["match"]["vni"] == 0x445 and record["intent"]["match"]["teid"] == 0x8894D0D4
    assert response.headers["location"] == f"{INTENTS}/legacy-e918d704"
    assert service.calls == ["apply_legacy"]


def test_given_legacy_messages_when_posted_to_the_legacy_route_then_insert_update_delete_answer_201_200_204(
    tenant_a, service
):
    assert tenant_a.post(f"{INTENTS}/legacy", json=legacy("INSERT")).status_code == 201

    updated = tenant_a.post(f"{INTENTS}/legacy", json=legacy("UPDATE", rx_queue="0"))
    assert updated.status_code == 200 and updated.json()["intent"]["action"]["cpu"] == 0

    deleted = tenant_a.post(f"{INTENTS}/legacy", json=legacy("DELETE"))
    assert deleted.status_code == 204 and deleted.content == b""
    assert service.intents == {}


def test_given_a_native_intent_when_posted_to_the_legacy_route_then_400_names_the_missing_legacy_fields(
    tenant_a,
):
    response = tenant_a.post(f"{INTENTS}/legacy", json=native_intent())

    problem = assert_problem(response, 400)
    reasons = {param["name"]: param["reason"] for param in problem["invalid-params"]}
    assert reasons["Resources"] == "required field is missing"
    assert reasons["id"] == reasons["match"] == "unknown field"


def test_given_an_idempotency_key_when_a_create_is_retried_then_the_first_record_comes_back_with_200(
    tenant_a, service
):
    headers = {"Idempotency-Key": "req-1"}
    first = tenant_a.post(INTENTS, json=native_intent("video"), headers=headers)
    retry = tenant_a.post(INTENTS, json=native_intent("video"), headers=headers)

    assert first.status_code == 201 and retry.status_code == 200
    assert retry.json() == first.json()
    assert "location" not in retry.headers
    assert len(service.intents) == 1


def test_given_no_idempotency_key_when_a_create_is_repeated_then_409(tenant_a):
    created(tenant_a, native_intent("video"))

    problem = assert_problem(tenant_a.post(INTENTS, json=native_intent("video")), 409)
    assert problem["invalid-params"] == [{"name": "id", "reason": "intent id 'video' is in use"}]


def test_given_an_intent_with_the_same_match_when_created_then_409_names_both(tenant_a):
    created(tenant_a, native_intent("first"))

    problem = assert_problem(tenant_a.post(INTENTS, json=native_intent("second")), 409)
    assert "'second' has the same match as 'first'" in problem["detail"]
    assert problem["conflicts"] == [{"kind": "duplicate", "intent_a": "first", "intent_b": "second"}]


def test_given_the_data_plane_refuses_when_creating_then_503(tenant_a, service):
    service.fail_next(DataplaneUnavailable("dpp_rules: out of memory; rolled back"))

    problem = assert_problem(tenant_a.post(INTENTS, json=native_intent()), 503)
    assert problem["detail"] == "dpp_rules: out of memory; rolled back"


# --- dry runs ----------------------------------------------------------------------------------


def test_given_dry_run_when_posting_then_the_report_comes_back_and_nothing_is_created(tenant_a, service):
    created(tenant_a, native_intent("first"))

    response = tenant_a.post(INTENTS, params={"dry_run": "true"}, json=native_intent("second"))

    assert response.status_code == 200
    report = response.json()
    assert report["applied"] is False
    assert [rule["intent_id"] for rule in report["rules"]] == ["second"]
    assert report["rules"][0]["action"] == "steer" and report["rules"][0]["cpu"] == 1
    assert report["conflicts"][0]["intent_a"] == "first"
    assert set(service.intents) == {("tenant-a", "first")}


def test_given_dry_run_when_posting_a_legacy_insert_then_it_is_compiled_not_applied(tenant_a, service):
    response = tenant_a.post(f"{INTENTS}/legacy", params={"dry_run": True}, json=paper_message())

    assert response.status_code == 200
    assert response.json()["rules"][0]["intent_id"] == "legacy-e918d704"
    assert service.intents == {} and service.calls == ["dry_run"]


def test_given_dry_run_when_posting_a_legacy_delete_then_400_says_there_is_nothing_to_compile(tenant_a):
    problem = assert_problem(tenant_a.post(INTENTS, params={"dry_run": True}, json=legacy("DELETE")), 400)
    assert problem["invalid-params"][0]["name"] == "Action.actionType"


def test_given_dry_run_when_replacing_then_the_report_comes_back_and_the_intent_is_unchanged(
    tenant_a, service
):
    created(tenant_a, native_intent("video"))

    replacement = native_intent("video", action={"type": "drop"})
    response = tenant_a.put(f"{INTENTS}/video", params={"dry_run": True}, json=replacement)

    assert response.status_code == 200 and response.json()["rules"][0]["action"] == "drop"
    assert service.intent("video").action.type == "steer"


# --- read, replace, delete ---------------------------------------------------------------------


def test_given_an_intent_when_read_then_the_record_comes_back(tenant_a):
    record = created(tenant_a, native_intent("video"))
    assert record.pop("warnings") == []  # the create's, not the record's

    response = tenant_a.get(f"{INTENTS}/video")

    assert response.status_code == 200 and response.json() == record


def test_given_an_intent_when_replaced_then_200_with_the_next_revision(tenant_a):
    created(tenant_a, native_intent("video"))

    response = tenant_a.put(f"{INTENTS}/video", json=native_intent("video", priority=300))

    assert response.status_code == 200
    assert response.json()["intent"]["priority"] == 300 and response.json()["revision"] == 2


def test_given_a_body_with_another_id_when_replacing_then_400_names_id(tenant_a):
    created(tenant_a, native_intent("video"))

    problem = assert_problem(tenant_a.put(f"{INTENTS}/video", json=native_intent("audio")), 400)
    assert problem["invalid-params"][0]["name"] == "id"
    assert "differs from the intent id in the path" in problem["detail"]


def test_given_an_intent_when_deleted_then_204_and_then_404(tenant_a, service):
    created(tenant_a, native_intent("video"))

    response = tenant_a.delete(f"{INTENTS}/video")

    assert response.status_code == 204 and response.content == b""
    assert_problem(tenant_a.get(f"{INTENTS}/video"), 404)
    assert_problem(tenant_a.delete(f"{INTENTS}/video"), 404)


# --- tenants -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, body",
    [("get", None), ("put", native_intent("video", priority=1)), ("delete", None)],
)
def test_given_another_tenants_intent_when_touched_then_404_as_if_it_did_not_exist(
    tenant_a, tenant_b, method, body
):
    created(tenant_a, native_intent("video"))

    kwargs = {"json": body} if body is not None else {}
    problem = assert_problem(getattr(tenant_b, method)(f"{INTENTS}/video", **kwargs), 404)
    assert problem["detail"] == "no intent 'video'"


def test_given_two_tenants_when_each_lists_then_each_sees_only_its_own_and_admin_sees_all(
    tenant_a, tenant_b, admin
):
    created(tenant_a, native_intent("a1", match={"dscp": 1}))
    created(tenant_b, native_intent("b1", match={"dscp": 2}))

    def ids(client, **params):
        return [item["intent"]["id"] for item in client.get(INTENTS, params=params).json()["items"]]

    assert ids(tenant_a) == ["a1"]
    assert ids(tenant_b) == ["b1"]
    assert ids(admin) == ["a1", "b1"]
    assert ids(admin, tenant="tenant-b") == ["b1"]


def test_given_a_tenant_when_it_filters_by_another_tenant_then_403(tenant_a):
    problem = assert_problem(tenant_a.get(INTENTS, params={"tenant": "tenant-b"}), 403)
    assert problem["required_scope"] == "admin"
    assert tenant_a.get(INTENTS, params={"tenant": "tenant-a"}).status_code == 200


def test_given_two_tenants_when_both_use_one_id_then_each_has_its_own(tenant_a, tenant_b):
    created(tenant_a, native_intent("video", match={"dscp": 1}))
    created(tenant_b, native_intent("video", match={"dscp": 2}))

    assert tenant_a.get(f"{INTENTS}/video").json()["intent"]["match"]["dscp"] == 1
    assert tenant_b.get(f"{INTENTS}/video").json()["intent"]["match"]["dscp"] == 2


def test_given_an_admin_when_it_names_the_tenant_then_it_reads_replaces_and_deletes_that_tenants_intent(
    tenant_a, admin, service
):
    created(tenant_a, native_intent("video"))
    owner = {"tenant": "tenant-a"}

    assert_problem(admin.get(f"{INTENTS}/video"), 404)  # the admin's own tenant has none
    assert admin.get(f"{INTENTS}/video", params=owner).json()["tenant"] == "tenant-a"
    replaced = admin.put(f"{INTENTS}/video", params=owner, json=native_intent("video", priority=7))
    assert replaced.status_code == 200 and service.intent("video").priority == 7
    assert admin.delete(f"{INTENTS}/video", params=owner).status_code == 204
    assert service.intents == {}


def test_given_a_tenant_when_it_names_another_tenant_for_one_intent_then_403(tenant_a, tenant_b):
    created(tenant_b, native_intent("video"))

    problem = assert_problem(tenant_a.delete(f"{INTENTS}/video", params={"tenant": "tenant-b"}), 403)

    assert problem["required_scope"] == "admin"


# --- lists: filters and pages ------------------------------------------------------------------


def test_given_intents_of_several_kinds_when_filtered_then_only_the_matching_ones_come_back(tenant_a):
    created(tenant_a, native_intent("steer", match={"dscp": 1}))
    created(tenant_a, native_intent("drop", match={"dscp": 2}, action={"type": "drop"}))
    created(tenant_a, paper_message())

    def ids(**params):
        return [item["intent"]["id"] for item in tenant_a.get(INTENTS, params=params).json()["items"]]

    assert ids(action="drop") == ["drop"]
    assert ids(source="legacy") == ["legacy-e918d704"]
    assert ids(source="native", action="steer") == ["steer"]
    assert ids(slice="nope") == []


def test_given_seven_intents_when_paged_by_three_then_totals_and_link_headers_walk_the_pages(tenant_a):
    for number in range(7):
        created(tenant_a, native_intent(f"i{number}", match={"dscp": number}))

    middle = tenant_a.get(INTENTS, params={"offset": 3, "limit": 3, "action": "steer"})

    body = middle.json()
    assert [item["intent"]["id"] for item in body["items"]] == ["i3", "i4", "i5"]
    assert (body["total"], body["offset"], body["limit"]) == (7, 3, 3)
    links = parse_links(middle.headers["link"])
    assert links == {
        "first": f"{INTENTS}?offset=0&limit=3&action=steer",
        "prev": f"{INTENTS}?offset=0&limit=3&action=steer",
        "next": f"{INTENTS}?offset=6&limit=3&action=steer",
        "last": f"{INTENTS}?offset=6&limit=3&action=steer",
    }
    last = tenant_a.get(links["next"]).json()
    assert [item["intent"]["id"] for item in last["items"]] == ["i6"]


def test_given_the_last_page_when_listed_then_there_is_no_next_link(tenant_a):
    created(tenant_a, native_intent("only"))

    links = parse_links(tenant_a.get(INTENTS, params={"limit": 1}).headers["link"])

    assert set(links) == {"first", "last"}


def parse_links(header: str) -> dict[str, str]:
    """RFC 8288 Link header -> rel -> target (canonical query order)."""
    links = {}
    for part in header.split(","):
        target, rel = part.split(";")
        links[rel.strip().removeprefix('rel="').removesuffix('"')] = _canonical(target.strip()[1:-1])
    return links


def _canonical(url: str) -> str:
    from urllib.parse import parse_qsl, urlencode

    path, _, query = url.partition("?")
    order = {"offset": 0, "limit": 1}
    pairs = sorted(parse_qsl(query), key=lambda pair: order.get(pair[0], 2))
    return f"{path}?{urlencode(pairs)}"


# --- batch create ----------------------------------------------------------------------------------

BATCH = f"{INTENTS}/batch"


def batch_of(count: int, first_port: int = 6000) -> dict:
    return {
        "intents": [
            native_intent(f"flow-{n}", match={"protocol": "udp", "dst_port": first_port + n}) for n in range(count)
        ]
    }


def test_given_a_batch_when_posted_then_201_with_every_record_in_order(tenant_a, service):
    response = tenant_a.post(BATCH, json=batch_of(3))

    assert response.status_code == 201, response.text
    items = response.json()["items"]
    assert [item["intent"]["id"] for item in items] == ["flow-0", "flow-1", "flow-2"]
    assert all(item["tenant"] == "tenant-a" and item["source"] == "native" for item in items)
    assert service.calls == ["create_intents"]
    assert len(service.intents) == 3


def test_given_a_batch_whose_third_intent_collides_then_409_names_it_and_nothing_is_created(tenant_a, service):
    created(tenant_a, native_intent("installed", match={"protocol": "udp", "dst_port": 6002}))
    before = dict(service.intents)

    problem = assert_problem(tenant_a.post(BATCH, json=batch_of(4)), 409)

    assert problem["invalid-params"][0]["name"] == "intents[2].match"
    assert problem["detail"].startswith("intents[2]: ")
    assert service.intents == before


def test_given_a_batch_with_an_invalid_intent_then_400_names_its_position(tenant_a, service):
    body = batch_of(3)
    body["intents"][1]["match"]["vni"] = 1 << 24

    problem = assert_problem(tenant_a.post(BATCH, json=body), 400)

    assert [param["name"] for param in problem["invalid-params"]] == ["intents[1].match.vni"]
    assert service.intents == {}


def test_given_a_legacy_message_in_a_batch_then_400_says_legacy_is_not_accepted(tenant_a, service):
    body = batch_of(2)
    body["intents"].append(paper_message())

    problem = assert_problem(tenant_a.post(BATCH, json=body), 400)

    assert problem["invalid-params"][0]["name"] == "intents[2]"
    assert "legacy message" in problem["invalid-params"][0]["reason"]
    assert service.intents == {}


def test_given_a_batch_over_the_limit_or_empty_then_400_names_the_limit(tenant_a, service):
    too_many = assert_problem(tenant_a.post(BATCH, json=batch_of(1001)), 400)
    assert too_many["invalid-params"][0]["name"] == "intents"
    assert too_many["invalid-params"][0]["allowed"] == "at most 1000 items"

    empty = assert_problem(tenant_a.post(BATCH, json={"intents": []}), 400)
    assert empty["invalid-params"][0]["name"] == "intents"
    assert service.intents == {}


def test_given_dry_run_when_posting_a_batch_then_the_report_of_all_comes_back_and_nothing_is_created(
    tenant_a, service
):
    response = tenant_a.post(BATCH, params={"dry_run": "true"}, json=batch_of(2))

    assert response.status_code == 200
    report = response.json()
    assert report["applied"] is False
    assert [rule["intent_id"] for rule in report["rules"]] == ["flow-0", "flow-1"]
    assert service.intents == {} and service.calls == ["dry_run"]


def test_given_an_idempotency_key_when_a_batch_is_retried_then_the_same_records_with_200(tenant_a, service):
    headers = {"Idempotency-Key": "batch-1"}
    first = tenant_a.post(BATCH, json=batch_of(2), headers=headers)
    retry = tenant_a.post(BATCH, json=batch_of(2), headers=headers)
    other = tenant_a.post(BATCH, json=batch_of(2, first_port=7000), headers=headers)

    assert first.status_code == 201 and retry.status_code == 200
    assert retry.json() == first.json()
    assert assert_problem(other, 409)["invalid-params"][0]["name"] == "Idempotency-Key"
    assert len(service.intents) == 2


def test_given_a_token_without_intents_write_when_posting_a_batch_then_403(client_for, service):
    problem = assert_problem(client_for("reader-a").post(BATCH, json=batch_of(1)), 403)
    assert "intents:write" in problem["detail"]
    assert service.intents == {}


def test_given_two_tenants_when_both_batch_the_same_ids_then_each_has_its_own(tenant_a, tenant_b, service):
    assert tenant_a.post(BATCH, json=batch_of(2)).status_code == 201
    assert tenant_b.post(BATCH, json=batch_of(2, first_port=7000)).status_code == 201

    assert [item["intent"]["id"] for item in tenant_b.get(INTENTS).json()["items"]] == ["flow-0", "flow-1"]
    assert {tenant for tenant, _ in service.intents} == {"tenant-a", "tenant-b"}
    assert tenant_b.get(f"{INTENTS}/flow-0").json()["intent"]["match"]["dst_port"] == 7000
