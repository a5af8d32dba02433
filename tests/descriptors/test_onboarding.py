"""The VNFD and NSD pass OSM's onboarding: pyangbind load (unknown keys are errors) plus the
NBI's cross-checks, and they carry what the issue asks of them."""

from __future__ import annotations

import re

import pytest

from tests.utils.yang import REPO_ROOT, nsd_cross_check, vnfd_cross_check

CHARM_DIR = REPO_ROOT / "charms"

# api/telemetry.md, section "Prometheus names".
PROMETHEUS_METRICS = {
    "dpp_intent_packets_total", "dpp_intent_bytes_total", "dpp_slice_packets_total",
    "dpp_cpu_packets_total", "dpp_cpu_load_ratio", "dpp_cpu_overloaded",
    "dpp_verdict_packets_total", "dpp_reason_packets_total", "dpp_telemetry_points_dropped_total",
}  # fmt: skip

DAY2_PRIMITIVES = {
    "add-intent": {"intent": "STRING"},
    "remove-intent": {"intent-id": "STRING"},
    "list-intents": {},
    "create-slice": {"slice": "STRING"},
    "update-slice": {"slice": "STRING"},
    "delete-slice": {"slice-id": "STRING"},
    "set-alternatives": {"groups": "STRING"},
    "get-stats": {},
    "attach": {"interface": "STRING", "mode": "STRING"},
    "detach": {"interface": "STRING"},
    "subscribe-telemetry": {"callback-uri": "STRING", "measurements": "STRING", "period": "INTEGER"},
    "unsubscribe-telemetry": {"subscription-id": "STRING"},
    "set-cpu": {"cpu": "INTEGER", "capacity-pps": "INTEGER", "queue-size": "INTEGER", "overloaded": "BOOLEAN"},
    "remove-cpu": {"cpu": "INTEGER"},
    "check-openstack": {"server": "STRING", "data-networks": "STRING"},
    "reload-dataplane": {},
    "apply-appd": {"appd": "STRING", "app-instance-id": "STRING"},
}


def _day12(vnfd: dict) -> dict:
    (df,) = vnfd["df"]
    (conf,) = df["lcm-operations-configuration"]["operate-vnf-op-config"]["day1-2"]
    return conf


def test_vnfd_loads_through_osm_pyangbind_bindings(nbi, descriptors):
    nbi.load_vnfd(descriptors.vnfd)


def test_nsd_loads_through_osm_pyangbind_bindings(nbi, descriptors):
    nbi.load_nsd(descriptors.nsd)


def test_vnfd_passes_nbi_cross_checks(descriptors):
    """Unique ids, resolving references, cloud_init/ file present. Charms are looked up at
    charms/<name> in the repository (the package build copies them to <package>/charms/); the
    charm check itself is the next test, so a charm still missing here is not reported twice."""
    errors = vnfd_cross_check(descriptors.vnfd, REPO_ROOT / "vnfd", [CHARM_DIR])
    assert [e for e in errors if "/juju/charm:" not in e] == []


def test_every_juju_execution_environment_has_its_charm_in_the_repo(descriptors):
    charms = {
        ee["juju"]["charm"]
        for df in descriptors.vnfd["df"]
        for conf in df["lcm-operations-configuration"]["operate-vnf-op-config"]["day1-2"]
        for ee in conf.get("execution-environment-list", [])
        if "juju" in ee
    }
    assert charms == {"dpp-netapp"}
    if not (CHARM_DIR / "dpp-netapp").is_dir():
        pytest.skip("charms/dpp-netapp/ is not in the repository yet (written separately)")
    errors = vnfd_cross_check(descriptors.vnfd, REPO_ROOT / "vnfd", [CHARM_DIR])
    assert [e for e in errors if "/juju/charm:" in e] == []
    assert (CHARM_DIR / "dpp-netapp" / "charmcraft.yaml").is_file()


