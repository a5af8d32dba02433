"""Translate the SOL006 VNFD (YANG-modelled YAML, what OSM onboards) into a SOL001 VNFD (TOSCA,
what ONAP SDC and other SOL004 consumers onboard).

One service template for the VNFD's first deployment flavour, in SOL001's single-flavour form:

* a VNF-specific node type derived from ``tosca.nodes.nfv.VNF`` whose properties are pinned
  (``valid_values`` and ``default``) to the VNFD's identity, with one requirement per ``ext-cpd``;
  ``substitution_mappings`` maps each to the connection point that realises it;
* node templates: the ``VNF`` (identity, flavour, the charm and AppD as artefacts), one
  ``Vdu.Compute`` per VDU (``virtual_compute`` from its ``virtual-compute-desc``, image, cloud-init
  as ``boot_data``), one ``Vdu.VirtualBlockStorage`` per ``virtual-storage-desc``, one ``VduCp``
  per ``int-cpd``, one ``VnfVirtualLink`` per ``int-virtual-link-desc``, and a ``VnfExtCp`` for an
  ``ext-cpd`` that re-exposes an internal virtual link;
* policies from the flavour: ``VduInitialDelta``, ``InstantiationLevels`` /
  ``VduInstantiationLevels``, ``ScalingAspects`` / ``VduScalingAspectDeltas``.

What SOL001 v2.6.1 cannot say is left out, not approximated: OSM's day-1/2 juju configuration
(the charm travels as an artefact instead), ``mgmt-cp``, monitoring parameters (SOL001 restricts
``performance_metric`` to the IFA 027 metric names) and ``scaling-policy`` (no VNFD-level
auto-scaling policy before SOL001 v3). SOL006 details without a SOL001 property (CPU thread
policy, huge pages, NUMA policy, interface type, XDP mode) go into the ``vdu_*_requirements`` and
``network_interface_requirements`` maps, which SOL001 leaves open for such key/value pairs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from netapp.packaging.errors import PackagingError

TOSCA_VERSION = "tosca_simple_yaml_1_3"
# SOL001's pattern for vnfm_info entries; SOL006's "etsi-osm" does not match it.
VNFM_INFO_PATTERN = re.compile(
    r"(^etsivnfm:v[0-9]?[0-9]\.[0-9]?[0-9]\.[0-9]?[0-9]$)|(^[0-9]+:[a-zA-Z0-9.-]+$)"
)
# Any VNFM implementing the ETSI NFV specifications at this version (the types' version).
GENERIC_VNFM = "etsivnfm:v2.6.1"
VNF_NODE = "VNF"

# SOL006 virtual-interface type -> SOL001 v2.6.1 vnic_type (which has no value for an SR-IOV VF).
VNIC_TYPES = {"PARAVIRT": "normal", "VIRTIO": "virtio", "PCI-PASSTHROUGH": "direct-physical"}


@dataclass(frozen=True)
class Artefacts:
    """Paths, relative to the VNFD's folder in the CSAR, of the files the VNFD names."""

    charms: dict[str, str]
    appd: str
    cloud_init: dict[str, str]  # cloud-init file name -> path


def _gb(value: Any) -> str:
    """A SOL006 size in GB as a TOSCA scalar-unit.size."""
    number = float(value)
    return f"{int(number) if number.is_integer() else number} GB"


def _by_id(items: list[dict[str, Any]], what: str) -> dict[str, dict[str, Any]]:
    return {item["id"]: item for item in items if _require(item, "id", what)}


def _require(item: dict[str, Any], key: str, what: str) -> Any:
    if key not in item:
        raise PackagingError(f"VNFD: {what} {item.get('id', '?')!r} has no '{key}', which SOL001 needs")
    return item[key]


def _ref(table: dict[str, Any], ref: str, what: str, holder: str) -> dict[str, Any]:
    if ref not in table:
        raise PackagingError(f"VNFD: {holder} names {what} {ref!r}, which the VNFD does not define")
    return table[ref]


