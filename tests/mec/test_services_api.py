"""MEC 011 service management, timing and transports on the real service (tests/mec/conftest.py),
their answers checked against ETSI's documents (MecServiceMgmtApi.json and MecAppSupportApi.json of
GS MEC 011 v2.1.1, in ../shared/specs beside the repository; skipped with the reason when absent):
the NetApp's own services, an application's services registered by its tenant only and discovered
by every tenant, errors as ProblemDetails naming the field, and service availability notifications
POSTed to a real local receiver (tests/utils/callbacks.py) only where the operator allows."""

from __future__ import annotations

import time

from netapp.mec.services import PLATFORM_SERVICES, api_base_url
from tests.api.problems import MEC_SPEC, assert_problem, invalid_param
from tests.mec.conftest import APP
from tests.utils.callbacks import CallbackReceiver
from tests.utils.mec import etsi_answer_validator, etsi_schema_validator, etsi_document, service_info

SERVICE_SPEC = MEC_SPEC.with_name("MecServiceMgmtApi.json")
MGMT = "/mec_service_mgmt/v1"
SERVICES = f"{MGMT}/applications/{APP}/services"
SUBSCRIPTIONS = f"{MGMT}/applications/{APP}/subscriptions"
OWN = [ser_id for ser_id, *_ in PLATFORM_SERVICES]


def validate(body, operation: str, method: str = "get", status: str = "200", spec=SERVICE_SPEC) -> None:
    etsi_answer_validator(spec, operation, method, status).validate(body)


def test_every_tenant_discovers_the_netapps_own_services_as_etsi_describes_them(mec_site):
    listed = mec_site.client("tenant-b").get(f"{MGMT}/services")
    assert listed.status_code == 200, listed.text
    validate(listed.json(), "/services")
    assert [service["serInstanceId"] for service in listed.json()][:len(OWN)] == OWN
    one = mec_site.client("tenant-b").get(f"{MGMT}/services/{OWN[0]}")
    validate(one.json(), "/services/{serviceId}")
    assert one.json()["transportInfo"]["endpoint"]["uris"][0].endswith("/mec_app_support/v1")
    assert_problem(mec_site.client("tenant-a").delete(f"{SERVICES}/{OWN[0]}"), 403)


def test_a_tenant_registers_changes_and_removes_its_applications_service(mec_site):
    tenant, other = mec_site.client("tenant-a"), mec_site.client("tenant-b")
    created = tenant.post(SERVICES, json=service_info("registered-1"))
    assert created.status_code == 201, created.text
    validate(created.json(), "/applications/{appInstanceId}/services", "post", "201")
    ser_id = created.json()["serInstanceId"]
    assert created.headers["location"] == f"{SERVICES}/{ser_id}"
    assert tenant.get(created.headers["location"]).json() == created.json()

    # Another tenant discovers it but cannot see it through the application nor change it.
    assert other.get(f"{MGMT}/services/{ser_id}").json() == created.json()
    assert_problem(other.get(SERVICES), 404)
    assert_problem(other.put(f"{SERVICES}/{ser_id}", json=service_info("registered-1", state="INACTIVE")), 404)
    assert_problem(other.delete(f"{SERVICES}/{ser_id}"), 404)

    changed = tenant.put(f"{SERVICES}/{ser_id}", json=service_info("registered-1", state="INACTIVE"))
    validate(changed.json(), "/applications/{appInstanceId}/services/{serviceId}", "put")
    listed = tenant.get(SERVICES, params={"ser_name": "registered-1"})
    validate(listed.json(), "/applications/{appInstanceId}/services")
    assert [service["state"] for service in listed.json()] == ["INACTIVE"]
    assert tenant.delete(f"{SERVICES}/{ser_id}").status_code == 204
    assert_problem(tenant.get(f"{MGMT}/services/{ser_id}"), 404)


