"""libdpp.so exports exactly its public API: the functions the ctypes binding declares, each under
the version node of src/libdpp.map, and none of the internal functions its modules share (they are
global in the objects, local in the library).

Without nm or the built library these tests skip, except in CI (CI=true), where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from netapp.dataplane import binding

REPO = Path(__file__).resolve().parents[2]
LIBDPP = REPO / "dataplane" / "build" / "libdpp.so"
VERSION_NODE = "LIBDPP_0.1"


@pytest.fixture(scope="module")
def exported() -> dict[str, tuple[str, str]]:
    """Defined dynamic symbols of libdpp.so: name -> (nm type letter, version node)."""
    nm = shutil.which("nm")
    reason = "nm (binutils) is not installed" if nm is None else None
    if nm and not LIBDPP.exists():
        reason = f"{LIBDPP.relative_to(REPO)} is not built (run `make -C dataplane`)"
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the export check must run)")
        pytest.skip(reason)
    out = subprocess.run([nm, "-D", "--defined-only", str(LIBDPP)], check=True, capture_output=True, text=True)
    symbols = {}
    for line in out.stdout.splitlines():
        kind, symbol = line.split()[-2:]
        name, _, version = symbol.partition("@@")
        symbols[name] = (kind, version)
    return symbols


def test_the_exported_functions_are_the_bindings_prototypes(exported):
    functions = {name for name, (kind, _) in exported.items() if kind == "T"}
    assert functions == set(binding.PROTOTYPES)


def test_nothing_but_the_functions_and_their_version_node_is_exported(exported):
    others = {name: kind for name, (kind, _) in exported.items() if kind != "T"}
    assert others == {VERSION_NODE: "A"}


def test_every_function_is_versioned(exported):
    unversioned = sorted(name for name, (kind, version) in exported.items() if kind == "T" and version != VERSION_NODE)
    assert unversioned == []
