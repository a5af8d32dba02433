"""The telemetry collector: every interval, read every counter once (batched map reads, per-CPU
slots summed in libdpp), compute rates from timestamped deltas, stamp the poll with one time, and
hand it to the sinks (InfluxDB, subscriptions, the event stream).

Rates are only reported when they are true: after a program reload (its id or the rule-counter
map's id changed) every baseline starts again, as it does for a counter that went backwards or a
row whose identity changed (an intent re-created in another slot, a slice whose members changed).
Sinks must not block: they queue and return, so a slow InfluxDB never delays a poll.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Protocol

import numpy

from netapp.telemetry.poll import (
    ACTION,
    ALTERNATIVE,
    CPU,
    INTERFACE,
    REASON,
    RSS_WORKER,
    SLICE,
    TELEMETRY,
    VERDICT,
    FieldValue,
    IntentSeries,
    Point,
    Poll,
    counter_fields,
    intent_prefixes,
)
from netapp.telemetry.sample import Counters, CounterSource, IntentTable

log = logging.getLogger("netapp.telemetry")

INTERFACE_RATED = ("bytes_recv", "bytes_sent", "packets_recv", "packets_sent")


class Sink(Protocol):
    """Where polls go. `offer` must return at once (queue, never wait on the network)."""

    name: str

    def offer(self, poll: Poll) -> None: ...

    def stats(self) -> dict[str, FieldValue]: ...

    def close(self, timeout_s: float = 5.0) -> None: ...


class PointSource(Protocol):
    """Points of what the counter source does not cover (the UPF's URRs, netapp.upf.telemetry), on
    the collector's cadence: `poll(time_ns)` at every poll (it may act on what it reads: the URR
    logic reports usage), `snapshot(time_ns)` for a scrape (it must not)."""

    name: str

    def poll(self, time_ns: int) -> Iterable[Point]: ...

    def snapshot(self, time_ns: int) -> Iterable[Point]: ...


@dataclass
class CollectorStats:
    polls: int = 0
    polls_failed: int = 0
    polls_late: int = 0  # intervals skipped because a poll overran
    poll_duration_s: float = 0.0
    points: int = 0
    last_error: str = ""

    def fields(self) -> dict[str, FieldValue]:
        return {
            "polls": self.polls,
            "polls_failed": self.polls_failed,
            "polls_late": self.polls_late,
            "poll_duration_s": self.poll_duration_s,
            "points": self.points,
        }


@dataclass
class _TableCache:
    """What a store revision's intent table derives once: tag prefixes, slice groups."""

    table: IntentTable
    prefixes: tuple[str, ...]
    slice_keys: tuple[tuple[str, str], ...]  # (tenant, slice) per group
    slice_members: tuple[int, ...]  # number of intents per group
    slice_identity: tuple[int, ...]  # hash of each group's members: a resize restarts its rate
    group_of_row: numpy.ndarray  # group index per row, -1 for intents outside slices


