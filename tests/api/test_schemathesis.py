"""Property-based run of the OpenAPI document against the real server (fake service): whatever
schemathesis sends, no 5xx, and every answer conforms to the document. tests/api/test_schemathesis_real.py
runs the same document against the real NetApp service, with many more examples."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from tests.api.openapi_run import admin_schema, excluded_checks

# 25 examples per operation keeps the whole run well under a minute on two cores.
EXAMPLES_PER_OPERATION = 25

schema = admin_schema()


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    # The server and the fake service are shared by the examples of one operation on purpose: later
    # examples meet the objects earlier ones made.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
    ],
)
def test_every_operation_conforms_to_the_document(case, server, service):
    case.call_and_validate(base_url=server.url, excluded_checks=excluded_checks(case.path))
