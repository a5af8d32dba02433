"""A no-kernel stand-in for binding.DppHandle: map state in dicts and a log of every call.

It lets the facade's bookkeeping (diffs, slots, call order) be tested without root or libdpp.
It runs no packets: test_run raises EOPNOTSUPP.
"""

from __future__ import annotations

import errno
from typing import Any, Sequence

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
    AltGroup,
    Config,
    Cpu,
    DataplaneError,
    FlowKey,
    Prog,
    Rule,
    Shape,
    ShapeSet,
    TestResult,
    Verdict,
    XdpMode,
    struct_bytes,
)


def _copy(value: Any) -> Any:
    return type(value).from_buffer_copy(value)


class FakeDpp:
    """In-memory maps with libdpp's semantics, enough for the facade: calls are logged in `calls`."""

    def __init__(self, max_rules: int = MAX_RULES, reused: bool = False):
        self.calls: list[tuple[Any, ...]] = []
        self.rules: dict[bytes, tuple[FlowKey, Rule]] = {}
        self.shape_sets = [ShapeSet(), ShapeSet()]
        self.config = Config(default_verdict=Verdict.PASS, default_alt_group=NONE)
        self.cpus = {cpu: Cpu() for cpu in range(MAX_CPUS)}
        self.ports: set[int] = set()
        self.alt_groups: dict[int, AltGroup] = {}
        self.rule_counters = [[0, 0] for _ in range(max_rules)]
        self.cpu_counters = [[0, 0] for _ in range(MAX_CPUS)]
        self.links: dict[int, XdpMode] = {}
        self.closed = False
        self.program_id = 1
        self.qsize_max = 16384  # the kernel's CPUMAP queue limit; a test may lower it
        self._reused = reused

    # lifecycle
    def close(self) -> None:
        self.calls.append(("close",))
        self.closed = True

    def reused(self) -> bool:
        return self._reused

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

    # config, CPUs, ports, alternatives
    def config_get(self) -> Config:
        return _copy(self.config)

    def config_set(self, config: Config) -> None:
        self.calls.append(("config_set", config.default_verdict, config.default_alt_group))
        self.config = _copy(config)

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

    def port_add(self, ifindex: int) -> None:
        self.calls.append(("port_add", ifindex))
        self.ports.add(ifindex)

    def port_remove(self, ifindex: int) -> None:
        self.calls.append(("port_remove", ifindex))
        self.ports.discard(ifindex)

    def alt_group_set(self, group: int, value: AltGroup) -> None:
        self.calls.append(("alt_group_set", group))
        self.alt_groups[group] = _copy(value)

    def alt_group_clear(self, group: int) -> None:
        self.calls.append(("alt_group_clear", group))
        self.alt_groups.pop(group, None)

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

    def map_info(self, name: str) -> dict[str, int]:
        """Made-up ids (1 + the map's position in MAPS); sizes from the header, rules as configured."""
        size = MAPS[name].max_entries
        if name == "dpp_rules":
            size = len(self.rule_counters)
        elif isinstance(size, str):
            size = CONSTANTS[size]
        return {"id": 1 + list(MAPS).index(name), "max_entries": size}

    def test_run(self, packet: bytes, ingress_ifindex: int = 0) -> tuple[TestResult, bytes]:
        raise DataplaneError(errno.EOPNOTSUPP, "dpp_test_run", "the fake data plane runs no packets")


__all__ = ["FakeDpp"]
