"""The VNFD and `netapp openstack check` ask for the same things: what the VDU declares (pinning,
huge pages, port security of the data-plane ports, size) is what the preconditions require, mapped
as OSM's RO maps SOL006 onto Nova flavor extra specs."""

from __future__ import annotations

from pathlib import Path

import yaml

from netapp.openstack import preconditions
from netapp.openstack.preparer import Options

REPO = Path(__file__).resolve().parents[2]
VNFD = yaml.safe_load((REPO / "vnfd" / "dpp-netapp_vnfd.yaml").read_text())["vnfd"]
CLOUD_INIT = (REPO / "vnfd" / "cloud_init" / "dpp-netapp-cloud-config.yaml").read_text()
# OSM RO: SOL006 pinning policy and OSM IM thread-policy / mempage-size -> Nova extra specs.
OSM_PINNING = {"static": ("hw:cpu_policy", "dedicated"), "dynamic": ("hw:cpu_policy", "shared")}
OSM_MEMPAGE = {"LARGE": "large", "SMALL": "small", "SIZE_2MB": "2MB", "SIZE_1GB": "1GB", "PREFER_LARGE": "any"}


def compute() -> dict:
    (vdu,) = VNFD["vdu"]
    return next(desc for desc in VNFD["virtual-compute-desc"] if desc["id"] == vdu["virtual-compute-desc"])


def test_the_vdus_pinning_is_the_flavor_extra_specs_check_requires():
    pinning = compute()["virtual-cpu"]["pinning"]

    specs = dict([OSM_PINNING[pinning["policy"]], ("hw:cpu_thread_policy", pinning["thread-policy"].lower())])

    assert specs == dict(preconditions.PINNING_SPECS)
    assert not preconditions.pinning_unmet(specs)


def test_the_vdus_huge_pages_are_what_check_requires_and_prepare_sets():
    mempage = OSM_MEMPAGE[compute()["virtual-memory"]["mempage-size"]]

    assert mempage == preconditions.HUGE_PAGES_VALUE
    assert preconditions.huge_pages_met({preconditions.HUGE_PAGES_SPEC: mempage})
    assert preconditions.Requirements().huge_pages  # required by default, as the VNFD asks


def test_the_flavor_prepare_creates_has_the_vdus_size():
    desc = compute()
    (storage,) = VNFD["virtual-storage-desc"]

    assert desc["virtual-cpu"]["num-virtual-cpu"] == preconditions.FLAVOR_VCPUS
    assert desc["virtual-memory"]["size"] * 1024 == preconditions.FLAVOR_RAM_MB
    assert storage["size-of-storage"] == preconditions.FLAVOR_DISK_GB


def test_data_plane_ports_have_port_security_off_as_check_requires_and_management_keeps_it():
    (vdu,) = VNFD["vdu"]
    cpds = {cpd["id"]: cpd for cpd in vdu["int-cpd"]}
    mgmt = next(ext["int-cpd"]["cpd"] for ext in VNFD["ext-cpd"] if ext["id"] == VNFD["mgmt-cp"])

    assert cpds[mgmt].get("port-security-enabled", True) is True
    for cpd_id, cpd in cpds.items():
        if cpd_id == mgmt:
            continue
        assert cpd["port-security-enabled"] is False, cpd_id
        assert cpd["port-security-disable-strategy"] == Options().port_security, cpd_id
        port = preconditions.PortState(cpd_id, cpd_id, "net", 1500, "normal", port_security=cpd["port-security-enabled"])
        target = preconditions.Target("f", dict(preconditions.PINNING_SPECS), 8, "i", {}, (port,))
        (finding,) = [f for f in preconditions.evaluate(target).findings if f.check == "port-security"]
        assert finding.status is preconditions.Status.OK, cpd_id


def test_virtio_data_ports_are_the_ones_check_judges_for_multiqueue_and_mtu_and_cloud_init_caps_their_mtu():
    (vdu,) = VNFD["vdu"]
    types = {
        cpd["id"]: cpd["virtual-network-interface-requirement"][0]["virtual-interface"]["type"] for cpd in vdu["int-cpd"]
    }

    assert types["alt"] == "VIRTIO"  # Neutron vnic_type normal: multiqueue and MTU are checked
    assert {"PCI-PASSTHROUGH", "SR-IOV"} == {types["n3"], types["n6"]}  # the NIC's driver: not virtio_net
    assert f"mtu={preconditions.MAX_VIRTIO_XDP_MTU}" in CLOUD_INIT
    assert "ethtool -K \"$dev\" lro off rx-gro-hw off" in CLOUD_INIT
