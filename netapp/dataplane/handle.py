"""An opened libdpp instance: `DppHandle`, every libdpp call with Python types."""

from __future__ import annotations

import ctypes
import errno as errno_codes
import os
import platform
from ctypes import POINTER, byref, c_int, c_uint32, c_void_p
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

import numpy

from netapp.dataplane.abi import (
    Prog,
    ACTION_MAX,
    MAPS,
    MAX_CPUS,
    REASON_MAX,
    VERDICT_MAX,
    Config,
    Counter,
    Cpu,
    FlowKey,
    Rule,
    Shape,
    ShapeSet,
    Verdict,
    XdpMode,
)
from netapp.dataplane.errors import DataplaneError, check, check_batch
from netapp.qos.abi import ClockWord
from netapp.dataplane.libdpp_abi import RULE_CB, MapSize, OpenOpts, ProgDesc, TableCursor, TestResult, UpgradeOpts

if TYPE_CHECKING:
    from netapp.dataplane.binding import Libdpp


class DppHandle:
    """One opened libdpp instance: every libdpp call with Python types, errors as DataplaneError.

    This is the low-level adapter `netapp.dataplane.facade.Dataplane` drives; `FakeDpp` in
    netapp.dataplane.fake implements the same methods without a kernel.
    """

    def __init__(self, lib: Libdpp, handle: c_void_p):
        self.lib = lib
        self._handle = handle
        self._not_added: set[str] = set()  # programs this build could not add to the instance (warned once)

    @classmethod
    def open(
        cls,
        lib: Libdpp,
        instance: Optional[str] = None,
        *,
        max_rules: int = 0,
        max_flows: int = 0,
        flow_cache: bool = True,
        trace: bool = False,
        default_verdict: int = Verdict.PASS,
        meter_window_ns: int = 0,
        map_sizes: Optional[Mapping[str, int]] = None,
    ) -> "DppHandle":
        sizes = (MapSize * len(map_sizes or {}))(
            *(MapSize(name.encode(), entries) for name, entries in (map_sizes or {}).items())
        )
        opts = OpenOpts(
            sz=ctypes.sizeof(OpenOpts),
            instance=instance.encode() if instance else None,
            max_rules=max_rules,
            max_flows=max_flows,
            flow_cache=flow_cache,
            trace=trace,
            default_verdict=int(default_verdict),
            meter_window_ns=meter_window_ns,
            map_sizes=sizes,
            nr_map_sizes=len(sizes),
        )
        handle = c_void_p()
        rc = lib.dpp_open(byref(opts), byref(handle))
        check(rc, "dpp_open", hint=_open_hint(rc))
        return cls(lib, handle)

    def close(self) -> None:
        if self._handle:
            self.lib.dpp_close(self._handle)
            self._handle = c_void_p()

    @property
    def is_open(self) -> bool:
        return bool(self._handle)

    def unpin(self) -> None:
        check(self.lib.dpp_unpin(self._handle), "dpp_unpin")

    def reused(self) -> bool:
        return check(self.lib.dpp_reused(self._handle), "dpp_reused") == 1

    def prog_fd(self) -> int:
        return check(self.lib.dpp_prog_fd(self._handle), "dpp_prog_fd")

    def map_fd(self, name: str) -> int:
        if name not in MAPS:
            raise KeyError(f"unknown map {name!r}; known: {', '.join(MAPS)}")
        return check(self.lib.dpp_map_fd(self._handle, name.encode()), f"dpp_map_fd({name})")

    def prog_id(self) -> int:
        """The kernel's id of the loaded program (what `bpftool prog show id` takes)."""
        return int(fdinfo(self.prog_fd())["prog_id"])

    def program_fd(self, name: str) -> int:
        """The handle's fd of the instance's program `name` (valid while the handle is open). An
        instance pinned by an older build that lacks it gets this build's, loaded against its maps
        (dpp_program_add); LookupError where it cannot (libdpp warned, naming the instance and what
        to do: asked once per handle; a load the kernel refused for the moment, asked again)."""
        fd = self._program_fd(name)
        if fd is None and name not in self._not_added:
            if self.lib.dpp_program_add(self._handle, name.encode()) in (-errno_codes.ENOENT, -errno_codes.EPROTO):
                self._not_added.add(name)  # for good: a refusal of the moment is asked again
            fd = self._program_fd(name)
        if fd is None:
            raise LookupError(f"no program {name} in the instance")
        return fd

    def _program_fd(self, name: str) -> Optional[int]:
        found = (ProgDesc * check(self.lib.dpp_programs(self._handle, None, 0), "dpp_programs"))()
        check(self.lib.dpp_programs(self._handle, found, len(found)), "dpp_programs")
        return next((prog.fd for prog in found if bytes(prog.name).rstrip(b"\0").decode() == name), None)

    def programs(self) -> list[dict[str, Any]]:
        """The XDP entry, then the programs it tail-calls: name, id, kind and dpp_progs slot."""
        found = (ProgDesc * check(self.lib.dpp_programs(self._handle, None, 0), "dpp_programs"))()
        check(self.lib.dpp_programs(self._handle, found, len(found)), "dpp_programs")
        slots = {slot.value: slot.name.lower() for slot in Prog}  # a newer object's: its number
        kinds = ("xdp", "tail", "cpumap", "devmap")  # enum dpp_prog_kind
        return [
            {
                "name": bytes(p.name).rstrip(b"\0").decode(),
                "id": p.id,
                "kind": kinds[p.kind],
                "slot": None if p.slot < 0 else slots.get(p.slot, str(p.slot)),
            }
            for p in found
        ]

    def clock_word(self) -> Optional[ClockWord]:
        """The COARSE policers' clock word of the programs the handle runs; None: built without it."""
        word = ClockWord()
        rc = self.lib.dpp_clock_word_get(self._handle, byref(word))
        if rc == -errno_codes.ENOENT:
            return None
        check(rc, "dpp_clock_word_get")
        return word

    def map_info(self, name: str) -> dict[str, int]:
        """A map's kernel id and max_entries."""
        info = fdinfo(self.map_fd(name))
        return {"id": int(info["map_id"]), "max_entries": int(info["max_entries"])}

    def upgrade(self, *, flow_cache: bool = True, trace: bool = False) -> None:
        """Replace the program with the one this libdpp carries; maps and links stay."""
        opts = UpgradeOpts(sz=ctypes.sizeof(UpgradeOpts), flow_cache=flow_cache, trace=trace)
        check(self.lib.dpp_upgrade(self._handle, byref(opts)), "dpp_upgrade")

    def attach(self, ifindex: int, mode: XdpMode) -> None:
        check(self.lib.dpp_attach(self._handle, ifindex, int(mode)), f"dpp_attach(ifindex {ifindex})")

    def detach(self, ifindex: int) -> None:
        check(self.lib.dpp_detach(self._handle, ifindex), f"dpp_detach(ifindex {ifindex})")

    def attached(self, max_count: int = 256) -> list[int]:
        found = (c_int * max_count)()
        count = check(self.lib.dpp_attached(self._handle, found, max_count), "dpp_attached")
        return list(found[: min(count, max_count)])

    def rules_upsert(self, keys: Sequence[FlowKey], rules: Sequence[Rule]) -> None:
        if not keys:
            return
        done = c_uint32(0)
        rc = self.lib.dpp_rules_upsert(
            self._handle, _array(FlowKey, keys), _array(Rule, rules), len(keys), byref(done)
        )
        check_batch(rc, "dpp_rules_upsert", done.value, len(keys))

    def rules_delete(self, keys: Sequence[FlowKey]) -> None:
        if not keys:
            return
        done = c_uint32(0)
        rc = self.lib.dpp_rules_delete(self._handle, _array(FlowKey, keys), len(keys), byref(done))
        check_batch(rc, "dpp_rules_delete", done.value, len(keys))

    def rules_dump(self) -> list[tuple[FlowKey, Rule]]:
        """Copies of every installed (key, rule)."""
        found: list[tuple[FlowKey, Rule]] = []

        def collect(key: Any, rule: Any, _ctx: Any) -> int:
            found.append((FlowKey.from_buffer_copy(key.contents), Rule.from_buffer_copy(rule.contents)))
            return 0

        callback = RULE_CB(collect)
        check(self.lib.dpp_rules_foreach(self._handle, callback, None), "dpp_rules_foreach")
        return found

    def shapes_publish(self, shapes: Sequence[Shape]) -> None:
        check(
            self.lib.dpp_shapes_publish(self._handle, _array(Shape, shapes), len(shapes)),
            "dpp_shapes_publish",
        )

    def shapes_get(self) -> ShapeSet:
        out = ShapeSet()
        check(self.lib.dpp_shapes_get(self._handle, byref(out)), "dpp_shapes_get")
        return out

    def config_get(self) -> Config:
        out = Config()
        check(self.lib.dpp_config_get(self._handle, byref(out)), "dpp_config_get")
        return out

    def config_set(self, config: Config) -> None:
        check(self.lib.dpp_config_set(self._handle, byref(config)), "dpp_config_set")

    def cpu_enable(self, cpu: int, queue_size: int = 0, capacity_pps: int = 0) -> None:
        check(
            self.lib.dpp_cpu_enable(self._handle, cpu, queue_size, capacity_pps), f"dpp_cpu_enable(cpu {cpu})"
        )

    def cpu_disable(self, cpu: int) -> None:
        check(self.lib.dpp_cpu_disable(self._handle, cpu), f"dpp_cpu_disable(cpu {cpu})")

    def cpu_set_overloaded(self, cpu: int, overloaded: bool) -> None:
        check(
            self.lib.dpp_cpu_set_overloaded(self._handle, cpu, overloaded),
            f"dpp_cpu_set_overloaded(cpu {cpu})",
        )

    def cpu_get(self, cpu: int) -> Cpu:
        out = Cpu()
        check(self.lib.dpp_cpu_get(self._handle, cpu, byref(out)), f"dpp_cpu_get(cpu {cpu})")
        return out

    def cpumap_qsize_max(self) -> int:
        """The largest CPUMAP queue the running kernel takes (probed on a throwaway map)."""
        out = c_uint32()
        check(self.lib.dpp_cpumap_qsize_max(byref(out)), "dpp_cpumap_qsize_max")
        return out.value

    # Generic tables (netapp.dataplane.tables.Table drives these): keys and values are C arrays.

    def table_update(self, name: str, keys: Any, values: Any, flags: int = 0) -> None:
        done = c_uint32(0)
        key_size, value_size = _item_size(keys), _item_size(values)
        rc = self.lib.dpp_table_update(
            self._handle, name.encode(), keys, key_size, values, value_size, len(keys), flags, byref(done)
        )
        check_batch(rc, f"dpp_table_update({name})", done.value, len(keys))

    def table_fill(self, name: str, indexes: Any, stride: int, rows: int, value: bytes) -> None:
        """`value` at each of `indexes` (a C array of __u32) in each of `rows` rows of `stride` slots."""
        done = c_uint32(0)
        rc = self.lib.dpp_table_fill(
            self._handle, name.encode(), indexes, len(indexes), stride, rows, value, len(value), byref(done)
        )
        check_batch(rc, f"dpp_table_fill({name})", done.value, len(indexes) * rows)

    def table_lookup(self, name: str, keys: Any, values: Any, found: Any) -> int:
        """Fills values[i] and found[i] (1: in the map) for each key; returns how many were found."""
        key_size, value_size = _item_size(keys), _item_size(values)
        rc = self.lib.dpp_table_lookup(
            self._handle, name.encode(), keys, key_size, values, value_size, len(keys), found
        )
        return check(rc, f"dpp_table_lookup({name})")

    def table_held(self, name: str, keys: Any, value_size: int, flag_at: int, flag: int) -> int:
        """The index of the first key held (its value's byte at flag_at with `flag` set; flag 0: held
        at all), or len(keys)."""
        rc = self.lib.dpp_table_held(self._handle, name.encode(), keys, _item_size(keys), value_size, len(keys),
                                     flag_at, flag)
        return check(rc, f"dpp_table_held({name})")

    def table_delete(self, name: str, keys: Any) -> None:
        done = c_uint32(0)
        rc = self.lib.dpp_table_delete(
            self._handle, name.encode(), keys, _item_size(keys), len(keys), byref(done)
        )
        check_batch(rc, f"dpp_table_delete({name})", done.value, len(keys))

    def table_dump(self, name: str, cursor: TableCursor, keys: Any, values: Any) -> int:
        """The next entries into keys and values (as many as they hold); 0 once the dump is over."""
        key_size, value_size = _item_size(keys), _item_size(values)
        rc = self.lib.dpp_table_dump(
            self._handle, name.encode(), byref(cursor), keys, key_size, values, value_size, len(keys)
        )
        return check(rc, f"dpp_table_dump({name})")

    def table_wait_readers(self) -> None:
        """Returns once every run of the programs that began before the call has ended."""
        check(self.lib.dpp_table_wait_readers(self._handle), "dpp_table_wait_readers")

    def table_inner_set(self, name: str, index: int, inner_type: int, max_entries: int, keys: Any, values: Any) -> None:
        """Entry `index` of the map of maps `name` made a new inner map holding keys -> values."""
        rc = self.lib.dpp_table_inner_set(
            self._handle, name.encode(), index, inner_type, max_entries, keys, _item_size(keys), values,
            _item_size(values), len(keys)
        )
        check(rc, f"dpp_table_inner_set({name}[{index}])")

    def table_inner_lookup(self, name: str, index: int, keys: Any, values: Any, found: Any) -> int:
        """table_lookup in the inner map at `index`; DataplaneError (ENOENT) when there is none."""
        rc = self.lib.dpp_table_inner_lookup(
            self._handle, name.encode(), index, keys, _item_size(keys), values, _item_size(values), len(keys), found
        )
        return check(rc, f"dpp_table_inner_lookup({name}[{index}])")

    def stats_rules(self, first: int, count: int) -> list[tuple[int, int]]:
        if count <= 0:
            return []
        out = (Counter * count)()
        check(self.lib.dpp_stats_rules(self._handle, first, count, out), "dpp_stats_rules")
        return [(counter.packets, counter.bytes) for counter in out]

    def stats_rules_array(self, first: int, count: int) -> numpy.ndarray:
        """The same counters as stats_rules, as a (count, 2) uint64 array [packets, bytes]: read
        straight into the array, so a million rules cost no Python object each."""
        out = numpy.zeros((max(count, 0), 2), dtype=numpy.uint64)
        if count > 0:
            buffer = out.ctypes.data_as(POINTER(Counter))
            check(self.lib.dpp_stats_rules(self._handle, first, count, buffer), "dpp_stats_rules")
        return out

    def stats_rules_clear(self, first: int, count: int) -> None:
        check(self.lib.dpp_stats_rules_clear(self._handle, first, count), "dpp_stats_rules_clear")

    def stats_verdicts(self) -> list[tuple[int, int]]:
        return self._stats_table(self.lib.dpp_stats_verdicts, VERDICT_MAX, "dpp_stats_verdicts")

    def stats_actions(self) -> list[tuple[int, int]]:
        return self._stats_table(self.lib.dpp_stats_actions, ACTION_MAX, "dpp_stats_actions")

    def stats_reasons(self) -> list[tuple[int, int]]:
        return self._stats_table(self.lib.dpp_stats_reasons, REASON_MAX, "dpp_stats_reasons")

    def stats_cpus(self, count: int = MAX_CPUS) -> list[tuple[int, int]]:
        """(packets, bytes) STEER handed to each of CPUs [0, count)."""
        out = (Counter * count)()
        check(self.lib.dpp_stats_cpus(self._handle, out, count), "dpp_stats_cpus")
        return [(counter.packets, counter.bytes) for counter in out]

    def _stats_table(self, function: Any, size: int, op: str) -> list[tuple[int, int]]:
        out = (Counter * size)()
        check(function(self._handle, out), op)
        return [(counter.packets, counter.bytes) for counter in out]

    def test_run(
        self, packet: bytes, ingress_ifindex: int = 0, headroom: int = 512
    ) -> tuple[TestResult, bytes]:
        """Run one packet through the program; the output buffer leaves room for encapsulation."""
        capacity = len(packet) + headroom
        out = ctypes.create_string_buffer(capacity)
        out_len = c_uint32(capacity)
        result = TestResult()
        rc = self.lib.dpp_test_run(
            self._handle, packet, len(packet), ingress_ifindex, out, byref(out_len), byref(result)
        )
        check(rc, "dpp_test_run", hint="BPF_PROG_TEST_RUN needs root" if rc == -errno_codes.EPERM else "")
        return result, out.raw[: out_len.value]

    def upf_punts(self) -> Any:
        """A reader of the UPF's punted frames (netapp.upf.punts.PuntReader)."""
        from netapp.upf.punts import PuntReader

        return PuntReader(self.lib, self._handle)

    def upf_replay(self, frame: bytes, ifindex: int) -> None:
        """A frame through the program as if it had arrived on `ifindex` (netapp.upf.punts.replay)."""
        from netapp.upf.punts import replay

        replay(self.lib, self._handle, frame, ifindex)


