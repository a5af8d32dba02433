"""/api/v1/mec/applications over the real service (tests/mec/conftest.py): administrators declare and
remove application instances, a tenant lists its own, and a declaration is all or nothing."""

from __future__ import annotations

import pytest

from tests.api.problems import assert_problem, invalid_param
from tests.mec.conftest import APP, TENANT
from tests.utils.maps import map_rules
from tests.utils.mec import traffic_rule

pytestmark = pytest.mark.slow

APPLICATIONS = "/api/v1/mec/applications"


def test_a_declared_application_is_listed_to_its_tenant_only(mec_site):
    own, other = mec_site.client("tenant-a").get(APPLICATIONS), mec_site.client("tenant-b").get(APPLICATIONS)

    assert [app["appInstanceId"] for app in own.json()] == [APP]
    assert own.json()[0]["tenant"] == TENANT
    assert other.status_code == 200 and other.json() == []
    assert_problem(mec_site.client("tenant-b").get(f"{APPLICATIONS}/{APP}"), 404)


def test_declaring_is_for_administrators_and_an_id_is_declared_once(mec_site):
    body = {"appInstanceId": APP, "tenant": TENANT}

    assert_problem(mec_site.client("tenant-a").post(APPLICATIONS, json=body), 403)
    assert_problem(mec_site.client("admin").post(APPLICATIONS, json=body), 409)


def test_a_declaration_with_a_rule_the_data_plane_cannot_do_installs_nothing(mec_site):
    admin = mec_site.client("admin")
    body = {"appInstanceId": "app-2", "tenant": TENANT, "trafficRules": [
        traffic_rule("ok", trafficFilter=[{"protocol": ["udp"], "dstPort": ["7000"]}]),
        traffic_rule("gtp", trafficFilter=[{"srcTunnelPort": ["2152"]}]),
    ]}
    intents_before = admin.get("/api/v1/intents", params={"tenant": TENANT}).json()["total"]

    problem = assert_problem(admin.post(APPLICATIONS, json=body), 400)

    assert invalid_param(problem)["name"] == "trafficRules[1].trafficFilter[0].srcTunnelPort"
    assert admin.get("/api/v1/intents", params={"tenant": TENANT}).json()["total"] == intents_before
    assert_problem(admin.get(f"{APPLICATIONS}/app-2"), 404)


def test_removing_an_application_takes_its_rules_out_of_the_maps(mec_site):
    admin = mec_site.client("admin")
    body = {"appInstanceId": "app-3", "tenant": TENANT,
            "trafficRules": [traffic_rule("r", trafficFilter=[{"protocol": ["udp"], "dstPort": ["7001"]}])]}
    created = admin.post(APPLICATIONS, json=body)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == f"{APPLICATIONS}/app-3"
    instance = mec_site.service.settings.instance
    held, entries = mec_intents(admin), len(map_rules(instance))

    assert admin.delete(f"{APPLICATIONS}/app-3").status_code == 204

    assert (mec_intents(admin), len(map_rules(instance))) == (held - 1, entries - 1)


def mec_intents(admin) -> int:
    return admin.get("/api/v1/intents", params={"tenant": TENANT, "source": "mec011"}).json()["total"]
