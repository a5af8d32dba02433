"""The wheelhouse the charm carries: the NetApp's wheel holds its data plane and is tagged for the
platform, not the Python; every dependency is a wheel; requirements.txt pins each file to its
SHA-256 and pip installs the set from it with no index; the VNFD's version must be the wheel's."""

from __future__ import annotations

import platform
import subprocess
import sys
import zipfile

import pytest

from netapp.packaging.archive import DEFAULT_EPOCH
from netapp.packaging.errors import PackagingError
from netapp.packaging.osm import Sources, check_software_version, load_vnfd
from netapp.packaging.wheels import (
    CHARM_EXTRAS,
    REQUIREMENTS_FILE,
    SHA256SUMS_FILE,
    build_netapp_wheel,
    read_requirements,
    sha256_of,
)
from tests.packaging.helpers import REPO_ROOT

PACKAGED = ("netapp/dataplane/lib/libdpp.so", "netapp/dataplane/lib/xdp_pass.bpf.o")


def test_the_netapps_wheel_is_for_this_platform_and_any_python_3(wheelhouse):
    version = wheelhouse.netapp.version
    assert wheelhouse.netapp.path.name == f"dpp_netapp-{version}-py3-none-linux_{platform.machine()}.whl"
    with zipfile.ZipFile(wheelhouse.netapp.path) as wheel:
        meta = wheel.read(f"dpp_netapp-{wheelhouse.netapp.version}.dist-info/WHEEL").decode()
    assert f"Tag: py3-none-linux_{platform.machine()}" in meta.splitlines()
    assert "Root-Is-Purelib: false" in meta.splitlines()


def test_the_netapps_wheel_carries_libdpp_and_the_bpf_objects_inside_the_package(wheelhouse):
    with zipfile.ZipFile(wheelhouse.netapp.path) as wheel:
        names = set(wheel.namelist())
        assert set(PACKAGED) <= names, sorted(n for n in names if "dataplane" in n)
        assert all(wheel.read(name)[:4] == b"\x7fELF" for name in PACKAGED)
    assert not any(name.startswith(("dataplane/", "tests/")) for name in names)


def test_requirements_pin_every_wheel_to_its_sha256_the_netapp_first(wheelhouse):
    pins = read_requirements(wheelhouse.folder)
    files = sorted(wheelhouse.folder.glob("*.whl"))
    assert len(pins) == len(files) == len(wheelhouse.wheels)
    for wheel in wheelhouse.wheels:
        assert pins[wheel.name] == (wheel.version, sha256_of(wheel.path))
    first = next(line for line in (wheelhouse.folder / REQUIREMENTS_FILE).read_text().splitlines() if "==" in line)
    assert first.startswith(f"dpp-netapp=={wheelhouse.netapp.version} --hash=sha256:{wheelhouse.netapp.sha256}")
    lines = (wheelhouse.folder / SHA256SUMS_FILE).read_text().splitlines()
    sums = dict(reversed(line.split("  ")) for line in lines)
    assert sums == {path.name: sha256_of(path) for path in files}


def test_pip_installs_the_set_from_the_wheelhouse_alone(wheelhouse, tmp_path):
    """A dry run for this interpreter: no index, every hash checked, nothing missing."""
    done = subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-index",
            "--find-links", str(wheelhouse.folder), "--require-hashes", "--only-binary=:all:",
            "-r", str(wheelhouse.folder / REQUIREMENTS_FILE), "--disable-pip-version-check",
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"dpp-netapp-{wheelhouse.netapp.version}" in done.stdout


def test_the_wheelhouse_carries_the_openstack_extra_so_the_charm_can_run_netapp_openstack(wheelhouse):
    pins = read_requirements(wheelhouse.folder)
    assert CHARM_EXTRAS == ("openstack",)
    assert {"openstacksdk", "keystoneauth1"} <= set(pins)


def test_two_builds_give_the_same_wheel(wheelhouse, tmp_path):
    again = build_netapp_wheel(REPO_ROOT, tmp_path / "again", DEFAULT_EPOCH)
    assert again.sha256 == wheelhouse.netapp.sha256


def test_the_charm_carries_the_wheelhouse_as_wheels(charm_dir, wheelhouse):
    carried = {path.name: sha256_of(path) for path in (charm_dir / "wheels").iterdir()}
    assert carried == {path.name: sha256_of(path) for path in wheelhouse.folder.iterdir()}


def test_given_a_vnfd_of_another_version_then_the_build_is_refused_naming_both(wheelhouse):
    src = Sources(REPO_ROOT)
    check_software_version(src, load_vnfd(src), wheelhouse.netapp.version)  # the repository agrees
    with pytest.raises(PackagingError) as refused:
        check_software_version(src, load_vnfd(src), "9.9.9")
    assert f"vnfd/dpp-netapp_vnfd.yaml software-version is '{wheelhouse.netapp.version}'" in str(refused.value)
    assert "vnfd/dpp-netapp_appd.json appSoftVersion" in str(refused.value)
