"""MEC 011 service management and timing checked by schemathesis with ETSI's own documents as the
schema (MecServiceMgmtApi.json; the timing paths of MecAppSupportApi.json; GS MEC 011 v2.1.1, in
../shared/specs beside the repository), not our exported one, against the real server (see
tests/mec/conftest.py) as the application's tenant: no 5xx, every answer of a status, media type and
body ETSI's document allows.

AppServices_POST is left out of the run: ETSI's document gives its body as `oneOf` two bare objects,
which no body satisfies (an object matches both), so nothing can be generated for it; its answers
are checked in tests/mec/test_services_api.py, and the run registers services for the others."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest
import schemathesis
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from tests.api.conftest import token_of
from tests.api.openapi_run import examples
from tests.api.problems import MEC_SPEC
from tests.mec.conftest import APP
from tests.utils.callbacks import CallbackReceiver
from tests.utils.mec import etsi_examples, etsi_timeout, service_info

pytestmark = pytest.mark.slow

# Per operation (eleven of service management, two of timing).
EXAMPLES_PER_OPERATION = etsi_examples(50)
SERVICE_SPEC = MEC_SPEC.with_name("MecServiceMgmtApi.json")
MGMT, APP_SUPPORT = "/mec_service_mgmt/v1", "/mec_app_support/v1"


def _etsi_schema(path, **include: Any) -> Any:
    if not path.exists():
        return None
    schema = schemathesis.openapi.from_dict(json.loads(path.read_text()))
    return schema.include(**include) if include else schema.exclude(operation_id="AppServices_POST")


service_schema = _etsi_schema(SERVICE_SPEC)
timing_schema = _etsi_schema(MEC_SPEC, path_regex="timing")


@pytest.fixture(scope="module")
def receiver():
    with CallbackReceiver() as listening:
        yield listening


@pytest.fixture(scope="module")
def aims(mec_site, receiver) -> dict[str, list[str]]:
    """What the cases are aimed at: a few services and subscriptions of the application."""
    tenant = mec_site.client("tenant-a")
    services = [tenant.post(f"{MGMT}/applications/{APP}/services", json=service_info(f"aimed-{number}"))
                for number in range(3)]
    subscription = tenant.post(f"{MGMT}/applications/{APP}/subscriptions", json={
        "subscriptionType": "SerAvailabilityNotificationSubscription", "callbackReference": receiver.url,
        "_links": {"self": {"href": "ignored"}}})
    assert subscription.status_code == 201, subscription.text
    return {
        "serviceId": [created.json()["serInstanceId"] for created in services] + ["dpp-telemetry"],
        "subscriptionId": [subscription.json()["_links"]["self"]["href"].rsplit("/", 1)[1]],
    }


def _aimed(case: Any, aims: dict[str, list[str]]) -> Any:
    """A positive `case` about the application and, mostly, one of its services or subscriptions
    (random ids only meet 404s), chosen from what was generated (so a run replays); a negative case
    stays as generated: it must stay invalid."""
    if case.meta is None or not case.meta.generation.mode.is_positive:
        return case
    case.path_parameters = {**case.path_parameters, "appInstanceId": APP}
    for name, values in aims.items():
        if name in case.path_parameters:
            choice = zlib.crc32(str(case.path_parameters[name]).encode()) % (len(values) + 1)
            if choice < len(values):  # the last choice keeps the generated id
                case.path_parameters[name] = values[choice]
    return case


def _run(case: Any, base: str, aimed: bool = False) -> None:
    # A body valid by ETSI's schema may still be refused for what JSON Schema cannot say (a
    # serInstanceId that is not the path's, a callback the operator does not allow): its 400 is
    # checked for shape, acceptance is not. An aimed case holds ids of ours, valid by construction,
    # where schemathesis may still take it for the case it generated: it is not asked to be refused.
    excluded = [positive_data_acceptance] + ([negative_data_rejection] if aimed else [])
    case.call_and_validate(base_url=base, headers={"Authorization": f"Bearer {token_of('tenant-a')}"},
                           excluded_checks=excluded)


if service_schema is not None and timing_schema is not None:
    @service_schema.parametrize()
    @examples(EXAMPLES_PER_OPERATION)
    @pytest.mark.timeout(etsi_timeout(EXAMPLES_PER_OPERATION))
    def test_schemathesis_with_etsis_service_mgmt_document(case, mec_site, aims):
        generated = dict(case.path_parameters or {})
        aimed = _aimed(case, aims)
        _run(aimed, mec_site.url + MGMT, aimed=aimed.path_parameters != generated)

    @timing_schema.parametrize()
    @examples(EXAMPLES_PER_OPERATION)
    @pytest.mark.timeout(etsi_timeout(EXAMPLES_PER_OPERATION))
    def test_schemathesis_with_etsis_timing_paths(case, mec_site):
        _run(case, mec_site.url + APP_SUPPORT)

else:

    def test_schemathesis_with_etsis_documents():
        pytest.skip(f"ETSI's MEC 011 documents are not beside the repository ({MEC_SPEC.parent}): nothing to run")
