"""Read the BTF of a BPF object through `bpftool btf dump file OBJ --json`, indexed by name."""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest


@dataclass(frozen=True)
class BtfMember:
    name: str
    byte_offset: int
    type_name: str


class Btf:
    """Types of one object: structs and enums by name, and the .maps section's map definitions."""

    def __init__(self, types: list[dict[str, Any]]):
        self.by_id = {entry["id"]: entry for entry in types}
        self.by_id[0] = {"id": 0, "kind": "VOID", "name": "void"}

    @classmethod
    def of_object(cls, path: Path, bpftool: str = "bpftool") -> "Btf":
        dumped = subprocess.run(
            [bpftool, "btf", "dump", "file", str(path), "--json"], check=True, capture_output=True, text=True
        )
        return cls(json.loads(dumped.stdout)["types"])

    def named(self, kind: str, name: str) -> Optional[dict[str, Any]]:
        return next(
            (entry for entry in self.by_id.values() if entry["kind"] == kind and entry.get("name") == name),
            None,
        )

    def struct(self, name: str) -> Optional[dict[str, Any]]:
        return self.named("STRUCT", name)

    def enum(self, name: str) -> Optional[dict[str, Any]]:
        return self.named("ENUM", name) or self.named("ENUM64", name)

    def members(self, struct: dict[str, Any]) -> list[BtfMember]:
        return [
            BtfMember(member["name"], member["bits_offset"] // 8, self.type_name(member["type_id"]))
            for member in struct["members"]
        ]

    def resolve(self, type_id: int) -> dict[str, Any]:
        """Skip typedefs and qualifiers."""
        entry = self.by_id[type_id]
        while entry["kind"] in ("TYPEDEF", "CONST", "VOLATILE", "RESTRICT", "TYPE_TAG"):
            entry = self.by_id[entry["type_id"]]
        return entry

    def type_name(self, type_id: int) -> str:
        entry = self.resolve(type_id)
        if entry["kind"] == "ARRAY":
            return f"{self.type_name(entry['type_id'])}[{entry['nr_elems']}]"
        return entry.get("name", entry["kind"])

    def maps(self) -> dict[str, dict[str, Any]]:
        """Map name -> {"type": ..., "max_entries": N, "key": type name, "value": type name}.

        A BTF map definition is a struct whose __uint(x, N) members are pointers to arrays of N.
        """
        section = self.named("DATASEC", ".maps")
        found: dict[str, dict[str, Any]] = {}
        for var in (section or {}).get("vars", []):
            variable = self.by_id[var["type_id"]]
            definition = self.resolve(variable["type_id"])
            found[variable["name"]] = {
                m["name"]: self._map_attribute(m["type_id"]) for m in definition["members"]
            }
        return found

    def inner_map(self, name: str) -> dict[str, Any]:
        """A map of maps' inner map definition (its `values` member: an array of pointers to it),
        as `maps` gives a map's."""
        section = self.named("DATASEC", ".maps")
        var = next(var for var in (section or {}).get("vars", []) if self.by_id[var["type_id"]]["name"] == name)
        definition = self.resolve(self.by_id[var["type_id"]]["type_id"])
        values = next(member for member in definition["members"] if member["name"] == "values")
        inner = self.resolve(self.resolve(self.resolve(values["type_id"])["type_id"])["type_id"])
        return {member["name"]: self._map_attribute(member["type_id"]) for member in inner["members"]}

    def _map_attribute(self, type_id: int) -> Any:
        pointer = self.resolve(type_id)
        target = self.resolve(pointer["type_id"])
        if target["kind"] == "ARRAY":
            return target["nr_elems"]
        return target.get("name", target["kind"])


def object_btf(obj: Path) -> "Btf":
    """The BTF of a built object for an ABI test; the test skips when bpftool or the object is
    missing, and fails instead under CI (CI=true), where the ABI check must run."""
    bpftool = find_bpftool()
    reason = "bpftool is not installed" if bpftool is None else None
    if reason is None and not obj.exists():
        reason = f"{obj.name} is not built (run `make -C dataplane`)"
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the ABI check must run)")
        pytest.skip(reason)
    return Btf.of_object(obj, bpftool)


MAP_TYPES = {"HASH": 1, "ARRAY": 2, "PERCPU_HASH": 5, "PERCPU_ARRAY": 6, "ARRAY_OF_MAPS": 12, "HASH_OF_MAPS": 13,
             "DEVMAP": 14, "DEVMAP_HASH": 25}  # enum bpf_map_type


def c_name(mirror: Any) -> str:
    """The C name of a map's key or value mirror: a ctypes Structure's C_NAME, a C name given as a
    string, or a plain integer."""
    return mirror if isinstance(mirror, str) else getattr(mirror, "C_NAME", "unsigned int")


def assert_struct_mirrored(btf: "Btf", mirror: Any) -> None:
    """A ctypes mirror has its C struct's size, and its members at their offsets, in order."""
    struct = btf.struct(mirror.C_NAME)
    assert struct is not None, f"struct {mirror.C_NAME} is not in the BTF"
    assert ctypes.sizeof(mirror) == struct["size"]
    members = [(name, getattr(mirror, name).offset) for name, *_ in mirror._fields_]
    assert members == [(m.name, m.byte_offset) for m in btf.members(struct)]


def assert_maps_declared(
    btf: "Btf", maps: dict[str, tuple[str, Any, Any, Any]], constants: dict[str, int], among_others: bool = False
) -> None:
    """The object declares exactly `maps` (name -> (map type, key, value, size: a constant's name or a
    number)), each with its type, key, value and size; `among_others`: those maps, and others too (a
    function's maps in the pipeline's object)."""
    found = btf.maps()
    assert set(maps) <= set(found) if among_others else set(found) == set(maps)
    for name, (kind, key, value, size) in maps.items():
        assert (found[name]["type"], found[name]["max_entries"]) == (MAP_TYPES[kind], constants.get(size, size)), name
        if kind.endswith("_OF_MAPS"):  # its values are its inner maps, checked by assert_inner_maps_declared
            assert found[name]["key"] == c_name(key), name
            continue
        assert (found[name]["key"], found[name]["value"]) == (c_name(key), c_name(value)), name


def assert_inner_maps_declared(btf: "Btf", inner: dict[str, tuple[str, Any, Any, Any]], constants: dict[str, int]) -> None:
    """Each map of maps' inner maps have the type, size, and key and value sizes of the mirrors
    `inner` gives them (an inner map declares sizes: its types would not reach the BTF)."""
    for name, (kind, key, value, size) in inner.items():
        found = btf.inner_map(name)
        assert (found["type"], found["max_entries"]) == (MAP_TYPES[kind], constants.get(size, size)), name
        assert (found["key_size"], found["value_size"]) == (ctypes.sizeof(key), ctypes.sizeof(value)), name


def header_defines(header: Path) -> dict[str, int]:
    """The DPP_ constants an ABI header defines (its include guard left out), for the test that
    each is mirrored in Python."""
    defines = re.findall(r"^#define (DPP_\w+) (\w+)", header.read_text(), re.M)
    return {name: int(value, 0) for name, value in defines if not name.endswith("_H")}


def find_bpftool() -> Optional[str]:
    return shutil.which("bpftool") or next(
        (str(path) for path in (Path("/usr/sbin/bpftool"), Path("/sbin/bpftool")) if path.exists()), None
    )
