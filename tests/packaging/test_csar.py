"""The SOL004 CSAR (ONAP): its layout and TOSCA.meta, a TOSCA parser we did not write
(tosca-parser, OpenStack's) accepting it offline, every manifest digest recomputed from the zip,
and the SOL001 VNFD saying what the SOL006 VNFD says."""

from __future__ import annotations

import hashlib
import shutil
import socket
import tempfile
import zipfile
from pathlib import Path

import pytest
import yaml

from netapp.packaging.__main__ import main
from netapp.packaging.csar import (
    DEFAULT_DIGEST,
    META_FILE,
    build_csar,
    csar_problems,
    parse_manifest,
    parse_tosca_meta,
)
from netapp.packaging.errors import PackagingError
from netapp.packaging.osm import Sources
from tests.packaging.helpers import REPO_ROOT, quiet

toscaparser = pytest.importorskip(
    "toscaparser.tosca_template", reason="tosca-parser (the test extra) is not installed"
)
from toscaparser.common.exception import ValidationError  # noqa: E402

SOL006 = yaml.safe_load((REPO_ROOT / "vnfd/dpp-netapp_vnfd.yaml").read_text())["vnfd"]
FILES = {
    "TOSCA-Metadata/TOSCA.meta",
    "Definitions/dpp-netapp_vnfd.yaml",
    "Definitions/sol001_subset_types.yaml",
    "dpp-netapp.mf",
    "ChangeLog.txt",
    "Licenses/LICENSE",
    "Artifacts/charms/dpp-netapp.charm",
    "Artifacts/mec/dpp-netapp_appd.json",
    "Artifacts/cloud_init/dpp-netapp-cloud-config.yaml",
}
HASHES = {"SHA-256": hashlib.sha256, "SHA-512": hashlib.sha512}


