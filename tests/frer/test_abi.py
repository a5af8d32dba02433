"""FRER's ABI seen from Python: netapp/frer/abi.py's mirrors against the BTF of the built FRER
object (dataplane/build/dpp_frer.bpf.o, which holds the maps and, through an anchor, the enums) and
its constants against dataplane/include/dpp/nf/frer.h."""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

import pytest

from netapp.frer import abi
from tests.utils.btf import Btf, find_bpftool

REPO = Path(__file__).resolve().parents[2]
OBJECT = REPO / "dataplane" / "build" / "dpp_frer.bpf.o"
HEADER = REPO / "dataplane" / "include" / "dpp" / "nf" / "frer.h"


@pytest.fixture(scope="module")
def btf() -> Btf:
    bpftool = find_bpftool()
    reason = "bpftool is not installed" if bpftool is None else None
    if reason is None and not OBJECT.exists():
        reason = f"{OBJECT.relative_to(REPO)} is not built (run `make -C dataplane`)"
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the ABI check must run)")
        pytest.skip(reason)
    return Btf.of_object(OBJECT, bpftool)


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


MAP_TYPES = {"HASH": 1, "ARRAY": 2, "PERCPU_HASH": 5, "PERCPU_ARRAY": 6, "DEVMAP": 14}  # enum bpf_map_type


def c_name(mirror) -> str:  # noqa: ANN001
    return mirror if isinstance(mirror, str) else getattr(mirror, "C_NAME", "unsigned int")


def test_every_map_is_declared_with_its_types_and_size(btf):
    maps = btf.maps()
    assert set(maps) == set(abi.MAPS)
    for name, (kind, key, value, size) in abi.MAPS.items():
        found = maps[name]
        assert (found["type"], found["max_entries"]) == (MAP_TYPES[kind], abi.CONSTANTS.get(size, size)), name
        assert (found["key"], found["value"]) == (c_name(key), c_name(value)), name


def test_every_define_of_the_header_is_mirrored():
    defines = dict(re.findall(r"^#define (DPP_\w+) (\w+)", HEADER.read_text(), re.M))
    defines.pop("DPP_NF_FRER_H", None)
    # the function's reason base is defined with the others' in dpp/core/consts.h (tests/dataplane)
    mirrored = {name: value for name, value in abi.CONSTANTS.items() if name != "DPP_REASON_BASE_FRER"}
    assert {name: int(value, 0) for name, value in defines.items()} == mirrored
