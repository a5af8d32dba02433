"""Reading the data plane: status, counters and test runs. Dataplane's reading half (a mixin)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Sequence

from netapp.dataplane.binding import MAPS, MAX_CPUS, NONE, Action, Reason, TestResult, Verdict, key_from_c
from netapp.dataplane.slots import InstalledRule, SlotAllocator
from netapp.qos.abi import ClockWord
from netapp.qos.applier import coarse_tick_ns
from netapp.routing.abi import RoutePath

if TYPE_CHECKING:
    from netapp.dataplane.facade import Adapter


@dataclass(frozen=True)
class PacketOutcome:
    """What one packet got from test_run. Names are lower-case except the verdict (XDP_* style)."""

    verdict: str
    action: str
    intent: Optional[str]
    cpu: Optional[int]
    reason: Optional[str]
    len: int
    data: bytes
    key: dict[str, Any]
    alt_group: Optional[int] = None
    alt_member: Optional[int] = None
    egress_ifindex: Optional[int] = None
    duration_ns: int = 0
    fast_path: Optional[bool] = None  # traced only: the N3 fast path parsed it (else the staged parser)
    # traced only: where a forwarded packet's next hop came from (fib, fib-cached, private,
    # private-cached, unresolved, no-route); None when it was not routed
    route_path: Optional[str] = None


def clock_view(word: Optional[ClockWord]) -> dict[str, Any]:
    """The COARSE policers' clock (dataplane/bpf/nf/qos/clock.h), as `dppctl status` shows it: running,
    its word younger than two ticks (the timer writes one every 250 us); stopped, the word older or
    never written (its jiffies are past: the policers read the helper); none, programs without it.
    The word's age is against CLOCK_MONOTONIC, the clock its time was read from."""
    if word is None:
        return {"state": "none", "word_age_us": None}
    age_ns = time.clock_gettime_ns(time.CLOCK_MONOTONIC) - word.ns
    running = word.jiffies != 0 and age_ns < 2 * coarse_tick_ns()
    return {"state": "running" if running else "stopped", "word_age_us": age_ns // 1000 if word.jiffies else None}


class Counters:
    """Status, statistics and test runs, named after intents by the rule shadow."""

    _dpp: Adapter
    _trace: bool
    _slots: SlotAllocator
    _installed: dict[bytes, InstalledRule]
    _intent_slots: dict[str, int]
    _slot_intents: dict[int, str]
    _published_shapes: list[bytes]
    _alt_groups: set[int]
    _cpus: set[int]
    _ports: set[int]

    # --- status ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Program ids (the entry's, every program's), each map's id and size, the fill of the maps
        the facade tracks (None where it does not: arrays by CPU or slot are always full), and the
        COARSE policers' clock (clock_view)."""
        entries = {
            "dpp_rules": len(self._installed),
            "dpp_alt_groups": len(self._alt_groups),
            "dpp_cpu_map": len(self._cpus),
            "dpp_ports": len(self._ports),
        }
        maps = {name: {**self._dpp.map_info(name), "entries": entries.get(name)} for name in MAPS}
        return {
            "program_id": self._dpp.prog_id(),
            "programs": self._dpp.programs(),
            "maps": maps,
            "shapes": len(self._published_shapes),
            "rules": len(self._installed),
            "intents": len(self._intent_slots),
            "clock": clock_view(self._dpp.clock_word()),
        }

    # --- statistics --------------------------------------------------------------------------

    def rule_stats(self) -> dict[str, tuple[int, int]]:
        """Intent id -> (packets, bytes) summed over CPUs."""
        counters = self._dpp.stats_rules(0, self._slots.high_water)
        return {intent: counters[slot] for intent, slot in sorted(self._intent_slots.items())}

    def program_id(self) -> int:
        """The kernel's id of the loaded program: a new one means a reload (counters restart)."""
        return self._dpp.prog_id()

    def map_id(self, name: str) -> int:
        return self._dpp.map_info(name)["id"]

    def rule_counter_array(self) -> Any:
        """A (slots, 2) uint64 array of [packets, bytes] indexed by stat slot (installed_intents
        says whose): the bulk form of rule_stats, for the telemetry collector."""
        return self._dpp.stats_rules_array(0, self._slots.high_water)

    def verdict_stats(self) -> dict[str, tuple[int, int]]:
        return _named(Verdict, self._dpp.stats_verdicts(), upper=True)

    def action_stats(self) -> dict[str, tuple[int, int]]:
        return _named(Action, self._dpp.stats_actions())

    def reason_stats(self) -> dict[str, tuple[int, int]]:
        return _named(Reason, self._dpp.stats_reasons())

    def cpu_stats(self) -> dict[int, tuple[int, int]]:
        """CPU id -> (packets, bytes) STEER handed to that CPU, summed over the receiving CPUs.
        Every CPU of the set, and any other that was steered to before it left the set."""
        counters = self._dpp.stats_cpus(MAX_CPUS)
        return {
            cpu: tuple(counter)  # type: ignore[misc]
            for cpu, counter in enumerate(counters)
            if cpu in self._cpus or any(counter)
        }

    # --- test runs ---------------------------------------------------------------------------

    def test_run(self, packet: bytes, ingress_ifindex: int = 0) -> PacketOutcome:
        """Run one packet through the program (BPF_PROG_TEST_RUN); needs an instance opened with trace
        for action/intent/cpu/reason/key (else action is "untraced")."""
        result, data = self._dpp.test_run(bytes(packet), ingress_ifindex)
        verdict = _enum_name(Verdict, result.verdict, upper=True)
        if not self._trace:
            return PacketOutcome(
                verdict, "untraced", None, None, None, len(data), data, {}, duration_ns=result.duration_ns
            )
        return self._traced_outcome(verdict, result, data)

    def _traced_outcome(self, verdict: str, result: TestResult, data: bytes) -> PacketOutcome:
        trace = result.trace
        return PacketOutcome(
            verdict=verdict,
            action=_enum_name(Action, trace.action),
            intent=self._slot_intents.get(trace.slot),
            cpu=_optional(trace.cpu),
            reason=None if trace.reason == Reason.NONE else _enum_name(Reason, trace.reason),
            len=len(data),
            data=data,
            key=key_from_c(trace.key),
            alt_group=_optional(trace.alt_group),
            alt_member=_optional(trace.alt_member) if trace.alt_group != NONE else None,
            egress_ifindex=trace.egress_ifindex or None,
            duration_ns=result.duration_ns,
            fast_path=bool(trace.fast_path),
            route_path=route_path_name(trace.route_path),
        )


def route_path_name(value: int) -> Optional[str]:
    """The trace's route_path as the replay tool says it (None: not routed)."""
    if value == RoutePath.NONE:
        return None
    return _enum_name(RoutePath, value).replace("_", "-")


def _optional(value: int) -> Optional[int]:
    return None if value == NONE else value


def _enum_name(enum_type: Any, value: int, upper: bool = False) -> str:
    try:
        name = enum_type(value).name
    except ValueError:
        name = f"unknown({value})"
    return name if upper else name.lower()


def _named(
    enum_type: Any, counters: Sequence[tuple[int, int]], upper: bool = False
) -> dict[str, tuple[int, int]]:
    """Every member's counter; an index no member has (between reason ranges) only if it counted."""
    return {
        _enum_name(enum_type, index, upper): tuple(counter)  # type: ignore[misc]
        for index, counter in enumerate(counters)
        if index in enum_type._value2member_map_ or any(counter)
    }