class RateKeeper:
    """Previous values per row identity; rates where the same row was seen last poll and no
    counter went backwards."""

    def __init__(self) -> None:
        self._intents: Optional[tuple[int, IntentTable, numpy.ndarray]] = None
        self._rows: dict[tuple[Any, ...], tuple[int, tuple[int, ...]]] = {}

    def reset(self) -> None:
        self._intents = None
        self._rows = {}

    def intent_rates(
        self, time_ns: int, table: IntentTable, counters: numpy.ndarray
    ) -> tuple[numpy.ndarray, numpy.ndarray]:
        """(packets_rate, bytes_rate) per row, NaN where unknown."""
        previous = self._previous_rows(table)
        self._intents = (time_ns, table, counters)
        rates = numpy.full((len(table), 2), numpy.nan)
        if previous is None:
            return rates[:, 0], rates[:, 1]
        then, prior, known = previous
        elapsed = (time_ns - then) / 1e9
        if elapsed <= 0:
            return rates[:, 0], rates[:, 1]
        honest = known & numpy.all(counters >= prior, axis=1)
        rates[honest] = (counters[honest] - prior[honest]).astype(numpy.float64) / elapsed
        return rates[:, 0], rates[:, 1]

    def _previous_rows(self, table: IntentTable) -> Optional[tuple[int, numpy.ndarray, numpy.ndarray]]:
        """The previous counters aligned with `table`'s rows, and which rows have one."""
        if self._intents is None:
            return None
        then, old_table, old_counters = self._intents
        if old_table.revision == table.revision and len(old_table) == len(table):
            return then, old_counters, numpy.ones(len(table), dtype=bool)
        # A row is the same counter when its slot and the slot's epoch are: a slot given to another
        # intent is zeroed first, which moves its epoch. The ids are compared as well, for slots
        # taken over from rules no intent owned (after a restart), which keep their epoch.
        old_keys, new_keys = _slot_keys(old_table), _slot_keys(table)
        order = numpy.argsort(old_keys, kind="stable")
        found = numpy.searchsorted(old_keys, new_keys, sorter=order)
        found = numpy.minimum(found, max(len(old_keys) - 1, 0))
        rows = order[found] if len(old_keys) else numpy.zeros(len(table), dtype=numpy.int64)
        known = (old_keys[rows] == new_keys) if len(old_keys) else numpy.zeros(len(table), dtype=bool)
        known &= _same_ids(old_table, rows, table)
        prior = numpy.zeros((len(table), 2), dtype=numpy.uint64)
        prior[known] = old_counters[rows[known]]
        return then, prior, known

    def keep_only(self, keys: set[tuple[Any, ...]]) -> None:
        """Forget the rows not in `keys` (gone since: a source whose rows come and go)."""
        self._rows = {key: row for key, row in self._rows.items() if key in keys}

    def rates(self, key: tuple[Any, ...], time_ns: int, values: tuple[int, ...]) -> tuple[float, ...]:
        """Rates per second of `values` for the row `key`; NaN each when unknown."""
        previous = self._rows.get(key)
        self._rows[key] = (time_ns, values)
        nan = (float("nan"),) * len(values)
        if previous is None:
            return nan
        then, old = previous
        elapsed = (time_ns - then) / 1e9
        if elapsed <= 0 or any(new < prior for new, prior in zip(values, old)):
            return nan
        return tuple((new - prior) / elapsed for new, prior in zip(values, old))


