"""DUPLICATE's ABI seen from Python: netapp/duplicate/abi.py's mirrors against the BTF of the built
pipeline (dataplane/build/dpp.bpf.o) and its constants against dataplane/include/dpp/nf/duplicate.h."""

from __future__ import annotations

from pathlib import Path

import pytest

from netapp.dataplane.abi import DevmapVal
from netapp.duplicate import abi
from tests.utils.btf import Btf, assert_inner_maps_declared, assert_maps_declared, header_defines, object_btf

REPO = Path(__file__).resolve().parents[2]
HEADER = REPO / "dataplane" / "include" / "dpp" / "nf" / "duplicate.h"


@pytest.fixture(scope="module")
def btf() -> Btf:
    return object_btf(REPO / "dataplane" / "build" / "dpp.bpf.o")


def test_every_map_is_declared_with_its_types_and_size(btf):
    assert_maps_declared(btf, abi.MAPS, abi.CONSTANTS, among_others=True)


def test_every_define_of_the_header_is_mirrored():
    assert header_defines(HEADER) == abi.CONSTANTS


def test_the_groups_are_declared_as_their_mirrors(btf):
    assert_inner_maps_declared(btf, {name: (kind, key, DevmapVal if value == "bpf_devmap_val" else value, size)
                                     for name, (kind, key, value, size) in abi.INNER_MAPS.items()}, abi.CONSTANTS)
