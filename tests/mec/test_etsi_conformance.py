"""MEC 011 traffic rules checked against ETSI's own document (MecAppSupportApi.json of GS MEC 011
v2.1.1, in ../shared/specs beside the repository; skipped with the reason when it is not there), not
against our exported one: the answers validate against ETSI's schemas (jsonschema), and schemathesis,
with ETSI's document as the schema, runs the traffic_rules operations against the real server (see
tests/mec/conftest.py) as the application's tenant: no 5xx, every answer of a status, media type
and body ETSI's document allows."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema
import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis.checks import positive_data_acceptance

from netapp.core.netns import entered
from netapp.routing.neighbours import device_mac
from tests.api.conftest import token_of
from tests.api.openapi_run import examples
from tests.api.problems import MEC_SPEC, assert_problem, invalid_param
from tests.mec.conftest import APP, RULE_IDS, VETH, declared_rules
from tests.utils.maps import assert_maps_hold_the_store
from tests.utils.mec import etsi_examples, etsi_timeout, traffic_rule

pytestmark = pytest.mark.slow

# Per operation (three: the rules' GET, a rule's GET and PUT); about 20 s in all on an idle machine.
EXAMPLES_PER_OPERATION = etsi_examples(100)
BASE = "/mec_app_support/v1"
RULES = f"{BASE}/applications/{APP}/traffic_rules"


@lru_cache(maxsize=1)
def etsi_document() -> dict[str, Any]:
    if not MEC_SPEC.exists():
        pytest.skip(f"ETSI's MEC 011 document is not beside the repository ({MEC_SPEC}): nothing to check against")
    return json.loads(MEC_SPEC.read_text())


def etsi_validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator of `schema` whose $refs resolve in ETSI's document (OpenAPI 3.1: JSON Schema 2020-12)."""
    return jsonschema.Draft202012Validator({**schema, "components": etsi_document()["components"]})


def operation_schema(path: str, method: str) -> dict[str, Any]:
    """The schema ETSI's document gives the 200 answer of an operation."""
    operation = etsi_document()["paths"][path][method]
    return operation["responses"]["200"]["content"]["application/json"]["schema"]


def test_the_answers_validate_against_etsis_schemas(mec_site):
    tenant = mec_site.client("tenant-a")
    put = tenant.put(f"{RULES}/r2", json=traffic_rule("r2", trafficFilter=[{"protocol": ["tcp"], "dstPort": ["443"]}],
                                                       priority=7))
    listed, one = tenant.get(RULES), tenant.get(f"{RULES}/r2")

    for response in (put, listed, one):
        assert response.status_code == 200, response.text
    etsi_validator(operation_schema("/applications/{appInstanceId}/traffic_rules", "get")).validate(listed.json())
    rule_schema = operation_schema("/applications/{appInstanceId}/traffic_rules/{trafficRuleId}", "get")
    for body in (put.json(), one.json()):
        etsi_validator(rule_schema).validate(body)
    assert [rule["trafficRuleId"] for rule in listed.json()] == list(RULE_IDS)
    assert one.json()["trafficFilter"] == [{"protocol": ["tcp"], "dstPort": ["443"]}]
    assert "dstInterface" not in one.json()  # absent, not null: ETSI's types have no nulls


def test_a_duplicate_rule_is_answered_in_etsis_shape_and_put_back_is_the_same_rule(mec_site):
    """DUPLICATE_*'s two destinations, written as a list (MEC 011's text), answered as v2.1.1's
    document types dstInterface (one object, the first) with both in dstInterfaces."""
    with entered(mec_site.service._state.settings.netns):
        node_mac = device_mac(mec_site.service._state.index.interfaces[VETH])
    copies = [{"interfaceType": "MAC", "srcMacAddress": mac} for mac in (node_mac, mec_site.peer_mac)]
    tenant = mec_site.client("tenant-a")
    rule_schema = etsi_validator(operation_schema("/applications/{appInstanceId}/traffic_rules/{trafficRuleId}", "get"))
    try:
        put = tenant.put(f"{RULES}/r2", json=traffic_rule("r2", action="DUPLICATE_ENCAPSULATED", dstInterface=copies))
        assert put.status_code == 200, put.text
        for body in (put.json(), tenant.get(f"{RULES}/r2").json()):
            rule_schema.validate(body)
            assert (body["dstInterface"], body["dstInterfaces"]) == (copies[0], copies)
        again = tenant.put(f"{RULES}/r2", json=put.json())
        assert (again.status_code, again.json()) == (200, put.json())
        etsi_validator(operation_schema("/applications/{appInstanceId}/traffic_rules", "get")).validate(
            tenant.get(RULES).json())
    finally:
        assert tenant.put(f"{RULES}/r2", json=declared_rules()[1]).status_code == 200