@pytest.fixture(scope="module")
def csar(charm_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("csar")
    return build_csar(Sources(REPO_ROOT), {"dpp-netapp": charm_archive}, out, log=quiet)


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No network for the parser (a connect raises), and its unpacked CSAR lands in tmp_path
    (tosca-parser leaves the folder it extracts to behind)."""

    def refuse(*args, **kwargs):
        raise OSError("network access attempted in an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def parse(path: Path):
    return toscaparser.ToscaTemplate(path=str(path))


def read_zip(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}


def rewrite_zip(src: Path, dest: Path, changes: dict[str, bytes | None]) -> Path:
    """A copy of the zip with entries replaced (bytes) or removed (None)."""
    with zipfile.ZipFile(src) as old, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            if info.filename in changes and changes[info.filename] is None:
                continue
            new.writestr(info, changes.get(info.filename) or old.read(info))
    return dest


# --- layout -----------------------------------------------------------------------------------


def test_the_csar_holds_definitions_manifest_changelog_licences_and_artefacts(csar):
    assert csar.name == "dpp-netapp.csar"
    assert set(read_zip(csar)) == FILES


def test_tosca_meta_block_0_names_the_sol004_entries(csar):
    meta = parse_tosca_meta(read_zip(csar)[META_FILE].decode())
    assert meta == {
        "TOSCA-Meta-File-Version": "1.0",
        "CSAR-Version": "1.1",
        "Created-By": SOL006["provider"],
        "Entry-Definitions": "Definitions/dpp-netapp_vnfd.yaml",
        "ETSI-Entry-Manifest": "dpp-netapp.mf",
        "ETSI-Entry-Change-Log": "ChangeLog.txt",
        "ETSI-Entry-Licenses": "Licenses",
    }


def test_artefacts_are_the_built_charm_and_the_repository_files(csar, charm_archive):
    files = read_zip(csar)
    assert files["Artifacts/charms/dpp-netapp.charm"] == charm_archive.read_bytes()
    assert (
        files["Artifacts/mec/dpp-netapp_appd.json"] == (REPO_ROOT / "vnfd/dpp-netapp_appd.json").read_bytes()
    )
    cloud_init = REPO_ROOT / "vnfd/cloud_init/dpp-netapp-cloud-config.yaml"
    assert files["Artifacts/cloud_init/dpp-netapp-cloud-config.yaml"] == cloud_init.read_bytes()
    assert files["Licenses/LICENSE"] == (REPO_ROOT / "LICENSE").read_bytes()


def test_two_builds_give_identical_csars(csar, charm_archive, tmp_path):
    again = build_csar(Sources(REPO_ROOT), {"dpp-netapp": charm_archive}, tmp_path, log=quiet)
    assert again.read_bytes() == csar.read_bytes()


# --- the manifest -----------------------------------------------------------------------------


def recomputed_problems(path: Path) -> list[str]:
    """This test's own reading of the manifest against the zip (independent of csar_problems)."""
    files = read_zip(path)
    manifest_name = parse_tosca_meta(files[META_FILE].decode())["ETSI-Entry-Manifest"]
    blocks = files[manifest_name].decode().strip().split("\n\n")
    problems, listed = [], []
    for block in blocks[1:]:
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        listed.append(fields["Source"])
        actual = HASHES[fields["Algorithm"]](files[fields["Source"]]).hexdigest()
        if actual != fields["Hash"]:
            problems.append(f"digest of {fields['Source']}")
    problems += [
        f"{name} listed {listed.count(name)} times" for name in set(listed) if listed.count(name) != 1
    ]
    problems += [f"{name} not listed" for name in files if name != manifest_name and name not in listed]
    return problems


def test_every_manifest_digest_matches_the_zip_and_every_other_file_is_listed_once(csar):
    assert recomputed_problems(csar) == []
    assert csar_problems(csar) == []
    manifest = parse_manifest(read_zip(csar)["dpp-netapp.mf"].decode())
    assert {algorithm for _, algorithm, _ in manifest.sources} == {DEFAULT_DIGEST}
    assert {source for source, _, _ in manifest.sources} == FILES - {"dpp-netapp.mf"}


def test_manifest_metadata_is_the_vnfds(csar):
    manifest = parse_manifest(read_zip(csar)["dpp-netapp.mf"].decode())
    assert manifest.metadata == {
        "vnf_provider_id": SOL006["provider"],
        "vnf_product_name": SOL006["product-name"],
        "vnf_release_date_time": "1980-01-01T00:00:00+00:00",
        "vnf_package_version": SOL006["software-version"],
    }


@pytest.mark.parametrize(
    "entry",
    ["Artifacts/charms/dpp-netapp.charm", "Definitions/dpp-netapp_vnfd.yaml", "TOSCA-Metadata/TOSCA.meta"],
)
def test_given_an_altered_file_then_its_digest_no_longer_matches(csar, tmp_path, entry):
    original = read_zip(csar)[entry]
    altered = rewrite_zip(csar, tmp_path / "altered.csar", {entry: original + b"\n# altered\n"})
    assert recomputed_problems(altered) == [f"digest of {entry}"]
    assert csar_problems(altered) == [f"dpp-netapp.mf: Source {entry}: SHA-256 differs from the file's"]


def test_given_an_unlisted_or_missing_file_then_the_check_names_it(csar, tmp_path):
    extra = rewrite_zip(csar, tmp_path / "extra.csar", {})
    with zipfile.ZipFile(extra, "a") as archive:
        archive.writestr("Artifacts/extra.txt", b"not in the manifest")
    assert "dpp-netapp.mf: Artifacts/extra.txt is in the archive but not listed" in csar_problems(extra)
    removed = rewrite_zip(csar, tmp_path / "removed.csar", {"ChangeLog.txt": None})
    assert csar_problems(removed) == [
        f"{META_FILE}: ETSI-Entry-Change-Log names ChangeLog.txt, not in the archive",
        "dpp-netapp.mf: Source ChangeLog.txt is not in the archive",
    ]


def test_given_sha_512_then_every_entry_is_digested_with_it(charm_archive, tmp_path):
    out = build_csar(Sources(REPO_ROOT), {"dpp-netapp": charm_archive}, tmp_path, log=quiet, digest="sha-512")
    manifest = parse_manifest(read_zip(out)["dpp-netapp.mf"].decode())
    assert {algorithm for _, algorithm, _ in manifest.sources} == {"SHA-512"}
    assert all(len(digest) == 128 for _, _, digest in manifest.sources)
    assert recomputed_problems(out) == []


def test_given_an_unknown_digest_then_the_build_refuses_it(charm_archive, tmp_path):
    with pytest.raises(PackagingError, match="--csar-digest md5: not supported; use one of sha-256, sha-512"):
        build_csar(Sources(REPO_ROOT), {"dpp-netapp": charm_archive}, tmp_path, log=quiet, digest="md5")


# --- tosca-parser -----------------------------------------------------------------------------


def test_tosca_parser_accepts_the_csar_offline(csar, offline):
    template = parse(csar)
    types = {node.name: node.type for node in template.nodetemplates}
    assert types == {
        "VNF": "DPP_NetApp_project.dpp_netapp.0_1_0",
        "dpp-netapp": "tosca.nodes.nfv.Vdu.Compute",
        "dpp-netapp-root": "tosca.nodes.nfv.Vdu.VirtualBlockStorage",
        "mgmt": "tosca.nodes.nfv.VduCp",
        "n3": "tosca.nodes.nfv.VduCp",
        "n6": "tosca.nodes.nfv.VduCp",
        "alt": "tosca.nodes.nfv.VduCp",
    }
    assert {policy.type for policy in template.policies} == {
        "tosca.policies.nfv.VduInitialDelta",
        "tosca.policies.nfv.ScalingAspects",
        "tosca.policies.nfv.VduScalingAspectDeltas",
        "tosca.policies.nfv.InstantiationLevels",
        "tosca.policies.nfv.VduInstantiationLevels",
    }


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        ("num_virtual_cpu: 8", "num_virtual_cpu: 0", "num_virtual_cpu must be greater than 0"),
        ("vnic_type: virtio", "vnic_type: bogus", "vnic_type outside SOL001's valid values"),
        (
            "file: ../Artifacts/mec/dpp-netapp_appd.json",
            "file: ../Artifacts/mec/gone.json",
            "artefact missing",
        ),
        ("virtual_binding: dpp-netapp", "virtual_binding: no-such-vdu", "a requirement on no node"),
        ("- sol001_subset_types.yaml", "- no_such_types.yaml", "the SOL001 types not found"),
    ],
)
def test_tosca_parser_refuses_a_broken_vnfd(csar, offline, tmp_path, old, new, reason):
    """The parser really checks what the VNFD says against the types: each break is refused."""
    vnfd = read_zip(csar)["Definitions/dpp-netapp_vnfd.yaml"].decode()
    assert old in vnfd
    broken = rewrite_zip(
        csar, tmp_path / "broken.csar", {"Definitions/dpp-netapp_vnfd.yaml": vnfd.replace(old, new).encode()}
    )
    with pytest.raises(ValidationError):
        parse(broken)


