"""Property-based run of the OpenAPI document against the real server (fake service): whatever
schemathesis sends, no 5xx, and every answer conforms to the document. tests/api/test_schemathesis_real.py
runs the same document against the real NetApp service, with many more examples."""

from __future__ import annotations

from tests.api.openapi_run import admin_schema, examples, excluded_checks

# 25 examples per operation keeps the whole run well under a minute on two cores.
EXAMPLES_PER_OPERATION = 25

# The MEC routes (MEC 011 with its service management, MEC 015 BWM) need the NetApp's service (a rule
# is intents in its transactions): the fake answers them 503. test_schemathesis_real.py runs them,
# and tests/mec runs ETSI's own documents.
schema = admin_schema().exclude(path_regex="^/(api/v1/mec|mec_app_support|mec_service_mgmt|bwm)/")


@schema.parametrize()
@examples(EXAMPLES_PER_OPERATION)
def test_every_operation_conforms_to_the_document(case, server, service):
    case.call_and_validate(base_url=server.url, excluded_checks=excluded_checks(case.path))
