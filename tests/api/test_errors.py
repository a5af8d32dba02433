"""Every failure is an RFC 7807 problem naming what is wrong: malformed JSON, wrong types, values out
of range, unknown fields, bad media types, unknown routes and methods, and bugs (without leaking)."""

from __future__ import annotations

import pytest

from netapp.service.contract import ServiceError
from tests.api.problems import assert_problem, mec_problem_details_schema
from tests.utils.intents import changed, native_intent, paper_message

INTENTS = "/api/v1/intents"


def invalid_params(problem: dict) -> dict[str, dict]:
    return {param["name"]: param for param in problem["invalid-params"]}


def test_the_mec_problem_details_schema_is_found_or_the_check_is_skipped_with_a_reason():
    if mec_problem_details_schema() is None:
        pytest.skip(
            "../shared/specs is not beside the repository: problems are checked against RFC 7807 only"
        )
    assert set(mec_problem_details_schema()["properties"]) == {
        "type",
        "title",
        "status",
        "detail",
        "instance",
    }


def test_given_malformed_json_when_posted_then_400_says_where(tenant_a, service):
    response = tenant_a.post(INTENTS, content=b'{"id": "x",', headers={"Content-Type": "application/json"})

    problem = assert_problem(response, 400)
    [param] = problem["invalid-params"]
    assert param["name"] == "body" and param["reason"].startswith("malformed JSON")
    assert "at character 11" in param["reason"]
    assert service.calls == []


def test_given_no_body_when_posting_then_400_says_a_body_is_required(tenant_a):
    problem = assert_problem(tenant_a.post(INTENTS), 400)

    assert invalid_params(problem)["body"]["reason"] == "a JSON body is required"


@pytest.mark.parametrize(
    "change, field, reason, allowed",
    [
        (
            lambda i: i["action"].update(cpu="1"),
            "action.cpu",
            "Input should be a valid integer",
            "an integer",
        ),
        (lambda i: i.update(priority=True), "priority", "Input should be a valid integer", "an integer"),
        (lambda i: i["action"].update(cpu=128), "action.cpu", "less than or equal to 127", "<= 127"),
        (
            lambda i: i["match"].update(dst_port=70000),
            "match.dst_port",
            "less than or equal to 65535",
            "<= 65535",
        ),
        (lambda i: i.update(alternative=-1), "alternative", "greater than or equal to 0", ">= 0"),
        (lambda i: i["match"].update(overlay="vxlan", vni=1 << 24), "match.vni", "above 2^24-1", None),
        (
            lambda i: i["match"].update(overlay="ipip"),
            "match.overlay",
            "Input should be",
            "'vxlan', 'geneve' or 'gre'",
        ),
        (lambda i: i["action"].update(type="mirror"), "action.type", "unknown type 'mirror'", "'pass'"),
        (lambda i: i.update(id="no spaces"), "id", "should match pattern", "a string matching"),
        (lambda i: i["match"].update(colour="red"), "match.colour", "unknown field", None),
        (lambda i: i.update(owner="me"), "owner", "unknown field", None),
    ],
    ids=[
        "string-cpu",
        "bool-priority",
        "cpu-range",
        "port-range",
        "negative-group",
        "vni-range",
        "overlay-enum",
        "action-tag",
        "id-pattern",
        "unknown-match-field",
        "unknown-field",
    ],
)
def test_given_a_bad_native_intent_when_posted_then_400_names_the_field_the_reason_and_what_is_allowed(
    tenant_a, service, change, field, reason, allowed
):
    problem = assert_problem(tenant_a.post(INTENTS, json=changed(native_intent(), change)), 400)

    param = invalid_params(problem)[field]
    assert reason in param["reason"]
    if allowed is not None:
        assert allowed in param["allowed"]
    assert f"{field}: " in problem["detail"]
    assert service.calls == []


@pytest.mark.parametrize(
    "change, field, reason",
    [
        (
            lambda m: m["Resources"][0].update(encapsulationID1="01000000"),
            "Resources[0].encapsulationID1",
            "above 2^24-1",
        ),
        (
            lambda m: m["Resources"][0].update(encapsulationID1="445"),
            "Resources[0].encapsulationID1",
            "8 hexadecimal digits",
        ),
        (lambda m: m["Action"].update(rx_queue="128"), "Action.rx_queue", "less than or equal to 127"),
        (lambda m: m["Action"].update(actionName="MIRROR"), "Action.actionName", "Input should be"),
        (lambda m: m["Resources"][2].update(color="red"), "Resources[2].color", "unknown field"),
    ],
    ids=["vni-range", "hex-length", "cpu-range", "action-name", "unknown-field"],
)
def test_given_a_bad_legacy_message_when_posted_then_400_names_the_legacy_field(
    tenant_a, change, field, reason
):
    for path in (INTENTS, f"{INTENTS}/legacy"):
        problem = assert_problem(tenant_a.post(path, json=changed(paper_message(), change)), 400)

        assert reason in invalid_params(problem)[field]["reason"]