def node_type_name(vnfd: dict[str, Any]) -> str:
    """The VNF-specific node type: ``<provider>.<product>.<software version>`` (SOL001 names it so)."""

    def part(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "_", str(text)).strip("_")

    return f"{part(vnfd['provider'])}.{part(vnfd['product-name'])}.{part(vnfd['software-version'])}"


def vnfm_info(vnfd: dict[str, Any]) -> list[str]:
    """The SOL006 entries SOL001 accepts, else the generic ETSI VNFM."""
    kept = [entry for entry in vnfd.get("vnfm-info", []) if VNFM_INFO_PATTERN.match(entry)]
    return kept or [GENERIC_VNFM]


def _identity(vnfd: dict[str, Any], df: dict[str, Any]) -> dict[str, Any]:
    """The VNF node's properties, SOL006 leaf -> SOL001 property."""
    props = {
        "descriptor_id": vnfd["id"],
        "descriptor_version": str(_require(vnfd, "version", "vnfd")),
        "provider": _require(vnfd, "provider", "vnfd"),
        "product_name": _require(vnfd, "product-name", "vnfd"),
        "software_version": str(_require(vnfd, "software-version", "vnfd")),
        "vnfm_info": vnfm_info(vnfd),
        "flavour_id": df["id"],
        "flavour_description": df.get("description") or df["id"],
    }
    for sol001, sol006 in (
        ("product_info_name", "product-info-name"),
        ("product_info_description", "product-info-description"),
    ):
        if vnfd.get(sol006):
            props[sol001] = vnfd[sol006]
    return props


def _vnf_node_type(vnfd: dict[str, Any], identity: dict[str, Any]) -> dict[str, Any]:
    """Derived from tosca.nodes.nfv.VNF with every identity property pinned to this VNFD."""
    properties: dict[str, Any] = {}
    for name, value in identity.items():
        if name == "vnfm_info":
            properties[name] = {"type": "list", "entry_schema": {"type": "string"}, "default": value}
        else:
            properties[name] = {
                "type": "string",
                "constraints": [{"valid_values": [value]}],
                "default": value,
            }
    requirements = [
        {
            ext["id"]: {
                "capability": "tosca.capabilities.nfv.VirtualLinkable",
                "relationship": "tosca.relationships.nfv.VirtualLinksTo",
                "occurrences": [0, 1],
            }
        }
        for ext in vnfd.get("ext-cpd", [])
    ]
    return {
        "derived_from": "tosca.nodes.nfv.VNF",
        "description": vnfd.get("description", vnfd["id"]),
        "properties": properties,
        "requirements": requirements,
    }


def _sw_image(image: dict[str, Any]) -> dict[str, Any]:
    data = {
        "name": image.get("image") or image.get("name") or image["id"],
        "version": str(_require(image, "version", "sw-image-desc")),
        "checksum": {
            "algorithm": image.get("checksum", {}).get("algorithm", "sha-256"),
            "hash": _require(image.get("checksum", {}), "hash", f"sw-image-desc {image['id']} checksum"),
        },
        "container_format": _require(image, "container-format", "sw-image-desc"),
        "disk_format": _require(image, "disk-format", "sw-image-desc"),
        "min_disk": _gb(image.get("min-disk", 0)),
        "size": _gb(_require(image, "size", "sw-image-desc")),
    }
    if "min-ram" in image:
        data["min_ram"] = _gb(image["min-ram"])
    if image.get("operating-system"):
        data["operating_system"] = image["operating-system"]
    if image.get("supported-virtualization-environment"):
        data["supported_virtualisation_environments"] = list(image["supported-virtualization-environment"])
    return data