class Collector:
    """Polls a CounterSource every `interval_s` on its own thread and fans the polls out."""

    def __init__(
        self,
        source: CounterSource,
        *,
        node: str,
        interval_s: float = 1.0,
        sinks: Sequence[Sink] = (),
        clock_ns: Callable[[], int] = time.time_ns,
        intent_rates: bool = True,
    ):
        self.source = source
        self.node = node
        self.interval_s = interval_s
        self.intent_rates = intent_rates
        self.stats = CollectorStats()
        self._sinks: list[Sink] = list(sinks)
        self._listeners: list[Callable[[Poll], None]] = []
        self._sources: list[PointSource] = []
        self._clock_ns = clock_ns
        self._rates = RateKeeper()
        self._program: Optional[tuple[int, int]] = None
        self._cache: Optional[_TableCache] = None
        self._seq = 0
        self._last_time_ns: Optional[int] = None
        self._lock = threading.Lock()  # one poll at a time (thread and poll_once callers)
        self._listeners_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.latest: Optional[Poll] = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="telemetry-collector", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop polling, then give each sink `timeout_s` to deliver what it holds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        for sink in self._sinks:
            try:
                sink.close(timeout_s)
            except Exception:  # one sink failing to close must not keep the others open
                log.exception("telemetry sink %s did not close cleanly", sink.name)

    @property
    def sinks(self) -> tuple[Sink, ...]:
        return tuple(self._sinks)

    def add_listener(self, listener: Callable[[Poll], None]) -> None:
        """Call `listener(poll)` after every poll, on the collector's thread: it must not block."""
        with self._listeners_lock:
            self._listeners.append(listener)

    def add_source(self, source: PointSource) -> None:
        """Put `source`'s points in every poll and snapshot from now on."""
        with self._lock:
            self._sources.append(source)

    def remove_source(self, source: PointSource) -> None:
        with self._lock:
            if source in self._sources:
                self._sources.remove(source)

    def remove_listener(self, listener: Callable[[Poll], None]) -> None:
        with self._listeners_lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def _run(self) -> None:
        for _ in self._ticks():
            self.poll_once()

    def _ticks(self) -> Iterator[None]:
        yield from ticks(self.interval_s, self._stop, self._missed)

    def _missed(self, missed: int) -> None:
        self.stats.polls_late += missed

    # --- one poll ----------------------------------------------------------------------------

    def poll_once(self) -> Optional[Poll]:
        """Read, build and deliver one poll; None (counted, logged) when the source failed."""
        with self._lock:
            started = time.perf_counter()
            try:
                counters = self.source.counters()
            except Exception as exc:  # the service may be closing or the maps gone: try next tick
                self.stats.polls_failed += 1
                if str(exc) != self.stats.last_error:
                    log.warning("telemetry poll failed: %s", exc)
                self.stats.last_error = str(exc)
                return None
            poll = self._build(counters, self._clock_ns(), started)
            self.latest = poll
        self._deliver(poll)
        return poll

    def snapshot(self) -> Poll:
        """Every counter now, for a scrape (/metrics): counters only, no rates; neither delivered
        nor counted as a poll, and the polls' rates are not disturbed."""
        with self._lock:  # the table cache is shared with the polls
            counters = self.source.counters()
            time_ns = self._clock_ns()
            no_rates = RateKeeper()
            series = self._intent_series(counters, no_rates, time_ns)
            others = [
                *self._other_points(counters, time_ns, no_rates),
                *self._source_points(time_ns, scrape=True),
                *self._telemetry_points(time_ns),
            ]
        return Poll(0, time_ns, self.node, series, tuple(others))

    def _build(self, counters: Counters, time_ns: int, started: float) -> Poll:
        reset = self._notice_reload(counters)
        elapsed = None if reset or self._last_time_ns is None else (time_ns - self._last_time_ns) / 1e9
        self._last_time_ns = time_ns
        self._seq += 1
        series = self._intent_series(counters, self._rates, time_ns)
        others = list(self._other_points(counters, time_ns, self._rates))
        others.extend(self._source_points(time_ns, scrape=False))
        self.stats.polls += 1
        self.stats.poll_duration_s = time.perf_counter() - started
        self.stats.points = len(counters.intents) + len(others) + 1 + len(self._sinks)
        others.extend(self._telemetry_points(time_ns))
        return Poll(self._seq, time_ns, self.node, series, tuple(others), elapsed, reset)

    def _intent_series(self, counters: Counters, rates: "RateKeeper", time_ns: int) -> IntentSeries:
        cache = self._table_cache(counters.intents)
        if self.intent_rates:
            packets_rate, bytes_rate = rates.intent_rates(time_ns, counters.intents, counters.rule_counters)
        else:  # left out (NaN), as for an unknown rate: InfluxDB derives them when asked
            packets_rate = bytes_rate = numpy.full(len(counters.intents), numpy.nan)
        return IntentSeries(
            counters.intents,
            counters.rule_counters[:, 0],
            counters.rule_counters[:, 1],
            packets_rate,
            bytes_rate,
            cache.prefixes,
        )

    def _other_points(self, counters: Counters, time_ns: int, rates: "RateKeeper") -> Iterator[Point]:
        cache = self._table_cache(counters.intents)
        yield from self._slice_points(cache, counters.rule_counters, time_ns, rates)
        yield from self._cpu_points(counters, time_ns, rates)
        yield from self._table_points(VERDICT, "verdict", counters.verdicts, time_ns, rates)
        yield from self._table_points(ACTION, "action", counters.actions, time_ns, rates)
        yield from self._table_points(REASON, "reason", counters.reasons, time_ns, rates)
        yield from self._table_points(RSS_WORKER, "cpu", counters.workers, time_ns, rates)
        yield from self._interface_points(counters, time_ns, rates)
        for node in counters.alternatives:
            fields: dict[str, FieldValue] = {
                "up": node.up,
                "state_changes": node.state_changes,
                "probes": node.probes,
                "answers": node.answers,
            }
            yield Point(ALTERNATIVE, {"node": self.node, "address": node.address}, fields, time_ns)

    def _source_points(self, time_ns: int, scrape: bool) -> list[Point]:
        points: list[Point] = []
        for source in self._sources:
            try:
                points.extend(source.snapshot(time_ns) if scrape else source.poll(time_ns))
            except Exception:  # one source failing must not cost the poll
                log.exception("telemetry source %s failed", source.name)
        return points

    def _notice_reload(self, counters: Counters) -> bool:
        program = (counters.program_id, counters.stats_map_id)
        reloaded = self._program is not None and program != self._program
        if reloaded:
            log.warning(
                "the data-plane program was reloaded (program %s, counter map %s): counters restart "
                "from zero and rates from the next poll",
                *program,
            )
        if self._program is None or reloaded:
            self._rates.reset()
        self._program = program
        return reloaded

    def _table_cache(self, table: IntentTable) -> _TableCache:
        if self._cache is None or self._cache.table.revision != table.revision:
            self._cache = _build_table_cache(table, self.node, self._cache)
        return self._cache

    def _slice_points(
        self, cache: _TableCache, counters: numpy.ndarray, time_ns: int, rates: RateKeeper
    ) -> Iterator[Point]:
        if not cache.slice_keys:
            return
        inside = cache.group_of_row >= 0
        groups = cache.group_of_row[inside]
        width = len(cache.slice_keys)
        packets = numpy.bincount(groups, weights=counters[inside, 0].astype(numpy.float64), minlength=width)
        sizes = numpy.bincount(groups, weights=counters[inside, 1].astype(numpy.float64), minlength=width)
        for group, (tenant, slice_id) in enumerate(cache.slice_keys):
            values = (int(packets[group]), int(sizes[group]))
            key = (SLICE, tenant, slice_id, cache.slice_identity[group])
            fields = counter_fields(*values, *rates.rates(key, time_ns, values))
            fields["intents"] = cache.slice_members[group]
            tags = {"node": self.node, "tenant": tenant, "slice": slice_id}
            yield Point(SLICE, tags, fields, time_ns)

    def _cpu_points(self, counters: Counters, time_ns: int, rates: RateKeeper) -> Iterator[Point]:
        for cpu in counters.cpus:
            values = (cpu.packets, cpu.bytes)
            fields = counter_fields(*values, *rates.rates((CPU, cpu.cpu), time_ns, values))
            fields.update(enabled=cpu.enabled, overloaded=cpu.overloaded, capacity_pps=cpu.capacity_pps)
            if cpu.capacity_pps > 0 and "packets_rate" in fields:
                fields["load"] = float(fields["packets_rate"]) / cpu.capacity_pps
            yield Point(CPU, {"node": self.node, "cpu": str(cpu.cpu)}, fields, time_ns)

    def _table_points(
        self, measurement: str, tag: str, table: dict[str, tuple[int, int]], time_ns: int, rates: RateKeeper
    ) -> Iterator[Point]:
        for name, values in table.items():
            measured = rates.rates((measurement, name), time_ns, values)
            yield Point(
                measurement, {"node": self.node, tag: name}, counter_fields(*values, *measured), time_ns
            )

    def _interface_points(self, counters: Counters, time_ns: int, rates: RateKeeper) -> Iterator[Point]:
        for interface in counters.interfaces:
            fields: dict[str, FieldValue] = {
                name: getattr(interface, name) for name in interface.__dataclass_fields__ if name != "name"
            }
            values = tuple(int(fields[name]) for name in INTERFACE_RATED)
            measured = rates.rates((INTERFACE, interface.name), time_ns, values)
            for name, rate in zip(INTERFACE_RATED, measured):
                if rate == rate:  # not NaN
                    fields[f"{name}_rate"] = rate
            yield Point(INTERFACE, {"node": self.node, "interface": interface.name}, fields, time_ns)

    def _telemetry_points(self, time_ns: int) -> Iterator[Point]:
        """The pipeline's own health: the collector's counters and each sink's."""
        yield Point(TELEMETRY, {"node": self.node, "component": "collector"}, self.stats.fields(), time_ns)
        for sink in self._sinks:
            try:
                fields = sink.stats()
            except Exception as exc:  # a sink's stats must not cost the poll
                log.warning("telemetry sink %s: no stats: %s", sink.name, exc)
                continue
            yield Point(TELEMETRY, {"node": self.node, "component": sink.name}, dict(fields), time_ns)

    def _deliver(self, poll: Poll) -> None:
        for sink in self._sinks:
            _call_safely(sink.offer, poll, f"telemetry sink {sink.name}")
        with self._listeners_lock:
            listeners = list(self._listeners)
        for listener in listeners:
            _call_safely(listener, poll, "telemetry listener")


