"""Open the instances, install their rules, prove every (instance, flow count) takes the path it
should, then time them interleaved with the floor: several runs, a fresh random order each run."""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from typing import Iterator, Optional, Protocol, Sequence

import numpy

from netapp.dataplane.binding import DppHandle, Verdict, load_libdpp
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import compile_intents

from bench.flows import workload
from bench.harness import Harness, Walk
from bench.measure import WrongPathError

MIN_MAX_RULES = 1 << 16


def max_rules_for(rules: int, shapes: int) -> int:
    """Rule capacity of an instance: twice the searched shape's rules (a million in a hash map of 2M
    buckets, as a node sized for them would run), rounded up to a power of two, and room for the
    other shapes' rules; the same at every shape count, so shapes are compared on one map."""
    needed = max(2 * rules, sum(workload.shape_rule_counts(rules, shapes)))
    return max(MIN_MAX_RULES, 1 << (needed - 1).bit_length())


FLOOR = "floor"


def point_key(rules: int, shapes: int, cache: bool) -> str:
    return f"rules={rules}/shapes={shapes}/cache={'on' if cache else 'off'}"


@dataclass(frozen=True)
class Counts:
    drop: int
    passed: int
    reasons: int
    rule_packets: int


class Subject(Protocol):
    """What is verified and timed: this checkout's Instance, or a --baseline one (remote.py)."""

    rules: int
    shapes: int
    cache: bool
    installed: int
    version: str

    @property
    def key(self) -> str: ...

    def prog_fd(self) -> int: ...

    def counts(self) -> Counts: ...


@dataclass
class Instance:
    """One anonymous pipeline instance holding the rules of one (rules, shapes) point."""

    rules: int
    shapes: int
    cache: bool
    handle: DppHandle
    dataplane: Dataplane
    installed: int = 0
    install_s: float = 0.0
    version: str = ""  # this checkout's pipeline
    tunnel_rules: int = 0  # --tunnel-rule: the rule on a tunnel address (workload.tunnel_intent)

    @property
    def key(self) -> str:
        return point_key(self.rules, self.shapes, self.cache)

    def prog_fd(self) -> int:
        return self.handle.prog_fd()

    def counts(self) -> Counts:
        return _counts(self)

    def close(self) -> None:
        self.dataplane.close()


def open_instance(rules: int, shapes: int, cache: bool, max_flows: int, tunnel_rule: bool = False) -> Instance:
    max_rules = max_rules_for(rules, shapes)
    handle = DppHandle.open(
        load_libdpp(),
        None,
        max_rules=max_rules,
        max_flows=max_flows,
        flow_cache=cache,
        # A packet the parser rejects is dropped, and counted under a reason, never a silent pass.
        default_verdict=Verdict.DROP,
    )
    dataplane = Dataplane(handle, max_rules=max_rules)
    instance = Instance(rules, shapes, cache, handle, dataplane, tunnel_rules=int(tunnel_rule))
    first = workload.first_intents(shapes) + ([workload.tunnel_intent()] if tunnel_rule else [])
    try:
        report = dataplane.apply(compile_intents(first, {}))
        if report.conflicts or report.upserted != len(first):
            raise AssertionError(f"the workload's first rules collide: {report}")
        _install_bulk(instance)
        instance.installed += instance.tunnel_rules
    except Exception:
        instance.close()
        raise
    return instance


def _install_bulk(instance: Instance) -> None:
    arrays = workload.bulk_rules(instance.rules, instance.shapes, first_slot=instance.shapes)
    started = time.perf_counter()
    if arrays.count:
        instance.handle.rules_upsert(arrays.keys, arrays.rules)
    instance.install_s = time.perf_counter() - started
    instance.installed = instance.shapes + arrays.count
    # What apply() does after installing: publish the shapes again (a generation bump).
    current = instance.handle.shapes_get()
    instance.handle.shapes_publish([current.shapes[i] for i in range(current.count)])


def open_all(
    rule_levels: Sequence[int], shape_levels: Sequence[int], max_flows: int, tunnel_rule: bool = False
) -> Iterator[Instance]:
    for rules in rule_levels:
        for shapes in shape_levels:
            for cache in (True, False):
                instance = open_instance(rules, shapes, cache, max_flows, tunnel_rule)
                print(
                    f"  {instance.key}: {instance.installed:,} rules installed in {instance.install_s:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )
                yield instance


def repeat_for(flows: int, minimum: int) -> int:
    """At least `minimum` repetitions, and a whole number of walks over every flow."""
    return max(1, -(-minimum // flows)) * flows


# --- path checks -------------------------------------------------------------------------------


def _counts(instance: Instance) -> Counts:
    # A --baseline revision's process calls its own _counts (bench/baseline_side.py).
    verdicts = instance.dataplane.verdict_stats()
    reasons = instance.dataplane.reason_stats()
    rules = instance.handle.stats_rules_array(0, instance.installed)
    return Counts(
        verdicts["DROP"][0],
        verdicts["PASS"][0],
        sum(packets for packets, _ in reasons.values()),
        int(numpy.sum(rules[:, 0])) if len(rules) else 0,
    )


def verify(harness: Harness, instance: Subject, walk: Walk, packet: bytes) -> None:
    """One walk over every flow from flow 0: flow f < rules meets its drop rule, the others none
    (best effort: pass); no reason counted, the rules' own counters agree. Also fills the cache."""
    where = f"{instance.key} at {walk.flows:,} flows"
    harness.set_walk(walk)
    before = instance.counts()
    result = harness.run_walk(instance.prog_fd(), packet, walk.flows)
    after = instance.counts()
    matched = min(walk.flows, instance.rules)
    got = Counts(
        after.drop - before.drop,
        after.passed - before.passed,
        after.reasons - before.reasons,
        after.rule_packets - before.rule_packets,
    )
    expected = Counts(matched, walk.flows - matched, 0, matched)
    if result.retval == Verdict.ABORTED or got != expected:
        raise WrongPathError(f"{where}: counted {got}, expected {expected} (last verdict {result.retval})")


# --- timing ------------------------------------------------------------------------------------


@dataclass
class Level:
    """The samples of every subject at one flow count."""

    flows: int
    repeat: int
    samples: dict[str, list[int]] = field(default_factory=dict)


def measure_level(
    harness: Harness,
    instances: Sequence[Subject],
    flows: int,
    runs: int,
    minimum_repeat: int,
    rng: random.Random,
) -> Level:
    packet = workload.packet()
    walk = workload.walk(flows)
    for instance in instances:
        verify(harness, instance, walk, packet)
    level = Level(flows, repeat_for(flows, minimum_repeat))
    subjects: list[tuple[str, Optional[int]]] = [(FLOOR, harness.empty_fd)]
    subjects += [(instance.key, instance.prog_fd()) for instance in instances]
    level.samples = {key: [] for key, _ in subjects}
    harness.set_walk(walk)
    started = time.monotonic()
    for _ in range(runs):
        for key, prog_fd in rng.sample(subjects, len(subjects)):
            result = harness.run_walk(prog_fd, packet, level.repeat)
            if result.retval == Verdict.ABORTED:
                raise WrongPathError(f"{key} at {flows:,} flows: the harness aborted")
            level.samples[key].append(result.duration_ns)
    print(
        f"  {flows:>9,} flows: {len(subjects)} subjects x {runs} runs of {level.repeat:,} in "
        f"{time.monotonic() - started:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return level
