"""A no-kernel stand-in for binding.DppHandle: map state in dicts and a log of every call.

It lets the facade's bookkeeping (diffs, slots, call order) be tested without root or libdpp.
It runs no packets: test_run raises EOPNOTSUPP.
"""

from __future__ import annotations

import ctypes
import errno
import sys
from ctypes import c_uint32
from typing import Any, Mapping, Optional, Sequence

import numpy

from netapp.dataplane.binding import (
    ACTION_MAX,
    CONSTANTS,
    MAPS,
    MAX_CPUS,
    MAX_RULES,
    NONE,
    REASON_MAX,
    VERDICT_MAX,
    Config,
    Cpu,
    DataplaneError,
    FlowKey,
    Prog,
    Rule,
    Shape,
    ShapeSet,
    TestResult,
    MapSpec,
    MapType,
    Verdict,
    XdpMode,
    struct_bytes,
)
from netapp.dataplane.handle import possible_cpus
from netapp.dataplane.tables import UpdateFlag, fill_arrays
from netapp.qos.abi import ClockWord


def _copy(value: Any) -> Any:
    return type(value).from_buffer_copy(value)


def _items(array: Any) -> list[Any]:
    """The elements of a C array as ctypes objects (ints become c_uint32 and the like)."""
    return [array._type_.from_buffer(array, index * _item_size(array)) for index in range(len(array))]


def _item_size(array: Any) -> int:
    return ctypes.sizeof(array._type_)


def _raw(key: Any) -> bytes:
    return bytes(key)


def _key_bytes(index: int) -> bytes:
    return bytes(ctypes.c_uint32(index))


def _index(key: Any) -> int:
    return int.from_bytes(bytes(key)[:4], sys.byteorder)


def _decode(ctype: Any, raw: bytes) -> Any:
    value = ctype.from_buffer_copy(raw)
    return value.value if hasattr(value, "value") and not isinstance(value, ctypes.Structure) else value


def _refusal(spec: MapSpec, entries: dict[bytes, bytes], key: bytes, flags: int, max_entries: int) -> int:
    """The errno the kernel answers an update with, or 0."""
    present = spec.array or key in entries
    if spec.array and _index(key) >= max_entries:
        return errno.E2BIG
    if flags == UpdateFlag.NOEXIST and present:
        return errno.EEXIST
    if flags == UpdateFlag.EXIST and not present and spec.type != MapType.DEVMAP_HASH:
        return errno.ENOENT  # a DEVMAP_HASH ignores BPF_EXIST
    if not present and len(entries) >= max_entries:
        return errno.E2BIG
    return 0


def _store(spec: MapSpec, entries: dict[bytes, bytes], key: bytes, value: bytes) -> None:
    """An array keeps only what is not zeroed: a zeroed slot reads back the same as an absent one."""
    if spec.array and not any(value):
        entries.pop(key, None)
    else:
        entries[key] = value


def _batch_error(code: int, op: str, done: int, total: int) -> DataplaneError:
    error = DataplaneError(code, op, f"{errno.errorcode.get(code, code)} after {done} of {total}")
    error.done = done  # type: ignore[attr-defined]
    return error