def _virtual_compute(compute: dict[str, Any]) -> dict[str, Any]:
    """virtual_cpu and virtual_memory of a SOL006 virtual-compute-desc."""
    cpu_in = _require(compute, "virtual-cpu", "virtual-compute-desc")
    mem_in = _require(compute, "virtual-memory", "virtual-compute-desc")
    cpu: dict[str, Any] = {"num_virtual_cpu": int(_require(cpu_in, "num-virtual-cpu", "virtual-cpu"))}
    if cpu_in.get("cpu-architecture"):
        cpu["cpu_architecture"] = cpu_in["cpu-architecture"]
    pinning = cpu_in.get("pinning") or {}
    if pinning.get("policy"):
        cpu["virtual_cpu_pinning"] = {"virtual_cpu_pinning_policy": str(pinning["policy"]).lower()}
    if pinning.get("thread-policy"):
        cpu["vdu_cpu_requirements"] = {"thread-policy": str(pinning["thread-policy"])}
    memory: dict[str, Any] = {"virtual_mem_size": _gb(_require(mem_in, "size", "virtual-memory"))}
    if "numa-enabled" in mem_in:
        memory["numa_enabled"] = bool(mem_in["numa-enabled"])
    requirements = {}
    if mem_in.get("mempage-size"):
        requirements["mempage-size"] = str(mem_in["mempage-size"])
    numa = mem_in.get("numa-node-policy") or {}
    if "node-cnt" in numa:
        requirements["numa-node-count"] = str(numa["node-cnt"])
    if numa.get("mem-policy"):
        requirements["numa-mem-policy"] = str(numa["mem-policy"])
    if requirements:
        memory["vdu_mem_requirements"] = requirements
    return {"properties": {"virtual_cpu": cpu, "virtual_memory": memory}}


def _layer_protocols(values: list[str]) -> list[str]:
    return [str(value).removeprefix("layer-protocol-") for value in values]


def _vdu_cp(vdu_id: str, cpd: dict[str, Any], vl_nodes: set[str]) -> dict[str, Any]:
    props: dict[str, Any] = {"layer_protocols": _layer_protocols(_require(cpd, "layer-protocol", "int-cpd"))}
    if cpd.get("description"):
        props["description"] = " ".join(str(cpd["description"]).split())
    vnirs = cpd.get("virtual-network-interface-requirement", [])
    if vnirs:
        props["virtual_network_interface_requirements"] = [_vnir(vnir) for vnir in vnirs]
        first = vnirs[0]
        if "position" in first:
            props["order"] = int(first["position"])
        vnic = VNIC_TYPES.get(first.get("virtual-interface", {}).get("type", ""))
        if vnic:
            props["vnic_type"] = vnic
    requirements: list[dict[str, str]] = [{"virtual_binding": vdu_id}]
    link = cpd.get("int-virtual-link-desc")
    if link:
        if link not in vl_nodes:
            raise PackagingError(
                f"VNFD: int-cpd {cpd['id']!r} names int-virtual-link-desc {link!r}, not defined"
            )
        requirements.append({"virtual_link": link})
    return {"type": "tosca.nodes.nfv.VduCp", "properties": props, "requirements": requirements}


def _vnir(vnir: dict[str, Any]) -> dict[str, Any]:
    """One SOL006 virtual-network-interface-requirement; its interface type joins the key/value map."""
    pairs = {str(kv["key"]): str(kv["value"]) for kv in vnir.get("network-interface-requirements", [])}
    kind = vnir.get("virtual-interface", {}).get("type")
    if kind:
        pairs["interface-type"] = str(kind)
    out: dict[str, Any] = {
        "support_mandatory": bool(vnir.get("support-mandatory", False)),
        "network_interface_requirements": pairs,
    }
    if vnir.get("name"):
        out["name"] = vnir["name"]
    return out


