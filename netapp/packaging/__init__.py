"""Build the NetApp's deployable artefacts, reproducibly.

``python -m netapp.packaging --out dist`` (``make package``) writes:

* ``dpp-netapp.charm``: the Juju machine charm, packed as charmcraft packs it (charm.py), with
  the NetApp's wheel (its data plane inside) and its dependencies as wheels (wheels.py), which
  the charm installs from without an index, and the VNF package's MEC 010-2 AppD, which its
  apply-appd action applies by default;
* ``dpp-netapp_vnf.tar.gz`` and ``dpp-netapp_ns.tar.gz``: the OSM packages, laid out as
  ``osm package-build`` lays them out and checked as OSM's NBI checks an upload (osm.py).

``--image FILE`` writes that VM image's SHA-256 and size into the packaged VNFD (image.py).

Every input is checked before the slow steps (pip downloading the wheels, filling the charm's
venv), so a missing file, or a VNFD whose software-version is not the wheel's version, fails the
build at once with its name.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from netapp.packaging.archive import build_epoch
from netapp.packaging.charm import CharmProject, Log, build_charm, default_platform, default_python_version
from netapp.packaging.errors import PackagingError
from netapp.packaging.image import ImageFacts, stamp_image
from netapp.packaging.osm import (
    NAME,
    Sources,
    build_ns_package,
    build_vnf_package,
    check_ns_sources,
    check_software_version,
    check_vnf_sources,
    juju_charms,
)
from netapp.packaging.wheels import build_wheelhouse

__all__ = ["PackagingError", "build_all"]


def build_all(
    repo: Path,
    out_dir: Path,
    python_version: str | None = None,
    platform: str | None = None,
    log: Log = print,
    image: Path | None = None,
) -> list[Path]:
    """Build the charm(s) the VNFD names, then the VNF and NS packages; return what was written.
    ``image``: the VM image file whose SHA-256 and size the packaged VNFD is to carry."""
    src = Sources(repo)
    vnfd = check_vnf_sources(src)
    check_ns_sources(src, vnfd)
    facts = ImageFacts.of(image) if image is not None else None
    if facts is not None:
        stamp_image({"vnfd": vnfd}, facts)  # refused now, not after the charm is built
    projects = {name: CharmProject.load(src.charm(name)) for name in juju_charms(vnfd)}
    with tempfile.TemporaryDirectory(prefix="dpp-netapp-wheels-") as tmp:
        wheelhouse = None
        if NAME in projects:  # the charm that installs the NetApp carries it
            project = projects[NAME]
            wheelhouse = Path(tmp) / "wheels"
            built = build_wheelhouse(
                repo,
                wheelhouse,
                python_version or default_python_version(project),
                platform or default_platform(project),
                build_epoch(),
                log,
                check=lambda version: check_software_version(src, vnfd, version),
            )
            log(f"  {built.netapp.path.name}: sha256 {built.netapp.sha256}")
        charms = {
            name: build_charm(
                project.root,
                out_dir / f"{name}.charm",
                python_version,
                platform,
                log,
                wheelhouse if name == NAME else None,
                src.appd if name == NAME else None,
            )
            for name, project in projects.items()
        }
    return [
        *charms.values(),
        build_vnf_package(src, charms, out_dir, log, facts),
        build_ns_package(src, out_dir, log),
    ]
