"""What the collector reads from the service in one go: every counter of the data plane, with
enough of the store to name them (intent -> tenant, slice). The service fills a `Counters` under
its lock, so the slots and the counters belong to the same moment; the collector turns it into a
`Poll` (rates, points) without holding anything.

A `CounterSource` is anything that can fill one: the NetApp service, or a test's fake.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol

import numpy


@dataclass(frozen=True)
class IntentTable:
    """The installed intents, one row each, in a fixed order for one store revision.

    `slots[i]` is row i's stat slot in the data plane; the collector reuses a table (and the tag
    strings it derives from it) until the revision changes.
    """

    revision: int
    tenants: tuple[str, ...]
    ids: tuple[str, ...]
    slices: tuple[Optional[str], ...]
    slots: numpy.ndarray  # int64, one per row
    # Per row: when its slot's counters were last zeroed (Dataplane.slot_epoch). A row is the same
    # counter from poll to poll only with the same (tenant, id, slot, epoch).
    epochs: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def empty(cls, revision: int = 0) -> "IntentTable":
        return cls(revision, (), (), (), numpy.zeros(0, dtype=numpy.int64))


@dataclass(frozen=True)
class CpuCounters:
    """One CPU of the CPU set: what STEER handed it and its state in the data plane."""

    cpu: int
    packets: int
    bytes: int
    enabled: bool
    overloaded: bool
    capacity_pps: int


@dataclass(frozen=True)
class InterfaceCounters:
    """The kernel's counters of one interface the pipeline is attached to (Telegraf `net` names)."""

    name: str
    bytes_recv: int
    bytes_sent: int
    packets_recv: int
    packets_sent: int
    err_in: int
    err_out: int
    drop_in: int
    drop_out: int


@dataclass(frozen=True)
class AlternativeCounters:
    """One probed alternative node (netapp.forwarding.liveness): its state and the probe's counts."""

    address: str
    up: bool
    state_changes: int
    probes: int
    answers: int


@dataclass(frozen=True)
class Counters:
    """Every counter at one moment.

    `program_id` and `stats_map_id` identify the loaded program and its rule-counter map: when
    either changes, the program was reloaded and every counter started again from zero.
    `rule_counters[i]` is [packets, bytes] (uint64) of `intents` row i.
    """

    program_id: int
    stats_map_id: int
    intents: IntentTable
    rule_counters: numpy.ndarray
    cpus: tuple[CpuCounters, ...] = ()
    verdicts: dict[str, tuple[int, int]] = field(default_factory=dict)
    actions: dict[str, tuple[int, int]] = field(default_factory=dict)
    reasons: dict[str, tuple[int, int]] = field(default_factory=dict)
    interfaces: tuple[InterfaceCounters, ...] = ()
    alternatives: tuple[AlternativeCounters, ...] = ()
    workers: dict[str, tuple[int, int]] = field(default_factory=dict)  # the GTP-U dispatcher's, by CPU


class CounterSource(Protocol):
    """Reads every counter (the service: `NetAppService.counters`). Raises when the data plane is
    not there (not started, closed); the collector then skips the poll and says so."""

    def counters(self) -> Counters: ...


def rule_rows(table: IntentTable, by_slot: numpy.ndarray) -> numpy.ndarray:
    """The rows of `by_slot` (indexed by stat slot) in `table`'s order; slots beyond the array
    (none should be) read as zero rather than failing the poll."""
    rows = numpy.zeros((len(table), 2), dtype=numpy.uint64)
    if len(table) == 0:
        return rows
    inside = table.slots < len(by_slot)
    rows[inside] = by_slot[table.slots[inside]]
    return rows