def _virtual_link(vl: dict[str, Any], df: dict[str, Any]) -> dict[str, Any]:
    connectivity = vl.get("connectivity-type") or {}
    conn: dict[str, Any] = {
        "layer_protocols": _layer_protocols(connectivity.get("layer-protocol", ["ethernet"]))
    }
    if connectivity.get("flow-pattern"):
        conn["flow_pattern"] = str(connectivity["flow-pattern"]).lower()
    profile = next((p for p in df.get("virtual-link-profile", []) if p.get("id") == vl["id"]), {})

    def bitrate(key: str) -> dict[str, int]:
        given = profile.get(key) or {}
        out = {"root": int(given.get("root", 0))}
        if "leaf" in given:
            out["leaf"] = int(given["leaf"])
        return out

    props: dict[str, Any] = {
        "connectivity_type": conn,
        "vl_profile": {
            "max_bitrate_requirements": bitrate("max-bitrate-requirements"),
            "min_bitrate_requirements": bitrate("min-bitrate-requirements"),
        },
    }
    if vl.get("description"):
        props["description"] = vl["description"]
    return {"type": "tosca.nodes.nfv.VnfVirtualLink", "properties": props}


def _policy(name: str, kind: str, properties: dict[str, Any], target: str | None = None) -> dict[str, Any]:
    """One entry of the topology's policies list (``tosca.policies.nfv.<kind>``)."""
    body: dict[str, Any] = {"type": f"tosca.policies.nfv.{kind}", "properties": properties}
    if target is not None:
        body["targets"] = [target]
    return {name: body}


def _vdu_levels(entries: list[tuple[str, list[dict[str, Any]]]], vdu_key: str, vdu_id: str) -> dict[str, Any]:
    """``{entry id: VduLevel}`` for one VDU, from (entry id, per-VDU counts) pairs: the deltas of a
    scaling aspect (``vdu-delta``) or the instantiation levels (``vdu-level``)."""
    return {
        entry_id: {"number_of_instances": int(count["number-of-instances"])}
        for entry_id, counts in entries
        for count in counts
        if count.get(vdu_key) == vdu_id
    }


def _aspect(aspect: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": aspect.get("name", aspect["id"]),
        "description": " ".join(str(aspect.get("description", aspect["id"])).split()),
        "max_scale_level": int(aspect.get("max-scale-level", 1)),
        "step_deltas": [delta["id"] for delta in aspect.get("aspect-delta-details", {}).get("deltas", [])],
    }


def _level(level: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"description": level.get("description", level["id"])}
    if level.get("scaling-info"):
        out["scale_info"] = {
            info["scaling-aspect-id"]: {"scale_level": int(info["scale-level"])}
            for info in level["scaling-info"]
        }
    return out


def _policies(df: dict[str, Any], vdu_ids: list[str]) -> list[dict[str, Any]]:
    """SOL001 policies of one deployment flavour (SOL006 df)."""
    policies = [
        _policy(
            f"{profile['id']}_initial_delta",
            "VduInitialDelta",
            {"initial_delta": {"number_of_instances": int(profile.get("min-number-of-instances", 1))}},
            profile["id"],
        )
        for profile in df.get("vdu-profile", [])
    ]
    aspects = df.get("scaling-aspect", [])
    if aspects:
        policies.append(
            _policy("scaling_aspects", "ScalingAspects", {"aspects": {a["id"]: _aspect(a) for a in aspects}})
        )
    for aspect in aspects:
        deltas = [
            (d["id"], d.get("vdu-delta", []))
            for d in aspect.get("aspect-delta-details", {}).get("deltas", [])
        ]
        for vdu_id in vdu_ids:
            per_vdu = _vdu_levels(deltas, "id", vdu_id)
            if per_vdu:
                props = {"aspect": aspect["id"], "deltas": per_vdu}
                policies.append(
                    _policy(f"{vdu_id}_{aspect['id']}_deltas", "VduScalingAspectDeltas", props, vdu_id)
                )
    levels = df.get("instantiation-level", [])
    if levels:
        props = {"levels": {level["id"]: _level(level) for level in levels}}
        if df.get("default-instantiation-level"):
            props["default_level"] = df["default-instantiation-level"]
        policies.append(_policy("instantiation_levels", "InstantiationLevels", props))
        counts = [(level["id"], level.get("vdu-level", [])) for level in levels]
        for vdu_id in vdu_ids:
            per_vdu = _vdu_levels(counts, "vdu-id", vdu_id)
            if per_vdu:
                policies.append(
                    _policy(
                        f"{vdu_id}_instantiation_levels",
                        "VduInstantiationLevels",
                        {"levels": per_vdu},
                        vdu_id,
                    )
                )
    return policies