def test_nsd_passes_nbi_cross_checks(descriptors):
    assert nsd_cross_check(descriptors.nsd, {descriptors.vnfd["id"]: descriptors.vnfd}) == []


def test_vnfd_is_complete_as_sol006_asks(descriptors):
    vnfd = descriptors.vnfd
    for key in ("provider", "product-name", "software-version", "version", "vnfm-info"):
        assert vnfd.get(key), key
    (image,) = vnfd["sw-image-desc"]
    for key in (
        "name",
        "version",
        "checksum",
        "container-format",
        "disk-format",
        "min-disk",
        "min-ram",
        "size",
        "image",
    ):
        assert key in image, key
    (vdu,) = vnfd["vdu"]
    for cpd in vdu["int-cpd"]:
        assert cpd["virtual-network-interface-requirement"], cpd["id"]


def test_vdu_has_xdp_capable_interfaces(descriptors):
    (vdu,) = descriptors.vnfd["vdu"]
    types = {
        cpd["id"]: cpd["virtual-network-interface-requirement"][0]["virtual-interface"]["type"]
        for cpd in vdu["int-cpd"]
    }
    assert types == {"mgmt": "PARAVIRT", "n3": "PCI-PASSTHROUGH", "n6": "SR-IOV", "alt": "VIRTIO"}
    ext = {e["int-cpd"]["cpd"] for e in descriptors.vnfd["ext-cpd"]}
    assert ext == set(types)


def test_compute_has_pinned_cpus_and_dedicated_memory(descriptors):
    (compute,) = descriptors.vnfd["virtual-compute-desc"]
    assert compute["virtual-cpu"]["pinning"]["policy"] == "static"
    assert compute["virtual-cpu"]["num-virtual-cpu"] >= 2
    assert compute["virtual-memory"]["mempage-size"] in {"LARGE", "SIZE_2MB", "SIZE_1GB"}
    (image,) = descriptors.vnfd["sw-image-desc"]
    assert compute["virtual-memory"]["size"] >= image["min-ram"]


def test_df_scales_the_netapp_out(descriptors):
    (df,) = descriptors.vnfd["df"]
    (aspect,) = df["scaling-aspect"]
    (delta,) = aspect["aspect-delta-details"]["deltas"]
    assert delta["vdu-delta"] == [{"id": "dpp-netapp", "number-of-instances": 1}]
    (profile,) = df["vdu-profile"]
    assert (
        profile["max-number-of-instances"] == profile["min-number-of-instances"] + aspect["max-scale-level"]
    )
    assert {level["id"] for level in df["instantiation-level"]} >= {df["default-instantiation-level"]}


def _documented(metric: str) -> bool:
    """``<measurement>_<field>[_total]`` with the field in the measurement's section, or named
    literally under "Prometheus names" (api/telemetry.md)."""
    doc = (REPO_ROOT / "api" / "telemetry.md").read_text()
    if metric in doc.split("## Prometheus names", 1)[1]:
        return True
    sections = dict(re.findall(r"^### `(dpp_\w+)`\n(.*?)(?=^#)", doc, re.MULTILINE | re.DOTALL))
    base = metric.removesuffix("_total")
    for measurement, body in sections.items():
        if base.startswith(measurement + "_"):
            return f"`{base[len(measurement) + 1 :]}`" in body
    return False


def test_monitoring_parameters_name_the_prometheus_metrics(descriptors):
    (vdu,) = descriptors.vnfd["vdu"]
    metrics = {p["performance-metric"] for p in vdu["monitoring-parameter"]}
    assert metrics == PROMETHEUS_METRICS
    for metric in metrics:
        assert _documented(metric), f"{metric} is not a metric api/telemetry.md defines"
    (df,) = descriptors.vnfd["df"]
    assert df["exporters-endpoints"]["metric-path"] == "/metrics"


