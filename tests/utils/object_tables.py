"""The generic tables' adapter (netapp.dataplane.tables.TableAdapter) over the maps of a BPF object
loaded with libbpf (bench.libbpf), so that a function's service writes and reads a standalone
program's maps (xdp_atsss.bpf.o, dpp_frer.bpf.o) as it does the pinned pipeline's through libdpp."""

from __future__ import annotations

import ctypes
import errno
import os
from ctypes import c_uint32
from typing import Any

from bench.libbpf import BpfObject, inner_map_set, map_delete, map_fd_by_id, map_keys, map_lookup, map_update
from netapp.dataplane.abi import CONSTANTS, MAPS
from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.tables import Table, fill_arrays, open_table


def _item(array: Any, index: int) -> Any:
    return array._type_.from_buffer(array, index * ctypes.sizeof(array._type_))


class ObjectTables:
    """The generic tables' adapter (netapp.dataplane.tables.TableAdapter) over a loaded object's
    maps, one element per libbpf call. Each call is recorded in `calls` (call, map, entries).

    TEST DOUBLE in one respect: `refuse` makes a write fail as libdpp's would (DataplaneError), since
    these maps refuse nothing a test can bring about (they are far from full)."""

    def __init__(self, obj: BpfObject):
        self.obj = obj
        self.specs = MAPS
        self._dumps: dict[str, list[Any]] = {}
        self.calls: list[tuple[str, str, int]] = []
        self._refusals: dict[str, list[int]] = {}  # map -> the numbers of its coming writes to refuse (1: the next)

    def refuse(self, name: str, *writes: int) -> None:
        """Refuse these of the map's coming writes (1: the next), whole."""
        self._refusals[name] = list(writes or (1,))

    def _write(self, call: str, name: str, count: int) -> None:
        self.calls.append((call, name, count))
        coming = self._refusals.get(name)
        if coming:
            self._refusals[name] = [number - 1 for number in coming if number > 1]
            if 1 in coming:
                raise DataplaneError(errno.EIO, f"dpp_table_{call}({name})", "refused by the test")

    def table_update(self, name: str, keys: Any, values: Any, flags: int = 0) -> None:
        self._write("update", name, len(keys))
        for index in range(len(keys)):
            map_update(self.obj.map_fd(name), _item(keys, index), _item(values, index))

    def table_fill(self, name: str, indexes: Any, stride: int, rows: int, value: bytes) -> None:
        """libdpp's dpp_table_fill: its slots and values written as table_update writes them."""
        self.table_update(name, *fill_arrays(MAPS[name], list(indexes), stride, rows, value))

    def table_lookup(self, name: str, keys: Any, values: Any, found: Any) -> int:
        self.calls.append(("lookup", name, len(keys)))
        for index in range(len(keys)):
            found[index] = map_lookup(self.obj.map_fd(name), _item(keys, index), _item(values, index))
        return sum(found)

    def table_delete(self, name: str, keys: Any) -> None:
        self._write("delete", name, len(keys))
        for index in range(len(keys)):
            map_delete(self.obj.map_fd(name), _item(keys, index))

    def table_inner_set(self, name: str, index: int, inner_type: int, max_entries: int, keys: Any,
                        values: Any) -> None:
        """libdpp's dpp_table_inner_set: a new inner map, filled, put in with one write."""
        self._write("inner_set", name, len(keys))
        inner_map_set(self.obj.map_fd(name), index, inner_type, max_entries,
                      [(_item(keys, position), _item(values, position)) for position in range(len(keys))],
                      ctypes.sizeof(keys._type_), ctypes.sizeof(values._type_))

    def table_inner_lookup(self, name: str, index: int, keys: Any, values: Any, found: Any) -> int:
        self.calls.append(("inner_lookup", name, len(keys)))
        inner_id = c_uint32()
        if not map_lookup(self.obj.map_fd(name), c_uint32(index), inner_id):
            raise DataplaneError(errno.ENOENT, f"dpp_table_inner_lookup({name}[{index}])")
        inner = map_fd_by_id(inner_id.value)
        try:
            for position in range(len(keys)):
                found[position] = map_lookup(inner, _item(keys, position), _item(values, position))
        finally:
            os.close(inner)
        return sum(found)

    def table_dump(self, name: str, cursor: Any, keys: Any, values: Any) -> int:
        """cursor.state: entries returned so far, plus one (0: not started); a map of maps' empty
        entries left out, as the kernel's lookups leave them."""
        if cursor.state == 0:
            self.calls.append(("dump", name, 0))
            spec = self.specs[name]
            every = ([c_uint32(index) for index in range(self.map_info(name)["max_entries"])] if spec.array
                     else map_keys(self.obj.map_fd(name), keys._type_))
            if spec.inner is not None:
                every = [key for key in every if map_lookup(self.obj.map_fd(name), key, c_uint32())]
            self._dumps[name] = every
        start = max(cursor.state - 1, 0)
        chunk = self._dumps[name][start:start + len(keys)]
        for index, key in enumerate(chunk):
            ctypes.memmove(ctypes.addressof(keys) + index * ctypes.sizeof(keys._type_), ctypes.byref(key),
                           ctypes.sizeof(keys._type_))
            map_lookup(self.obj.map_fd(name), key, _item(values, index))
        cursor.state = start + len(chunk) + 1
        return len(chunk)

    def table_wait_readers(self) -> None:
        pass

    def map_fd(self, name: str) -> int:
        """The object's map (a Table's `in_place` maps an mmapable array's values through it)."""
        return self.obj.map_fd(name)

    def program_fd(self, name: str) -> int:
        """The object's program (a writer of a map's values in place, Table.program_fd)."""
        try:
            return self.obj.program_fd(name)
        except OSError as exc:
            raise LookupError(name) from exc

    def map_info(self, name: str) -> dict[str, int]:
        size = self.specs[name].max_entries
        return {"id": 0, "max_entries": CONSTANTS[size] if isinstance(size, str) else size}

    def table(self, name: str) -> Table:
        return open_table(self, name, self.specs[name])  # type: ignore[arg-type]
