"""The ONAP-style VNF package: an ETSI GS NFV-SOL 004 CSAR built from the same descriptors as the
OSM package.

``dpp-netapp.csar`` is a zip with a TOSCA-Metadata directory (SOL004 v2.6.1+ option "CSAR with
TOSCA-Metadata", which ONAP SDC onboards as an "ETSI SOL004 package" when block_0 names
Entry-Definitions, ETSI-Entry-Manifest and ETSI-Entry-Change-Log):

```
TOSCA-Metadata/TOSCA.meta            block_0: versions, Created-By, the ETSI-Entry-* keys
Definitions/dpp-netapp_vnfd.yaml     the SOL001 VNFD (sol001.py, from vnfd/dpp-netapp_vnfd.yaml)
Definitions/sol001_subset_types.yaml the SOL001 types it uses (vnfd/sol001/, offline)
dpp-netapp.mf                        metadata + Source/Algorithm/Hash per file
ChangeLog.txt                        ETSI-Entry-Change-Log
Licenses/LICENSE                     ETSI-Entry-Licenses
Artifacts/charms/dpp-netapp.charm    the charm, packed as for `juju deploy`
Artifacts/mec/dpp-netapp_appd.json   the MEC 010-2 AppD
Artifacts/cloud_init/<file>          each VDU's cloud-init (the VNFD's boot_data)
```

The manifest digests every file of the archive but the manifest itself (SOL004 has signatures
excluded too; this package is unsigned), one algorithm for all: SHA-256 by default, SHA-512 on
request (``--csar-digest sha-512``). ``csar_problems`` re-reads a built archive and recomputes each
digest; the build refuses a CSAR it finds a problem in.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from netapp.packaging.archive import build_epoch, tree_files, write_zip
from netapp.packaging.errors import PackagingError
from netapp.packaging.image import ImageFacts, stamp_image
from netapp.packaging.osm import Sources, check_vnf_sources, cloud_init_files, juju_charms
from netapp.packaging.sol001 import Artefacts, translate

Log = Callable[[str], None]

META_FILE = "TOSCA-Metadata/TOSCA.meta"
DEFINITIONS = "Definitions"
TYPES_FILE = "sol001_subset_types.yaml"
CHANGE_LOG = "ChangeLog.txt"
LICENSES = "Licenses"
ARTIFACTS = "Artifacts"
# SOL004 manifest Algorithm names -> hashlib constructors.
DIGESTS: dict[str, Callable[[], Any]] = {"SHA-256": hashlib.sha256, "SHA-512": hashlib.sha512}
DEFAULT_DIGEST = "SHA-256"
MANIFEST_METADATA = ("vnf_provider_id", "vnf_product_name", "vnf_release_date_time", "vnf_package_version")
# block_0 of TOSCA.meta: SOL004 requires the ETSI-Entry-* keys when there is a TOSCA-Metadata
# directory; ONAP SDC's SOL004 detection looks for the first three of them.
META_REQUIRED = (
    "TOSCA-Meta-File-Version",
    "CSAR-Version",
    "Created-By",
    "Entry-Definitions",
    "ETSI-Entry-Manifest",
    "ETSI-Entry-Change-Log",
    "ETSI-Entry-Licenses",
)
SIGNATURE_SUFFIXES = (".sig.p7s", ".cms")


def digest_name(option: str) -> str:
    """``sha-256`` / ``SHA256`` / ``sha512`` ... -> the manifest's spelling (``SHA-256``)."""
    wanted = option.upper().replace("_", "-")
    if "-" not in wanted and wanted.startswith("SHA"):
        wanted = f"SHA-{wanted[3:]}"
    if wanted not in DIGESTS:
        raise PackagingError(
            f"--csar-digest {option}: not supported; use one of {', '.join(DIGESTS).lower()}"
        )
    return wanted


def file_digest(data: bytes, algorithm: str) -> str:
    """The hex digest the manifest writes for ``data``."""
    return DIGESTS[algorithm](data).hexdigest()


def rfc3339(epoch: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(epoch))


@dataclass(frozen=True)
class Layout:
    """Where each input goes in the CSAR (paths relative to its root)."""

    name: str

    @property
    def vnfd(self) -> str:
        return f"{DEFINITIONS}/{self.name}_vnfd.yaml"

    @property
    def manifest(self) -> str:
        return f"{self.name}.mf"

    def charm(self, charm: str) -> str:
        return f"{ARTIFACTS}/charms/{charm}.charm"

    @property
    def appd(self) -> str:
        return f"{ARTIFACTS}/mec/{self.name}_appd.json"

    def cloud_init(self, file: str) -> str:
        return f"{ARTIFACTS}/cloud_init/{file}"


def from_definitions(path: str) -> str:
    """A CSAR path as the VNFD names it (TOSCA resolves artefact files from the template's folder)."""
    return f"../{path}"


