"""What both property-based runs of the OpenAPI document share: the document as schemathesis reads
it, with an admin's token, and the checks a schema-valid request may rightly fail."""

from __future__ import annotations

import urllib.parse
from typing import Any

import jsonschema
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    allow_header_conformance,
    positive_data_acceptance,
    unsupported_method,
)
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import AcceptedNegativeData
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation import GenerationMode
from schemathesis.schemas import BaseSchema

from netapp.api.openapi import committed_document
from tests.api.conftest import token_of

# What uvicorn answers, as text/plain, to a request its HTTP parser cannot read (a header line
# without a colon, a malformed Transfer-Encoding): the app never sees it, so the document cannot
# describe the answer; its status is all the API owns.
UNPARSED_REQUEST = b"Invalid HTTP request received."


def admin_schema() -> BaseSchema:
    """The document of this source tree, every call with the admin's token.

    Built when a test module is collected, not through schemathesis.pytest.from_fixture: that path
    relies on a pytest attribute (Node._nodeid) that pytest 9.2 removed. The token goes through the
    document's security scheme, not a header forced onto every call: schemathesis then knows which
    requests it meant to send without one."""
    schema = schemathesis.openapi.from_dict(
        committed_document(),
        config=SchemathesisConfig.from_dict({"auth": {"openapi": {"bearer": {"bearer": token_of("admin")}}}}),
    )
    schema.hook(filter_failure)
    return schema


def filter_failure(context: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure but those of a 400 that uvicorn sent for a request it could not parse, and
    "negative data accepted" where the data was negative only before it became a query string."""
    if response.status_code == 400 and response.content == UNPARSED_REQUEST:
        return False
    return not (isinstance(failure, AcceptedNegativeData) and negative_only_before_the_wire(case, response))


def negative_only_before_the_wire(case: Any, response: Any) -> bool:
    """True when only the query was generated to break the schema and what was sent conforms: a value
    such as `false` for an array of strings is sent as the text "false", which is a string (a known
    false positive of schemathesis' negative_data_rejection for query parameters). Only parameters
    that take text are judged; a negative boolean or integer still counts as negative."""
    negative = {location for location, info in case.meta.components.items() if info.mode == GenerationMode.NEGATIVE}
    if negative != {ParameterLocation.QUERY}:
        return False
    sent = urllib.parse.parse_qs(urllib.parse.urlsplit(response.request.url).query, keep_blank_values=True)
    declared = {item["name"]: item["schema"] for item in _parameters(case) if item.get("in") == "query"}
    return all(name in declared and _text_conforms(declared[name], values) for name, values in sent.items())


def _parameters(case: Any) -> list[dict[str, Any]]:
    return committed_document()["paths"][case.path][case.method.lower()].get("parameters", [])


def _text_conforms(schema: dict[str, Any], values: list[str]) -> bool:
    """Whether the query's texts `values` are valid for a parameter that takes text (one string or
    an array of strings); False for any other kind of parameter."""
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") == "array" and branch.get("items", {}).get("type") == "string":
            if jsonschema.Draft202012Validator(branch).is_valid(values):
                return True
        elif branch.get("type") == "string" and len(values) == 1:
            if jsonschema.Draft202012Validator(branch).is_valid(values[0]):
                return True
    return False


def examples(count: int) -> settings:
    """Hypothesis settings of a run: `count` examples per operation, no deadline. The server and its
    service are shared by the examples on purpose: later examples meet the objects earlier ones
    made."""
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
        ],
    )


def excluded_checks(path: str) -> list:
    # Schema-valid requests may still be refused, rightly, for rules JSON Schema cannot say: fields
    # that need each other (vni needs overlay), the id in the path and in the body, the legacy
    # message's combinations. Their 400s are checked for shape like any other answer.
    excluded = [positive_data_acceptance]
    if path in ("/api/v1/intents/legacy", "/api/v1/intents/batch"):
        # An intent may be named "legacy" or "batch": GET, PUT and DELETE of /api/v1/intents/{intent_id} answer
        # at this path too, and the Allow header of a 405 says so, unlike the document's path item.
        excluded += [unsupported_method, allow_header_conformance]
    return excluded
