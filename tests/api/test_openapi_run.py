"""The schemathesis runs' filter of "negative data accepted" (tests/api/openapi_run.py): dropped only
where the query, as sent, conforms to the document; kept for anything else."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation import GenerationMode
from schemathesis.generation.meta import ComponentInfo

from tests.api.openapi_run import negative_only_before_the_wire

SERVICES = "/mec_service_mgmt/v1/services"


def case(*negative: ParameterLocation) -> Any:
    components = {location: ComponentInfo(mode=GenerationMode.NEGATIVE) for location in negative}
    return SimpleNamespace(meta=SimpleNamespace(components=components), path=SERVICES, method="GET")


def sent(query: str) -> Any:
    return SimpleNamespace(request=SimpleNamespace(url=f"http://127.0.0.1:1{SERVICES}?{query}"))


def test_a_false_sent_for_an_array_of_strings_is_text_and_not_negative():
    assert negative_only_before_the_wire(case(ParameterLocation.QUERY), sent("ser_instance_id=false"))


@pytest.mark.parametrize("query", [
    "is_local=abc",  # a boolean parameter: judged by the service, not here
    "ser_instance_id=" + "&ser_instance_id=".join(["a"] * 65),  # more than maxItems
    "undeclared=1",
])
def test_what_the_document_refuses_as_sent_stays_negative(query):
    assert not negative_only_before_the_wire(case(ParameterLocation.QUERY), sent(query))


def test_a_case_negative_elsewhere_too_stays_negative():
    both = case(ParameterLocation.QUERY, ParameterLocation.HEADER)
    assert not negative_only_before_the_wire(both, sent("ser_instance_id=false"))
