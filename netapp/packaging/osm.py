"""Lay out, check and archive the OSM VNF and NS packages the way ``osm package-build`` does.

Layout and checksums follow osmclient (``osmclient/common/package_tool.py``) for an OSM package
(no SOL004 ``.mf`` manifest, so osmclient builds a tar.gz, not a zip):

* one folder ``<name>_vnf/`` or ``<name>_ns/`` holding the descriptor ``<name>_vnfd.yaml`` /
  ``<name>_nsd.yaml`` (osmclient finds descriptors by the ``nfd.yaml`` / ``nsd.yaml`` suffix),
  ``README.md``, ``cloud_init/`` and ``charms/<charm>`` for each charm the descriptor names;
* ``build_tarfile`` archives that folder as ``<folder>.tar.gz``, the folder its one top entry;
* ``calculate_checksum`` writes ``checksums.txt``: ``<md5>\\t<folder>/<path>`` per file.
  osmclient globs ``**/*.*``, which skips names without a dot (``dispatch``, ``hooks/*``);
  we list every file but checksums.txt, so the charm's entry points are covered too.

The charm goes in as the unpacked charm directory ``charms/dpp-netapp/``, not as a ``.charm``
file: OSM LCM deploys ``<package>/charms/<juju.charm>`` (``osm_lcm/lcm_utils.py``
``get_charm_artifact_path``), and python-libjuju treats a local path as a packed archive only
when it ends in ``.charm`` (``juju/utils.py`` ``get_local_charm_data``); a directory it zips
itself (``CharmArchiveGenerator``). The VNFD names the charm ``dpp-netapp``, so a directory.

``nbi_problems`` checks a built archive the way OSM's NBI does on upload
(``osm_nbi/descriptor_topics.py``: ``DescriptorTopic.upload_content`` and
``VnfdTopic._validate_input_new``): every entry inside one folder, no absolute or ``..`` paths,
exactly one ``.yaml``/``.yml``/``.json`` directly in the folder (the descriptor; so the MEC AppD
JSON lives in ``mec/``), ``cloud_init/<file>`` for each VDU's cloud-init-file, a non-empty
``charms/`` when a juju execution environment is declared.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from netapp.dashboards import GRAFANA_DASHBOARD
from netapp.packaging.archive import build_epoch, extract_zip, tree_files, write_tar_gz
from netapp.packaging.errors import PackagingError
from netapp.packaging.image import ImageFacts, stamp_image

Log = Callable[[str], None]

NAME = "dpp-netapp"
CHECKSUMS_FILE = "checksums.txt"
DESCRIPTOR_SUFFIXES = (".yaml", ".yml", ".json")
APPD_FOLDER = "mec"
GRAFANA_FOLDER = "grafana"
PROMETHEUS_FOLDER = "prometheus"


@dataclass(frozen=True)
class Sources:
    """Where the package inputs live in the repository."""

    root: Path
    name: str = NAME
    dashboard: Path = GRAFANA_DASHBOARD  # shipped in the Python package, built from netapp.dashboards

    @property
    def vnfd(self) -> Path:
        return self.root / "vnfd" / f"{self.name}_vnfd.yaml"

    @property
    def vnf_readme(self) -> Path:
        return self.root / "vnfd" / "README.md"

    @property
    def cloud_init(self) -> Path:
        return self.root / "vnfd" / "cloud_init"

    @property
    def appd(self) -> Path:
        return self.root / "vnfd" / f"{self.name}_appd.json"

    @property
    def prometheus_rules(self) -> Path:
        """The VNFD's scaling policy as Prometheus alerting rules (api/telemetry.md)."""
        return self.root / "vnfd" / PROMETHEUS_FOLDER / f"{self.name}-rules.yml"

    @property
    def nsd(self) -> Path:
        return self.root / "nsd" / f"{self.name}_nsd.yaml"

    @property
    def ns_readme(self) -> Path:
        return self.root / "nsd" / "README.md"

    def charm(self, name: str) -> Path:
        """The project folder of a charm the VNFD names."""
        return self.root / "charms" / name

    def rel(self, path: Path) -> str:
        """``path`` as the repository names it, for messages."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)


# --------------------------------------------------------------------------------------------
# Descriptors
# --------------------------------------------------------------------------------------------


def _load_yaml(src: Sources, path: Path) -> Any:
    if not path.is_file():
        raise PackagingError(f"{src.rel(path)}: not found")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise PackagingError(f"{src.rel(path)}: not valid YAML: {exc}") from exc


def load_vnfd(src: Sources) -> dict[str, Any]:
    """The VNFD under its ``vnfd:`` key (the form ``osm nfpkg-create`` takes)."""
    doc = _load_yaml(src, src.vnfd)
    vnfd = doc.get("vnfd") if isinstance(doc, dict) else None
    if not isinstance(vnfd, dict) or not vnfd.get("id"):
        raise PackagingError(f"{src.rel(src.vnfd)}: expected a top-level 'vnfd:' mapping with an 'id'")
    return vnfd


def load_nsds(src: Sources) -> list[dict[str, Any]]:
    """The NSD entries under ``nsd: {nsd: [...]}`` (the form ``osm nspkg-create`` takes)."""
    doc = _load_yaml(src, src.nsd)
    nsds = (
        doc.get("nsd", {}).get("nsd") if isinstance(doc, dict) and isinstance(doc.get("nsd"), dict) else None
    )
    if not isinstance(nsds, list) or not nsds or not all(isinstance(n, dict) and n.get("id") for n in nsds):
        raise PackagingError(f"{src.rel(src.nsd)}: expected 'nsd: {{nsd: [...]}}' with an 'id' in each entry")
    return nsds


def cloud_init_files(vnfd: dict[str, Any]) -> dict[str, str]:
    """cloud-init file name -> id of the VDU naming it."""
    return {
        vdu["cloud-init-file"]: vdu.get("id", "?")
        for vdu in vnfd.get("vdu", [])
        if vdu.get("cloud-init-file")
    }


def juju_charms(vnfd: dict[str, Any]) -> list[str]:
    """Charms of the day-1/2 juju execution environments (what osmclient's charms_search finds)."""
    found: list[str] = []
    for df in vnfd.get("df", []):
        day12 = df.get("lcm-operations-configuration", {}).get("operate-vnf-op-config", {}).get("day1-2", [])
        for conf in day12:
            for ee in conf.get("execution-environment-list", []):
                charm = ee.get("juju", {}).get("charm")
                if charm and charm not in found:
                    found.append(charm)
    return found


def check_vnf_sources(src: Sources) -> dict[str, Any]:
    """Load the VNFD and check every file the VNF package needs; all problems in one error."""
    vnfd = load_vnfd(src)
    problems = [f"{src.rel(path)}: not found" for path in (src.vnf_readme, src.appd, src.prometheus_rules)
                if not path.is_file()]
    if src.appd.is_file():
        try:
            json.loads(src.appd.read_text())
        except ValueError as exc:
            problems.append(f"{src.rel(src.appd)}: not valid JSON: {exc}")
    for name, vdu in cloud_init_files(vnfd).items():
        if not (src.cloud_init / name).is_file():
            problems.append(
                f"{src.rel(src.cloud_init / name)}: not found "
                f"(cloud-init-file of vdu '{vdu}' in {src.rel(src.vnfd)})"
            )
    for charm in juju_charms(vnfd):
        if not (src.charm(charm) / "charmcraft.yaml").is_file():
            problems.append(
                f"{src.rel(src.charm(charm) / 'charmcraft.yaml')}: not found "
                f"(the juju execution environment of {src.rel(src.vnfd)} names charm '{charm}')"
            )
    if problems:
        raise PackagingError("\n".join(problems))
    return vnfd


def check_ns_sources(src: Sources, vnfd: dict[str, Any]) -> list[dict[str, Any]]:
    """Load the NSD; it may name only the VNFD packaged here (OSM needs it onboarded first)."""
    nsds = load_nsds(src)
    problems = [f"{src.rel(src.ns_readme)}: not found"] if not src.ns_readme.is_file() else []
    for nsd in nsds:
        for ref in nsd.get("vnfd-id", []):
            if ref != vnfd["id"]:
                problems.append(
                    f"{src.rel(src.nsd)}: nsd '{nsd['id']}' names vnfd '{ref}', not '{vnfd['id']}'"
                )
    if problems:
        raise PackagingError("\n".join(problems))
    return nsds


def check_software_version(src: Sources, vnfd: dict[str, Any], version: str) -> None:
    """The VNFD's software-version and the AppD's appSoftVersion must be the packaged NetApp's."""
    appd = json.loads(src.appd.read_text())
    found = {
        f"{src.rel(src.vnfd)} software-version": str(vnfd.get("software-version")),
        f"{src.rel(src.appd)} appSoftVersion": str(appd.get("appSoftVersion")),
    }
    problems = [
        f"{where} is {value!r}, the NetApp's wheel {version!r}"
        for where, value in found.items()
        if value != version
    ]
    if problems:
        raise PackagingError("\n".join(problems) + " (pyproject.toml's version)")


# --------------------------------------------------------------------------------------------
# Package folders
# --------------------------------------------------------------------------------------------


def md5_of(path: Path) -> str:
    """The file's MD5 in hex, as osmclient's utils.md5 and the NBI's Content-File-MD5 use."""
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def write_checksums(package: Path) -> None:
    """checksums.txt in osmclient's format, one line per file in path order."""
    lines = [
        f"{md5_of(package / rel)}\t{package.name}/{rel.as_posix()}\n"
        for rel in tree_files(package)
        if rel.as_posix() != CHECKSUMS_FILE
    ]
    (package / CHECKSUMS_FILE).write_text("".join(lines))


def _copy(path: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, dest)


def _write_vnfd(src: Sources, dest: Path, image: ImageFacts | None) -> None:
    """The VNFD as written, or, with an image, stamped with its hash and size (the comments of the
    repository's file do not survive that: OSM reads the data only)."""
    if image is None:
        _copy(src.vnfd, dest)
        return
    stamped = stamp_image(_load_yaml(src, src.vnfd), image)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(yaml.safe_dump(stamped, sort_keys=False, allow_unicode=True))


def stage_vnf_package(
    src: Sources,
    vnfd: dict[str, Any],
    charms: dict[str, Path],
    parent: Path,
    image: ImageFacts | None = None,
) -> Path:
    """Lay out ``<name>_vnf/`` in ``parent``; ``charms`` maps charm name -> built .charm file;
    ``image``: the VM image whose hash and size the packaged VNFD carries."""
    package = parent / f"{src.name}_vnf"
    _write_vnfd(src, package / src.vnfd.name, image)
    _copy(src.vnf_readme, package / "README.md")
    for path in sorted(src.cloud_init.glob("*")):
        if path.is_file() and not path.name.startswith("."):
            _copy(path, package / "cloud_init" / path.name)
    _copy(src.appd, package / APPD_FOLDER / src.appd.name)
    _copy(src.dashboard, package / GRAFANA_FOLDER / src.dashboard.name)
    _copy(src.prometheus_rules, package / PROMETHEUS_FOLDER / src.prometheus_rules.name)
    for charm in juju_charms(vnfd):
        if charm not in charms:
            raise PackagingError(f"{src.rel(src.vnfd)} names charm '{charm}', but no {charm}.charm was built")
        extract_zip(charms[charm], package / "charms" / charm)
    write_checksums(package)
    return package


def stage_ns_package(src: Sources, parent: Path) -> Path:
    """Lay out ``<name>_ns/`` in ``parent``."""
    package = parent / f"{src.name}_ns"
    _copy(src.nsd, package / src.nsd.name)
    _copy(src.ns_readme, package / "README.md")
    write_checksums(package)
    return package


# --------------------------------------------------------------------------------------------
# Archives, checked as the NBI reads them
# --------------------------------------------------------------------------------------------


def nbi_problems(archive: Path, vnfd: dict[str, Any] | None = None) -> list[str]:
    """What OSM's NBI would reject in this package tar.gz (empty when it would onboard it)."""
    with tarfile.open(archive, "r:gz") as tar:
        members = [(member.name, member.isdir()) for member in tar.getmembers()]
    problems = []
    tops = sorted({name.split("/")[0] for name, _ in members})
    if len(tops) != 1:
        problems.append(f"expected one top-level folder, found {tops}")
    for name, is_dir in members:
        parts = name.split("/")
        if not parts[0] or ".." in parts:
            problems.append(f"{name}: absolute path or '..'")
        elif len(parts) == 1 and not is_dir:
            problems.append(f"{name}: a file outside the package folder")
    descriptors = [
        n for n, d in members if not d and len(n.split("/")) == 2 and n.endswith(DESCRIPTOR_SUFFIXES)
    ]
    if len(descriptors) != 1:
        problems.append(f"expected exactly one descriptor file in the package folder, found {descriptors}")
    if vnfd is not None and tops:
        files = {name for name, is_dir in members if not is_dir}
        for name in cloud_init_files(vnfd):
            if f"{tops[0]}/cloud_init/{name}" not in files:
                problems.append(f"cloud_init/{name}: named by the VNFD but not in the package")
        for charm in juju_charms(vnfd):
            if f"{tops[0]}/charms/{charm}/metadata.yaml" not in files:
                problems.append(
                    f"charms/{charm}/: named by the VNFD but not in the package as a charm directory"
                )
    return problems


def archive_package(package: Path, out: Path, vnfd: dict[str, Any] | None = None) -> Path:
    """Tar ``package`` to ``out`` and refuse the result if the NBI would."""
    write_tar_gz(package, package.name, out, build_epoch())
    problems = nbi_problems(out, vnfd)
    if problems:
        out.unlink()
        raise PackagingError(f"{out.name} would not onboard:\n" + "\n".join(problems))
    return out


def build_vnf_package(
    src: Sources,
    charms: dict[str, Path],
    out_dir: Path,
    log: Log = print,
    image: ImageFacts | None = None,
) -> Path:
    """``out_dir/<name>_vnf.tar.gz`` from the repository's vnfd/ and the built charms."""
    vnfd = check_vnf_sources(src)
    out = out_dir / f"{src.name}_vnf.tar.gz"
    log(f"building VNF package -> {out}")
    if image is not None:
        log(f"  image {image.path.name}: sha-256 {image.sha256}, {image.size_gb} GB")
    with tempfile.TemporaryDirectory(prefix=f"{src.name}-vnf-") as tmp:
        archive_package(stage_vnf_package(src, vnfd, charms, Path(tmp), image), out, vnfd)
    log(f"  wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return out


def build_ns_package(src: Sources, out_dir: Path, log: Log = print) -> Path:
    """``out_dir/<name>_ns.tar.gz`` from the repository's nsd/."""
    check_ns_sources(src, load_vnfd(src))
    out = out_dir / f"{src.name}_ns.tar.gz"
    log(f"building NS package -> {out}")
    with tempfile.TemporaryDirectory(prefix=f"{src.name}-ns-") as tmp:
        archive_package(stage_ns_package(src, Path(tmp)), out)
    log(f"  wrote {out}")
    return out
