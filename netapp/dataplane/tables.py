"""Generic tables: a plain map of the data plane, by name, read and written in batches.

A `Table` needs only the map's spec in `abi.MAPS` (its key and value mirrors, checked against BTF by
tests/dataplane/test_abi.py): libdpp's dpp_table_* calls do the rest, and `fake.FakeDpp` offers the
same four adapter calls over dicts. So a new function's plain table needs no C, binding, facade or
fake code. Maps with a protocol to their writes (rules, shapes, config, CPUs, counters: `table=False`
in their spec) are refused for writes by libdpp and the fake alike. A per-CPU map is a
`PerCpuTable`: each value is one per possible CPU, as the kernel reads and writes them.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import functools
import mmap
import sys
from ctypes import Structure, c_uint8, c_uint32
from typing import Any, Iterable, Iterator, Mapping, Optional, Protocol, Sequence, Union

import numpy

from netapp.dataplane.abi import MAPS, MapSpec
from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.libdpp_abi import TableCursor, Word
from netapp.dataplane.handle import possible_cpus


class UpdateFlag(enum.IntEnum):
    """BPF_ANY, BPF_NOEXIST, BPF_EXIST (linux/bpf.h)."""

    ANY = 0
    NOEXIST = 1  # only new keys (an array has every key: always EEXIST)
    EXIST = 2  # only keys already there


class TableAdapter(Protocol):
    """What a Table needs from the layer below (binding.DppHandle, fake.FakeDpp): C arrays in and out."""

    def table_update(self, name: str, keys: Any, values: Any, flags: int = 0) -> None: ...
    def table_lookup(self, name: str, keys: Any, values: Any, found: Any) -> int: ...
    def table_delete(self, name: str, keys: Any) -> None: ...
    # optional: def table_held(self, name, keys, value_size, flag_at, flag) -> int (Table.first_held)
    def table_fill(self, name: str, indexes: Any, stride: int, rows: int, value: bytes) -> None: ...
    def table_dump(self, name: str, cursor: TableCursor, keys: Any, values: Any) -> int: ...
    def table_wait_readers(self) -> None: ...
    def table_inner_set(self, name: str, index: int, inner_type: int, max_entries: int, keys: Any,
                        values: Any) -> None: ...
    def table_inner_lookup(self, name: str, index: int, keys: Any, values: Any, found: Any) -> int: ...
    def map_info(self, name: str) -> dict[str, int]: ...


Entries = Union[Mapping[Any, Any], Iterable[tuple[Any, Any]]]


class Table:
    """One plain map: update, lookup, delete and items, each a batch. Keys and values are the spec's
    ctypes mirrors (ints for integer types); what comes back are copies."""

    DUMP_CHUNK = 1024  # entries per dpp_table_dump call
    PER_CPU = False

    def __init__(self, adapter: TableAdapter, name: str, spec: Optional[MapSpec] = None):
        spec = spec if spec is not None else MAPS.get(name)
        if spec is None:
            raise ValueError(f"no map named {name!r}; known: {', '.join(MAPS)}")
        if spec.key is None or spec.value is None:
            raise ValueError(f"map {name}: a table needs key and value mirrors in its MapSpec")
        if spec.per_cpu != self.PER_CPU:
            kind = "a PerCpuTable" if spec.per_cpu else "a Table"
            raise ValueError(f"map {name} is {'' if spec.per_cpu else 'not '}per-CPU: open it as {kind}")
        self._adapter = adapter
        self.name = name
        self.spec = spec
        self._value_type: Any = spec.value
        self._max_entries: Optional[int] = None
        self._mappings: dict[tuple[int, int], tuple[mmap.mmap, Any]] = {}  # InPlace's pages of the map

    @property
    def max_entries(self) -> int:
        """The map's size in the kernel (as loaded, or as pinned: not always the header's), asked
        once: a map's size never changes."""
        if self._max_entries is None:
            self._max_entries = self._adapter.map_info(self.name)["max_entries"]
        return self._max_entries

    def update(self, entries: Entries, flags: UpdateFlag = UpdateFlag.ANY) -> None:
        """Write every (key, value) in order; a DataplaneError carries `done`, how many were written."""
        pairs = list(entries.items() if isinstance(entries, Mapping) else entries)
        if pairs:
            keys, values = zip(*pairs)
            self._adapter.table_update(self.name, self._keys(keys), self._values(values), int(flags))

    def update_arrays(self, keys: Sequence[Any], values: Sequence[Any], flags: UpdateFlag = UpdateFlag.ANY) -> None:
        """`update` of keys[i] -> values[i], given apart: a C array of the map's key or value type is
        written as it is, without a copy of each item (a batch made at once, as a C array)."""
        if len(keys) != len(values):
            raise ValueError(f"table {self.name}: {len(keys)} keys and {len(values)} values")
        if len(keys):
            self._adapter.table_update(self.name, self._keys(keys), self._values(values), int(flags))

    def delete(self, keys: Sequence[Any]) -> None:
        """Delete keys in order (an array's cannot be: write a zeroed value instead)."""
        if keys:
            self._adapter.table_delete(self.name, self._keys(keys))

    def lookup(self, keys: Sequence[Any]) -> list[Optional[Any]]:
        """The value of each key, None where the map has none."""
        if not keys:
            return []
        values = (self._value_type * len(keys))()
        found = (c_uint8 * len(keys))()
        self._adapter.table_lookup(self.name, self._keys(keys), values, found)
        # the array is this call's alone: its items are given out as they are, not copied again
        return [values[index] if hit else None for index, hit in enumerate(found)]

    def first_held(self, keys: Sequence[Any], flag_at: int = 0, flag: int = 0) -> int:
        """The index of the first of `keys` the map holds with the bits `flag` set in its value's byte
        at `flag_at` (flag 0: held at all), or len(keys): a guard's question, in one libdpp call
        (dpp_table_held) that hands no values back; `held_at` of the lookups where the adapter has no
        such call."""
        if not keys:
            return 0
        held = getattr(self._adapter, "table_held", None)
        if held is None or type(self).lookup is not Table.lookup:  # or a value that is not one entry's
            return held_at(self.lookup(keys), flag_at, flag)
        return held(self.name, self._keys(keys), ctypes.sizeof(self._value_type), flag_at, flag)

    def get(self, key: Any) -> Optional[Any]:
        return self.lookup([key])[0]

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every (key, value) of the map, DUMP_CHUNK at a time (an array's: every index)."""
        cursor = TableCursor()
        keys = (self.spec.key * self.DUMP_CHUNK)()
        values = (self._value_type * self.DUMP_CHUNK)()
        while True:
            count = self._adapter.table_dump(self.name, cursor, keys, values)
            if count == 0:
                return
            for index in range(count):
                yield _copy(keys, index), _copy(values, index)

    def wait_readers(self) -> None:
        """Return once every run of the programs that began before the call has ended (an RCU grace
        period, some milliseconds): a value one may have been reading can then be rewritten."""
        self._adapter.table_wait_readers()

    def program_fd(self, name: str) -> Optional[int]:
        """The fd of the instance's program `name` (one that writes this map's values in place);
        None where no program runs (the fake) or the instance has none of that name and cannot be
        given this build's (one pinned by an older build whose maps are laid out otherwise: libdpp
        warned once, naming it, DppHandle.program_fd)."""
        program_fd = getattr(self._adapter, "program_fd", None)
        try:
            fd = program_fd(name) if program_fd is not None else 0
        except LookupError:
            return None
        return fd if fd > 0 else None  # the fake's 0: no program runs there

    @contextlib.contextmanager
    def in_place(self) -> Iterator["InPlace"]:
        """A writer of some words of this array's values in place (InPlace), for the length of the
        `with`: through mappings of the map's pages when the adapter has the kernel's map (a
        BPF_F_MMAPABLE array; the pages stay mapped while the table lives, which keeps the map
        too), else by reading and writing whole values (the fake, where no program runs meanwhile)."""
        map_fd = getattr(self._adapter, "map_fd", None)
        writer = InPlace(self, map_fd(self.name) if map_fd is not None else None)
        try:
            yield writer
        finally:
            writer.release()

    def _keys(self, keys: Sequence[Any]) -> Any:
        return _array(self.spec.key, keys)

    def _values(self, values: Sequence[Any]) -> Any:
        return _array(self._value_type, values)


class MapOfMaps(Table):
    """A map of maps (its spec names the inner maps): an entry is written whole, as a new inner map
    holding what it should (`set`), and emptied with `delete`; `items` reads the entries' inner map
    ids, `inner` an entry's inner map."""

    def __init__(self, adapter: TableAdapter, name: str, spec: Optional[MapSpec] = None):
        super().__init__(adapter, name, spec)
        if self.spec.inner is None:
            raise ValueError(f"map {name}: no inner maps in its MapSpec: open it as a Table")
        self.inner_spec = self.spec.inner

    def set(self, index: int, entries: Entries) -> None:
        """Entry `index` leads to a new inner map holding `entries`, put in with one write."""
        pairs = list(entries.items() if isinstance(entries, Mapping) else entries)
        keys = _array(self.inner_spec.key, [key for key, _ in pairs])
        values = _array(self.inner_spec.value, [value for _, value in pairs])
        size = self.inner_spec.max_entries
        self._adapter.table_inner_set(self.name, index, int(self.inner_spec.type), int(size), keys, values)

    def inner(self, index: int, keys: Sequence[Any]) -> list[Optional[Any]]:
        """The value of each key in entry `index`'s inner map (None where it has none); a
        DataplaneError (ENOENT) when the entry leads to no map."""
        values = (self.inner_spec.value * len(keys))()
        found = (c_uint8 * len(keys))()
        self._adapter.table_inner_lookup(self.name, index, _array(self.inner_spec.key, keys), values, found)
        return [values[position] if hit else None for position, hit in enumerate(found)]


class PerCpuTable(Table):
    """A per-CPU map: a value is a ctypes array with one value per possible CPU (index: the CPU).
    `update` takes such arrays or sequences of values; `fill` writes one value on every CPU."""

    PER_CPU = True

    def __init__(
        self, adapter: TableAdapter, name: str, spec: Optional[MapSpec] = None, cpus: Optional[int] = None
    ):
        super().__init__(adapter, name, spec)
        if ctypes.sizeof(self.spec.value) % 8:
            raise ValueError(f"map {name}: the kernel pads per-CPU values to 8 bytes; the mirror must be too")
        self.cpus = cpus if cpus is not None else possible_cpus()
        self._value_type = self.spec.value * self.cpus

    def fill(self, keys: Sequence[Any], value: Any = None) -> None:
        """Write `value` (by default a zeroed one) on every CPU of each key, in one write: the
        values' C array made at once (zeroed as made, for the default), not a per-CPU array copied
        in per key (a UPF establishment's policers' counters, two a session, are zeroed this way)."""
        if not keys:
            return
        if value is not None and not isinstance(value, self.spec.value):
            raise TypeError(f"table {self.name}: a {type(value).__name__} is no {self.spec.value.__name__}")
        array = self._value_type * len(keys)
        # every key's value the same bytes: the array made from them at once, not assigned key by key
        values = array() if value is None else array.from_buffer_copy(bytes(value) * (self.cpus * len(keys)))
        self._adapter.table_update(self.name, self._keys(keys), values, int(UpdateFlag.ANY))

    def _values(self, values: Sequence[Any]) -> Any:
        return _array(self._value_type, [item if isinstance(item, self._value_type) else self._value_type(*item)
                                         for item in values])


class RowsTable(Table):
    """A plain array with a row of slots per possible CPU, which only that CPU writes (a per-CPU array
    without its pointer table: dpp_policer_stats, bpf/nf/qos/maps.h), read and written as a
    PerCpuTable is: key k's value is a ctypes array of every CPU's slot, cpu x row + k, where a row
    is the map's size over the CPUs. A key past the row is refused: it would be the next CPU's."""

    def __init__(
        self, adapter: TableAdapter, name: str, spec: Optional[MapSpec] = None, cpus: Optional[int] = None
    ):
        super().__init__(adapter, name, spec)
        if not self.spec.rows:
            raise ValueError(f"map {name} has no row per CPU: open it as a Table")
        self.cpus = cpus if cpus is not None else possible_cpus()
        self._value_type = self.spec.value * self.cpus
        self._row: Optional[int] = None  # the kernel asked once: a map's size never changes

    @property
    def row(self) -> int:
        """Slots a CPU's row holds."""
        if self._row is None:
            self._row = self.max_entries // self.cpus
        return self._row

    def fill(self, keys: Sequence[Any], value: Any = None) -> None:
        """Write `value` (by default a zeroed one) in every CPU's slot of each key, in one write."""
        if not keys:
            return
        if value is not None and not isinstance(value, self.spec.value):
            raise TypeError(f"table {self.name}: a {type(value).__name__} is no {self.spec.value.__name__}")
        indexes = self._indexes(keys)
        raw = bytes(value) if value is not None else bytes(ctypes.sizeof(self.spec.value))
        # libdpp makes every CPU's slot and value (dpp_table_fill): a group's 64 policers are 128 of them
        self._adapter.table_fill(self.name, (ctypes.c_uint32 * len(indexes))(*indexes), self.row, self.cpus, raw)

    def update(self, entries: Entries, flags: UpdateFlag = UpdateFlag.ANY) -> None:
        """Write each key's per-CPU value (an array of the CPUs' values, or a sequence of them)."""
        pairs = list(entries.items() if isinstance(entries, Mapping) else entries)
        if pairs:
            keys, values = zip(*pairs)
            self.update_arrays(keys, values, flags)

    def update_arrays(self, keys: Sequence[Any], values: Sequence[Any], flags: UpdateFlag = UpdateFlag.ANY) -> None:
        if len(keys) != len(values):
            raise ValueError(f"table {self.name}: {len(keys)} keys and {len(values)} values")
        if not len(keys):
            return
        by_cpu = [[per_cpu[cpu] for per_cpu in values] for cpu in range(self.cpus)]
        slots = self._slots(keys)
        self._adapter.table_update(self.name, _array(self.spec.key, slots),
                                   _array(self.spec.value, [value for row in by_cpu for value in row]), int(flags))

    def delete(self, keys: Sequence[Any]) -> None:
        raise ValueError(f"table {self.name}: an array's slots cannot be deleted: fill them with zeroes")

    def lookup(self, keys: Sequence[Any]) -> list[Optional[Any]]:
        """Each key's value on every CPU (a ctypes array, index: the CPU)."""
        if not keys:
            return []
        slots = self._slots(keys)
        values = (self.spec.value * len(slots))()
        found = (c_uint8 * len(slots))()
        self._adapter.table_lookup(self.name, _array(self.spec.key, slots), values, found)
        result = []
        for position in range(len(keys)):
            per_cpu = self._value_type()
            for cpu in range(self.cpus):
                per_cpu[cpu] = values[cpu * len(keys) + position]
            result.append(per_cpu)
        return result

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every key of a row with its CPUs' values, DUMP_CHUNK keys at a time."""
        for first in range(0, self.row, self.DUMP_CHUNK):
            keys = list(range(first, min(first + self.DUMP_CHUNK, self.row)))
            yield from zip(keys, self.lookup(keys))

    def _indexes(self, keys: Sequence[Any]) -> list[int]:
        """`keys` as ints, each checked to be within a CPU's row."""
        keys = [int(key) for key in keys]
        if min(keys) < 0 or max(keys) >= self.row:
            past = [key for key in keys if not 0 <= key < self.row]
            raise ValueError(f"table {self.name}: keys {past[:8]} past a CPU's row: 0 to {self.row - 1} allowed")
        return keys

    def _slots(self, keys: Sequence[Any]) -> list[int]:
        """Each CPU's slots of `keys`: CPU 0's in the keys' order, then CPU 1's, and so on."""
        return fill_slots(self._indexes(keys), self.row, self.cpus)


def held_at(values: Sequence[Optional[Any]], flag_at: int = 0, flag: int = 0) -> int:
    """`Table.first_held` of looked-up values (None: not held): the reference of dpp_table_held."""
    return next((index for index, value in enumerate(values)
                 if value is not None and (not flag or bytes(value)[flag_at] & flag)), len(values))


Span = tuple[int, int]  # (offset, end) of bytes of a value


class InPlace:
    """Bytes of an array's values written where they are, as aligned words of 8, 4, 2 or 1 bytes
    (the widest the offset and length allow), each stored by one atomic store that a program on
    another CPU reads whole, old or new, never half: libdpp's dpp_words_store, release order (a
    reader that loads with acquire sees the words new in the order given; the programs' plain loads
    do on x86-64, not surely on arm64). What a value's writer leaves out, the words the
    programs move (atomic counters, a lock), is never written, so no count or number a program takes
    meanwhile is lost, as a read, carry over and write of the whole value would lose it. Of the
    words a call gives only those that differ are stored, in their order, all in one call: a reader
    may meet any prefix of them new, which the caller orders and argues harmless.

    Where libdpp cannot be loaded (not built) the words are stored by numpy's typed stores, one
    aligned store each on the compilers and machines the project runs on (x86-64, arm64), without
    the order's guarantee on arm64. Without the kernel's map (the fake, where no program runs) the
    whole value is read, patched and written."""

    WIDTHS = (8, 4, 2, 1)

    def __init__(self, table: Table, map_fd: Optional[int]):
        self._table = table
        self._fd = map_fd
        self._size = ctypes.sizeof(table._value_type)
        self._entries = table.max_entries if map_fd is not None else 0
        # (first page, last page) -> the mapping of those pages of the map and its address, the
        # table's: only the pages of the values written are mapped (the kernel maps every page of a
        # mapping at once: the whole of dpp_atsss_paths took some 8 ms), each once in the table's
        # life (a mapping made and unmapped each change cost more than a whole value's lookup and
        # update: the unmapping flushes the other CPUs' TLBs)
        self._mapped = table._mappings
        self._lib = _words_lib_of(table._adapter) if map_fd is not None else None

    def store(self, index: int, raw: bytes, spans: Sequence[Span]) -> list[tuple[int, int]]:
        """Value `index`'s bytes in `spans` made those of `raw` (the whole new value): the words
        that differ, in the spans' order, in one call. Returns them as (offset in the value, width)."""
        if self._fd is None:
            self._patch(index, raw, spans)
            return [(start, end - start) for start, end in spans]
        if not 0 <= index < self._entries:
            raise ValueError(f"table {self._table.name}: no value {index} (0 to {self._entries - 1})")
        base = index * self._size
        pages = ((base + min(start for start, _ in spans)) // mmap.PAGESIZE,
                 (base + max(end for _, end in spans) - 1) // mmap.PAGESIZE)
        memory, address = self._mapping(*pages)
        origin = base - pages[0] * mmap.PAGESIZE  # the value's offset in the mapping
        words = [word for start, end in spans if memory[origin + start : origin + end] != raw[start:end]
                 for word in self._pieces(memory, origin, raw, start, end)]
        if self._lib is not None:
            self._store_by_libdpp(address, len(memory), origin, words)
        else:
            self._store_by_numpy(memory, origin, words)
        return [(at, width) for at, width, _ in words]

    def _mapping(self, first: int, last: int) -> tuple[mmap.mmap, int]:
        """The map's pages first to last, mapped (once in the table's life), and their address."""
        if (first, last) not in self._mapped:
            memory = mmap.mmap(self._fd, (last - first + 1) * mmap.PAGESIZE, offset=first * mmap.PAGESIZE)  # type: ignore[arg-type]
            pointer = (ctypes.c_char * len(memory)).from_buffer(memory)
            self._mapped[first, last] = (memory, pointer)
        memory, pointer = self._mapped[first, last]
        return memory, ctypes.addressof(pointer)

    def _pieces(self, memory: mmap.mmap, origin: int, raw: bytes, start: int,
                end: int) -> Iterator[tuple[int, int, int]]:
        """The aligned words of raw[start:end] at `origin` + start of `memory` that differ from what
        it holds: (offset in the value, width, value)."""
        at = start
        while at < end:
            width = next(w for w in self.WIDTHS if (origin + at) % w == 0 and at + w <= end)
            if memory[origin + at : origin + at + width] != raw[at : at + width]:
                yield at, width, int.from_bytes(raw[at : at + width], sys.byteorder)
            at += width

    def _store_by_libdpp(self, address: int, size: int, origin: int, words: list[tuple[int, int, int]]) -> None:
        if not words:
            return
        array = (Word * len(words))(*(Word(offset=origin + at, value=piece, width=width) for at, width, piece in words))
        rc = self._lib.dpp_words_store(address, size, array, len(words))  # type: ignore[union-attr]
        if rc < 0:
            raise DataplaneError(-rc, "dpp_words_store", f"table {self._table.name}")

    @staticmethod
    def _store_by_numpy(memory: mmap.mmap, origin: int, words: list[tuple[int, int, int]]) -> None:
        """Each word by numpy's typed store of its width (where libdpp cannot be loaded)."""
        for at, width, piece in words:
            view = numpy.frombuffer(memory, dtype=f"=u{width}")
            view[(origin + at) // width] = piece
            del view  # the mapping closes only once no view holds it

    def _patch(self, index: int, raw: bytes, spans: Sequence[Span]) -> None:
        kind = self._table._value_type
        value = self._table.lookup([c_uint32(index)])[0]
        patched = bytearray(bytes(value) if value is not None else ctypes.sizeof(kind))
        for start, end in spans:
            patched[start:end] = raw[start:end]
        self._table.update([(c_uint32(index), kind.from_buffer_copy(patched))])

    def release(self) -> None:
        """The writer done (its table keeps the mappings: they close with it)."""


def _words_lib_of(adapter: Any) -> Any:
    """The adapter's own libdpp (the build its handle was opened with) when it has dpp_words_store,
    else the one found (_words_lib)."""
    lib = getattr(adapter, "lib", None)
    return lib if lib is not None and hasattr(lib, "dpp_words_store") else _words_lib()


@functools.lru_cache(maxsize=None)
def _words_lib() -> Any:
    """libdpp, for dpp_words_store; None where it cannot be loaded (not built). Found once: its
    search resolves paths, which took a change some 0.4 ms."""
    from netapp.dataplane.binding import load_libdpp  # the binding imports this module's users

    try:
        return load_libdpp()
    except (DataplaneError, OSError):
        return None


def open_table(adapter: TableAdapter, name: str, spec: Optional[MapSpec] = None) -> Table:
    """Map `name` as the table its spec says it is: a map of maps, a row per CPU, per-CPU or plain
    (the spec: `spec`, else the instance's, MAPS)."""
    spec = spec if spec is not None else MAPS.get(name)
    if spec is not None and spec.inner is not None:
        return MapOfMaps(adapter, name, spec)
    if spec is not None and spec.rows:
        return RowsTable(adapter, name, spec)
    if spec is not None and spec.per_cpu:
        return PerCpuTable(adapter, name, spec)
    return Table(adapter, name, spec)


def fill_slots(indexes: Sequence[int], stride: int, rows: int) -> list[int]:
    """The slots libdpp's dpp_table_fill writes: row 0's in the indexes' order, then row 1's, ..."""
    return [row * stride + index for row in range(rows) for index in indexes]


def fill_arrays(spec: MapSpec, indexes: Sequence[int], stride: int, rows: int, value: bytes) -> tuple[Any, Any]:
    """The keys and values dpp_table_fill writes, as C arrays of the map's types (for the adapters
    that write them through their own table_update: the fakes)."""
    slots = fill_slots(indexes, stride, rows)
    return (spec.key * len(slots))(*slots), (spec.value * len(slots)).from_buffer_copy(value * len(slots))


def summed(kind: Any, values: Iterable[Any]) -> Any:
    """A `kind` (a structure of integer counters) each of whose fields is the sum of `values`' (a
    per-CPU value's CPUs, or several slots)."""
    total = kind()
    for value in values:
        for name, _ in kind._fields_:
            setattr(total, name, getattr(total, name) + getattr(value, name))
    return total


def _array(ctype: Any, items: Sequence[Any]) -> Any:
    if isinstance(items, ctypes.Array) and items._type_ is ctype:
        return items
    return (ctype * len(items))(*items)


def _copy(array: Any, index: int) -> Any:
    """array[index] detached from the array's buffer (a plain int stays an int)."""
    item = array[index]
    return type(item).from_buffer_copy(item) if isinstance(item, (Structure, ctypes.Array)) else item


__all__ = ["InPlace", "MapOfMaps", "PerCpuTable", "Table", "TableAdapter", "UpdateFlag", "fill_arrays", "summed"]
