"""Pack the Juju machine charm into a ``.charm`` archive the way ``charmcraft pack`` does.

charmcraft needs snap and LXD, which Debian has not, so this module reproduces what charmcraft 3
writes for a machine charm with the unified ``charmcraft.yaml`` (canonical/charmcraft):

* ``dispatch``: charmcraft's script (``const.DISPATCH_CONTENT``), which runs the entrypoint
  ``src/charm.py`` with ``PYTHONPATH=lib:venv`` and ``JUJU_DISPATCH_PATH`` set for Juju versions
  that still run hooks/<name>;
* ``hooks/install``, ``hooks/start``, ``hooks/upgrade-charm`` (``const.MANDATORY_HOOK_NAMES``):
  symlinks to dispatch in charmcraft's build tree, but its ``utils.build_zip`` follows symlinks,
  so the packed charm holds copies; so does ours;
* ``metadata.yaml``, ``config.yaml``, ``actions.yaml`` generated from the matching parts of
  charmcraft.yaml (``services/package.py`` ``write_metadata``, ``models/metadata.py``
  ``CharmMetadata.from_charm``), and ``manifest.yaml`` with the run-on bases;
* ``src/``, ``lib/`` (charm libraries, when present) and ``venv/``: the dependencies of
  requirements.txt, installed for the charm's base rather than for this machine;
* ``wheels/``, when given a wheelhouse (wheels.py): the NetApp and its dependencies as wheels,
  which the charm installs from without an index. Not charmcraft's: its ``dump`` part would copy
  a prepared folder the same way;
* ``appd.json``, when given an AppD: the VNF package's MEC 010-2 AppD, copied from its one source
  at build time, which the charm's apply-appd action applies when neither the action nor the
  ``appd`` option gives one (so OSM's day 1 onboards it with no instantiation parameter). Not
  charmcraft's either: a ``dump`` part of the file would do the same.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from netapp.packaging.archive import EXEC_MODE, build_epoch, write_zip
from netapp.packaging.errors import PackagingError

Log = Callable[[str], None]

CHARMCRAFT_FILE = "charmcraft.yaml"
REQUIREMENTS_FILE = "requirements.txt"
ENTRYPOINT = "src/charm.py"
# charmcraft const.DISPATCH_CONTENT, with the entrypoint filled in.
DISPATCH = (
    "#!/bin/sh\n"
    "\n"
    'JUJU_DISPATCH_PATH="${JUJU_DISPATCH_PATH:-$0}" PYTHONPATH=lib:venv \\\n'
    f"  exec ./{ENTRYPOINT}\n"
)
# charmcraft const.MANDATORY_HOOK_NAMES: what Juju before the dispatch mechanism looks for.
MANDATORY_HOOKS = ("install", "start", "upgrade-charm")
# The metadata.yaml keys of charmcraft's CharmMetadata model, in its order; charmcraft.yaml keys
# outside this list (type, base, platforms, parts, config, actions, ...) are build settings or
# have files of their own.
METADATA_KEYS = (
    "name", "display-name", "summary", "description", "maintainers", "assumes", "charm-user",
    "containers", "devices", "docs", "extra-bindings", "issues", "peers", "provides", "requires",
    "resources", "source", "storage", "subordinate", "terms", "website",
)  # fmt: skip
# Plain files of a charm project that charmcraft's packed charm keeps (const.CHARM_OPTIONAL_FILES).
OPTIONAL_FILES = ("README.md", "LICENSE", "icon.svg", "version")
# The Python each base ships: the charm's venv must hold wheels for that interpreter.
BASE_PYTHON = {"ubuntu@20.04": "3.8", "ubuntu@22.04": "3.10", "ubuntu@24.04": "3.12"}
# Juju architecture names -> the machine names in wheel platform tags.
ARCH_MACHINE = {
    "amd64": "x86_64",
    "arm64": "aarch64",
    "ppc64el": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}
# manylinux2014 = glibc 2.17: wheels built for it run on every Ubuntu base above.
DEFAULT_MANYLINUX = "manylinux2014"
PYTHON_VERSION = re.compile(r"^3\.\d{1,2}$")


@dataclass(frozen=True)
class CharmProject:
    """A charm project folder: its charmcraft.yaml, sources and requirements."""

    root: Path
    spec: dict[str, Any]

    @classmethod
    def load(cls, root: Path) -> CharmProject:
        """Read and check ``root/charmcraft.yaml``; every problem names the file and key."""
        path = root / CHARMCRAFT_FILE
        if not path.is_file():
            raise PackagingError(f"{path}: not found (a charm project needs its charmcraft.yaml)")
        try:
            spec = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise PackagingError(f"{path}: not valid YAML: {exc}") from exc
        if not isinstance(spec, dict):
            raise PackagingError(f"{path}: must be a YAML mapping")
        project = cls(root=root, spec=spec)
        project._check(path)
        return project

    def _check(self, path: Path) -> None:
        if self.spec.get("type") != "charm":
            raise PackagingError(f"{path}: type must be 'charm', not {self.spec.get('type')!r}")
        for key in ("name", "summary", "description", "base"):
            if not isinstance(self.spec.get(key), str) or not self.spec[key].strip():
                raise PackagingError(f"{path}: '{key}' is missing or not a string")
        if not isinstance(self.spec.get("platforms"), dict) or not self.spec["platforms"]:
            raise PackagingError(f"{path}: 'platforms' must name at least one architecture")
        for section in ("config", "actions"):
            if section in self.spec and not isinstance(self.spec[section], dict):
                raise PackagingError(f"{path}: '{section}' must be a mapping")
        for needed in (ENTRYPOINT, REQUIREMENTS_FILE):
            if not (self.root / needed).is_file():
                raise PackagingError(f"{self.root / needed}: not found (the charm's {needed})")

    @property
    def name(self) -> str:
        """The charm's name, the folder name a VNFD's ``juju: charm:`` refers to."""
        return self.spec["name"]

    @property
    def base(self) -> str:
        """The run-on base, e.g. ``ubuntu@24.04``."""
        return self.spec["base"]

    @property
    def architectures(self) -> list[str]:
        """The architectures the platforms build for (a bare platform name is its architecture)."""
        found: list[str] = []
        for name, platform in self.spec["platforms"].items():
            build_for = platform.get("build-for", [name]) if isinstance(platform, dict) else [name]
            for arch in [build_for] if isinstance(build_for, str) else build_for:
                arch = str(arch).split(":")[-1]  # "ubuntu@24.04:amd64" -> "amd64"
                if arch not in found:
                    found.append(arch)
        return found


# --------------------------------------------------------------------------------------------
# Generated files
# --------------------------------------------------------------------------------------------


def metadata(spec: dict[str, Any]) -> dict[str, Any]:
    """metadata.yaml as charmcraft's CharmMetadata.from_charm writes it: ``title`` becomes
    ``display-name``, ``links`` are flattened (documentation -> docs, contact -> maintainers),
    then only the metadata keys are kept."""
    merged = dict(spec)
    if "title" in merged:
        merged["display-name"] = merged.pop("title")
    links = dict(merged.pop("links", None) or {})
    if "documentation" in links:
        merged["docs"] = links.pop("documentation")
    if "contact" in links:
        contact = links.pop("contact")
        merged["maintainers"] = [contact] if isinstance(contact, str) else contact
    merged.update(links)
    return {key: merged[key] for key in METADATA_KEYS if merged.get(key) is not None}


def manifest(project: CharmProject) -> dict[str, Any]:
    """manifest.yaml: the run-on bases (all Juju reads of it: juju/charm manifest.go) and the
    two analysis attributes charmcraft's linters report. No charmcraft-version or
    charmcraft-started-at: charmcraft did not build this charm."""
    distro, _, channel = project.base.partition("@")
    requirements = (project.root / REQUIREMENTS_FILE).read_text()
    uses_ops = re.search(r"^\s*ops\b", requirements, re.MULTILINE) is not None
    return {
        "bases": [{"name": distro, "channel": channel, "architectures": project.architectures}],
        "analysis": {
            "attributes": [
                {"name": "language", "result": "python"},
                {"name": "framework", "result": "operator" if uses_ops else "unknown"},
            ]
        },
    }


class _BlockDumper(yaml.SafeDumper):
    """Writes multi-line strings (descriptions) as ``|`` blocks, as they read in charmcraft.yaml."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def _dump(data: dict[str, Any]) -> str:
    """YAML in the source's key order (readable next to charmcraft.yaml), no flow style."""
    return yaml.dump(
        data, Dumper=_BlockDumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100
    )