def test_a_refused_rule_is_a_problem_details_naming_the_field(mec_site):
    tenant = mec_site.client("tenant-a")
    duplicate = {"interfaceType": "MAC", "srcMacAddress": mec_site.peer_mac}
    response = tenant.put(f"{RULES}/r2", json=traffic_rule("r2", action="DUPLICATE_DECAPSULATED", dstInterface=duplicate))

    problem = assert_problem(response, 400)  # also validates against ETSI's ProblemDetails
    assert invalid_param(problem)["name"] == "dstInterface"
    assert "two values shall be provided" in problem["detail"]


def test_another_tenant_gets_404s_and_its_put_changes_nothing(mec_site):
    before = mec_site.client("tenant-a").get(f"{RULES}/r1").json()
    other = mec_site.client("tenant-b")

    assert_problem(other.get(RULES), 404)
    assert_problem(other.put(f"{RULES}/r1", json=traffic_rule("r1", action="PASSTHROUGH")), 404)
    assert mec_site.client("tenant-a").get(f"{RULES}/r1").json() == before


# --- schemathesis, with ETSI's document as the schema ---------------------------------------------


def _etsi_schema() -> Any:
    if not MEC_SPEC.exists():
        return None
    schema = schemathesis.openapi.from_dict(json.loads(MEC_SPEC.read_text()))
    return schema.include(path_regex="traffic_rules")


etsi_schema = _etsi_schema()


# Stands for the MAC of the data plane's PEER interface in generated rules; the test puts the real one in.
PEER_MAC = "PEER-MAC"


@st.composite
def aimed_rules(draw: st.DrawFn) -> dict[str, Any]:
    """A rule the data plane can install (or that collides with the other rule), over a few values."""
    rule = {
        "filterType": draw(st.sampled_from(("PACKET", "FLOW"))),
        "priority": draw(st.integers(0, 3)),
        "trafficFilter": draw(st.sampled_from(([{"protocol": ["udp"], "dstPort": ["5000"]}],
                                               [{"dstAddress": ["192.0.2.0/24"]}], [{"protocol": ["tcp"]}]))),
        "action": draw(st.sampled_from(("DROP", "PASSTHROUGH", "FORWARD_DECAPSULATED"))),
        "state": draw(st.sampled_from(("ACTIVE", "INACTIVE"))),
    }
    if rule["action"] == "FORWARD_DECAPSULATED":
        rule["dstInterface"] = {"interfaceType": "MAC", "srcMacAddress": PEER_MAC}
    return rule


def _aim(case: Any, rule_id: str, rule: dict[str, Any]) -> Any:
    """`case` about the application's rule `rule_id`; a PUT's body that rule."""
    case.path_parameters = {**case.path_parameters, "appInstanceId": APP}
    if "trafficRuleId" in case.path_parameters:
        case.path_parameters["trafficRuleId"] = rule_id
    if case.method.upper() == "PUT":
        case.body = {**rule, "trafficRuleId": rule_id}
    return case


if etsi_schema is not None:

    @etsi_schema.hook
    def flatmap_case(context: Any, case: Any) -> st.SearchStrategy:
        """The generated case, or one aimed at the application and its rules (random ids only meet
        404s, random rules mostly 400s); positive cases only: a negative one must stay invalid."""
        if case.meta is None or not case.meta.generation.mode.is_positive:
            return st.just(case)
        aimed = st.tuples(st.sampled_from(RULE_IDS), aimed_rules()).map(lambda drawn: _aim(case, *drawn))
        return st.one_of(st.just(case), aimed)

    @etsi_schema.parametrize()
    @examples(EXAMPLES_PER_OPERATION)
    @pytest.mark.timeout(etsi_timeout(EXAMPLES_PER_OPERATION))
    def test_schemathesis_with_etsis_document_finds_no_5xx_and_only_conformant_answers(case, mec_site):
        destination = case.body.get("dstInterface") if isinstance(case.body, dict) else None
        if isinstance(destination, dict) and destination.get("srcMacAddress") == PEER_MAC:
            case.body = {**case.body, "dstInterface": {**destination, "srcMacAddress": mec_site.peer_mac}}
        # A rule valid by ETSI's schema may still be one the data plane cannot do: its 400 is the
        # point (tests/mec/test_compiler.py), so acceptance of every valid body is not a check here.
        case.call_and_validate(
            base_url=mec_site.url + BASE,
            headers={"Authorization": f"Bearer {token_of('tenant-a')}"},
            excluded_checks=[positive_data_acceptance],
        )

else:

    def test_schemathesis_with_etsis_document_finds_no_5xx_and_only_conformant_answers():
        pytest.skip(f"ETSI's MEC 011 document is not beside the repository ({MEC_SPEC}): nothing to run")


def test_after_the_examples_the_kernels_maps_hold_the_store(mec_site):
    assert_maps_hold_the_store(mec_site.service, mec_site.service.settings.instance,
                               mec_site.service._state.index.interfaces)
