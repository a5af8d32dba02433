"""Fixtures for the descriptor tests: the OSM/SOL006 validators built once per session.

The YANG and MEC specs come from ``../shared/specs`` beside the repository (CI checks it out
there); without them, or without the pinned pyang/pyangbind, the tests skip and say why.
Generated bindings and rewritten YANG modules live in pytest's session tmp dir.
"""

from __future__ import annotations

import pytest

from tests.utils.yang import SPECS_DIR, YANG_DIR, Descriptors, NbiValidator, StrictValidator, missing_tools


def _need_yang() -> None:
    if not YANG_DIR.is_dir():
        pytest.skip(f"SOL006/OSM YANG models not found at {YANG_DIR} (clone shared/ beside the repo)")


@pytest.fixture(scope="session")
def descriptors() -> Descriptors:
    return Descriptors.load()


@pytest.fixture(scope="session")
def nbi(tmp_path_factory: pytest.TempPathFactory) -> NbiValidator:
    """pyangbind bindings generated like OSM IM does, loaded like osm_nbi does."""
    _need_yang()
    reason = missing_tools()
    if reason:
        pytest.skip(reason)
    return NbiValidator(tmp_path_factory.mktemp("osm-im-bindings"))


@pytest.fixture(scope="session")
def strict(tmp_path_factory: pytest.TempPathFactory) -> StrictValidator:
    """yangson over SOL006 + OSM augments."""
    _need_yang()
    pytest.importorskip("yangson", reason="yangson is not installed (pip install -e '.[test]')")
    return StrictValidator(tmp_path_factory.mktemp("sol006-yangson"))


@pytest.fixture(scope="session")
def mec_specs():
    path = SPECS_DIR / "mec010-2-v2.1.1-etsi-forge"
    if not path.is_dir():
        pytest.skip(f"MEC 010-2 OpenAPI not found at {path} (clone shared/ beside the repo)")
    return path