# --------------------------------------------------------------------------------------------
# Dependencies
# --------------------------------------------------------------------------------------------


def default_python_version(project: CharmProject) -> str:
    """The Python of the charm's base, which runs the charm on the unit."""
    try:
        return BASE_PYTHON[project.base]
    except KeyError:
        known = ", ".join(BASE_PYTHON)
        raise PackagingError(
            f"{project.root / CHARMCRAFT_FILE}: no known Python for base {project.base!r} "
            f"(known: {known}); pass --python-version"
        ) from None


def default_platform(project: CharmProject) -> str:
    """The wheel platform tag of the charm's (first) architecture."""
    arch = project.architectures[0]
    if arch not in ARCH_MACHINE:
        raise PackagingError(
            f"{project.root / CHARMCRAFT_FILE}: no wheel platform known for architecture {arch!r}; "
            "pass --platform"
        )
    return f"{DEFAULT_MANYLINUX}_{ARCH_MACHINE[arch]}"


def pip_command(requirements: Path, target: Path, python_version: str, platform: str) -> list[str]:
    """pip, run by this interpreter, installing binary wheels for the unit's Python and platform.

    ``--no-compile``: byte code would embed install times (and Python compiles on first import
    on the unit anyway).
    """
    return [
        sys.executable, "-m", "pip", "install",
        "--target", str(target), "--requirement", str(requirements),
        "--platform", platform, "--python-version", python_version,
        "--implementation", "cp", "--only-binary=:all:",
        "--no-compile", "--no-input", "--disable-pip-version-check", "--progress-bar", "off",
    ]  # fmt: skip