def test_day2_config_primitives_are_the_netapp_actions(descriptors):
    conf = _day12(descriptors.vnfd)
    (ee,) = conf["execution-environment-list"]
    assert ee["juju"] == {"charm": "dpp-netapp", "proxy": False}
    found = {
        prim["name"]: {p["name"]: p["data-type"] for p in prim.get("parameter", [])}
        for prim in conf["config-primitive"]
    }
    assert found == DAY2_PRIMITIVES


def test_initial_config_sets_interfaces_xdp_api_and_influxdb(descriptors):
    conf = _day12(descriptors.vnfd)
    seqs = [p["seq"] for p in conf["initial-config-primitive"]]
    assert seqs == sorted(seqs)
    names = {p["name"] for prim in conf["initial-config-primitive"] for p in prim.get("parameter", [])}
    assert {"interfaces", "xdp-mode", "api-port", "influxdb-url", "influxdb-token"} <= names
    assert {p["name"] for p in conf["terminate-config-primitive"]} == {"detach"}


def test_day1_ends_with_the_mec_onboarding_of_the_appd_the_charm_carries(descriptors):
    """apply-appd once the API answers (after reload-dataplane), with no parameter: OSM's LCM
    (ns.py _map_primitive_params) refuses a primitive whose <placeholder> the instantiation does
    not give, so the AppD is the charm's own, which needs none (tests/charm/test_appd.py runs it)."""
    conf = _day12(descriptors.vnfd)
    names = [p["name"] for p in sorted(conf["initial-config-primitive"], key=lambda p: p["seq"])]
    assert names[-2:] == ["reload-dataplane", "apply-appd"]
    (onboarding,) = [p for p in conf["initial-config-primitive"] if p["name"] == "apply-appd"]
    assert "parameter" not in onboarding, onboarding


def test_no_credentials_in_descriptors(descriptors):
    """Secrets only as OSM placeholders (<name>), no ssh-password like the hackfest VNFD."""
    text = (REPO_ROOT / "vnfd" / "dpp-netapp_vnfd.yaml").read_text()
    assert not re.search(r"password|passwd|ssh-key", text, re.IGNORECASE)
    conf = _day12(descriptors.vnfd)
    for prim in conf["initial-config-primitive"]:
        for param in prim.get("parameter", []):
            if re.search(r"token|key|cert|secret", param["name"]):
                assert re.fullmatch(r"<[\w-]+>", param["value"]), param


def test_nsd_connects_every_vnf_interface_to_its_network(descriptors):
    nsd = descriptors.nsd
    assert {v["id"] for v in nsd["virtual-link-desc"]} == {"mgmtnet", "n3net", "n6net", "altnet"}
    assert [v["id"] for v in nsd["virtual-link-desc"] if v.get("mgmt-network")] == ["mgmtnet"]
    (df,) = nsd["df"]
    (profile,) = df["vnf-profile"]
    links = {
        c["virtual-link-profile-id"]: c["constituent-cpd-id"][0]["constituent-cpd-id"]
        for c in profile["virtual-link-connectivity"]
    }
    assert links == {
        "mgmtnet": "vnf-mgmt-ext",
        "n3net": "vnf-n3-ext",
        "n6net": "vnf-n6-ext",
        "altnet": "vnf-alt-ext",
    }


def test_scaled_out_instances_learn_each_other_as_alternatives(descriptors):
    """Every VM's charm is both ends of the `alternatives` relation on the alt network."""
    conf = _day12(descriptors.vnfd)
    assert conf["id"] == "dpp-netapp"  # VDU level: a charm in every VM, also scaled-out ones
    (rel,) = conf["relation"]
    assert rel["provider"]["vdu-profile-id"] == rel["requirer"]["vdu-profile-id"] == "dpp-netapp"
    (ee,) = conf["execution-environment-list"]
    alt = next(e for e in descriptors.vnfd["ext-cpd"] if e["int-cpd"]["cpd"] == "alt")
    assert ee["external-connection-point-ref"] == alt["id"]