def possible_cpus(path: str = "/sys/devices/system/cpu/possible") -> int:
    """How many CPUs the kernel may ever bring up (what libbpf counts per-CPU values by): one more
    than the highest in a list like "0-3,6"."""
    with open(path) as listing:
        ranges = listing.read().strip().split(",")
    return 1 + max(int(part.split("-")[-1]) for part in ranges)


def fdinfo(fd: int) -> dict[str, str]:
    """The kernel's description of an fd (/proc/self/fdinfo): for BPF objects, their ids and sizes."""
    with open(f"/proc/self/fdinfo/{fd}") as lines:
        fields = (line.split(":", 1) for line in lines if ":" in line)
        return {name.strip(): value.strip() for name, value in fields}


def _open_hint(rc: int) -> str:
    """Why dpp_open failed, for its error: root, or a kernel libdpp refuses (dpp_kernel_check's
    EOPNOTSUPP; the log has the release, the minimum and the reason)."""
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "loading BPF programs needs root (or CAP_BPF and CAP_NET_ADMIN)"
    if rc == -errno_codes.EOPNOTSUPP:
        return f"kernel {platform.release()} is older than the oldest the data path loads on (see libdpp's log)"
    return ""


def _item_size(array: Any) -> int:
    return ctypes.sizeof(array) // len(array) if len(array) else ctypes.sizeof(array._type_)


def _array(ctype: Any, items: Sequence[Any]) -> Any:
    """items as a C array of ctype; an existing one is passed as is (no per-element copy)."""
    if isinstance(items, ctypes.Array) and items._type_ is ctype:
        return items
    return (ctype * len(items))(*items)