class FakeDpp:
    """In-memory maps with libdpp's semantics, enough for the facade: calls are logged in `calls`."""

    def __init__(
        self, max_rules: int = MAX_RULES, reused: bool = False, map_sizes: Optional[Mapping[str, int]] = None
    ):
        self.calls: list[tuple[Any, ...]] = []
        self.rules: dict[bytes, tuple[FlowKey, Rule]] = {}
        self.shape_sets = [ShapeSet(), ShapeSet()]
        self.config = Config(default_verdict=Verdict.PASS, default_alt_group=NONE)
        self.cpus = {cpu: Cpu() for cpu in range(MAX_CPUS)}
        self.tables: dict[str, dict[bytes, bytes]] = {}  # generic tables: key bytes -> value bytes
        self.reader_waits = 0  # table_wait_readers calls
        self.inner_tables: dict[tuple[str, int], dict[bytes, bytes]] = {}  # (map of maps, index) -> its inner map
        self._inner_ids = 0  # the made-up id of the last inner map made
        self.rule_counters = [[0, 0] for _ in range(max_rules)]
        self.cpu_counters = [[0, 0] for _ in range(MAX_CPUS)]
        self.links: dict[int, XdpMode] = {}
        self.closed = False
        self.program_id = 1
        self.qsize_max = 16384  # the kernel's CPUMAP queue limit; a test may lower it
        self._reused = reused
        self.map_sizes = dict(map_sizes or {})  # sizes chosen at load (dpp_open_opts.map_sizes)

    # lifecycle
    def close(self) -> None:
        self.calls.append(("close",))
        self.closed = True

    def reused(self) -> bool:
        return self._reused

    def program_fd(self, name: str) -> int:
        """No program runs here: a DEVMAP entry written with this fd holds none."""
        self.calls.append(("program_fd", name))
        return 0

    def attach(self, ifindex: int, mode: XdpMode) -> None:
        self.calls.append(("attach", ifindex, mode))
        if ifindex in self.links:
            raise DataplaneError(errno.EEXIST, "dpp_attach")
        self.links[ifindex] = mode

    def detach(self, ifindex: int) -> None:
        self.calls.append(("detach", ifindex))
        if self.links.pop(ifindex, None) is None:
            raise DataplaneError(errno.ENOENT, "dpp_detach")

    def attached(self) -> list[int]:
        return sorted(self.links)

    def unpin(self) -> None:
        self.calls.append(("unpin",))
        self.links.clear()

    def upgrade(self, *, flow_cache: bool = True, trace: bool = False) -> None:
        """A new program id, as the kernel gives; maps and links stay as they are."""
        self.calls.append(("upgrade", flow_cache, trace))
        self.program_id += 1

    # rules and shapes
    def rules_upsert(self, keys: Sequence[FlowKey], rules: Sequence[Rule]) -> None:
        if not keys:
            return
        self.calls.append(("rules_upsert", [struct_bytes(key) for key in keys]))
        for key, rule in zip(keys, rules, strict=True):
            self.rules[struct_bytes(key)] = (_copy(key), _copy(rule))

    def rules_delete(self, keys: Sequence[FlowKey]) -> None:
        if not keys:
            return
        self.calls.append(("rules_delete", [struct_bytes(key) for key in keys]))
        for key in keys:
            if self.rules.pop(struct_bytes(key), None) is None:
                raise DataplaneError(errno.ENOENT, "dpp_rules_delete")

    def rules_dump(self) -> list[tuple[FlowKey, Rule]]:
        return [(_copy(key), _copy(rule)) for key, rule in self.rules.values()]

    def shapes_publish(self, shapes: Sequence[Shape]) -> None:
        self.calls.append(("shapes_publish", [struct_bytes(shape) for shape in shapes]))
        inactive = 1 - self.config.shape_set
        published = ShapeSet(count=len(shapes))
        for index, shape in enumerate(shapes):
            published.shapes[index] = shape
        self.shape_sets[inactive] = published
        self.config.shape_set = inactive
        self.config.generation += 1

    def shapes_get(self) -> ShapeSet:
        return _copy(self.shape_sets[self.config.shape_set])

    def active_shapes(self) -> list[Shape]:
        active = self.shape_sets[self.config.shape_set]
        return [active.shapes[index] for index in range(active.count)]

    # config, CPUs
    def config_get(self) -> Config:
        return _copy(self.config)

    def config_set(self, config: Config) -> None:
        self.calls.append(("config_set", config.default_verdict, config.default_alt_group))
        kept = self.config  # libdpp keeps the active shape set, the generation and the functions' word
        self.config = _copy(config)
        self.config.shape_set, self.config.generation = kept.shape_set, kept.generation
        self.config.functions = kept.functions

    def cpu_enable(self, cpu: int, queue_size: int = 0, capacity_pps: int = 0) -> None:
        self.calls.append(("cpu_enable", cpu, queue_size, capacity_pps))
        if queue_size > self.qsize_max:
            raise DataplaneError(errno.EOVERFLOW, f"dpp_cpu_enable(cpu {cpu})")
        self.cpus[cpu].enabled = 1
        self.cpus[cpu].capacity_pps = capacity_pps

    def cpu_disable(self, cpu: int) -> None:
        self.calls.append(("cpu_disable", cpu))
        self.cpus[cpu] = Cpu()

    def cpu_set_overloaded(self, cpu: int, overloaded: bool) -> None:
        self.calls.append(("cpu_set_overloaded", cpu, overloaded))
        self.cpus[cpu].overloaded = int(overloaded)

    def cpu_get(self, cpu: int) -> Cpu:
        return _copy(self.cpus[cpu])

    def cpumap_qsize_max(self) -> int:
        return self.qsize_max

    # generic tables (netapp.dataplane.tables): libdpp's dpp_table_* semantics over dicts
    def table_update(self, name: str, keys: Any, values: Any, flags: int = 0) -> None:
        spec = self._table(name, keys, values, write=True)
        self.calls.append(("table_update", name, [bytes(key) for key in _items(keys)]))
        entries = self.tables.setdefault(name, {})
        for done, (key, value) in enumerate(zip(_items(keys), _items(values), strict=True)):
            code = _refusal(spec, entries, _raw(key), flags, self._max_entries(name))
            if code:
                raise _batch_error(code, f"dpp_table_update({name})", done, len(keys))
            _store(spec, entries, _raw(key), bytes(value))

    def table_fill(self, name: str, indexes: Any, stride: int, rows: int, value: bytes) -> None:
        """libdpp's dpp_table_fill: the slots and values it makes, written as dpp_table_update writes them."""
        if any(index >= stride for index in indexes):
            raise _batch_error(errno.ERANGE, f"dpp_table_fill({name})", 0, len(indexes) * rows)
        self.table_update(name, *fill_arrays(MAPS[name], list(indexes), stride, rows, value))

    def table_lookup(self, name: str, keys: Any, values: Any, found: Any) -> int:
        spec = self._table(name, keys, values)
        entries = self.tables.get(name, {})
        for index, key in enumerate(_items(keys)):
            raw = entries.get(_raw(key))
            if raw is None and spec.array and _index(key) < self._max_entries(name):
                raw = bytes(_item_size(values))
            found[index] = raw is not None
            out = raw if raw is not None else bytes(_item_size(values))  # libdpp zeroes a missing key's value
            ctypes.memmove(ctypes.addressof(values) + index * _item_size(values), out, len(out))
        return sum(found)

    def table_held(self, name: str, keys: Any, value_size: int, flag_at: int, flag: int) -> int:
        """libdpp's dpp_table_held: its lookups, the first key held."""
        values, found = (ctypes.c_uint8 * (value_size * len(keys)))(), (ctypes.c_uint8 * len(keys))()
        self.table_lookup(name, keys, (ctypes.c_uint8 * value_size * len(keys)).from_buffer(values), found)
        return next((index for index in range(len(keys))
                     if found[index] and (not flag or values[index * value_size + flag_at] & flag)), len(keys))

    def table_delete(self, name: str, keys: Any) -> None:
        spec = self._table(name, keys, None, write=True)
        self.calls.append(("table_delete", name, [bytes(key) for key in _items(keys)]))
        entries = self.tables.setdefault(name, {})
        for done, key in enumerate(_items(keys)):
            if spec.array or _raw(key) not in entries:
                code = errno.EINVAL if spec.array else errno.ENOENT
                raise _batch_error(code, f"dpp_table_delete({name})", done, len(keys))
            del entries[_raw(key)]
            self.inner_tables.pop((name, _index(key)), None)  # a map of maps' entry: its inner map goes

    def table_dump(self, name: str, cursor: Any, keys: Any, values: Any) -> int:
        """cursor.state: how many entries were returned, plus one (0: not started)."""
        spec = self._table(name, keys, values)
        entries = self.tables.get(name, {})
        start = max(cursor.state - 1, 0)
        if spec.array:  # every index, this call's only
            zero = bytes(_item_size(values))
            indexes = map(_key_bytes, range(start, min(start + len(keys), self._max_entries(name))))
            chunk = [(key, entries.get(key, zero)) for key in indexes]
        else:
            chunk = list(entries.items())[start : start + len(keys)]
        for index, (key, value) in enumerate(chunk):
            keys[index] = _decode(keys._type_, key)
            values[index] = _decode(values._type_, value)
        cursor.state = start + len(chunk) + 1
        return len(chunk)

    def table_inner_set(self, name: str, index: int, inner_type: int, max_entries: int, keys: Any, values: Any) -> None:
        """A new inner map at `index`, its id in the outer entry (the kernel's read of a map of maps)."""
        spec = self._table(name, (c_uint32 * 1)(), (c_uint32 * 1)(), write=True)
        inner = spec.inner
        if inner is None or (inner_type, max_entries) != (inner.type, self._inner_size(inner)):
            raise DataplaneError(errno.EINVAL, f"dpp_table_inner_set({name})", "not the map of maps' inner maps")
        self.calls.append(("table_inner_set", name, index, [bytes(key) for key in _items(keys)]))
        held = self.tables.get(name, {})
        if spec.type == MapType.ARRAY_OF_MAPS and index >= self._max_entries(name):
            raise DataplaneError(errno.E2BIG, f"dpp_table_inner_set({name})", f"no index {index}")
        if _key_bytes(index) not in held and len(held) >= self._max_entries(name):
            raise DataplaneError(errno.E2BIG, f"dpp_table_inner_set({name})", f"{name} is full")
        self._inner_ids += 1
        self.inner_tables[(name, index)] = {_raw(key): bytes(value) for key, value in zip(_items(keys), _items(values))}
        self.tables.setdefault(name, {})[_key_bytes(index)] = bytes(c_uint32(self._inner_ids))

    def table_inner_lookup(self, name: str, index: int, keys: Any, values: Any, found: Any) -> int:
        self._table(name, (c_uint32 * 1)(), (c_uint32 * 1)())
        if _key_bytes(index) not in self.tables.get(name, {}):
            raise DataplaneError(errno.ENOENT, f"dpp_table_inner_lookup({name}[{index}])")
        entries = self.inner_tables.get((name, index), {})
        for position, key in enumerate(_items(keys)):
            raw = entries.get(_raw(key))
            found[position] = raw is not None
            out = raw if raw is not None else bytes(_item_size(values))
            ctypes.memmove(ctypes.addressof(values) + position * _item_size(values), out, len(out))
        return sum(found)

    @staticmethod
    def _inner_size(inner: MapSpec) -> int:
        return inner.max_entries if isinstance(inner.max_entries, int) else CONSTANTS[inner.max_entries]

    def table_wait_readers(self) -> None:
        """No program runs here: counted, for tests to see the waits."""
        self.reader_waits += 1

    def entries(self, name: str) -> dict[Any, Any]:
        """A table's written entries, decoded (an array's: those not zeroed), for tests to look at."""
        spec = MAPS[name]
        written = self.tables.get(name, {})
        return {_decode(spec.key, key): _decode(spec.value, value) for key, value in written.items()}

    def _table(self, name: str, keys: Any, values: Any, write: bool = False) -> MapSpec:
        """The map's spec, with libdpp's refusals: no such map, a map with a protocol, wrong sizes."""
        spec = MAPS.get(name)
        if spec is None:
            raise DataplaneError(errno.ENOENT, f"dpp_table({name})", f"no map named {name}")
        if write and not spec.table:
            raise DataplaneError(errno.EPERM, f"dpp_table({name})", f"{name} is written through its calls")
        sizes = (ctypes.sizeof(spec.key), ctypes.sizeof(spec.value) if spec.value is not None else None)
        given = (_item_size(keys), _item_size(values) if values is not None else sizes[1])
        if spec.per_cpu and sizes[1] and given[1] % sizes[1] == 0:
            given = (given[0], sizes[1])  # one value per CPU, however many the caller counts
        if given != sizes:
            raise DataplaneError(errno.EINVAL, f"dpp_table({name})", f"sizes {given}, the map has {sizes}")
        return spec

    def _max_entries(self, name: str) -> int:
        return self.map_info(name)["max_entries"]

    # statistics
    def count(self, slot: int, packets: int, size: int) -> None:
        """Pretend `packets` packets of `size` bytes hit rule slot `slot`."""
        self.rule_counters[slot][0] += packets
        self.rule_counters[slot][1] += packets * size

    def steer(self, cpu: int, packets: int, size: int) -> None:
        """Pretend STEER handed `packets` packets of `size` bytes to CPU `cpu`."""
        self.cpu_counters[cpu][0] += packets
        self.cpu_counters[cpu][1] += packets * size

    def stats_rules(self, first: int, count: int) -> list[tuple[int, int]]:
        return [tuple(counter) for counter in self.rule_counters[first : first + count]]  # type: ignore[misc]

    def stats_rules_array(self, first: int, count: int) -> Any:
        return numpy.array(self.stats_rules(first, count), dtype=numpy.uint64).reshape(-1, 2)

    def stats_rules_clear(self, first: int, count: int) -> None:
        self.calls.append(("stats_rules_clear", first, count))
        for slot in range(first, first + count):
            self.rule_counters[slot] = [0, 0]

    def stats_verdicts(self) -> list[tuple[int, int]]:
        return [(0, 0)] * VERDICT_MAX

    def stats_actions(self) -> list[tuple[int, int]]:
        return [(0, 0)] * ACTION_MAX

    def stats_reasons(self) -> list[tuple[int, int]]:
        return [(0, 0)] * REASON_MAX

    def stats_cpus(self, count: int = MAX_CPUS) -> list[tuple[int, int]]:
        if not 0 <= count <= MAX_CPUS:
            raise DataplaneError(errno.ERANGE, "dpp_stats_cpus")
        return [tuple(counter) for counter in self.cpu_counters[:count]]  # type: ignore[misc]

    # ids and sizes
    def prog_id(self) -> int:
        return self.program_id

    def programs(self) -> list[dict[str, Any]]:
        """The entry, then a program per slot of dpp_progs, with made-up ids that change on upgrade."""
        entry = {"name": "dpp_xdp", "id": self.program_id, "kind": "xdp", "slot": None}
        tails = [
            {
                "name": f"dpp_xdp_{slot.name.lower()}",
                "id": 1000 * self.program_id + slot,
                "kind": "tail",
                "slot": slot.name.lower(),
            }
            for slot in Prog
        ]
        return [entry, *tails]

    def clock_word(self) -> Optional[ClockWord]:
        """No programs run: no clock word."""
        return None

    def map_info(self, name: str) -> dict[str, int]:
        """Made-up ids (1 + the map's position in MAPS); sizes from the header, rules and map_sizes as
        configured."""
        size = self.map_sizes.get(name, MAPS[name].max_entries)
        if name == "dpp_rules":
            size = len(self.rule_counters)
        elif MAPS[name].rows:  # dpp_policer_stats: a row of dpp_policers per CPU, as libdpp sizes it
            size = possible_cpus() * self.map_info("dpp_policers")["max_entries"]
        elif isinstance(size, str):
            size = CONSTANTS[size]
        return {"id": 1 + list(MAPS).index(name), "max_entries": size}

    def test_run(self, packet: bytes, ingress_ifindex: int = 0) -> tuple[TestResult, bytes]:
        raise DataplaneError(errno.EOPNOTSUPP, "dpp_test_run", "the fake data plane runs no packets")


__all__ = ["FakeDpp"]
