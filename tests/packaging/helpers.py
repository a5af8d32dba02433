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
import urllib.request
from pathlib import Path

import pytest

from netapp.packaging.charm import build_charm
from netapp.packaging.errors import PackagingError

REPO_ROOT = Path(__file__).resolve().parents[2]
CHARM_ROOT = REPO_ROOT / "charms" / "dpp-netapp"
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


def build_test_charm(out: Path) -> Path:
    """The charm for this interpreter; skip (outside CI) only when the index is unreachable."""
    try:
        return build_charm(CHARM_ROOT, out, RUNNING_PYTHON, RUNNING_PLATFORM, log=quiet)
    except PackagingError:
        if not os.environ.get("CI") and not index_reachable(index_url()):
            pytest.skip(f"the package index {index_url()} is unreachable and CI is not set: no charm venv")
        raise
