"""Broken copies of the descriptors are rejected, each with a message naming the problem.

Each case says which check must catch it: ``nbi`` (pyangbind load as osm_nbi does), ``cross``
(the NBI's reference checks) or ``strict`` (yangson SOL006), and a fragment of the message."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable

import pytest

from tests.utils.yang import REPO_ROOT, DescriptorError, nsd_cross_check, vnfd_cross_check


def _day12(vnfd: dict) -> dict:
    return vnfd["df"][0]["lcm-operations-configuration"]["operate-vnf-op-config"]["day1-2"][0]


def _vnir(vnfd: dict, cpd: str) -> dict:
    (vdu,) = vnfd["vdu"]
    return next(c for c in vdu["int-cpd"] if c["id"] == cpd)["virtual-network-interface-requirement"][0]


def _rename(d: dict, old: str, new: str) -> None:
    d[new] = d.pop(old)


VNFD_CASES: dict[str, tuple[Callable[[dict], None], str, str]] = {
    "misspelled key": (lambda v: _rename(v["vdu"][0], "int-cpd", "int-cdp"), "nbi", "/vdu[0]/int-cdp"),
    "misspelled nested key": (
        lambda v: _rename(_day12(v)["config-primitive"][0], "parameter", "paramter"),
        "nbi",
        "/config-primitive[0]/paramter",
    ),
    "misspelled key (strict)": (lambda v: _rename(v, "product-name", "productname"), "strict", "productname"),
    "wrong enum: interface type": (
        lambda v: _vnir(v, "n6")["virtual-interface"].update(type="SRIOV"),
        "nbi",
        "type must be of a type compatible with enumeration (allowed: PARAVIRT, OM-MGMT, PCI-PASSTHROUGH, SR-IOV",
    ),
    "wrong enum: interface type (strict)": (
        lambda v: _vnir(v, "n6")["virtual-interface"].update(type="SRIOV"),
        "strict",
        (
            'int-cpd[id="n6"]/virtual-network-interface-requirement[name="n6"]/interface:virtual-interface/type}'
            " invalid-type"
        ),
    ),
    "wrong enum: cpu pinning": (
        lambda v: v["virtual-compute-desc"][0]["virtual-cpu"]["pinning"].update(policy="pinned"),
        "nbi",
        "policy must be of a type compatible with enumeration (allowed: static, dynamic)",
    ),
    "wrong enum: parameter data-type": (
        lambda v: _day12(v)["config-primitive"][0]["parameter"][0].update({"data-type": "JSON"}),
        "nbi",
        "data_type must be of a type compatible with common:parameter-data-type (allowed: STRING, INTEGER, BOOLEAN)",
    ),
    "dangling reference: ext-cpd to int-cpd": (
        lambda v: v["ext-cpd"][1]["int-cpd"].update(cpd="n9"),
        "cross",
        "vnfd/ext-cpd[id=vnf-n3-ext]/int-cpd/cpd: 'n9' is not an int-cpd of vdu 'dpp-netapp'",
    ),
    "dangling reference: vdu to compute": (
        lambda v: v["vdu"][0].update({"virtual-compute-desc": "big"}),
        "cross",
        "vnfd/vdu[id=dpp-netapp]/virtual-compute-desc: 'big' is not a virtual-compute-desc id",
    ),
    "dangling reference: execution environment (strict)": (
        lambda v: _day12(v)["config-primitive"][0].update({"execution-environment-ref": "ee"}),
        "strict",
        'config-primitive[name="add-intent"]/execution-environment-ref} instance-required',
    ),
    "dangling reference: execution environment": (
        lambda v: _day12(v)["config-primitive"][0].update({"execution-environment-ref": "ee"}),
        "cross",
        "config-primitive[name=add-intent]/execution-environment-ref: 'ee' is not an execution-environment-list id",
    ),
    "dangling reference: scaling criteria metric": (
        lambda v: v["df"][0]["scaling-aspect"][0]["scaling-policy"][0]["scaling-criteria"][0].update(
            {"vnf-monitoring-param-ref": "cpu-loda"}
        ),
        "cross",
        "vnf-monitoring-param-ref: 'cpu-loda' is not a monitoring-parameter id",
    ),
    "dangling reference: mgmt-cp": (
        lambda v: v.update({"mgmt-cp": "mgmt"}),
        "cross",
        "vnfd/mgmt-cp: 'mgmt' is not an ext-cpd id",
    ),
    "missing cloud-init file": (
        lambda v: v["vdu"][0].update({"cloud-init-file": "cloud-config.txt"}),
        "cross",
        "cloud-init-file: cloud_init/cloud-config.txt is not in the package",
    ),
    "duplicated id": (
        lambda v: v["ext-cpd"].append(copy.deepcopy(v["ext-cpd"][0])),
        "cross",
        "vnfd/ext-cpd[id=vnf-mgmt-ext]: duplicated id",
    ),
    "missing mandatory field: provider": (
        lambda v: v.pop("provider"),
        "strict",
        "{/etsi-nfv-vnfd:vnfd} missing-data: expected 'provider'",
    ),
    "missing mandatory field: image version": (
        lambda v: v["sw-image-desc"][0].pop("version"),
        "strict",
        "sw-image-desc[id=\"ubuntu-24.04\"]} missing-data: expected 'version'",
    ),
    "missing mandatory list: vnfm-info": (lambda v: v.pop("vnfm-info"), "strict", "vnfm-info"),
    "must violated: fewer max than min instances": (
        lambda v: v["df"][0]["vdu-profile"][0].update({"max-number-of-instances": 0}),
        "strict",
        "max-number-of-instances} must-violation",
    ),
}


def _vnfd_error(kind: str, vnfd: dict, nbi, strict) -> str:
    if kind == "cross":
        return "\n".join(vnfd_cross_check(vnfd, REPO_ROOT / "vnfd", [REPO_ROOT / "charms"]))
    validator = {
        "nbi": lambda: nbi.load_vnfd(vnfd),
        "strict": lambda: strict.validate({"etsi-nfv-vnfd:vnfd": vnfd}),
    }[kind]
    with pytest.raises(DescriptorError) as info:
        validator()
    return str(info.value)


@pytest.mark.parametrize("case", VNFD_CASES)
def test_broken_vnfd_is_rejected_naming_the_problem(case, descriptors, request):
    break_it, kind, expected = VNFD_CASES[case]
    nbi = request.getfixturevalue("nbi") if kind == "nbi" else None
    strict = request.getfixturevalue("strict") if kind == "strict" else None
    vnfd = copy.deepcopy(descriptors.vnfd)
    break_it(vnfd)
    message = _vnfd_error(kind, vnfd, nbi, strict)
    assert expected in message, message


NSD_CASES: dict[str, tuple[Callable[[dict], None], str, str]] = {
    "misspelled key": (
        lambda n: _rename(n, "virtual-link-desc", "virtual-link-descs"),
        "nbi",
        "/virtual-link-descs",
    ),
    "wrong type: mgmt-network": (
        lambda n: n["virtual-link-desc"][0].update({"mgmt-network": "yes"}),
        "nbi",
        "mgmt_network must be of a type compatible with boolean",
    ),
    "dangling reference: vnf ext-cpd": (
        lambda n: n["df"][0]["vnf-profile"][0]["virtual-link-connectivity"][1]["constituent-cpd-id"][
            0
        ].update({"constituent-cpd-id": "vnf-n3"}),
        "cross",
        "constituent-cpd-id 'vnf-n3' is not an ext-cpd of 'dpp-netapp_vnfd'",
    ),
    "dangling reference: vnfd-id": (
        lambda n: n["df"][0]["vnf-profile"][0].update({"vnfd-id": "dpp_vnfd"}),
        "cross",
        "vnf-profile[id=dpp-netapp]/vnfd-id: 'dpp_vnfd' is not in the nsd's vnfd-id",
    ),
    "dangling reference: instantiation level": (
        lambda n: n["df"][0]["vnf-profile"][0].update({"instantiation-level": "triple"}),
        "cross",
        "instantiation-level: 'triple' is not an instantiation-level of that df",
    ),
    "dangling reference: virtual link profile (strict)": (
        lambda n: n["df"][0]["vnf-profile"][0]["virtual-link-connectivity"][0].update(
            {"virtual-link-profile-id": "oam"}
        ),
        "strict",
        "virtual-link-profile-id} instance-required",
    ),
    "missing mandatory field: flavour-id": (
        lambda n: n["df"][0]["vnf-profile"][0].pop("flavour-id"),
        "strict",
        "vnf-profile[id=\"dpp-netapp\"]} missing-data: expected 'flavour-id'",
    ),
}


@pytest.mark.parametrize("case", NSD_CASES)
def test_broken_nsd_is_rejected_naming_the_problem(case, descriptors, request):
    break_it, kind, expected = NSD_CASES[case]
    nsd = copy.deepcopy(descriptors.nsd)
    break_it(nsd)
    if kind == "cross":
        message = "\n".join(nsd_cross_check(nsd, {descriptors.vnfd["id"]: descriptors.vnfd}))
    else:
        validator = request.getfixturevalue(kind)
        with pytest.raises(DescriptorError) as info:
            if kind == "nbi":
                validator.load_nsd(nsd)
            else:
                validator.validate({"etsi-nfv-nsd:nsd": {"vnfd": [descriptors.vnfd], "nsd": [nsd]}})
        message = str(info.value)
    assert expected in message, message


def test_unbroken_copies_pass_every_check(descriptors, nbi, strict):
    """Guards the cases above: they fail because of their one change, nothing else."""
    vnfd, nsd = copy.deepcopy(descriptors.vnfd), copy.deepcopy(descriptors.nsd)
    nbi.load_vnfd(vnfd)
    nbi.load_nsd(nsd)
    strict.validate({"etsi-nfv-vnfd:vnfd": vnfd})
    assert [
        e
        for e in vnfd_cross_check(vnfd, REPO_ROOT / "vnfd", [REPO_ROOT / "charms"])
        if not re.search(r"/juju/charm:", e)
    ] == []
    assert nsd_cross_check(nsd, {vnfd["id"]: vnfd}) == []
