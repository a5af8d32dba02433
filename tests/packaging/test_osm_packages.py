"""The OSM packages have the layout ``osm package-build`` gives (one folder, descriptor, README,
cloud_init/, charms/, checksums.txt), OSM's NBI would accept their archives, and the descriptors
inside pass the NBI's load and cross-checks with the package folder as the package: cloud-init
and the charm resolve inside it."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml

from netapp.packaging.__main__ import main
from netapp.packaging.errors import PackagingError
from netapp.packaging.image import ImageFacts, stamp_image
from netapp.packaging.osm import (
    Sources,
    build_ns_package,
    build_vnf_package,
    nbi_problems,
)
from tests.packaging.helpers import REPO_ROOT, quiet, unpack
from tests.utils.yang import nsd_cross_check, vnfd_cross_check

VNF_FILES = {
    "dpp-netapp_vnfd.yaml",
    "README.md",
    "checksums.txt",
    "cloud_init/dpp-netapp-cloud-config.yaml",
    "mec/dpp-netapp_appd.json",
    "grafana/dpp-netapp.json",
    "prometheus/dpp-netapp-rules.yml",
    "charms/dpp-netapp/dispatch",
    "charms/dpp-netapp/metadata.yaml",
    "charms/dpp-netapp/config.yaml",
    "charms/dpp-netapp/actions.yaml",
    "charms/dpp-netapp/manifest.yaml",
    "charms/dpp-netapp/src/charm.py",
    "charms/dpp-netapp/appd.json",
}
NS_FILES = {"dpp-netapp_nsd.yaml", "README.md", "checksums.txt"}


def files_of(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def checksums(folder: Path) -> dict[str, str]:
    """checksums.txt as path -> md5 (osmclient's "<md5>\\t<folder>/<path>" lines)."""
    entries = {}
    for line in (folder / "checksums.txt").read_text().splitlines():
        digest, path = line.split("\t")
        entries[path] = digest
    return entries


@pytest.fixture(scope="session")
def vnf_folder(osm_packages, tmp_path_factory) -> Path:
    return unpack(osm_packages["vnf"], tmp_path_factory.mktemp("vnf-package"))


@pytest.fixture(scope="session")
def ns_folder(osm_packages, tmp_path_factory) -> Path:
    return unpack(osm_packages["ns"], tmp_path_factory.mktemp("ns-package"))


def test_archives_have_osm_package_build_names(osm_packages):
    assert osm_packages["vnf"].name == "dpp-netapp_vnf.tar.gz"
    assert osm_packages["ns"].name == "dpp-netapp_ns.tar.gz"


@pytest.mark.parametrize("kind", ["vnf", "ns"])
def test_the_nbi_would_accept_the_archive(osm_packages, kind):
    with tarfile.open(osm_packages[kind], "r:gz") as tar:
        names = tar.getnames()
    assert names[0] == f"dpp-netapp_{kind}"
    assert all(name == names[0] or name.startswith(f"{names[0]}/") for name in names)
    assert nbi_problems(osm_packages[kind]) == []


def test_vnf_package_holds_what_osm_needs(vnf_folder):
    assert vnf_folder.name == "dpp-netapp_vnf"
    files = files_of(vnf_folder)
    assert VNF_FILES <= files
    top_level = {f for f in files if "/" not in f and f.endswith((".yaml", ".yml", ".json"))}
    assert top_level == {"dpp-netapp_vnfd.yaml"}, "the NBI takes each of these for a descriptor"
    for packaged, source in [
        ("dpp-netapp_vnfd.yaml", "vnfd/dpp-netapp_vnfd.yaml"),
        ("README.md", "vnfd/README.md"),
        ("grafana/dpp-netapp.json", "netapp/dashboards/dpp-netapp.json"),
        ("prometheus/dpp-netapp-rules.yml", "vnfd/prometheus/dpp-netapp-rules.yml"),
    ]:
        assert (vnf_folder / packaged).read_bytes() == (REPO_ROOT / source).read_bytes(), packaged


def test_the_charm_is_an_unpacked_directory_with_its_executable_bits(vnf_folder):
    charm = vnf_folder / "charms" / "dpp-netapp"
    assert charm.is_dir()
    for name in ("dispatch", "hooks/install", "hooks/start", "hooks/upgrade-charm", "src/charm.py"):
        assert (charm / name).stat().st_mode & 0o111, name
    assert not (charm / "config.yaml").stat().st_mode & 0o111


def test_ns_package_holds_the_nsd_readme_and_checksums(ns_folder):
    assert ns_folder.name == "dpp-netapp_ns"
    assert files_of(ns_folder) == NS_FILES
    assert (ns_folder / "README.md").read_bytes() == (REPO_ROOT / "nsd/README.md").read_bytes()


@pytest.mark.parametrize("folder_fixture", ["vnf_folder", "ns_folder"])
def test_checksums_list_every_other_file_with_its_md5(folder_fixture, request):
    folder = request.getfixturevalue(folder_fixture)
    listed = checksums(folder)
    expected = {f"{folder.name}/{name}" for name in files_of(folder) - {"checksums.txt"}}
    assert set(listed) == expected
    for path, digest in listed.items():
        assert hashlib.md5((folder.parent / path).read_bytes()).hexdigest() == digest, path


def test_vnfd_in_the_package_loads_and_passes_nbi_checks_inside_the_package(vnf_folder, nbi):
    vnfd = yaml.safe_load((vnf_folder / "dpp-netapp_vnfd.yaml").read_text())["vnfd"]
    nbi.load_vnfd(vnfd)
    # charms resolve at <package>/charms/<name>, cloud-init at <package>/cloud_init/<file>
    assert vnfd_cross_check(vnfd, vnf_folder) == []


def test_nsd_in_the_package_loads_and_passes_nbi_checks_against_the_packaged_vnfd(vnf_folder, ns_folder, nbi):
    vnfd = yaml.safe_load((vnf_folder / "dpp-netapp_vnfd.yaml").read_text())["vnfd"]
    (nsd,) = yaml.safe_load((ns_folder / "dpp-netapp_nsd.yaml").read_text())["nsd"]["nsd"]
    nbi.load_nsd(nsd)
    assert nsd_cross_check(nsd, {vnfd["id"]: vnfd}) == []


def test_two_builds_give_identical_packages(osm_packages, charm_archive, tmp_path):
    src = Sources(REPO_ROOT)
    vnf = build_vnf_package(src, {"dpp-netapp": charm_archive}, tmp_path, log=quiet)
    ns = build_ns_package(src, tmp_path, log=quiet)
    assert vnf.read_bytes() == osm_packages["vnf"].read_bytes()
    assert ns.read_bytes() == osm_packages["ns"].read_bytes()


# --- the VM image ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def image_file(tmp_path_factory) -> Path:
    """A stand-in for the cloud image: only its bytes matter (1.5 GB would be 2 GB; this is 1)."""
    path = tmp_path_factory.mktemp("image") / "noble-server-cloudimg-amd64.img"
    path.write_bytes(b"QFI\xfb" + bytes(range(256)) * 4096)
    return path


def test_given_an_image_the_packaged_vnfd_carries_its_sha256_and_size(
    charm_archive, image_file, tmp_path, nbi
):
    archive = build_vnf_package(
        Sources(REPO_ROOT),
        {"dpp-netapp": charm_archive},
        tmp_path,
        log=quiet,
        image=ImageFacts.of(image_file),
    )
    folder = unpack(archive, tmp_path / "unpacked")
    vnfd = yaml.safe_load((folder / "dpp-netapp_vnfd.yaml").read_text())["vnfd"]
    (image,) = vnfd["sw-image-desc"]
    assert image["checksum"] == {
        "algorithm": "sha-256",
        "hash": hashlib.sha256(image_file.read_bytes()).hexdigest(),
    }
    assert image["size"] == 1
    # Nothing else changed, and OSM still loads it.
    source = yaml.safe_load((REPO_ROOT / "vnfd/dpp-netapp_vnfd.yaml").read_text())["vnfd"]
    source["sw-image-desc"][0] |= {"checksum": image["checksum"], "size": 1}
    assert vnfd == source
    nbi.load_vnfd(vnfd)
    assert (
        checksums(folder)["dpp-netapp_vnf/dpp-netapp_vnfd.yaml"]
        == hashlib.md5((folder / "dpp-netapp_vnfd.yaml").read_bytes()).hexdigest()
    )


def test_the_image_size_is_in_gb_rounded_up():
    facts = ImageFacts(Path("x.img"), "0" * 64, 2_000_000_001)
    assert facts.size_gb == 3
    assert ImageFacts(Path("x.img"), "0" * 64, 1).size_gb == 1


def test_given_a_missing_or_empty_image_then_make_package_names_it_before_pip(tmp_path, capsys):
    assert main(["--out", str(tmp_path / "dist"), "--image", str(tmp_path / "nope.img")]) == 1
    assert f"--image {tmp_path / 'nope.img'}: not a file" in capsys.readouterr().err
    (tmp_path / "empty.img").write_bytes(b"")
    assert main(["--out", str(tmp_path / "dist"), "--image", str(tmp_path / "empty.img")]) == 1
    assert "the file is empty" in capsys.readouterr().err
    assert not (tmp_path / "dist").exists()


def test_given_a_vnfd_with_two_images_then_image_is_refused(image_file):
    document = yaml.safe_load((REPO_ROOT / "vnfd/dpp-netapp_vnfd.yaml").read_text())
    document["vnfd"]["sw-image-desc"].append({**document["vnfd"]["sw-image-desc"][0], "id": "other"})
    with pytest.raises(PackagingError, match=r"2 sw-image-desc \['ubuntu-24.04', 'other'\]"):
        stamp_image(document, ImageFacts.of(image_file))


# --- broken inputs ----------------------------------------------------------------------------


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """The package inputs in a folder of their own, to break without touching the repository."""
    copy = tmp_path / "repo"
    for folder in ("vnfd", "nsd", "charms/dpp-netapp"):
        shutil.copytree(REPO_ROOT / folder, copy / folder, ignore=shutil.ignore_patterns(".*", "__pycache__"))
    return copy


def test_given_no_cloud_init_file_when_building_then_the_error_names_it(repo_copy, charm_archive, tmp_path):
    (repo_copy / "vnfd/cloud_init/dpp-netapp-cloud-config.yaml").unlink()
    with pytest.raises(PackagingError, match=r"vnfd/cloud_init/dpp-netapp-cloud-config\.yaml: not found"):
        build_vnf_package(Sources(repo_copy), {"dpp-netapp": charm_archive}, tmp_path / "out", log=quiet)
    assert not (tmp_path / "out").exists()


def test_given_no_cloud_init_file_when_make_package_runs_then_it_exits_1_before_pip(
    repo_copy, tmp_path, capsys
):
    (repo_copy / "vnfd/cloud_init/dpp-netapp-cloud-config.yaml").unlink()
    assert main(["--repo", str(repo_copy), "--out", str(tmp_path / "dist")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: vnfd/cloud_init/dpp-netapp-cloud-config.yaml: not found")
    assert "cloud-init-file of vdu 'dpp-netapp'" in err
    assert not (tmp_path / "dist").exists()


def test_given_a_charm_the_vnfd_names_is_missing_then_the_error_names_it(repo_copy, tmp_path, capsys):
    shutil.rmtree(repo_copy / "charms/dpp-netapp")
    assert main(["--repo", str(repo_copy), "--out", str(tmp_path / "dist")]) == 1
    assert "charms/dpp-netapp/charmcraft.yaml: not found" in capsys.readouterr().err


def test_given_an_nsd_naming_another_vnfd_then_the_ns_package_is_refused(repo_copy, tmp_path):
    nsd = repo_copy / "nsd/dpp-netapp_nsd.yaml"
    doc = yaml.safe_load(nsd.read_text())
    doc["nsd"]["nsd"][0]["vnfd-id"] = ["other_vnfd"]
    nsd.write_text(yaml.safe_dump(doc))
    with pytest.raises(PackagingError, match="names vnfd 'other_vnfd'"):
        build_ns_package(Sources(repo_copy), tmp_path, log=quiet)


def test_an_archive_with_a_second_descriptor_is_what_the_nbi_refuses(tmp_path):
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "a_vnfd.yaml").write_text("vnfd: {}\n")
    (folder / "appd.json").write_text("{}\n")
    archive = tmp_path / "pkg.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname="pkg")
        tar.add(folder / "appd.json", arcname="stray.json")
    problems = nbi_problems(archive)
    assert any("exactly one descriptor" in p for p in problems)
    assert any("stray.json: a file outside the package folder" in p for p in problems)
    assert any("one top-level folder" in p for p in problems)
