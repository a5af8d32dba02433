"""The wheelhouse the charm installs the NetApp from, offline: the NetApp's wheel and every runtime
dependency as a wheel for the charm's base, with a hash-pinned requirements file.

* The NetApp's wheel is built from a clean copy of the sources (``setup.py`` runs the dataplane
  Makefile and puts libdpp.so and the BPF objects inside; the copy keeps ``dataplane/build``, so
  an up-to-date data plane is not compiled again, and leaves no setuptools ``build/`` behind).
* pip downloads the dependencies of that wheel file with its extras ``CHARM_EXTRAS`` (the
  ``openstack`` one: openstacksdk, for the charm's check-openstack action), binary only, for the
  unit's Python and platform; never the NetApp itself, whose name on an index is not ours to trust.
* ``requirements.txt`` pins every wheel to its version and SHA-256 (``name==version
  --hash=sha256:...``), so ``pip install --no-index --find-links wheels --require-hashes -r
  wheels/requirements.txt`` installs exactly these files; ``SHA256SUMS`` is the same hashes in
  ``sha256sum -c`` form, for operators.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from netapp.packaging.errors import PackagingError

Log = Callable[[str], None]

PROJECT = "dpp-netapp"
REQUIREMENTS_FILE = "requirements.txt"
# The NetApp's extras the charm's wheels carry: `openstack` (`netapp openstack check`).
CHARM_EXTRAS = ("openstack",)
SHA256SUMS_FILE = "SHA256SUMS"
# What building the wheel reads from the repository (setup.py's inputs).
WHEEL_SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "netapp", "dataplane")
# {distribution}-{version}(-{build tag})?-{python}-{abi}-{platform}.whl (PEP 427)
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


@dataclass(frozen=True)
class Wheel:
    """One wheel file of the wheelhouse."""

    path: Path
    name: str
    version: str
    sha256: str

    @classmethod
    def of(cls, path: Path) -> "Wheel":
        found = WHEEL_NAME.match(path.name)
        if not found:
            raise PackagingError(f"{path.name}: not a wheel file name (name-version-python-abi-platform.whl)")
        return cls(path, canonical_name(found["name"]), found["version"], sha256_of(path))

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


@dataclass(frozen=True)
class Wheelhouse:
    """A folder of wheels with its requirements.txt and SHA256SUMS; ``netapp``: the NetApp's wheel."""

    folder: Path
    netapp: Wheel
    wheels: tuple[Wheel, ...]


def canonical_name(name: str) -> str:
    """PEP 503's normalised project name (``dpp_netapp`` -> ``dpp-netapp``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _pip(args: list[str], what: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", *args, "--no-input", "--disable-pip-version-check", "--progress-bar", "off"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise PackagingError(f"pip could not {what}:\n{tail}")


def _copy_sources(repo: Path, dest: Path) -> None:
    """What the wheel is built from, without caches, packaging leftovers or a stale build/."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".*")
    dest.mkdir(parents=True)
    for name in WHEEL_SOURCES:
        path = repo / name
        if path.is_dir():
            shutil.copytree(path, dest / name, ignore=ignore)  # copy2: make sees the build's times
        elif path.is_file():
            shutil.copy2(path, dest / name)
        else:
            raise PackagingError(f"{path}: not found (building the NetApp's wheel needs it)")


def build_netapp_wheel(repo: Path, dest: Path, epoch: int) -> Wheel:
    """The NetApp's wheel (libdpp.so and the BPF objects inside), built into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dpp-netapp-wheel-") as tmp:
        source = Path(tmp) / "src"
        _copy_sources(repo, source)
        env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch)}
        _pip(["wheel", "--no-deps", "--wheel-dir", str(dest), str(source)], "build the NetApp's wheel", env)
    built = sorted(dest.glob(f"{PROJECT.replace('-', '_')}-*.whl"))
    if len(built) != 1:
        raise PackagingError(f"building the NetApp's wheel left {[p.name for p in built]} in {dest}")
    return Wheel.of(built[0])


def download_dependencies(wheel: Wheel, dest: Path, python_version: str, platform: str) -> None:
    """Every runtime dependency of ``wheel``, its ``CHARM_EXTRAS`` included, as binary wheels for
    the unit, into ``dest``.

    The platforms pip may take: ``platform`` (pip widens manylinux2014 to the older manylinux
    tags) and plain ``linux_<arch>``, the NetApp's own wheel's tag, which pip checks too.
    """
    arch = platform.split("_", 1)[1] if "_" in platform else platform
    _pip(
        [
            "download", "--dest", str(dest), "--only-binary=:all:",
            "--platform", platform, "--platform", f"linux_{arch}",
            "--python-version", python_version, "--implementation", "cp",
            f"{wheel.path}[{','.join(CHARM_EXTRAS)}]",
        ],
        f"download the NetApp's dependencies for Python {python_version} on {platform}",
    )  # fmt: skip


def write_manifests(folder: Path, wheels: list[Wheel]) -> None:
    """requirements.txt (hash-pinned, the NetApp first) and SHA256SUMS, in a stable order."""
    header = (
        "# The NetApp and its dependencies, exactly these files (netapp.packaging.wheels):\n"
        "#   pip install --no-index --find-links wheels --require-hashes -r wheels/requirements.txt\n"
    )
    (folder / REQUIREMENTS_FILE).write_text(header + "".join(f"{w.requirement}\n" for w in wheels))
    (folder / SHA256SUMS_FILE).write_text("".join(f"{w.sha256}  {w.path.name}\n" for w in wheels))


def build_wheelhouse(
    repo: Path,
    folder: Path,
    python_version: str,
    platform: str,
    epoch: int,
    log: Log = print,
    check: Callable[[str], None] = lambda version: None,
) -> Wheelhouse:
    """Build the NetApp's wheel, download its dependencies and write the manifests into ``folder``;
    ``check`` sees the NetApp's version before the download (and may refuse it)."""
    log(f"  building the NetApp's wheel (the data plane inside) for the charm's {folder.name}/")
    netapp = build_netapp_wheel(repo, folder, epoch)
    check(netapp.version)
    log(f"  downloading its dependencies (Python {python_version}, {platform})")
    download_dependencies(netapp, folder, python_version, platform)
    others = sorted((Wheel.of(p) for p in folder.glob("*.whl") if p != netapp.path), key=lambda w: w.name)
    wheels = [netapp, *others]
    write_manifests(folder, wheels)
    return Wheelhouse(folder, netapp, tuple(wheels))


def read_requirements(folder: Path) -> dict[str, tuple[str, str]]:
    """A wheelhouse's requirements.txt as name -> (version, sha256)."""
    pins: dict[str, tuple[str, str]] = {}
    for line in (folder / REQUIREMENTS_FILE).read_text().splitlines():
        found = re.match(r"^([A-Za-z0-9._-]+)==(\S+) --hash=sha256:([0-9a-f]{64})$", line.strip())
        if found:
            pins[canonical_name(found[1])] = (found[2], found[3])
    return pins