def tosca_meta(layout: Layout, created_by: str) -> str:
    """TOSCA.meta block_0 (SOL004 v2.6.1 clause 4.3.6, the keys in the order it lists them)."""
    entries = {
        "TOSCA-Meta-File-Version": "1.0",
        "CSAR-Version": "1.1",
        "Created-By": created_by,
        "Entry-Definitions": layout.vnfd,
        "ETSI-Entry-Manifest": layout.manifest,
        "ETSI-Entry-Change-Log": CHANGE_LOG,
        "ETSI-Entry-Licenses": LICENSES,
    }
    return "".join(f"{key}: {value}\n" for key, value in entries.items())


def manifest_text(metadata: dict[str, str], root: Path, algorithm: str, skip: set[str]) -> str:
    """The SOL004 manifest: the metadata block, then one Source/Algorithm/Hash block per file."""
    lines = ["metadata:"] + [f"{key}: {metadata[key]}" for key in MANIFEST_METADATA]
    for rel in tree_files(root):
        source = rel.as_posix()
        if source in skip:
            continue
        lines += [
            "",
            f"Source: {source}",
            f"Algorithm: {algorithm}",
            f"Hash: {file_digest((root / rel).read_bytes(), algorithm)}",
        ]
    return "\n".join(lines) + "\n"


def change_log(vnfd: dict[str, Any], released: str) -> str:
    """ETSI-Entry-Change-Log: this package version's entry (the history of the project is git's)."""
    return (
        f"{released} {vnfd['product-name']} {vnfd['software-version']} "
        f"(VNFD {vnfd['id']} version {vnfd['version']})\n"
        f"  Built from the SOL006 VNFD vnfd/{vnfd['product-name']}_vnfd.yaml "
        "by `python -m netapp.packaging`.\n"
    )