def ticks(interval_s: float, stop: threading.Event, missed: Callable[[int], None]) -> Iterator[None]:
    """Tick every interval on a fixed grid until `stop` is set; work that overran skips the ticks
    it missed (told to `missed`) instead of running back to back."""
    next_tick = time.monotonic()
    while not stop.is_set():
        yield
        next_tick += interval_s
        now = time.monotonic()
        if now > next_tick:
            late = int((now - next_tick) / interval_s) + 1
            missed(late)
            next_tick += late * interval_s
        stop.wait(max(0.0, next_tick - time.monotonic()))


def _call_safely(function: Callable[[Poll], None], poll: Poll, what: str) -> None:
    try:
        function(poll)
    except Exception:  # one consumer's bug must not stop the others or the collector
        log.exception("%s failed on poll %d", what, poll.seq)


def _build_table_cache(table: IntentTable, node: str, previous: Optional[_TableCache]) -> _TableCache:
    groups: dict[tuple[str, str], int] = {}
    members: dict[int, list[str]] = {}
    group_of_row = numpy.full(len(table), -1, dtype=numpy.int64)
    for row, (tenant, intent, slice_id) in enumerate(zip(table.tenants, table.ids, table.slices)):
        if slice_id is None:
            continue
        group = groups.setdefault((tenant, slice_id), len(groups))
        members.setdefault(group, []).append(intent)
        group_of_row[row] = group
    return _TableCache(
        table=table,
        prefixes=intent_prefixes(table, node, _prefixes_by_row(previous)),
        slice_keys=tuple(groups),
        slice_members=tuple(len(members[group]) for group in range(len(groups))),
        slice_identity=tuple(hash(tuple(sorted(members[group]))) for group in range(len(groups))),
        group_of_row=group_of_row,
    )


def _prefixes_by_row(cache: Optional[_TableCache]) -> dict[tuple[str, str, Optional[str]], str]:
    if cache is None:
        return {}
    table = cache.table
    return dict(zip(zip(table.tenants, table.ids, table.slices), cache.prefixes))


def _slot_keys(table: IntentTable) -> numpy.ndarray:
    """slot << 32 | epoch per row, as one sortable int64."""
    epochs = numpy.asarray(table.epochs or (0,) * len(table), dtype=numpy.int64)
    return (table.slots.astype(numpy.int64) << 32) | epochs


def _same_ids(old: IntentTable, rows: numpy.ndarray, new: IntentTable) -> numpy.ndarray:
    if len(old) == 0 or len(new) == 0:
        return numpy.zeros(len(new), dtype=bool)
    old_ids = numpy.array(old.ids, dtype=object)[rows]
    old_tenants = numpy.array(old.tenants, dtype=object)[rows]
    return (old_ids == numpy.array(new.ids, dtype=object)) & (
        old_tenants == numpy.array(new.tenants, dtype=object)
    )
