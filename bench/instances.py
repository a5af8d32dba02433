"""Pipeline instances under test: anonymous (unpinned) DPP instances holding the workload's rules.

An instance is opened the way Dataplane.open() opens an anonymous one, except that the benchmark
keeps the low-level handle it injects into Dataplane: the facade has no accessor for the program fd
(needed for the harness's tail-call slot) and no path for pre-built C rule arrays (needed to
install a million rules in seconds). Everything else goes through the facade's public API.

A --baseline revision's process opens and grows its instances with that revision's
`open_single_rule`, `open_shared` and `grow` (bench/baseline_side.py): those names, what they take
and the Instance attributes it reads (rules, shapes, prog_fd, installs) are kept from one revision
to the next (bench/README.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from netapp.dataplane.binding import DppHandle, Verdict, load_libdpp
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import CompiledRuleset, compile_intents
from netapp.intents.models import Intent

from bench.measure import Counters, read_counters
from bench.workload import (
    ALT_GROUP,
    ALT_MEMBER,
    MATCHED_CASES,
    SHAPES,
    STEER_CPU,
    bulk_fillers,
    case_intent,
    check_bulk_keys,
    filler_intent,
)

STEER_CAPACITY_PPS = 10**12
MAX_RULES = 1 << 21  # room for 1M rules (and their stat slots) with the hash map half full
BASELINE = "baseline"  # the version of the --baseline revision's instances (bench/remote.py); HEAD's is ""
# Filler n gets stat slot FILLER_SLOT_BASE + n: above the few slots the facade hands out at apply().
FILLER_SLOT_BASE = len(MATCHED_CASES)


@dataclass(frozen=True)
class BulkInstall:
    rules: int
    seconds: float

    @property
    def rules_per_s(self) -> float:
        return self.rules / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class Instance:
    """One loaded pipeline, its rules, and what installing them cost."""

    flow_cache: bool
    handle: DppHandle
    dataplane: Dataplane
    ruleset: CompiledRuleset
    rules: int  # rules in the kernel map
    next_filler: int  # first filler number not installed yet
    installs: list[BulkInstall] = field(default_factory=list)
    version: str = ""  # this checkout's pipeline

    @property
    def mode(self) -> str:
        """cached / uncached, prefixed with "baseline:" for the baseline's pipeline."""
        return mode_name(self.flow_cache, self.version)

    @property
    def prog_fd(self) -> int:
        return self.handle.prog_fd()

    @property
    def shapes(self) -> int:
        return len(self.ruleset.shapes)

    @property
    def stat_slots(self) -> int:
        """Stat slots in use: dense from 0 (the facade's at apply(), then FILLER_SLOT_BASE + n)."""
        return self.rules

    def counters(self, case: str) -> Counters:
        return read_counters(self, case)

    def grow_to(self, total_rules: int) -> None:
        grow(self, total_rules)

    def close(self) -> None:
        self.dataplane.close()


def mode_name(flow_cache: bool, version: str = "") -> str:
    mode = "cached" if flow_cache else "uncached"
    return f"{version}:{mode}" if version else mode


def open_instance(flow_cache: bool, intents: Sequence[Intent], next_filler: int) -> Instance:
    """A fresh anonymous instance with the CPU and alternative group the cases use, and `intents`
    applied through the compiler (which also publishes their shapes)."""
    handle = DppHandle.open(
        load_libdpp(),
        None,
        max_rules=MAX_RULES,
        flow_cache=flow_cache,
        # A packet the parser rejects is dropped: a miss (PASS) cannot be a parse failure in disguise.
        default_verdict=Verdict.DROP,
    )
    dataplane = Dataplane(handle, max_rules=MAX_RULES)
    try:
        # Metered, as a node with capacities runs, at a capacity no benchmark reaches: every steer
        # pays the meter and none overflows.
        dataplane.enable_cpu(STEER_CPU, capacity_pps=STEER_CAPACITY_PPS)
        dataplane.set_alternative(ALT_GROUP, [ALT_MEMBER])
        ruleset = compile_intents(intents, {})
        report = dataplane.apply(ruleset)
    except Exception:
        dataplane.close()
        raise
    if report.conflicts or report.upserted != len(intents):
        dataplane.close()
        raise AssertionError(f"workload intents collide: {report}")
    return Instance(flow_cache, handle, dataplane, ruleset, len(intents), next_filler)


def open_single_rule(flow_cache: bool, case: str) -> Instance:
    """One rule only: the case's own, or for a miss the first ue_subnet filler (no match)."""
    if case in MATCHED_CASES:
        return open_instance(flow_cache, [case_intent(case)], next_filler=0)
    first_subnet_filler = len(SHAPES) - 1  # fillers go round-robin and ue_subnet is the last shape
    return open_instance(flow_cache, [filler_intent(first_subnet_filler)], next_filler=0)


def open_shared(flow_cache: bool) -> Instance:
    """The matched cases' rules plus one filler for each other shape: all four shapes, few rules."""
    fillers = len(SHAPES) - 1
    intents = [case_intent(case) for case in MATCHED_CASES] + [filler_intent(n) for n in range(fillers)]
    return open_instance(flow_cache, intents, next_filler=fillers)


def grow(instance: Instance, total_rules: int) -> None:
    """Install fillers until the instance holds `total_rules`, in one libdpp batch call."""
    fillers = range(instance.next_filler, total_rules - len(MATCHED_CASES))
    if not len(fillers):
        return
    arrays = bulk_fillers(fillers, FILLER_SLOT_BASE)
    check_bulk_keys(arrays, fillers, FILLER_SLOT_BASE)
    start = time.perf_counter()
    instance.handle.rules_upsert(arrays.keys, arrays.rules)
    instance.installs.append(BulkInstall(arrays.count, time.perf_counter() - start))
    instance.rules += arrays.count
    instance.next_filler = fillers.stop
    _republish_shapes(instance.handle)


def _republish_shapes(handle: DppHandle) -> None:
    """What apply() does after installing: publish the (unchanged) shapes, which bumps the
    generation, so flows cached before the new rules existed are classified again."""
    current = handle.shapes_get()
    handle.shapes_publish([current.shapes[i] for i in range(current.count)])


def close_all(instances: Any) -> None:
    for instance in instances:
        instance.close()