# --- the SOL001 VNFD against the SOL006 one ---------------------------------------------------


@pytest.fixture(scope="module")
def template(csar, tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("parsed")))
        return parse(csar)


def node(template, name):
    (found,) = [n for n in template.nodetemplates if n.name == name]
    return found


def test_the_vnf_node_carries_the_sol006_identity(template):
    vnf = node(template, "VNF")
    assert {
        name: vnf.get_property_value(name)
        for name in (
            "descriptor_id",
            "provider",
            "product_name",
            "software_version",
            "descriptor_version",
            "product_info_name",
            "flavour_id",
        )
    } == {
        "descriptor_id": SOL006["id"],
        "provider": SOL006["provider"],
        "product_name": SOL006["product-name"],
        "software_version": SOL006["software-version"],
        "descriptor_version": SOL006["version"],
        "product_info_name": SOL006["product-info-name"],
        "flavour_id": SOL006["df"][0]["id"],
    }
    assert vnf.get_property_value("vnfm_info") == ["etsivnfm:v2.6.1"]


def test_the_vdu_has_the_sol006_compute_storage_and_image(template):
    (compute_desc,) = SOL006["virtual-compute-desc"]
    (storage_desc,) = SOL006["virtual-storage-desc"]
    (image,) = SOL006["sw-image-desc"]
    vdu = node(template, "dpp-netapp")
    compute = vdu.get_capability("virtual_compute").get_property_value
    assert compute("virtual_cpu")["num_virtual_cpu"] == compute_desc["virtual-cpu"]["num-virtual-cpu"]
    assert compute("virtual_cpu")["virtual_cpu_pinning"] == {"virtual_cpu_pinning_policy": "static"}
    assert (
        compute("virtual_memory")["virtual_mem_size"] == f"{int(compute_desc['virtual-memory']['size'])} GB"
    )
    assert compute("virtual_memory")["vdu_mem_requirements"]["mempage-size"] == "LARGE"
    assert vdu.get_property_value("vdu_profile") == {
        "min_number_of_instances": 1,
        "max_number_of_instances": 4,
    }
    assert vdu.get_property_value("sw_image_data")["checksum"] == image["checksum"]
    assert vdu.get_property_value("boot_data") == "../Artifacts/cloud_init/dpp-netapp-cloud-config.yaml"
    assert [next(iter(r.values())) for r in vdu.requirements] == [storage_desc["id"]]
    storage = node(template, storage_desc["id"]).get_property_value("virtual_block_storage_data")
    assert storage["size_of_storage"] == f"{storage_desc['size-of-storage']} GB"


