"""A MEC 010-2 AppD read for onboarding (netapp.mec.appd): its rules and services in MEC 011's
types, its placeholders given values, and what cannot be one of the application's refused naming
the AppD's member. The AppDs used here are first checked against ETSI's MEC 010-2 document (skipped
when ../shared/specs is not beside the repository), so that what is read is what ETSI writes."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from netapp.mec.appd import AppD, filled, onboarded
from netapp.mec.compiler import rule_intents
from netapp.service.contract import InvalidInput
from tests.descriptors.test_mec_appd import APPD as SHIPPED, _closed, _errors
from tests.utils.yang import SPECS_DIR

APP_PKG_MGMT = SPECS_DIR / "mec010-2-v2.1.1-etsi-forge" / "MEC010-2_AppPkgMgmt.json"
VALUES = {"mgmt-address": "192.0.2.7", "api-port": "8080"}


def appd_document(**fields: Any) -> dict[str, Any]:
    """A small AppD whose one rule drops UDP to the application's address, parts replaced."""
    body: dict[str, Any] = {
        "appDId": "cache-appd", "appName": "cache", "appProvider": "example", "appSoftVersion": "1.0",
        "appDVersion": "1", "mecVersion": ["2.1.1"], "appDescription": "a cache",
        "virtualComputeDescriptor": "small", "swImageDescriptor": "cache-image",
        "appTrafficRule": [{"trafficRuleId": "drop-5000", "filterType": "PACKET", "priority": 3, "action": "DROP",
                            "trafficFilter": [{"dstAddress": ["198.51.100.10"], "protocol": ["UDP"],
                                               "dstPort": ["5000"]}]}],
    }
    body.update(fields)
    return body


@pytest.fixture(scope="module")
def etsi_validator():
    jsonschema = pytest.importorskip("jsonschema")
    if not APP_PKG_MGMT.exists():
        pytest.skip(f"ETSI's MEC 010-2 document is not beside the repository ({APP_PKG_MGMT})")
    spec = json.loads(APP_PKG_MGMT.read_text())
    return jsonschema.Draft4Validator({"components": _closed(spec["components"]), "$ref": "#/components/schemas/AppD"})


def etsi_valid(validator, document: dict[str, Any]) -> AppD:
    assert _errors(validator, document) == []
    return AppD.model_validate(document)


def test_the_shipped_appd_makes_rules_on_the_netapps_own_address_only(etsi_validator):
    document = json.loads(SHIPPED.read_text())
    appd = AppD.model_validate(filled(etsi_valid(etsi_validator, document).model_dump(exclude_none=True), VALUES))

    made = onboarded(appd, "dpp-netapp")

    intents = [intent for rule in made.trafficRules for intent in rule_intents("dpp-netapp", rule, {})]
    assert intents, "the AppD has traffic rules"
    mine = {"192.0.2.7/32"}
    assert all({str(intent.match.src), str(intent.match.dst)} & mine for intent in intents)
    assert {intent.action.type for intent in intents} == {"pass"}
    assert [rule.ipAddress for rule in made.dnsRules] == ["192.0.2.7"]
    assert [service.state for service in made.services] == ["INACTIVE"] * len(document["appServiceProduced"])


def test_a_placeholder_without_a_value_is_refused_naming_its_member():
    document = json.loads(SHIPPED.read_text())

    with pytest.raises(InvalidInput) as refused:
        filled(document, {"api-port": "8080"})

    assert refused.value.field == "appTrafficRule[0].trafficFilter[0].dstAddress[0]"
    assert "<mgmt-address>" in refused.value.detail


def test_etsi_spellings_become_mec_011s(etsi_validator):
    rule = {"trafficRuleId": "copy", "filterType": "PACKET", "priority": 1, "action": "FORWARD_AS_IS",
            "trafficFilter": [{"srcAddress": ["198.51.100.0/24"], "tag": ["t1"]}],
            "dstInterface": [{"interfaceType": "TUNNEL", "dstMACAddress": "02:00:00:00:00:01", "tunnelInfo": {
                "tunnelType": "GTP-U", "tunnelDstAddress": "192.0.2.1", "tunnelSrcAddress": "192.0.2.2"}}]}
    appd = etsi_valid(etsi_validator, appd_document(appTrafficRule=[rule]))

    [made] = onboarded(appd, "cache").trafficRules

    assert made.action == "FORWARD_ENCAPSULATED" and made.state == "ACTIVE"
    assert made.trafficFilter[0].token == ["t1"]
    assert made.dstInterface.dstMacAddress == "02:00:00:00:00:01"
    assert made.dstInterface.tunnelInfo.tunnelType == "GTP_U"


