"""Every counter of the data plane at one moment, named, for the telemetry collector (netapp.telemetry)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Callable, Optional

import numpy

from netapp.dataplane.binding import DataplaneError
from netapp.qos.dispatch import worker_counters
from netapp.service.state import ServiceState
from netapp.telemetry.interfaces import read_interfaces
from netapp.telemetry.sample import Counters, CpuCounters, IntentTable, rule_rows

log = logging.getLogger("netapp.service")


class ServiceCounters:
    """Reads the counters; the table naming the rule slots is rebuilt only when the installed intents
    changed (the state's revision). `attachments`: interface -> its namespace."""

    def __init__(self, state: ServiceState, attachments: Callable[[], dict[str, Optional[str]]]):
        self._state = state
        self._attachments = attachments
        self._intent_table = IntentTable.empty()

    def counters(self) -> Counters:
        """Holds the lock for the map reads only, so the slots and the counters match."""
        state = self._state
        with state.lock:
            state.require_started()
            dataplane = state.dataplane
            table = self._current_intent_table()
            counters = Counters(
                program_id=dataplane.program_id(),
                stats_map_id=dataplane.map_id("dpp_rule_stats"),
                intents=table,
                rule_counters=rule_rows(table, dataplane.rule_counter_array()),
                cpus=self._cpu_counters(),
                verdicts=dataplane.verdict_stats(),
                actions=dataplane.action_stats(),
                reasons=dataplane.reason_stats(),
                workers={str(cpu): values for cpu, values in worker_counters(dataplane).items()},
            )
            attached = self._attachments()
        liveness = state.liveness
        return dataclasses.replace(
            counters,
            interfaces=read_interfaces(attached),
            alternatives=tuple(liveness.counters()) if liveness is not None else (),
        )

    def _current_intent_table(self) -> IntentTable:
        revision = self._state.revision
        if self._intent_table.revision == revision:
            return self._intent_table
        dataplane = self._state.dataplane
        slices = self._state.store.intent_slices(None)
        # any order: rows realign by slot; a network function's rules (no '/' in their ids) are no intents
        rows = [row for row in dataplane.installed_intents.items() if "/" in row[0]]
        names = [qualified.rpartition("/") for qualified, _ in rows]  # split_rule_id, inlined: 100k rows
        tenants = tuple(name[0] for name in names)
        ids = tuple(name[2] for name in names)
        slots = [slot for _, slot in rows]
        self._intent_table = IntentTable(
            revision=revision,
            tenants=tenants,
            ids=ids,
            slices=tuple(map(slices.get, zip(tenants, ids))),
            slots=numpy.array(slots, dtype=numpy.int64),
            epochs=tuple(map(dataplane.slot_epoch, slots)),
        )
        return self._intent_table

    def _cpu_counters(self) -> tuple[CpuCounters, ...]:
        dataplane = self._state.dataplane
        steered = dataplane.cpu_stats()
        found = []
        for spec in self._state.store.list_cpus():
            try:
                state = dataplane.cpu_state(spec.cpu)
            except DataplaneError as exc:  # one unreadable CPU must not cost the whole poll
                log.debug("telemetry: CPU %d unreadable: %s", spec.cpu, exc)
                continue
            packets, size = steered.get(spec.cpu, (0, 0))
            found.append(
                CpuCounters(
                    cpu=spec.cpu,
                    packets=packets,
                    bytes=size,
                    enabled=bool(state["enabled"]),
                    overloaded=bool(state["overloaded"]),
                    capacity_pps=int(state["capacity_pps"]),
                )
            )
        return tuple(found)