def test_errors_are_problem_details_naming_the_field(mec_site):
    tenant = mec_site.client("tenant-a")
    assigned = assert_problem(tenant.post(SERVICES, json=service_info(serInstanceId="mine")), 400)
    assert invalid_param(assigned)["name"] == "serInstanceId"
    missing = service_info()
    del missing["serName"]
    assert invalid_param(assert_problem(tenant.post(SERVICES, json=missing), 400))["name"] == "serName"
    both = assert_problem(tenant.get(f"{MGMT}/services", params={"ser_name": "a", "ser_category_id": "b"}), 400)
    assert invalid_param(both)["name"] == "ser_category_id"
    private = {"subscriptionType": "SerAvailabilityNotificationSubscription",
               "callbackReference": "http://10.1.2.3/notify", "_links": {"self": {"href": "x"}}}
    refused = assert_problem(tenant.post(SUBSCRIPTIONS, json=private), 400)
    assert invalid_param(refused)["name"] == "callbackReference" and "private" in refused["detail"]


def test_transports_and_timing_answer_as_etsi_says(mec_site):
    reader = mec_site.client("tenant-b")
    transports = reader.get(f"{MGMT}/transports")
    validate(transports.json(), "/transports")
    assert transports.json()[0]["endpoint"]["uris"] == [api_base_url(mec_site.service.settings)]
    before = time.time()
    now = reader.get("/mec_app_support/v1/timing/current_time")
    validate(now.json(), "/timing/current_time", spec=MEC_SPEC)
    assert abs(now.json()["seconds"] + now.json()["nanoSeconds"] / 1e9 - before) < 60
    caps = reader.get("/mec_app_support/v1/timing/timing_caps")
    validate(caps.json(), "/timing/timing_caps", spec=MEC_SPEC)
    assert caps.json()["timeStamp"]["seconds"] >= int(before)


def test_a_subscriber_is_notified_when_a_service_appears_changes_and_goes(mec_site):
    tenant, other = mec_site.client("tenant-a"), mec_site.client("tenant-b")
    notification = etsi_document(SERVICE_SPEC)["components"]["schemas"]["ServiceAvailabilityNotification"]
    with CallbackReceiver() as receiver:
        subscribed = tenant.post(SUBSCRIPTIONS, json={
            "subscriptionType": "SerAvailabilityNotificationSubscription",
            "callbackReference": receiver.url,
            "_links": {"self": {"href": "ignored"}},
            "filteringCriteria": {"serNames": ["watched"]},
        })
        assert subscribed.status_code == 201, subscribed.text
        validate(subscribed.json(), "/applications/{appInstanceId}/subscriptions", "post", "201")
        link = subscribed.json()["_links"]["self"]["href"]
        subscription_id = link.rsplit("/", 1)[1]
        assert subscribed.headers["location"] == link
        listed = tenant.get(SUBSCRIPTIONS).json()
        validate(listed, "/applications/{appInstanceId}/subscriptions")
        assert link in [entry["href"] for entry in listed["_links"]["subscriptions"]]
        assert_problem(other.get(f"{SUBSCRIPTIONS}/{subscription_id}"), 404)

        tenant.post(SERVICES, json=service_info("not-watched"))
        ser_id = tenant.post(SERVICES, json=service_info("watched")).json()["serInstanceId"]
        tenant.put(f"{SERVICES}/{ser_id}", json=service_info("watched", state="INACTIVE"))
        tenant.delete(f"{SERVICES}/{ser_id}")

        received = receiver.wait_for(3, subscription=subscription_id)
        bodies = [request.json() for request in received]
        for body in bodies:
            etsi_schema_validator(SERVICE_SPEC, notification).validate(body)
            assert body["_links"]["subscription"]["href"] == link
        assert [(ref["serInstanceId"], ref["changeType"], ref["state"]) for body in bodies
                for ref in body["serviceReferences"]] == [
            (ser_id, "ADDED", "ACTIVE"), (ser_id, "STATE_CHANGED", "INACTIVE"), (ser_id, "REMOVED", "INACTIVE")]

        assert tenant.delete(f"{SUBSCRIPTIONS}/{subscription_id}").status_code == 204
        assert_problem(tenant.get(f"{SUBSCRIPTIONS}/{subscription_id}"), 404)
