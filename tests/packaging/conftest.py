"""Fixtures of the packaging tests: the NetApp's wheelhouse and the charm carrying it, built once
per session (tests/packaging/helpers.py says for which Python and why), unpacked, and the OSM
packages built from it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from netapp.packaging.archive import extract_zip
from netapp.packaging.osm import Sources, build_ns_package, build_vnf_package
from netapp.packaging.wheels import Wheelhouse
from tests.packaging.helpers import CHARM_ROOT, REPO_ROOT, build_test_charm, build_test_wheelhouse, quiet
from tests.utils.run_wide import made_once
from tests.utils.yang import YANG_DIR, NbiValidator, missing_tools


@pytest.fixture(scope="session")
def charmcraft() -> dict:
    return yaml.safe_load((CHARM_ROOT / "charmcraft.yaml").read_text())


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Wheelhouse:
    """Built by the first worker that needs it, shared by the others (a minute on a loaded machine)."""
    return made_once(tmp_path_factory, worker_id, "wheelhouse", lambda folder: build_test_wheelhouse(folder / "wheels"))


@pytest.fixture(scope="session")
def charm_archive(wheelhouse: Wheelhouse, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    def build(folder: Path) -> Path:
        return build_test_charm(folder / "dpp-netapp.charm", wheelhouse.folder)

    return made_once(tmp_path_factory, worker_id, "charm", build)


@pytest.fixture(scope="session")
def osm_packages(charm_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``{"vnf": <tar.gz>, "ns": <tar.gz>}`` built from the repository and the session's charm."""
    out = tmp_path_factory.mktemp("dist")
    src = Sources(REPO_ROOT)
    return {
        "vnf": build_vnf_package(src, {"dpp-netapp": charm_archive}, out, log=quiet),
        "ns": build_ns_package(src, out, log=quiet),
    }


@pytest.fixture
def charm_dir(charm_archive: Path, tmp_path: Path) -> Path:
    """The charm unpacked as Juju unpacks it on a unit (a fresh copy per test: ops writes its
    state database into the charm folder)."""
    extract_zip(charm_archive, tmp_path / "charm")
    return tmp_path / "charm"


@pytest.fixture(scope="session")
def nbi(tmp_path_factory: pytest.TempPathFactory) -> NbiValidator:
    """pyangbind bindings generated like OSM IM does, loaded like osm_nbi does (as in
    tests/descriptors)."""
    if not YANG_DIR.is_dir():
        pytest.skip(f"SOL006/OSM YANG models not found at {YANG_DIR} (clone shared/ beside the repo)")
    reason = missing_tools()
    if reason:
        pytest.skip(reason)
    return NbiValidator(tmp_path_factory.mktemp("osm-im-bindings"))
