"""Onboarding from a MEC 010-2 AppD over the real service (tests/mec/conftest.py: uvicorn, a pinned
XDP program): PUT /api/v1/mec/applications/{id}/appd and `netapp mec apply-appd`, which calls it.
The AppD's rules are in the kernel's dpp_rules as intents of the application's tenant; applying the
same AppD again changes nothing, a changed one replaces only what an AppD made, and a refused one
changes nothing at all."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from netapp.cli.main import app as cli
from tests.api.conftest import token_of
from tests.api.problems import assert_problem, invalid_param
from tests.descriptors.test_mec_appd import APPD as SHIPPED
from tests.mec.conftest import TENANT
from tests.mec.test_appd import appd_document
from tests.utils.maps import map_rules
from tests.utils.mec import traffic_rule

pytestmark = pytest.mark.slow

APPLICATIONS = "/api/v1/mec/applications"
VALUES = ["mgmt-address=192.0.2.7", "api-port=8080"]


def apply(client, app_id: str, appd: dict[str, Any], **params: Any):
    return client.put(f"{APPLICATIONS}/{app_id}/appd", json=appd, params=params)


def held(mec_site, tenant: str) -> tuple[int, int]:
    """(the tenant's MEC intents, the entries of dpp_rules)."""
    total = mec_site.client("admin").get("/api/v1/intents", params={"tenant": tenant, "source": "mec011"}).json()["total"]
    return total, len(map_rules(mec_site.service.settings.instance))


def rule_ids(mec_site, app_id: str) -> list[str]:
    rules = mec_site.client("admin").get(f"/mec_app_support/v1/applications/{app_id}/traffic_rules")
    assert rules.status_code == 200, rules.text
    return [rule["trafficRuleId"] for rule in rules.json()]


def test_the_shipped_appd_onboards_the_netapp_once(mec_site):
    admin = mec_site.client("admin")
    appd = json.loads(SHIPPED.read_text())
    before = held(mec_site, "operator")

    first = apply(admin, "dpp-netapp", appd, value=VALUES)
    after_first = held(mec_site, "operator")
    again = apply(admin, "dpp-netapp", appd, value=VALUES)

    assert first.status_code == 200, first.text
    assert (first.json()["created"], first.json()["changed"], first.json()["tenant"]) == (True, True, "operator")
    # One FLOW rule: its two directions, two entries in the kernel's table.
    assert after_first == (before[0] + 2, before[1] + 2)
    assert again.json()["changed"] is False and held(mec_site, "operator") == after_first
    assert rule_ids(mec_site, "dpp-netapp") == ["dpp-api"]
    dns = admin.get("/mec_app_support/v1/applications/dpp-netapp/dns_rules").json()
    assert [(rule["domainName"], rule["ipAddress"]) for rule in dns] == [("dpp-netapp.mec.local", "192.0.2.7")]
    [service] = admin.get("/mec_service_mgmt/v1/services", params={"ser_name": "DppIntents"}).json()
    assert service["serInstanceId"] == first.json()["serInstanceIds"][0] and service["state"] == "INACTIVE"


def test_a_changed_appd_replaces_what_an_appd_made_and_keeps_the_apis(mec_site):
    admin = mec_site.client("admin")
    api_rule = traffic_rule("from-api", trafficFilter=[{"dstAddress": ["198.51.100.20"], "protocol": ["TCP"]}])
    declared = admin.post(APPLICATIONS, json={"appInstanceId": "cache", "tenant": TENANT, "trafficRules": [api_rule]})
    assert declared.status_code == 201, declared.text
    assert apply(admin, "cache", appd_document()).status_code == 200
    with_first = held(mec_site, TENANT)
    changed = appd_document(appDVersion="2")
    changed["appTrafficRule"][0] |= {"trafficRuleId": "drop-6000", "trafficFilter": [
        {"dstAddress": ["198.51.100.10"], "protocol": ["UDP"], "dstPort": ["6000"]}]}

    answer = apply(admin, "cache", changed)

    assert answer.status_code == 200, answer.text
    assert answer.json()["changed"] is True and answer.json()["created"] is False
    assert rule_ids(mec_site, "cache") == ["from-api", "drop-6000"]
    assert held(mec_site, TENANT) == with_first  # one PACKET rule out, one in
    assert installed_rules(mec_site, "cache") == {"from-api", "drop-6000"}

    assert admin.delete(f"{APPLICATIONS}/cache").status_code == 204
    assert apply(admin, "cache", changed, tenant=TENANT).json()["created"] is True  # its AppD went with it


def installed_rules(mec_site, app_id: str) -> set[str]:
    """The rules of the application whose intents are stored (their labels name them)."""
    listed = mec_site.client("admin").get("/api/v1/intents", params={"tenant": TENANT, "source": "mec011",
                                                                     "limit": 500}).json()["items"]
    suffix = f" of application {app_id!r}"
    return {record["intent"]["label"].split("'")[1] for record in listed if record["intent"]["label"].endswith(suffix)}


def test_one_bad_rule_applies_nothing_and_is_named(mec_site):
    admin = mec_site.client("admin")
    document = appd_document(appDId="bad")
    document["appTrafficRule"].append(copy.deepcopy(document["appTrafficRule"][0]) | {
        "trafficRuleId": "tunnel", "trafficFilter": [{"dstAddress": ["198.51.100.10"], "srcTunnelPort": ["2152"]}]})
    before = held(mec_site, TENANT)

    problem = assert_problem(apply(admin, "bad-app", document, tenant=TENANT), 400)

    assert invalid_param(problem)["name"] == "appTrafficRule[1].trafficFilter[0].srcTunnelPort"
    assert held(mec_site, TENANT) == before
    assert_problem(admin.get(f"{APPLICATIONS}/bad-app"), 404)


def test_an_appd_outside_the_etsi_document_is_refused_naming_the_member(mec_site):
    document = appd_document()
    document["appTrafficRule"][0]["action"] = "FORWARD"

    problem = assert_problem(apply(mec_site.client("admin"), "odd", document), 400)

    assert invalid_param(problem)["name"] == "appTrafficRule[0].action"
    assert "FORWARD_AS_IS" in invalid_param(problem)["allowed"]


def test_a_tenant_without_grants_gets_no_rules_and_tenants_cannot_onboard(mec_site):
    # tenant-b has no record: it owns no traffic, so the rule on its application's address is refused.
    problem = assert_problem(apply(mec_site.client("admin"), "b-app", appd_document(), tenant="tenant-b"), 400)
    assert invalid_param(problem)["name"].startswith("appTrafficRule[0].trafficFilter")
    assert_problem(mec_site.client("admin").get(f"{APPLICATIONS}/b-app"), 404)

    assert_problem(apply(mec_site.client("tenant-a"), "a-app", appd_document()), 403)


def test_the_cli_applies_an_appd_through_the_api(mec_site, tmp_path: Path):
    file = tmp_path / "appd.json"
    file.write_text(json.dumps(appd_document(appName="cli-cache")))
    options = ["--tenant", TENANT, "--url", mec_site.url, "--token", token_of("admin")]

    first = CliRunner().invoke(cli, ["mec", "apply-appd", str(file), *options])
    again = CliRunner().invoke(cli, ["mec", "apply-appd", str(file), *options])
    unset = CliRunner().invoke(cli, ["mec", "apply-appd", str(SHIPPED), "--app-instance-id", "cli-netapp", *options])

    assert first.exit_code == 0, first.output
    assert "cli-cache (tenant tenant-a): created and onboarded" in first.output
    assert again.exit_code == 0 and "unchanged" in again.output
    assert rule_ids(mec_site, "cli-cache") == ["drop-5000"]
    assert unset.exit_code == 2, unset.output  # the API refused the input (400)
    assert "appTrafficRule[0].trafficFilter[0].dstAddress[0]" in unset.output and "<mgmt-address>" in unset.output