def install_dependencies(requirements: Path, target: Path, python_version: str, platform: str) -> None:
    """Fill ``target`` (the charm's venv/) with requirements.txt's packages.

    Like charmcraft, which copies only the site-packages of its staging venv, console scripts
    (``target/bin``, whose shebangs name this machine's interpreter) are left out.
    """
    if not PYTHON_VERSION.match(python_version):
        raise PackagingError(f"python version {python_version!r} is not of the form 3.X")
    done = subprocess.run(
        pip_command(requirements, target, python_version, platform),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise PackagingError(
            f"pip could not install {requirements.name} for Python {python_version} on {platform}:\n{tail}"
        )
    shutil.rmtree(target / "bin", ignore_errors=True)
    for cache in sorted(target.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# The charm tree and its archive
# --------------------------------------------------------------------------------------------


def _skipped(rel: Path) -> bool:
    """Hidden files, byte code and caches are build leftovers (charmcraft's default .jujuignore
    drops VCS and tox folders; these never belong in a charm either)."""
    return any(part.startswith(".") or part == "__pycache__" for part in rel.parts) or rel.suffix == ".pyc"


def copy_sources(src: Path, dest: Path) -> None:
    """Copy a source folder (src/ or lib/) without build leftovers, keeping executable bits."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_file() and not _skipped(rel):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest / rel)


def write_dispatch(tree: Path) -> None:
    """dispatch, and the mandatory hooks as copies of it (what charmcraft's zip holds)."""
    for rel in ("dispatch", *(f"hooks/{hook}" for hook in MANDATORY_HOOKS)):
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(DISPATCH)
        path.chmod(EXEC_MODE)


def write_metadata_files(project: CharmProject, tree: Path) -> None:
    """metadata.yaml, manifest.yaml, and config.yaml / actions.yaml when charmcraft.yaml has them."""
    (tree / "metadata.yaml").write_text(_dump(metadata(project.spec)))
    (tree / "manifest.yaml").write_text(_dump(manifest(project)))
    for section in ("config", "actions"):
        if project.spec.get(section):
            (tree / f"{section}.yaml").write_text(_dump(project.spec[section]))


WHEELS_DIR = "wheels"
# Where the charm carries the AppD (charms/dpp-netapp/src/netapp_workload.py SHIPPED_APPD reads it).
APPD_FILE = "appd.json"


def stage(
    project: CharmProject,
    tree: Path,
    python_version: str,
    platform: str,
    log: Log,
    wheelhouse: Path | None = None,
    appd: Path | None = None,
) -> None:
    """Lay out the charm as it is packed: what charmcraft's prime directory holds,
    ``wheelhouse`` (a folder of wheels) as ``wheels/`` and ``appd`` (an AppD file) as APPD_FILE."""
    tree.mkdir(parents=True, exist_ok=True)
    copy_sources(project.root / "src", tree / "src")
    (tree / ENTRYPOINT).chmod(EXEC_MODE)  # dispatch execs it
    if (project.root / "lib").is_dir():
        copy_sources(project.root / "lib", tree / "lib")
    for name in OPTIONAL_FILES:
        if (project.root / name).is_file():
            shutil.copy2(project.root / name, tree / name)
    write_dispatch(tree)
    write_metadata_files(project, tree)
    log(f"  installing {REQUIREMENTS_FILE} into venv/ (Python {python_version}, {platform})")
    install_dependencies(project.root / REQUIREMENTS_FILE, tree / "venv", python_version, platform)
    if wheelhouse is not None:
        shutil.copytree(wheelhouse, tree / WHEELS_DIR)
    if appd is not None:
        shutil.copyfile(appd, tree / APPD_FILE)


def build_charm(
    charm_root: Path,
    out: Path,
    python_version: str | None = None,
    platform: str | None = None,
    log: Log = print,
    wheelhouse: Path | None = None,
    appd: Path | None = None,
) -> Path:
    """Build ``out`` (a ``.charm`` zip) from the charm project at ``charm_root``; ``wheelhouse``:
    a folder of wheels (wheels.py) the charm carries as ``wheels/``; ``appd``: the AppD file it
    carries as APPD_FILE."""
    project = CharmProject.load(charm_root)
    python_version = python_version or default_python_version(project)
    platform = platform or default_platform(project)
    log(f"building charm {project.name} -> {out}")
    with tempfile.TemporaryDirectory(prefix=f"{project.name}-charm-") as tmp:
        tree = Path(tmp) / project.name
        stage(project, tree, python_version, platform, log, wheelhouse, appd)
        write_zip(tree, out, build_epoch())
    log(f"  wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return out