def test_a_gre_tunnels_specific_data_is_kept_as_its_key(etsi_validator):
    rule = {"trafficRuleId": "gre", "filterType": "PACKET", "priority": 1, "action": "FORWARD_AS_IS",
            "trafficFilter": [{"srcAddress": ["198.51.100.0/24"]}],
            "dstInterface": [{"interfaceType": "TUNNEL", "tunnelInfo": {
                "tunnelType": "GRE", "tunnelDstAddress": "192.0.2.1", "tunnelSrcAddress": "192.0.2.2",
                "tunnelSpecificData": "1234"}}]}  # ETSI: Not_specified, a string
    appd = etsi_valid(etsi_validator, appd_document(appTrafficRule=[rule]))

    [made] = onboarded(appd, "cache").trafficRules

    assert (made.dstInterface.tunnelInfo.tunnelType, made.dstInterface.tunnelInfo.tunnelSpecificData) == ("GRE", "1234")
    [intent] = rule_intents("cache", made, {})
    assert intent.action.encapsulate.model_dump(mode="json", exclude_none=True) == {
        "protocol": "gre", "peer": "192.0.2.1", "source": "192.0.2.2", "key": 1234}


def test_a_duplicates_two_interfaces_are_both_kept(etsi_validator):
    rule = {"trafficRuleId": "copy", "filterType": "PACKET", "priority": 1, "action": "DUPLICATE_AS_IS",
            "trafficFilter": [{"dstAddress": ["198.51.100.7"]}],
            "dstInterface": [{"interfaceType": "MAC", "srcMACAddress": "02:00:00:00:00:01"},
                             {"interfaceType": "MAC", "srcMACAddress": "02:00:00:00:00:02"}]}
    appd = etsi_valid(etsi_validator, appd_document(appTrafficRule=[rule]))

    [made] = onboarded(appd, "cache").trafficRules

    assert made.action == "DUPLICATE_ENCAPSULATED"
    assert [one.srcMacAddress for one in made.destinations()] == ["02:00:00:00:00:01", "02:00:00:00:00:02"]


@pytest.mark.parametrize(("rule_change", "field"), [
    ({"trafficFilter": [{"protocol": ["UDP"], "dstPort": ["2152"]}]}, "appTrafficRule[1].trafficFilter[0].dstAddress"),
    ({"trafficRuleId": "drop-5000"}, "appTrafficRule[1].trafficRuleId"),
    ({"action": "PASSTHROUGH", "dstInterface": [{"interfaceType": "MAC"}, {"interfaceType": "MAC"}]},
     "appTrafficRule[1].dstInterface"),
], ids=["every packet of a port", "a repeated id", "two interfaces for one"])
def test_a_rule_that_cannot_be_the_applications_is_refused_naming_it(etsi_validator, rule_change, field):
    second = copy.deepcopy(appd_document()["appTrafficRule"][0]) | {"trafficRuleId": "second"} | rule_change
    document = appd_document(appTrafficRule=appd_document()["appTrafficRule"] + [second])
    appd = etsi_valid(etsi_validator, document)

    with pytest.raises(InvalidInput) as refused:
        onboarded(appd, "cache")

    assert refused.value.field == field


def test_a_dns_rule_whose_address_is_not_of_its_type_is_refused_naming_it(etsi_validator):
    dns = {"dnsRuleId": "name", "domainName": "cache.example", "ipAddressType": "IP_V6", "ipAddress": "192.0.2.9"}
    appd = etsi_valid(etsi_validator, appd_document(appDNSRule=[dns]))

    with pytest.raises(InvalidInput) as refused:
        onboarded(appd, "cache")

    assert refused.value.field == "appDNSRule[0].ipAddress"


def test_a_service_keeps_its_instance_id_for_the_same_application_only(etsi_validator):
    service = {"serName": "cache-api", "version": "2"}
    appd = etsi_valid(etsi_validator, appd_document(appServiceProduced=[service]))

    once, again, other = (onboarded(appd, app).services[0].serInstanceId for app in ("cache", "cache", "cache-2"))

    assert once == again != other