class _NoAliasDumper(yaml.SafeDumper):
    """Writes a value used twice (the VNF's identity, as property and as default) out twice, not as
    a YAML anchor and alias, which some TOSCA readers do not resolve."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _copy(path: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, dest)


def check_csar_sources(src: Sources) -> dict[str, Any]:
    """Load the VNFD and check what the CSAR adds to the VNF package's inputs (the SOL001 types,
    the licence); all problems in one error."""
    vnfd = check_vnf_sources(src)
    missing = [path for path in (types_file(src), src.root / "LICENSE") if not path.is_file()]
    if missing:
        raise PackagingError(
            "\n".join(f"{src.rel(path)}: not found (the CSAR carries it)" for path in missing)
        )
    return vnfd


def types_file(src: Sources) -> Path:
    return src.root / "vnfd" / "sol001" / TYPES_FILE


def stage_csar(
    src: Sources,
    vnfd: dict[str, Any],
    charms: dict[str, Path],
    parent: Path,
    algorithm: str = DEFAULT_DIGEST,
) -> Path:
    """Lay out the CSAR's tree in ``parent/<name>_csar`` and return it; ``charms`` maps charm name
    -> built .charm file, ``vnfd`` is the (possibly image-stamped) VNFD mapping."""
    root = parent / f"{src.name}_csar"
    layout = Layout(src.name)
    for charm in juju_charms(vnfd):
        if charm not in charms:
            raise PackagingError(f"{src.rel(src.vnfd)} names charm '{charm}', but no {charm}.charm was built")
        _copy(charms[charm], root / layout.charm(charm))
    _copy(src.appd, root / layout.appd)
    for name in cloud_init_files(vnfd):
        _copy(src.cloud_init / name, root / layout.cloud_init(name))
    _copy(types_file(src), root / DEFINITIONS / TYPES_FILE)
    _copy(src.root / "LICENSE", root / LICENSES / "LICENSE")

    artefacts = Artefacts(
        charms={charm: from_definitions(layout.charm(charm)) for charm in juju_charms(vnfd)},
        appd=from_definitions(layout.appd),
        cloud_init={name: from_definitions(layout.cloud_init(name)) for name in cloud_init_files(vnfd)},
    )
    definitions = translate(vnfd, artefacts, TYPES_FILE)
    (root / layout.vnfd).write_text(
        yaml.dump(definitions, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True, width=100)
    )

    released = rfc3339(build_epoch())
    (root / CHANGE_LOG).write_text(change_log(vnfd, released))
    (root / META_FILE).parent.mkdir(parents=True, exist_ok=True)
    (root / META_FILE).write_text(tosca_meta(layout, vnfd["provider"]))
    metadata = {
        "vnf_provider_id": vnfd["provider"],
        "vnf_product_name": vnfd["product-name"],
        "vnf_release_date_time": released,
        "vnf_package_version": str(vnfd["software-version"]),
    }
    (root / layout.manifest).write_text(manifest_text(metadata, root, algorithm, {layout.manifest}))
    return root


# --------------------------------------------------------------------------------------------
# Reading a built CSAR back
# --------------------------------------------------------------------------------------------


def parse_tosca_meta(text: str) -> dict[str, str]:
    """block_0 of TOSCA.meta as key -> value (later blocks, if any, are per-file and ignored)."""
    entries: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if not sep:
            raise PackagingError(f"{META_FILE}: line {line!r} is not 'key: value'")
        entries[key.strip()] = value.strip()
    return entries


@dataclass(frozen=True)
class Manifest:
    metadata: dict[str, str]
    sources: list[tuple[str, str, str]]  # (Source, Algorithm, Hash) in file order


def parse_manifest(text: str) -> Manifest:
    """A SOL004 manifest: blocks separated by blank lines, the first ``metadata:``."""
    blocks = [block.splitlines() for block in text.strip().split("\n\n") if block.strip()]
    if not blocks or blocks[0][0].strip() != "metadata:":
        raise PackagingError("manifest: does not start with a 'metadata:' block")
    metadata = {}
    for line in blocks[0][1:]:
        key, _, value = line.partition(":")
        metadata[key.strip()] = value.strip()
    sources = []
    for block in blocks[1:]:
        fields = {}
        for line in block:
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if set(fields) != {"Source", "Algorithm", "Hash"}:
            raise PackagingError(f"manifest: block {block} is not Source/Algorithm/Hash")
        sources.append((fields["Source"], fields["Algorithm"], fields["Hash"]))
    return Manifest(metadata, sources)


def csar_problems(csar: Path) -> list[str]:
    """What is wrong with a built CSAR's metadata and manifest (empty when nothing is): every
    TOSCA.meta entry present and pointing into the archive, the manifest's metadata complete, each
    file but the manifest and signatures listed once, each digest right."""
    with zipfile.ZipFile(csar) as archive:
        contents = {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}
    if META_FILE not in contents:
        return [f"{META_FILE}: missing"]
    meta = parse_tosca_meta(contents[META_FILE].decode())
    problems = [f"{META_FILE}: no {key}" for key in META_REQUIRED if key not in meta]
    for key in ("Entry-Definitions", "ETSI-Entry-Manifest", "ETSI-Entry-Change-Log"):
        if key in meta and meta[key] not in contents:
            problems.append(f"{META_FILE}: {key} names {meta[key]}, not in the archive")
    licences = meta.get("ETSI-Entry-Licenses")
    if licences and not any(name.startswith(f"{licences}/") for name in contents):
        problems.append(f"{META_FILE}: ETSI-Entry-Licenses names {licences}/, which holds no file")
    manifest_name = meta.get("ETSI-Entry-Manifest")
    if manifest_name not in contents:
        return problems
    try:
        manifest = parse_manifest(contents[manifest_name].decode())
    except PackagingError as exc:
        return [*problems, f"{manifest_name}: {exc}"]
    problems += [
        f"{manifest_name}: metadata has no {key}"
        for key in MANIFEST_METADATA
        if not manifest.metadata.get(key)
    ]
    seen: dict[str, int] = {}
    for source, algorithm, digest in manifest.sources:
        seen[source] = seen.get(source, 0) + 1
        if source not in contents:
            problems.append(f"{manifest_name}: Source {source} is not in the archive")
        elif algorithm not in DIGESTS:
            problems.append(
                f"{manifest_name}: Source {source}: Algorithm {algorithm} is not one of {list(DIGESTS)}"
            )
        elif file_digest(contents[source], algorithm) != digest:
            problems.append(f"{manifest_name}: Source {source}: {algorithm} differs from the file's")
    problems += [
        f"{manifest_name}: Source {source} listed {count} times"
        for source, count in seen.items()
        if count > 1
    ]
    signatures = {meta.get("ETSI-Entry-Certificate")}
    for name in sorted(contents):
        if name == manifest_name or name in signatures or name.endswith(SIGNATURE_SUFFIXES):
            continue
        if name not in seen:
            problems.append(f"{manifest_name}: {name} is in the archive but not listed")
    for name in contents:
        parts = PurePosixPath(name).parts
        if name.startswith("/") or ".." in parts:
            problems.append(f"{name}: absolute path or '..'")
    return problems


def build_csar(
    src: Sources,
    charms: dict[str, Path],
    out_dir: Path,
    log: Log = print,
    image: ImageFacts | None = None,
    digest: str = DEFAULT_DIGEST,
) -> Path:
    """``out_dir/<name>.csar`` from the repository's vnfd/ and the built charms; refused (and not
    left behind) if ``csar_problems`` finds anything."""
    algorithm = digest_name(digest)
    vnfd = check_csar_sources(src)
    if image is not None:
        vnfd = stamp_image({"vnfd": vnfd}, image)["vnfd"]
    out = out_dir / f"{src.name}.csar"
    log(f"building SOL004 CSAR -> {out} (manifest digests {algorithm})")
    with tempfile.TemporaryDirectory(prefix=f"{src.name}-csar-") as tmp:
        root = stage_csar(src, vnfd, charms, Path(tmp), algorithm)
        write_zip(root, out, build_epoch())
    problems = csar_problems(out)
    if problems:
        out.unlink()
        raise PackagingError(f"{out.name} is not a consistent SOL004 package:\n" + "\n".join(problems))
    log(f"  wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return out
