"""FRER's ABI seen from Python: netapp/frer/abi.py's mirrors against the BTF of the built FRER
object (dataplane/build/dpp_frer.bpf.o, which holds the maps and, through an anchor, the enums) and
its constants against dataplane/include/dpp/nf/frer.h."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from netapp.frer import abi
from netapp.dataplane.abi import DevmapVal
from tests.utils.btf import Btf, assert_inner_maps_declared, assert_maps_declared, header_defines, object_btf

REPO = Path(__file__).resolve().parents[2]
OBJECT = REPO / "dataplane" / "build" / "dpp_frer.bpf.o"
HEADER = REPO / "dataplane" / "include" / "dpp" / "nf" / "frer.h"


@pytest.fixture(scope="module")
def btf() -> Btf:
    return object_btf(OBJECT)


def ctypes_members(mirror: type[ctypes.Structure]) -> list[tuple[str, int]]:
    return [(name, getattr(mirror, name).offset) for name, *_ in mirror._fields_]


@pytest.mark.parametrize("mirror", abi.STRUCTS, ids=lambda s: s.C_NAME)
def test_the_struct_mirrors_match_btf(btf, mirror):
    struct = btf.struct(mirror.C_NAME)
    assert struct is not None
    assert ctypes.sizeof(mirror) == struct["size"]
    assert ctypes_members(mirror) == [(m.name, m.byte_offset) for m in btf.members(struct)]


@pytest.mark.parametrize("mirror", abi.ENUMS, ids=lambda e: e.C_NAME)
def test_the_enum_mirrors_match_btf(btf, mirror):
    enum = btf.enum(mirror.C_NAME)
    assert enum is not None, f"enum {mirror.C_NAME} is not in the BTF"
    values = {value["name"]: value["val"] for value in enum["values"]}
    assert values == {mirror.C_PREFIX + member.name: int(member) for member in mirror}


def test_every_map_is_declared_with_its_types_and_size(btf):
    assert_maps_declared(btf, abi.MAPS, abi.CONSTANTS)
    assert_inner_maps_declared(btf, {name: (kind, key, DevmapVal if value == "bpf_devmap_val" else value, size)
                                     for name, (kind, key, value, size) in abi.INNER_MAPS.items()}, abi.CONSTANTS)


def test_every_define_of_the_header_is_mirrored():
    # the function's reason base is defined with the others' in dpp/core/consts.h (tests/dataplane)
    mirrored = {name: value for name, value in abi.CONSTANTS.items() if name != "DPP_REASON_BASE_FRER"}
    assert header_defines(HEADER) == mirrored
