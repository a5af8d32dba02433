"""MEC 011 service management through the service (netapp.mec.services) over the recording fake
data plane (service management touches no map; the API's part is tests/mec/test_services_api.py):
the NetApp's own services, registration by an application's tenant only, discovery by everyone,
the query filters, and a restart keeping the registered services."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from netapp.mec.models import MecApplicationSpec
from netapp.mec import service_store
from netapp.mec.service_models import SerAvailabilitySubscription, ServiceInfo
from netapp.mec.services import PLATFORM_SERVICES, SER_AVAILABILITY, ServiceQuery, api_base_url
from netapp.service.contract import Forbidden, InvalidInput, NotFound
from tests.utils.fakes import RecordingDpp
from tests.utils.mec import service_info
from tests.utils.service import ADMIN, ALICE, BOB, READER, fake_service

APP = "cache-app-1"
OWN = [ser_id for ser_id, *_ in PLATFORM_SERVICES]


def info(name: str = "video-cache", **fields) -> ServiceInfo:
    return ServiceInfo.model_validate(service_info(name, **fields))


@pytest.fixture
def fake() -> RecordingDpp:
    return RecordingDpp(max_rules=256)


@pytest.fixture
def service(tmp_path, fake):
    started = fake_service(tmp_path, fake, api_host="127.0.0.2", api_port=9443)
    started.mec.create_application(ADMIN, MecApplicationSpec(appInstanceId=APP, tenant="alice"))
    yield started
    started.close()


def test_the_netapps_own_services_point_at_its_api_and_no_application_changes_them(service):
    found = service.mec_services.discover(BOB, ServiceQuery())
    assert [found_one.serInstanceId for found_one in found] == OWN
    base = api_base_url(service.settings)
    assert base == "http://127.0.0.2:9443"
    for own in found:
        assert all(uri.startswith(base + "/") for uri in own.transportInfo.endpoint.uris)
    with pytest.raises(Forbidden) as refused:
        service.mec_services.remove(ALICE, APP, OWN[0])
    assert refused.value.field == "serviceId"
    assert [s.serInstanceId for s in service.mec_services.discover(BOB, ServiceQuery())] == OWN


def test_a_tenant_registers_for_its_application_and_every_tenant_discovers_it(service):
    registered = service.mec_services.register(ALICE, APP, info())
    assert registered.serInstanceId not in OWN
    assert service.mec_services.get(BOB, registered.serInstanceId) == registered  # discovery is not scoped
    assert service.mec_services.app_services(READER, APP, ServiceQuery()) == [registered]
    for call in (lambda: service.mec_services.app_services(BOB, APP, ServiceQuery()),
                 lambda: service.mec_services.register(BOB, APP, info("intruder")),
                 lambda: service.mec_services.update(BOB, APP, registered.serInstanceId, info(state="INACTIVE")),
                 lambda: service.mec_services.remove(BOB, APP, registered.serInstanceId)):
        with pytest.raises(NotFound):
            call()
    assert service.mec_services.app_service(ALICE, APP, registered.serInstanceId) == registered


def test_the_platform_assigns_the_id_and_a_put_keeps_it(service):
    with pytest.raises(InvalidInput) as refused:
        service.mec_services.register(ALICE, APP, info(serInstanceId="mine"))
    assert refused.value.field == "serInstanceId"
    ser_id = service.mec_services.register(ALICE, APP, info()).serInstanceId
    with pytest.raises(InvalidInput) as differs:
        service.mec_services.update(ALICE, APP, ser_id, info(serInstanceId="other"))
    assert differs.value.field == "serInstanceId"
    updated = service.mec_services.update(ALICE, APP, ser_id, info(state="INACTIVE"))
    assert updated.serInstanceId == ser_id and service.mec_services.get(BOB, ser_id).state == "INACTIVE"


def test_the_query_filters_are_etsis_and_one_id_kind_at_a_time(service):
    cache = service.mec_services.register(ALICE, APP, info())
    other = service.mec_services.register(ALICE, APP, info("transcoder", serCategory=None, isLocal=False))
    discover = service.mec_services.discover
    assert discover(BOB, ServiceQuery(ser_name=["video-cache"])) == [cache]
    assert discover(BOB, ServiceQuery(ser_instance_id=[other.serInstanceId])) == [other]
    assert discover(BOB, ServiceQuery(ser_category_id="cache")) == [cache]
    assert other in discover(BOB, ServiceQuery(is_local=False)) and cache not in discover(BOB, ServiceQuery(is_local=False))
    assert {s.serInstanceId for s in discover(BOB, ServiceQuery(scope_of_locality="MEC_HOST"))} >= set(OWN)
    assert discover(BOB, ServiceQuery(consumed_local_only=True)) == [s for s in discover(BOB, ServiceQuery())
                                                                       if s.serInstanceId in OWN]
    with pytest.raises(InvalidInput) as both:
        discover(BOB, ServiceQuery(ser_name=["video-cache"], ser_category_id="cache"))
    assert both.value.field == "ser_category_id"


def test_a_restart_keeps_the_registered_services(tmp_path, fake, service):
    registered = service.mec_services.register(ALICE, APP, info())
    service.close()
    again = fake_service(tmp_path, fake, api_host="127.0.0.2", api_port=9443)
    try:
        assert again.mec_services.app_service(ALICE, APP, registered.serInstanceId) == registered
        assert registered in again.mec_services.discover(BOB, ServiceQuery())
    finally:
        again.close()


def test_removing_an_application_removes_its_services_and_their_subscriptions(service):
    registered = service.mec_services.register(ALICE, APP, info())
    service.mec.create_application(ADMIN, MecApplicationSpec(appInstanceId="other-app", tenant="alice"))
    kept = service.mec_services.register(ALICE, "other-app", info("kept"))
    subscription = SerAvailabilitySubscription.model_validate(
        {"subscriptionType": SER_AVAILABILITY, "callbackReference": "http://127.0.0.1:9/notify"})
    with service.store.transaction():  # as subscribe() stores it, without its callback check
        service_store.insert_subscription(service.store, "s1", APP, "alice", subscription, datetime.now(timezone.utc))

    service.mec.delete_application(ADMIN, APP)

    found = [s.serInstanceId for s in service.mec_services.discover(BOB, ServiceQuery())]
    assert registered.serInstanceId not in found and kept.serInstanceId in found
    with pytest.raises(NotFound):
        service.mec_services.get(BOB, registered.serInstanceId)
    rows = service.store.execute("SELECT count(*) FROM mec_service_subscriptions WHERE app_instance_id = ?", (APP,))
    assert rows.fetchone()[0] == 0
