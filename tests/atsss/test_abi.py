"""ATSSS's ABI seen from Python: netapp/atsss/abi.py's mirrors against the BTF of the built downlink
object (dataplane/build/xdp_atsss.bpf.o, which holds the maps and, through an anchor, the enums) and
its constants against dataplane/include/dpp/nf/atsss.h; the flows' state, the pipeline's alone, against
the pipeline's object (dataplane/build/dpp.bpf.o)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from netapp.atsss import abi
from netapp.dataplane.abi import DevmapVal
from tests.utils.btf import (
    Btf,
    assert_inner_maps_declared,
    assert_maps_declared,
    assert_struct_mirrored,
    header_defines,
    object_btf,
)

REPO = Path(__file__).resolve().parents[2]
OBJECT = REPO / "dataplane" / "build" / "xdp_atsss.bpf.o"
RING_TYPES = {"RINGBUF": 27}  # enum bpf_map_type
HEADER = REPO / "dataplane" / "include" / "dpp" / "nf" / "atsss.h"


@pytest.fixture(scope="module")
def btf() -> Btf:
    return object_btf(OBJECT)


@pytest.mark.parametrize("mirror", abi.STRUCTS, ids=lambda s: s.C_NAME)
def test_the_struct_mirrors_match_btf(btf, mirror):
    struct = btf.struct(mirror.C_NAME)
    assert struct is not None, f"struct {mirror.C_NAME} is not in the BTF"
    assert ctypes.sizeof(mirror) == struct["size"]
    members = [(name, getattr(mirror, name).offset) for name, *_ in mirror._fields_]
    assert members == [(m.name, m.byte_offset) for m in btf.members(struct)]


@pytest.mark.parametrize("mirror", abi.ENUMS, ids=lambda e: e.C_NAME)
def test_the_enum_mirrors_match_btf(btf, mirror):
    enum = btf.enum(mirror.C_NAME)
    assert enum is not None, f"enum {mirror.C_NAME} is not in the BTF"
    expected = {mirror.C_PREFIX + m.name: int(m) for m in mirror}
    if mirror.C_MAX is not None:
        expected[mirror.C_PREFIX + "MAX"] = mirror.C_MAX
    assert {v["name"]: v["val"] for v in enum["values"]} == expected


def test_every_map_is_declared_with_its_types_and_size(btf):
    rings = {name: btf.maps()[name] for name in abi.RINGS}
    assert {name: (ring["type"], ring["max_entries"]) for name, ring in rings.items()} == {
        name: (RING_TYPES[kind], abi.CONSTANTS[size]) for name, (kind, size) in abi.RINGS.items()
    }
    assert_maps_declared(_Without(btf, set(abi.RINGS)), abi.MAPS, abi.CONSTANTS)
    assert_inner_maps_declared(btf, {name: (kind, key, DevmapVal if value == "bpf_devmap_val" else value, size)
                                     for name, (kind, key, value, size) in abi.INNER_MAPS.items()}, abi.CONSTANTS)


class _Without:
    """The object's BTF with some maps left out (rings: they have no key or value to compare)."""

    def __init__(self, btf: Btf, names: set[str]):
        self._btf, self._names = btf, names

    def maps(self) -> dict:
        return {name: m for name, m in self._btf.maps().items() if name not in self._names}


def test_every_define_of_the_header_is_mirrored():
    assert header_defines(HEADER) == abi.CONSTANTS


def test_ten_thousand_sessions_of_four_paths_fit():
    assert abi.MAX_SESSIONS >= 10_000 and abi.MAX_PATHS > 10_000 * abi.MAX_PATHS_PER_SESSION


@pytest.fixture(scope="module")
def pipeline_btf() -> Btf:
    return object_btf(REPO / "dataplane" / "build" / "dpp.bpf.o")


@pytest.mark.parametrize("mirror", abi.FLOW_STRUCTS, ids=lambda s: s.C_NAME)
def test_the_pipelines_flow_struct_mirrors_match_its_btf(pipeline_btf, mirror):
    assert_struct_mirrored(pipeline_btf, mirror)


def test_the_pipelines_flow_maps_are_declared_with_their_types_and_size(pipeline_btf, btf):
    """The flows' maps are the pipeline's alone: xdp_atsss classifies no flow, and has none of them."""
    assert_maps_declared(pipeline_btf, abi.FLOW_MAPS, abi.CONSTANTS, among_others=True)
    assert not set(abi.FLOW_MAPS) & set(btf.maps())