def test_connection_points_are_the_sol006_int_cpds_and_ext_cpds(template):
    (vdu,) = SOL006["vdu"]
    cps = {n.name: n for n in template.nodetemplates if n.type == "tosca.nodes.nfv.VduCp"}
    assert set(cps) == {cpd["id"] for cpd in vdu["int-cpd"]}
    vnic = {"PARAVIRT": "normal", "VIRTIO": "virtio", "PCI-PASSTHROUGH": "direct-physical"}
    for cpd in vdu["int-cpd"]:
        cp = cps[cpd["id"]]
        (vnir,) = cpd["virtual-network-interface-requirement"]
        assert cp.get_property_value("layer_protocols") == cpd["layer-protocol"]
        assert cp.get_property_value("order") == vnir["position"]
        assert cp.get_property_value("vnic_type") == vnic.get(vnir["virtual-interface"]["type"])
        (requirement,) = cp.get_property_value("virtual_network_interface_requirements")
        assert requirement["network_interface_requirements"] == {
            "xdp-mode": vnir["network-interface-requirements"][0]["value"],
            "interface-type": vnir["virtual-interface"]["type"],
        }
        assert cp.requirements == [{"virtual_binding": vdu["id"]}]
    mappings = template.topology_template.substitution_mappings.requirements
    assert mappings == {ext["id"]: [ext["int-cpd"]["cpd"], "virtual_link"] for ext in SOL006["ext-cpd"]}


def test_scaling_and_instantiation_levels_are_the_flavours(template):
    (df,) = SOL006["df"]
    (aspect,) = df["scaling-aspect"]
    policies = {policy.type: policy for policy in template.policies}
    aspects = policies["tosca.policies.nfv.ScalingAspects"].properties["aspects"]
    assert aspects[aspect["id"]]["max_scale_level"] == aspect["max-scale-level"]
    deltas = policies["tosca.policies.nfv.VduScalingAspectDeltas"]
    assert deltas.targets == ["dpp-netapp"] and deltas.properties["deltas"] == {
        "one-more-netapp": {"number_of_instances": 1}
    }
    levels = policies["tosca.policies.nfv.InstantiationLevels"].properties
    assert levels["default_level"] == df["default-instantiation-level"]
    assert set(levels["levels"]) == {level["id"] for level in df["instantiation-level"]}


# --- what the SOL006 model has beyond this VNFD -----------------------------------------------


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    for folder in ("vnfd", "nsd", "charms/dpp-netapp"):
        shutil.copytree(REPO_ROOT / folder, copy / folder, ignore=shutil.ignore_patterns(".*", "__pycache__"))
    shutil.copyfile(REPO_ROOT / "LICENSE", copy / "LICENSE")
    return copy


def test_internal_virtual_links_and_a_re_exposed_link_translate_and_parse(
    repo_copy, charm_archive, offline, tmp_path
):
    path = repo_copy / "vnfd/dpp-netapp_vnfd.yaml"
    document = yaml.safe_load(path.read_text())
    vnfd = document["vnfd"]
    vnfd["int-virtual-link-desc"] = [
        {
            "id": "internal",
            "description": "VM to VM",
            "connectivity-type": {"layer-protocol": ["ipv4"], "flow-pattern": "mesh"},
        }
    ]
    vnfd["vdu"][0]["int-cpd"].append(
        {"id": "int", "layer-protocol": ["ipv4"], "int-virtual-link-desc": "internal"}
    )
    vnfd["ext-cpd"].append(
        {"id": "vnf-internal-ext", "int-virtual-link-desc": "internal", "layer-protocol": ["ipv4"]}
    )
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    out = build_csar(Sources(repo_copy), {"dpp-netapp": charm_archive}, tmp_path / "out", log=quiet)
    template = parse(out)
    assert node(template, "internal").type == "tosca.nodes.nfv.VnfVirtualLink"
    assert node(template, "int").requirements == [
        {"virtual_binding": "dpp-netapp"},
        {"virtual_link": "internal"},
    ]
    assert node(template, "vnf-internal-ext").requirements == [{"internal_virtual_link": "internal"}]
    mappings = template.topology_template.substitution_mappings.requirements
    assert mappings["vnf-internal-ext"] == ["vnf-internal-ext", "external_virtual_link"]


def test_given_an_ext_cpd_on_an_undefined_int_cpd_then_the_build_names_it(repo_copy, charm_archive, tmp_path):
    path = repo_copy / "vnfd/dpp-netapp_vnfd.yaml"
    document = yaml.safe_load(path.read_text())
    document["vnfd"]["ext-cpd"][1]["int-cpd"]["cpd"] = "n9"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(
        PackagingError, match="ext-cpd 'vnf-n3-ext' names int-cpd 'n9' of vdu 'dpp-netapp', not defined"
    ):
        build_csar(Sources(repo_copy), {"dpp-netapp": charm_archive}, tmp_path / "out", log=quiet)
    assert not (tmp_path / "out" / "dpp-netapp.csar").exists()


def test_given_no_sol001_types_when_make_package_runs_then_it_exits_1_before_pip(repo_copy, tmp_path, capsys):
    (repo_copy / "vnfd/sol001/sol001_subset_types.yaml").unlink()
    assert main(["--repo", str(repo_copy), "--out", str(tmp_path / "dist")]) == 1
    assert capsys.readouterr().err.startswith("error: vnfd/sol001/sol001_subset_types.yaml: not found")
    assert not (tmp_path / "dist").exists()
