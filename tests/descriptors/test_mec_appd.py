"""The MEC 010-2 AppD beside the VNFD is valid against the ETSI forge OpenAPI (v2.1.1) and
describes the same application as the VNFD."""

from __future__ import annotations

import copy
import json

import pytest

from tests.utils.yang import REPO_ROOT

APPD = REPO_ROOT / "vnfd" / "dpp-netapp_appd.json"


def _closed(schema: dict) -> dict:
    """Copy of the OpenAPI schemas where objects with declared properties reject other keys
    (the forge file leaves them open, so a misspelt optional key would pass unnoticed)."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node.setdefault("additionalProperties", False)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


@pytest.fixture(scope="module")
def appd_validator(mec_specs):
    jsonschema = pytest.importorskip("jsonschema")
    spec = json.loads((mec_specs / "MEC010-2_AppPkgMgmt.json").read_text())
    assert spec["openapi"].startswith("3.0")
    # OpenAPI 3.0 schema objects are a JSON Schema draft 4 dialect.
    root = {"components": _closed(spec["components"]), "$ref": "#/components/schemas/AppD"}
    return jsonschema.Draft4Validator(root)


@pytest.fixture(scope="module")
def appd() -> dict:
    return json.loads(APPD.read_text())


def _errors(validator, doc) -> list[str]:
    return [f"/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_appd_is_valid_mec010_2(appd_validator, appd):
    assert _errors(appd_validator, appd) == []


def test_appd_describes_the_vnfd(appd, descriptors):
    vnfd = descriptors.vnfd
    assert appd["appDId"] == vnfd["id"]
    assert appd["appProvider"] == vnfd["provider"]
    assert appd["appName"] == vnfd["product-name"]
    assert appd["appSoftVersion"] == vnfd["software-version"]
    assert appd["virtualComputeDescriptor"] in {c["id"] for c in vnfd["virtual-compute-desc"]}
    assert appd["swImageDescriptor"] in {i["id"] for i in vnfd["sw-image-desc"]}
    assert set(appd["virtualStorageDescriptor"]) <= {s["id"] for s in vnfd["virtual-storage-desc"]}
    ext_types = {
        e["id"]: next(c for c in vnfd["vdu"][0]["int-cpd"] if c["id"] == e["int-cpd"]["cpd"])[
            "virtual-network-interface-requirement"
        ][0]["virtual-interface"]["type"]
        for e in vnfd["ext-cpd"]
    }
    assert {
        c["inherited_attributes"]["id"]: c["virtualNetworkInterfaceRequirements"][0]
        for c in appd["appExtCpd"]
    } == ext_types


def test_appd_traffic_rules_act_on_the_netapps_management_address_only(appd):
    # Onboarding installs them above every operator intent (netapp.mec.compiler's priorities): a
    # rule on a port of every address (the N3 encapsulations) would override the site's steering.
    for rule in appd["appTrafficRule"]:
        for flt in rule["trafficFilter"]:
            assert "<mgmt-address>" in flt.get("dstAddress", []) + flt.get("srcAddress", []), rule
    ids = [rule["trafficRuleId"] for rule in appd["appTrafficRule"]]
    assert ids and len(ids) == len(set(ids))


@pytest.mark.parametrize(
    ("break_it", "expected"),
    [
        (lambda a: a.pop("appProvider"), "'appProvider' is a required property"),
        (
            lambda a: a["appTrafficRule"][0].update(action="FORWARD"),
            "/appTrafficRule/0/action: 'FORWARD' is not one of",
        ),
        (
            lambda a: a["appTrafficRule"][0].update(filterTyp="FLOW"),
            "/appTrafficRule/0: Additional properties are not allowed ('filterTyp' was unexpected)",
        ),
        (
            lambda a: a["appLatency"].update(maxLatency="1ms"),
            "/appLatency/maxLatency: '1ms' is not of type 'integer'",
        ),
    ],
    ids=["missing mandatory", "wrong enum", "misspelled key", "wrong type"],
)
def test_broken_appd_is_rejected_naming_the_problem(appd_validator, appd, break_it, expected):
    broken = copy.deepcopy(appd)
    break_it(broken)
    errors = "\n".join(_errors(appd_validator, broken))
    assert expected in errors, errors