@pytest.mark.parametrize(
    "path, field, allowed",
    [
        (f"{INTENTS}/has%20space", "intent_id", "a string matching"),
        ("/api/v1/alternatives/64", "group_id", "<= 63"),
        ("/api/v1/alternatives/x", "group_id", "an integer"),
        ("/api/v1/slices/" + "s" * 49, "slice_id", "at most 48 characters"),
    ],
)
def test_given_an_out_of_range_id_in_the_path_when_read_or_deleted_then_400_names_the_parameter(
    admin, service, path, field, allowed
):
    method = "get" if "intents" in path or "slices" in path else "delete"
    problem = assert_problem(getattr(admin, method)(path), 400)

    assert allowed in invalid_params(problem)[field]["allowed"]
    assert service.calls == []


@pytest.mark.parametrize(
    "params, field",
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"offset": -1}, "offset"),
        ({"action": "mirror"}, "action"),
        ({"source": "fax"}, "source"),
        ({"dry_run": "perhaps"}, None),
    ],
)
def test_given_bad_query_parameters_when_listing_then_400_names_them(tenant_a, params, field):
    method, path = ("post", INTENTS) if "dry_run" in params else ("get", INTENTS)
    kwargs = {"json": native_intent()} if method == "post" else {}
    problem = assert_problem(getattr(tenant_a, method)(path, params=params, **kwargs), 400)

    assert (field or "dry_run") in invalid_params(problem)


def test_given_a_too_long_idempotency_key_then_400_names_the_header(tenant_a):
    response = tenant_a.post(INTENTS, json=native_intent(), headers={"Idempotency-Key": "k" * 256})

    assert "Idempotency-Key" in invalid_params(assert_problem(response, 400))


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_given_a_body_that_is_not_json_when_posted_then_415(tenant_a, service, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    response = tenant_a.post(INTENTS, content=b'{"id": "x"}', headers=headers)
    if content_type is None:
        # httpx sends no Content-Type for raw content; check it really went without one.
        assert "content-type" not in response.request.headers

    problem = assert_problem(response, 415)
    assert "application/json" in problem["detail"]
    assert service.calls == []


def test_given_a_json_suffix_media_type_when_posted_then_it_is_accepted(tenant_a):
    import json

    response = tenant_a.post(
        INTENTS, content=json.dumps(native_intent()), headers={"Content-Type": "application/merge-patch+json"}
    )

    assert response.status_code == 201


def test_given_an_unknown_path_then_404_problem(tenant_a):
    assert_problem(tenant_a.get("/api/v1/nothing-here"), 404)


def test_given_a_method_a_path_does_not_have_then_405_lists_every_allowed_method(tenant_a):
    response = tenant_a.patch(f"{INTENTS}/video", json={})

    problem = assert_problem(response, 405)
    assert response.headers["allow"] == "DELETE, GET, PUT"
    assert "PATCH is not allowed" in problem["detail"]


def test_given_a_bug_in_the_service_then_500_without_internals(tenant_a, service, caplog):
    service.fail_next(RuntimeError("secret /var/lib/dpp-netapp/netapp.db: disk I/O error"))

    problem = assert_problem(tenant_a.get(INTENTS), 500)

    assert "secret" not in str(problem) and "/var/lib" not in str(problem)
    assert problem["title"] == "Internal error"


def test_given_a_plain_service_error_then_500_without_its_detail(tenant_a, service):
    service.fail_next(ServiceError("sqlite3.OperationalError at store.py:42"))

    problem = assert_problem(tenant_a.get(INTENTS), 500)

    assert "sqlite3" not in str(problem)


def test_given_an_unknown_query_parameter_then_400_lists_the_known_ones(tenant_a, service):
    problem = assert_problem(tenant_a.get(INTENTS, params={"actoin": "drop"}), 400)

    assert problem["invalid-params"] == [
        {
            "name": "actoin",
            "reason": "unknown query parameter",
            "allowed": "one of: action, limit, offset, slice, source, tenant",
        }
    ]
    assert service.calls == []


def test_given_a_query_parameter_of_another_operation_then_400(tenant_a):
    problem = assert_problem(tenant_a.get(INTENTS, params={"dry_run": "true"}), 400)

    assert problem["invalid-params"][0]["name"] == "dry_run"


@pytest.mark.parametrize(
    "path, body",
    [
        (
            "/api/v1/slices/s1",
            {"id": "s1", "snssai": {"sst": 1}, "priority_level": 1, "members": {}, "alternative": False},
        ),
        ("/api/v1/slices/s1", {"id": "s1", "snssai": {"sst": "1"}, "priority_level": 1, "members": {}}),
        ("/api/v1/alternatives/0", {"id": 0, "members": [{"mac": "02:00:00:00:00:01", "ip6": False}]}),
        ("/api/v1/alternatives/0", {"id": 0, "members": [{"mac": "02:00:00:00:00:01", "ip4": 167772161}]}),
        ("/api/v1/dataplane/cpus/0", {"cpu": 0, "overloaded": 0}),
    ],
    ids=[
        "slice-alternative-bool",
        "slice-sst-string",
        "member-ip6-bool",
        "member-ip4-int",
        "cpu-overloaded-int",
    ],
)
def test_given_a_wrong_json_type_in_a_site_body_then_400(admin, path, body):
    assert_problem(admin.put(path, json=body), 400)
