"""Helpers of the packaging tests: where the charm is, and building it for this interpreter.

The charm is built for the running interpreter (its Python version and this machine's wheel
platform), so that the binary wheels in its venv import here; ``make package`` builds it for the
charm's base instead. pip downloads the wheels: when the package index is unreachable and CI is
not set the tests skip and say so; under CI a failed download fails them.
"""

from __future__ import annotations

import os
import platform
import sys
import tarfile
import urllib.request
from pathlib import Path

import pytest

from netapp.packaging.archive import DEFAULT_EPOCH
from netapp.packaging.charm import build_charm
from netapp.packaging.errors import PackagingError
from netapp.packaging.osm import Sources
from netapp.packaging.wheels import Wheelhouse, build_wheelhouse

REPO_ROOT = Path(__file__).resolve().parents[2]
CHARM_ROOT = REPO_ROOT / "charms" / "dpp-netapp"
APPD_SOURCE = Sources(REPO_ROOT).appd  # the one AppD file: the VNF package's and the charm's
RUNNING_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
RUNNING_PLATFORM = f"manylinux2014_{platform.machine()}"


def quiet(line: str) -> None:
    """A build log that prints nothing (pytest shows the build's errors, not its progress)."""


def index_url() -> str:
    """The package index pip downloads from."""
    return os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/")


def index_reachable(url: str) -> bool:
    """Whether the package index answers at all (a failed build may have other causes)."""
    try:
        urllib.request.urlopen(url, timeout=10).close()
    except OSError:
        return False
    return True


def _skip_when_offline() -> None:
    """Outside CI, a build that failed with the package index unreachable skips and says so."""
    if not os.environ.get("CI") and not index_reachable(index_url()):
        pytest.skip(f"the package index {index_url()} is unreachable and CI is not set: no wheels")


def build_test_wheelhouse(folder: Path) -> Wheelhouse:
    """The NetApp's wheel and its dependencies for this interpreter, as make package builds them."""
    try:
        return build_wheelhouse(REPO_ROOT, folder, RUNNING_PYTHON, RUNNING_PLATFORM, DEFAULT_EPOCH, log=quiet)
    except PackagingError:
        _skip_when_offline()
        raise


def build_test_charm(out: Path, wheelhouse: Path | None = None) -> Path:
    """The charm for this interpreter, carrying ``wheelhouse`` as wheels/ when given and the
    repository's AppD, as make package builds it."""
    try:
        return build_charm(
            CHARM_ROOT, out, RUNNING_PYTHON, RUNNING_PLATFORM, log=quiet, wheelhouse=wheelhouse, appd=APPD_SOURCE
        )
    except PackagingError:
        _skip_when_offline()
        raise


def unpack(archive: Path, dest: Path) -> Path:
    """Extract a package tar.gz as the NBI does and return the one package folder."""
    with tarfile.open(archive, "r:gz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python < 3.11.4
            tar.extractall(dest)
    (folder,) = dest.iterdir()
    return folder