def _add(nodes: dict[str, Any], name: str, node: dict[str, Any], what: str) -> None:
    """Node template names are the SOL006 ids, which SOL006 scopes per list: refuse a clash."""
    if name in nodes:
        raise PackagingError(
            f"VNFD: {what} id {name!r} is also the id of another element; SOL001 needs one name"
        )
    nodes[name] = node


def translate(vnfd: dict[str, Any], artefacts: Artefacts, types_import: str) -> dict[str, Any]:
    """The SOL001 service template (a dict to dump as YAML) of ``vnfd`` (the mapping under
    ``vnfd:``), importing the SOL001 types from ``types_import``."""
    dfs = _require(vnfd, "df", "vnfd")
    if not dfs:
        raise PackagingError("VNFD: no deployment flavour (df); SOL001 needs one")
    df = dfs[0]
    computes = _by_id(vnfd.get("virtual-compute-desc", []), "virtual-compute-desc")
    storages = _by_id(vnfd.get("virtual-storage-desc", []), "virtual-storage-desc")
    images = _by_id(vnfd.get("sw-image-desc", []), "sw-image-desc")
    profiles = _by_id(df.get("vdu-profile", []), "vdu-profile")
    identity = _identity(vnfd, df)
    type_name = node_type_name(vnfd)

    nodes: dict[str, Any] = {}
    vnf_artifacts: dict[str, Any] = {
        f"{name}-charm": {"type": "dpp.artifacts.JujuCharm", "file": path}
        for name, path in artefacts.charms.items()
    }
    vnf_artifacts["mec-appd"] = {"type": "dpp.artifacts.MecAppD", "file": artefacts.appd}
    _add(nodes, VNF_NODE, {"type": type_name, "properties": identity, "artifacts": vnf_artifacts}, "vnf")

    for vl in vnfd.get("int-virtual-link-desc", []):
        _add(nodes, vl["id"], _virtual_link(vl, df), "int-virtual-link-desc")
    vl_nodes = {vl["id"] for vl in vnfd.get("int-virtual-link-desc", [])}

    for storage_id, storage in storages.items():
        props: dict[str, Any] = {
            "virtual_block_storage_data": {
                "size_of_storage": _gb(_require(storage, "size-of-storage", "storage"))
            }
        }
        if storage.get("sw-image-desc"):
            image = _ref(
                images, storage["sw-image-desc"], "sw-image-desc", f"virtual-storage-desc {storage_id!r}"
            )
            props["sw_image_data"] = _sw_image(image)
        _add(
            nodes,
            storage_id,
            {"type": "tosca.nodes.nfv.Vdu.VirtualBlockStorage", "properties": props},
            "storage",
        )

    vdu_ids = []
    for vdu in vnfd.get("vdu", []):
        vdu_id = vdu["id"]
        vdu_ids.append(vdu_id)
        holder = f"vdu {vdu_id!r}"
        profile = _ref(profiles, vdu_id, "vdu-profile (in df)", holder)
        compute = _ref(computes, _require(vdu, "virtual-compute-desc", "vdu"), "virtual-compute-desc", holder)
        props = {
            "name": vdu.get("name", vdu_id),
            "description": " ".join(str(vdu.get("description", vdu_id)).split()),
            "vdu_profile": {
                "min_number_of_instances": int(profile.get("min-number-of-instances", 1)),
                "max_number_of_instances": int(profile.get("max-number-of-instances", 1)),
            },
        }
        if vdu.get("sw-image-desc"):
            props["sw_image_data"] = _sw_image(_ref(images, vdu["sw-image-desc"], "sw-image-desc", holder))
        if vdu.get("cloud-init-file"):
            props["boot_data"] = artefacts.cloud_init[vdu["cloud-init-file"]]
        node: dict[str, Any] = {
            "type": "tosca.nodes.nfv.Vdu.Compute",
            "properties": props,
            "capabilities": {"virtual_compute": _virtual_compute(compute)},
        }
        storage_refs = vdu.get("virtual-storage-desc", [])
        for ref in storage_refs:
            _ref(storages, ref, "virtual-storage-desc", holder)
        if storage_refs:
            node["requirements"] = [{"virtual_storage": ref} for ref in storage_refs]
        _add(nodes, vdu_id, node, "vdu")
        for cpd in vdu.get("int-cpd", []):
            _add(nodes, cpd["id"], _vdu_cp(vdu_id, cpd, vl_nodes), "int-cpd")

    vdus = {vdu["id"]: vdu for vdu in vnfd.get("vdu", [])}
    mappings: dict[str, list[str]] = {}
    for ext in vnfd.get("ext-cpd", []):
        holder = f"ext-cpd {ext['id']!r}"
        if "int-cpd" in ext:
            vdu = _ref(vdus, ext["int-cpd"].get("vdu-id", ""), "vdu", holder)
            cpds = {cpd["id"] for cpd in vdu.get("int-cpd", [])}
            cpd = ext["int-cpd"].get("cpd")
            if cpd not in cpds:
                raise PackagingError(
                    f"VNFD: {holder} names int-cpd {cpd!r} of vdu {vdu['id']!r}, not defined"
                )
            mappings[ext["id"]] = [ext["int-cpd"]["cpd"], "virtual_link"]
        elif "int-virtual-link-desc" in ext:
            link = ext["int-virtual-link-desc"]
            if link not in vl_nodes:
                raise PackagingError(f"VNFD: {holder} names int-virtual-link-desc {link!r}, not defined")
            ext_node = {
                "type": "tosca.nodes.nfv.VnfExtCp",
                "properties": {"layer_protocols": _layer_protocols(ext.get("layer-protocol", ["ethernet"]))},
                "requirements": [{"internal_virtual_link": link}],
            }
            _add(nodes, ext["id"], ext_node, "ext-cpd")
            mappings[ext["id"]] = [ext["id"], "external_virtual_link"]
        else:
            raise PackagingError(f"VNFD: {holder} names neither an int-cpd nor an int-virtual-link-desc")

    topology: dict[str, Any] = {
        "substitution_mappings": {"node_type": type_name, "requirements": mappings},
        "node_templates": nodes,
    }
    policies = _policies(df, vdu_ids)
    if policies:
        topology["policies"] = policies
    return {
        "tosca_definitions_version": TOSCA_VERSION,
        "description": vnfd.get("description", vnfd["id"]),
        "metadata": {
            "template_name": vnfd["id"],
            "template_author": identity["provider"],
            "template_version": identity["descriptor_version"],
        },
        "imports": [types_import],
        "artifact_types": {
            "dpp.artifacts.JujuCharm": {
                "derived_from": "tosca.artifacts.Deployment",
                "description": "A packed Juju machine charm (zip) that installs and operates the VNFC",
                "mime_type": "application/zip",
                "file_ext": ["charm"],
            },
            "dpp.artifacts.MecAppD": {
                "derived_from": "tosca.artifacts.File",
                "description": "ETSI MEC 010-2 application descriptor (JSON) of the same application",
                "mime_type": "application/json",
                "file_ext": ["json"],
            },
        },
        "node_types": {type_name: _vnf_node_type(vnfd, identity)},
        "topology_template": topology,
    }
