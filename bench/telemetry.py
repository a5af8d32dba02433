"""Telemetry cost: what one collector poll costs at 1k, 100k and 1M installed intents, and how
many points per second the InfluxDB sink delivers into a real influxd without losing one.

    python -m bench.telemetry --out bench/results/telemetry.json

collector: a NetAppService over a real pinned instance holding N intents; `Collector.poll_once()`
timed as the counter read (`NetAppService.counters()`) and the poll build (rates, points), the
line-protocol formatting (`Poll.line_chunks`, on the sink's thread in production) timed apart;
steady polls, and polls right after an intent was created or deleted (the intent table is rebuilt).
influx: the collector over 100k intents with an InfluxSink into a local influxd 1.8, polls offered
at 120k points/s for 30 s, a flush, then every field counted back with InfluxQL; three variants of
what the sink is handed (production, no-intent-rates, idle). Methodology: bench/README.md
("bench/telemetry.py"). Needs root, `make -C dataplane` and .tools/bin/influxd (`make influxd`).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import datetime
import io
import json
import os
import platform
import pstats
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy

from bench.api import gtpu_intent, preload_intents
from bench.apiserver import TENANT, bench_tenant, cpu_seconds
from bench.dataplane import machine_info
from netapp.core.config import InfluxSettings, Settings
from netapp.dataplane import binding
from netapp.intents.models import Intent
from netapp.service.contract import IntentRecord, Principal, Scope
from netapp.service.service import NetAppService
from netapp.service.store import Store
from netapp.telemetry.collector import Collector
from netapp.telemetry.poll import INTENT, Poll, intent_lines
from netapp.telemetry.sample import Counters, CounterSource

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = Path("bench/results/telemetry.json")
DEFAULT_LEVELS = (1_000, 100_000, 1_000_000)
INFLUXD = REPO / ".tools" / "bin" / "influxd"
NODE = "bench-node"
DATABASE = "dpp_bench"
WRITER = Principal(TENANT, frozenset({Scope.READ, Scope.INTENTS_WRITE}), "bench")
CHANGE_TEID = 0x7F000000  # the intent created and deleted between the polls "after a change"
BATCH_LINES = InfluxSettings.model_fields["batch_lines"].default  # the chunks the sink formats
PROFILE_TOP = 15
# The steps of a poll whose cumulative time the profile reports by name: (file, function).
PROFILED_PARTS = frozenset(
    {
        ("netapp/service/counters.py", "counters"),
        ("netapp/service/counters.py", "_current_intent_table"),
        ("netapp/dataplane/handle.py", "stats_rules_array"),
        ("netapp/telemetry/sample.py", "rule_rows"),
        ("netapp/telemetry/collector.py", "_build"),
        ("netapp/telemetry/collector.py", "_build_table_cache"),
        ("netapp/telemetry/poll.py", "intent_prefixes"),
        ("netapp/telemetry/collector.py", "intent_rates"),
        ("netapp/telemetry/collector.py", "_previous_rows"),
        ("netapp/telemetry/poll.py", "line_chunks"),
    }
)
# The influx phase's variants: what the sink is handed.
PRODUCTION = "production"  # the collector's polls, synthetic traffic on every intent
NO_INTENT_RATES = "no-intent-rates"  # the same with telemetry.intent_rates off
IDLE = "idle"  # the collector's polls, traffic-free (every counter and rate zero)
VARIANTS = (PRODUCTION, NO_INTENT_RATES, IDLE)
# Targets, reported and never asserted.
TARGET_POLL_MS = 50.0
TARGET_POLL_AT = 100_000
TARGET_POINTS_PER_S = 100_000.0


class CheckError(Exception):
    """The system under test is not in the state the benchmark needs; nothing is written."""


class BlockedError(Exception):
    """A phase cannot run here (its code or binary is missing); the other phase's results stand."""


class InfluxdFailed(Exception):
    """influxd did not start or did not answer a query; nothing is written."""


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.telemetry", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument(
        "--levels",
        default=",".join(str(level) for level in DEFAULT_LEVELS),
        help="installed intents of the collector phase, comma-separated",
    )
    parser.add_argument("--polls", type=int, default=15, help="timed steady polls per level")
    parser.add_argument(
        "--changes", type=int, default=6, help="timed polls right after a create/delete, per level"
    )
    parser.add_argument(
        "--no-profile",
        dest="profile",
        action="store_false",
        help="skip the cProfile of one extra steady poll (with its formatting) and one after a change, per level",
    )
    parser.add_argument(
        "--influx-intents", type=int, default=100_000, help="installed intents of the influx phase"
    )
    parser.add_argument(
        "--rate", type=float, default=120_000.0, help="points/s offered to the sink (sets the poll interval)"
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"influx phase variants, comma-separated, of {', '.join(VARIANTS)} (the target is judged on "
        f"{PRODUCTION})",
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the influx phase offers polls")
    parser.add_argument(
        "--flush-timeout", type=float, default=120.0, help="longest wait for the sink to drain"
    )
    parser.add_argument("--influxd", type=Path, default=INFLUXD, help="the influxd 1.8 binary")
    parser.add_argument("--skip-influx", action="store_true", help="the collector phase only")
    parser.add_argument("--skip-collector", action="store_true", help="the influx phase only")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: levels 1,000 and 10,000, 3 polls, influx phase at 10,000 intents for 5 s",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.levels, args.polls, args.changes = "1000,10000", 3, 2
        args.influx_intents, args.seconds = min(args.influx_intents, 10_000), min(args.seconds, 5.0)
    args.levels = sorted({int(level) for level in args.levels.split(",")})
    args.variants = [variant for variant in args.variants.split(",") if variant]
    if not args.variants or set(args.variants) - set(VARIANTS):
        parser.error(f"--variants: some of {', '.join(VARIANTS)}")
    if min(args.levels) < 1 or args.polls < 2 or args.changes < 0 or args.influx_intents < 1:
        parser.error(
            "--levels, --influx-intents must be positive, --polls at least 2, --changes not negative"
        )
    if args.rate <= 0 or args.seconds <= 0 or args.flush_timeout <= 0:
        parser.error("--rate, --seconds and --flush-timeout must be positive")
    return args


# --- the system under test -----------------------------------------------------------------------


def max_rules_for(intents: int) -> int:
    """The settings' max_rules for `intents`: the smallest power of two holding twice as many (the
    hash map at most half full, as bench/instances.py has it), and no less than the default."""
    return max(Settings.model_fields["max_rules"].default, 1 << (2 * intents - 1).bit_length())


@dataclasses.dataclass
class Running:
    service: NetAppService
    instance: str
    intents: int
    max_rules: int
    preload_s: float  # validating the intents and writing them into the store
    start_s: float  # NetAppService.start(): compile every stored intent, install, reconcile


@contextlib.contextmanager
def running_service(intents: int) -> Iterator[Running]:
    """A started NetAppService over a fresh pinned instance whose store held `intents` GTP-U
    intents (bench/api.py's) before the start, as after a restart. The instance is unpinned and
    the state directory removed whatever happened."""
    instance = f"bench-tel-{secrets.token_hex(3)}"
    max_rules = max_rules_for(intents)
    with tempfile.TemporaryDirectory(prefix="bench-telemetry-") as temporary, contextlib.ExitStack() as stack:
        state = Path(temporary)
        preload_s = _preload(state / "netapp.db", intents)
        settings = Settings(state_dir=state, instance=instance, auth_disabled=True, max_rules=max_rules)
        service = NetAppService(settings)
        stack.callback(_unpin, instance)  # registered first: runs after the service has closed
        stack.callback(service.close)
        started = time.monotonic()
        service.start()
        start_s = time.monotonic() - started
        installed = len(service.dataplane.installed_intents)
        if installed != intents:
            raise CheckError(f"the service installed {installed:,} intents, not the {intents:,} stored")
        yield Running(service, instance, intents, max_rules, preload_s, start_s)


def _preload(db_path: Path, count: int) -> float:
    """Validate `count` intents and write them in one transaction; the seconds taken."""
    started = time.monotonic()
    now = datetime.datetime.now(datetime.timezone.utc)
    store = Store.open(db_path)
    try:
        with store.transaction():
            store.put_tenant(bench_tenant(now))
            for intent in preload_intents(count):
                store.insert_intent(
                    IntentRecord(intent=intent, tenant=TENANT, created_at=now, updated_at=now)
                )
    finally:
        store.close()
    return time.monotonic() - started


def _unpin(instance: str) -> None:
    handle = binding.DppHandle.open(binding.load_libdpp(), instance)
    try:
        handle.unpin()
    finally:
        handle.close()


class TimedSource:
    """The service as the collector's source, timing each `counters()` call."""

    def __init__(self, source: CounterSource):
        self.source = source
        self.last_s = 0.0

    def counters(self) -> Counters:
        started = time.perf_counter()
        counters = self.source.counters()
        self.last_s = time.perf_counter() - started
        return counters


class TrafficSource:
    """The service's counters with synthetic traffic added to every intent: each read, every row's
    [packets, bytes] grows by a random amount, so rates and fields carry realistic numbers (the
    instance itself sees no packets). The service's read is done and timed in full."""

    def __init__(self, source: CounterSource, seed: int = 1):
        self.timed = TimedSource(source)
        self._rng = numpy.random.default_rng(seed)
        self._totals: Optional[numpy.ndarray] = None

    def counters(self) -> Counters:
        counters = self.timed.counters()
        rows = len(counters.intents)
        if self._totals is None or len(self._totals) != rows:
            self._totals = numpy.zeros((rows, 2), dtype=numpy.uint64)
        packets = self._rng.integers(0, 200_000, rows, dtype=numpy.uint64)
        self._totals[:, 0] += packets
        self._totals[:, 1] += packets * self._rng.integers(64, 1500, rows, dtype=numpy.uint64)
        return dataclasses.replace(counters, rule_counters=counters.rule_counters + self._totals)


def with_traffic(poll: Poll, seed: int = 1) -> Poll:
    """`poll` with random non-zero counters and rates: what formatting costs when the numbers have
    many digits (a traffic-free poll formats zeros)."""
    rng = numpy.random.default_rng(seed)
    rows = len(poll.intents.table)
    packets = rng.integers(1, 1 << 40, rows, dtype=numpy.uint64)
    series = dataclasses.replace(
        poll.intents,
        packets=packets,
        bytes=packets * rng.integers(64, 1500, rows, dtype=numpy.uint64),
        packets_rate=rng.uniform(0, 1e6, rows),
        bytes_rate=rng.uniform(0, 1e9, rows),
    )
    return dataclasses.replace(poll, intents=series)


def format_lines(poll: Poll, lines_per_chunk: int = BATCH_LINES) -> tuple[int, int]:
    """Format the whole poll as the sink does; (lines, characters)."""
    lines = characters = 0
    for text, count in poll.line_chunks(lines_per_chunk):
        lines += count
        characters += len(text)
    return lines, characters


# --- phase 1: the collector ----------------------------------------------------------------------


@dataclasses.dataclass
class PollSample:
    read_s: float
    build_s: float
    format_s: float

    @property
    def poll_s(self) -> float:
        return self.read_s + self.build_s


def timed_poll(collector: Collector, source: TimedSource) -> tuple[Poll, PollSample]:
    started = time.perf_counter()
    poll = collector.poll_once()
    elapsed = time.perf_counter() - started
    if poll is None:
        raise CheckError(f"a poll failed: {collector.stats.last_error}")
    began = time.perf_counter()
    format_lines(poll)
    format_s = time.perf_counter() - began
    return poll, PollSample(source.last_s, elapsed - source.last_s, format_s)


def bench_level(intents: int, args: argparse.Namespace) -> dict[str, Any]:
    """Steady polls, then polls right after a change, on one service holding `intents`."""
    with running_service(intents) as running:
        print(
            f"  {intents:>9,} intents: stored in {running.preload_s:.1f} s, service started in "
            f"{running.start_s:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        source = TimedSource(running.service)
        collector = Collector(source, node=NODE, interval_s=1.0)
        _, cold = timed_poll(collector, source)  # builds the intent tables, no rates yet
        steady = [timed_poll(collector, source)[1] for _ in range(args.polls)]
        poll = collector.latest
        assert poll is not None
        lines, characters = check_poll(poll, intents)
        traffic = with_traffic(poll)
        traffic_format_s = [_timed(lambda: format_lines(traffic)) for _ in range(args.polls)]
        changed = polls_after_changes(running.service, collector, source, args.changes)
        profile = profiles(running.service, collector) if args.profile else None
    result = {
        "intents": intents,
        "max_rules": running.max_rules,
        "points_per_poll": poll.point_count,
        "lines_per_poll": lines,
        "line_protocol_bytes": characters,
        "polls": len(steady),
        "read_ms": summary([s.read_s for s in steady]),
        "build_ms": summary([s.build_s for s in steady]),
        "poll_ms": summary([s.poll_s for s in steady]),
        "format_ms": summary([s.format_s for s in steady]),
        "format_with_traffic_ms": summary(traffic_format_s),
        "first_poll": {
            "read_ms": _ms(cold.read_s),
            "build_ms": _ms(cold.build_s),
            "poll_ms": _ms(cold.poll_s),
        },
        "after_change": {
            "polls": len(changed),
            "read_ms": summary([s.read_s for s in changed]),
            "build_ms": summary([s.build_s for s in changed]),
            "poll_ms": summary([s.poll_s for s in changed]),
        },
        "preload_s": round(running.preload_s, 2),
        "service_start_s": round(running.start_s, 2),
    }
    if profile is not None:
        result["profile"] = profile
    median_poll, median_format = result["poll_ms"]["p50"], result["format_ms"]["p50"]
    print(
        f"  {intents:>9,} intents: poll {median_poll:.1f} ms (read {result['read_ms']['p50']:.1f} + build "
        f"{result['build_ms']['p50']:.1f}), format {median_format:.1f} ms, after a change "
        f"{result['after_change']['poll_ms'].get('p50', float('nan')):.1f} ms",
        file=sys.stderr,
        flush=True,
    )
    return result


def check_poll(poll: Poll, intents: int) -> tuple[int, int]:
    """A steady poll names every installed intent, with a rate for each (traffic-free: zero), and
    formats to one line per point; (lines, characters) of its line protocol."""
    series = poll.intents
    if len(series.table) != intents or len(series.prefixes) != intents:
        raise CheckError(f"a poll holds {len(series.table):,} intent rows, not {intents:,}")
    if numpy.isnan(series.packets_rate).any():
        raise CheckError("a steady poll has intents without a rate")
    lines, characters = format_lines(poll)
    if lines != poll.point_count:
        raise CheckError(f"line protocol has {lines} lines for {poll.point_count} points")
    return lines, characters


def _timed(function: Callable[[], Any]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def polls_after_changes(
    service: NetAppService, collector: Collector, source: TimedSource, changes: int
) -> list[PollSample]:
    """Alternately create one intent and delete it, each followed by a timed poll: the service and
    the collector rebuild their intent tables (and the rates realign by row) on every change of
    the installed intents."""
    samples = []
    intent = Intent.model_validate(gtpu_intent("bench-change", CHANGE_TEID))
    for i in range(changes):
        if i % 2 == 0:
            service.create_intent(WRITER, intent)
        else:
            service.delete_intent(WRITER, intent.id)
        samples.append(timed_poll(collector, source)[1])
    if changes % 2:
        service.delete_intent(WRITER, intent.id)
    return samples


def profiles(service: NetAppService, collector: Collector) -> dict[str, Any]:
    """cProfile of one steady poll with its formatting, and of one poll right after a create."""
    steady = profile_poll(collector, with_format=True)
    intent = Intent.model_validate(gtpu_intent("bench-change", CHANGE_TEID))
    service.create_intent(WRITER, intent)
    try:
        changed = profile_poll(collector, with_format=False)
    finally:
        service.delete_intent(WRITER, intent.id)
    collector.poll_once()  # the table of the deletion, out of the next caller's way
    return {"steady_with_format": steady, "after_change": changed}


def profile_poll(collector: Collector, with_format: bool) -> dict[str, Any]:
    """cProfile of one poll (and its formatting): the functions that took the most own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    poll = collector.poll_once()
    if poll is not None and with_format:
        format_lines(poll)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=io.StringIO())
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (filename, line, function), (_, calls, own, cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append(
            {
                "function": f"{_short_path(filename)}:{line}({function})",
                "calls": calls,
                "own_ms": round(own * 1e3, 2),
                "cumulative_ms": round(cumulative * 1e3, 2),
            }
        )
    rows.sort(key=lambda row: row["own_ms"], reverse=True)
    parts = {
        f"{_short_path(filename)}({function})": round(cumulative * 1e3, 2)
        for (filename, _, function), (_, _, _, cumulative, _) in stats.stats.items()  # type: ignore[attr-defined]
        if (_short_path(filename), function) in PROFILED_PARTS
    }
    return {
        "total_ms": round(total * 1e3, 2),
        "parts_cumulative_ms": parts,
        "top_own_time": rows[:PROFILE_TOP],
    }


def _short_path(filename: str) -> str:
    for marker in ("/netapp/", "/bench/", "/numpy/"):
        if marker in filename:
            return marker.strip("/") + "/" + filename.split(marker, 1)[1]
    return filename


# --- phase 2: into InfluxDB ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class InfluxParts:
    """What the influx phase uses of netapp.telemetry.influx and .influxd, imported when it runs."""

    local_influxd: Any
    bucket: Callable[[str], str]
    sink: Any
    error: type[Exception]  # influxd did not start, or a query failed


def influx_parts() -> InfluxParts:
    """BlockedError when the sink is not in this checkout."""
    try:
        from netapp.telemetry.influx import InfluxSink
        from netapp.telemetry.influxd import InfluxdError, LocalInfluxd, bucket
    except ImportError as exc:
        raise BlockedError(f"the InfluxDB sink is not in this checkout ({exc})") from exc
    return InfluxParts(LocalInfluxd, bucket, InfluxSink, InfluxdError)


@dataclasses.dataclass
class Offered:
    """What the influx phase handed the sink."""

    polls: int = 0
    points: int = 0
    late_ticks: int = 0  # poll intervals skipped because a poll overran
    poll_s: list[float] = dataclasses.field(default_factory=list)
    queued: list[int] = dataclasses.field(default_factory=list)  # points the sink held after each poll
    fields: dict[tuple[str, str], int] = dataclasses.field(
        default_factory=dict
    )  # (measurement, field) -> points
    intent_line: str = ""  # the last poll's first intent line, for the record

    def add(self, poll: Poll) -> None:
        if poll.intents.prefixes:
            self.intent_line = next(intent_lines(poll.intents, poll.time_ns))
        self.polls += 1
        self.points += poll.point_count
        rated = int(numpy.count_nonzero(~numpy.isnan(poll.intents.packets_rate)))
        rows = len(poll.intents.table)
        for name, count in (
            ("packets", rows),
            ("bytes", rows),
            ("packets_rate", rated),
            ("bytes_rate", rated),
        ):
            self.fields[(INTENT, name)] = self.fields.get((INTENT, name), 0) + count
        for point in poll.points_other:
            for name in point.fields:
                key = (point.measurement, name)
                self.fields[key] = self.fields.get(key, 0) + 1


def offer_polls(collector: Collector, sink: OfferedAs, interval_s: float, seconds: float) -> Offered:
    """Poll on a fixed grid of `interval_s` for `seconds` (the collector's own schedule: a poll
    that overruns skips the ticks it missed), every poll offered to the sink."""
    offered = Offered()
    started = time.monotonic()
    next_tick = started
    while next_tick < started + seconds:
        began = time.perf_counter()
        poll = collector.poll_once()
        offered.poll_s.append(time.perf_counter() - began)
        if poll is None:
            raise CheckError(f"a poll failed: {collector.stats.last_error}")
        assert sink.last is not None and sink.last.seq == poll.seq
        offered.add(sink.last)
        offered.queued.append(int(sink.stats()["points_queued"]))
        next_tick += interval_s
        now = time.monotonic()
        if now > next_tick:
            missed = int((now - next_tick) / interval_s) + 1
            offered.late_ticks += missed
            next_tick += missed * interval_s
        time.sleep(max(0.0, next_tick - time.monotonic()))
    return offered


def count_fields(influxd: Any) -> dict[tuple[str, str], int]:
    """(measurement, field) -> values stored, over every measurement of the database."""
    answer = influxd.query("SELECT count(*) FROM /.*/", db=DATABASE)
    found: dict[tuple[str, str], int] = {}
    for result in answer.get("results", ()):
        for series in result.get("series", ()):
            for column, value in zip(series["columns"], series["values"][0]):
                if column.startswith("count_") and value is not None:
                    found[(series["name"], column[len("count_") :])] = int(value)
    return found


class OfferedAs:
    """The sink as the collector sees it, handing it each poll as the variant has it."""

    def __init__(self, sink: Any, variant: str):
        self.sink = sink
        self.name = sink.name
        self.variant = variant
        self.last: Optional[Poll] = None

    def offer(self, poll: Poll) -> None:
        self.last = poll
        self.sink.offer(poll)

    def stats(self) -> dict[str, Any]:
        return self.sink.stats()

    def close(self, timeout_s: float = 5.0) -> None:
        self.sink.close(timeout_s)


def bench_influx(args: argparse.Namespace) -> dict[str, Any]:
    """Every variant of the influx phase on one service of `influx_intents` intents, each into a
    fresh influxd."""
    parts = influx_parts()
    if not args.influxd.is_file():
        raise BlockedError(f"no influxd binary at {args.influxd} (`make influxd` installs it)")
    with running_service(args.influx_intents) as running:
        print(
            f"  influx: {args.influx_intents:,} intents, service started in {running.start_s:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        try:
            variants = [bench_influx_variant(running, variant, parts, args) for variant in args.variants]
        except parts.error as exc:
            raise InfluxdFailed(str(exc)) from exc
    return {
        "intents": args.influx_intents,
        "offered_rate_per_s": args.rate,
        "service_start_s": round(running.start_s, 2),
        "variants": variants,
    }


def bench_influx_variant(
    running: Running, variant: str, parts: InfluxParts, args: argparse.Namespace
) -> dict[str, Any]:
    """Polls offered to an InfluxSink at `rate` points/s for `seconds` into a fresh influxd, a
    flush, then every field counted in InfluxDB."""
    with contextlib.ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-influxd-")))
        influxd = parts.local_influxd(data_dir / "influxd", binary=args.influxd)
        stack.callback(influxd.stop)
        influxd.start()
        influxd.create_database(DATABASE)
        settings = InfluxSettings(
            url=influxd.url, token="bench:unused", org="-", bucket=parts.bucket(DATABASE)
        )
        sink = OfferedAs(parts.sink.from_settings(settings), variant)
        stack.callback(sink.close, 5.0)
        source: CounterSource = running.service if variant == IDLE else TrafficSource(running.service)
        probe = Collector(source, node=NODE).poll_once()  # the collector's table, built once
        if probe is None:
            raise CheckError("the first poll of the influx phase failed")
        interval_s = (probe.point_count + 1) / args.rate  # + the sink's own stats point
        collector = Collector(
            source, node=NODE, interval_s=interval_s, sinks=[sink], intent_rates=variant != NO_INTENT_RATES
        )
        print(
            f"  influx, {variant}: a poll every {interval_s:.3f} s for {args.seconds:.0f} s into influxd "
            f"{influxd.url}",
            file=sys.stderr,
            flush=True,
        )
        cpu_before = (time.process_time(), time.thread_time(), cpu_seconds(influxd.pid))
        started = time.perf_counter()
        offered = offer_polls(collector, sink, interval_s, args.seconds)
        offered_s = time.perf_counter() - started
        queued_at_end = int(sink.stats()["points_queued"])
        drained = sink.sink.flush(args.flush_timeout)
        delivered_s = time.perf_counter() - started
        cpu_after = (time.process_time(), time.thread_time(), cpu_seconds(influxd.pid))
        stats = dict(sink.stats())
        counted = count_fields(influxd)
        log_tail = influxd.log_tail(5)
    process_s, collector_s, influxd_s = (
        after - before for after, before in zip(cpu_after, cpu_before, strict=True)
    )
    expected = {f"{m}.{f}": n for (m, f), n in sorted(offered.fields.items())}
    stored = {f"{m}.{f}": n for (m, f), n in sorted(counted.items())}
    mismatched = {
        key: {"offered": expected.get(key, 0), "stored": stored.get(key, 0)}
        for key in sorted(set(expected) | set(stored))
        if expected.get(key, 0) != stored.get(key, 0)
    }
    lossless = (
        drained
        and not mismatched
        and stats["points_dropped"] == 0
        and stats["points_written"] == offered.points == stats["points_offered"]
    )
    written = int(stats["points_written"])
    per_100k = 1e5 / max(written, 1)
    result = {
        "variant": variant,
        "poll_interval_s": round(interval_s, 4),
        "seconds": round(offered_s, 2),
        "polls": offered.polls,
        "late_ticks": offered.late_ticks,
        "points_offered": offered.points,
        "points_per_s_offered": round(offered.points / offered_s, 1),
        "drain_s": round(delivered_s - offered_s, 2),
        "drained": drained,
        "points_per_s": round(written / delivered_s, 1),
        "queued_after_poll": {
            "max": max(offered.queued),
            "last": offered.queued[-1],
            "at_end": queued_at_end,
        },
        "poll_ms": summary(offered.poll_s),
        "sink": stats,
        "stored_intent_points": counted.get((INTENT, "packets"), 0),
        "fields_counted": len(stored),
        "fields_mismatched": mismatched,
        "lossless": lossless,
        "intent_line_example": offered.intent_line,
        "cpu_s": {
            "collector_thread": round(collector_s, 2),
            "sink_threads": round(process_s - collector_s, 2),
            "influxd": round(influxd_s, 2),
        },
        "cpu_ms_per_100k_points": {
            "collector_thread": round(collector_s * 1e3 * per_100k, 1),
            "sink_threads": round((process_s - collector_s) * 1e3 * per_100k, 1),
            "influxd": round(influxd_s * 1e3 * per_100k, 1),
        },
        "cpu_cores_busy": {
            "bench_process": round(process_s / delivered_s, 2),
            "influxd": round(influxd_s / delivered_s, 2),
        },
        "batch_lines": sink.sink.batch_lines,
        "buffer_points": sink.sink.buffer_points,
        "influxd_log_tail": log_tail,
    }
    print(
        f"  influx, {variant}: {written:,} points written in {delivered_s:.1f} s = {result['points_per_s']:,.0f}/s "
        f"(offered {result['points_per_s_offered']:,.0f}/s), dropped {stats['points_dropped']}, "
        f"lossless {lossless}",
        file=sys.stderr,
        flush=True,
    )
    return result


def format_influx(influx: dict[str, Any]) -> list[str]:
    lines = [
        f"influx: {influx['intents']:,} intents, polls offered at {influx['offered_rate_per_s']:,.0f} points/s",
        f"{'variant':<17}{'offered/s':>10}{'written/s':>10}{'dropped':>11}{'drain s':>8}{'lossless':>9}"
        f"{'poll ms':>8}   CPU ms per 100k points: collector / sink / influxd",
    ]
    for variant in influx["variants"]:
        cpu = variant["cpu_ms_per_100k_points"]
        lines.append(
            f"{variant['variant']:<17}{variant['points_per_s_offered']:>10,.0f}{variant['points_per_s']:>10,.0f}"
            f"{variant['sink']['points_dropped']:>11,}{variant['drain_s']:>8.1f}{variant['lossless']!s:>9}"
            f"{variant['poll_ms']['p50']:>8.1f}   {cpu['collector_thread']:.0f} / {cpu['sink_threads']:.0f} / "
            f"{cpu['influxd']:.0f}"
        )
    return lines


# --- results -------------------------------------------------------------------------------------


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def summary(samples_s: Sequence[float]) -> dict[str, Any]:
    """Median and p95 (inclusive quantiles) in ms, with the extremes."""
    if not samples_s:
        return {"n": 0}
    ms = [s * 1e3 for s in samples_s]
    values = {"p50": statistics.median(ms), "min": min(ms), "max": max(ms)}
    values["p95"] = statistics.quantiles(ms, n=20, method="inclusive")[18] if len(ms) > 1 else ms[0]
    return {"n": len(ms), **{name: round(value, 3) for name, value in values.items()}}


def targets(levels: Sequence[dict[str, Any]], influx: Optional[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    at = next((level for level in levels if level["intents"] == TARGET_POLL_AT), None)
    if at is not None:
        value = at["poll_ms"]["p50"]
        found.append(
            _target(
                f"collector poll at {TARGET_POLL_AT:,} intents (median)",
                value,
                TARGET_POLL_MS,
                "ms",
                value <= TARGET_POLL_MS,
            )
        )
    if at is not None and at["after_change"]["polls"]:
        value = at["after_change"]["poll_ms"]["p50"]
        found.append(
            _target(
                f"collector poll at {TARGET_POLL_AT:,} intents right after an intent change (median)",
                value,
                TARGET_POLL_MS,
                "ms",
                value <= TARGET_POLL_MS,
            )
        )
    production = next((v for v in (influx or {}).get("variants", ()) if v["variant"] == PRODUCTION), None)
    if production is not None:
        value, lossless = production["points_per_s"], production["lossless"]
        found.append(
            _target(
                f"points/s into InfluxDB without loss ({PRODUCTION}, {influx['intents']:,} intents)",
                value,
                TARGET_POINTS_PER_S,
                "points/s",
                lossless and value >= TARGET_POINTS_PER_S,
            )
        )
    return found


def _target(name: str, value: float, limit: float, unit: str, met: bool) -> dict[str, Any]:
    return {"name": name, "value": value, "limit": limit, "unit": unit, "met": met}


def influxd_version(binary: Path) -> str:
    """What `influxd version` says; a plain `go install` build says "unknown" (scripts/influxd
    stamps its builds), so the Makefile's INFLUXDB_VERSION is added for the bundled binary."""
    try:
        out = subprocess.run([str(binary), "version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    version = out.strip()
    if "unknown" in version and binary.resolve() == INFLUXD.resolve():
        pinned = re.search(r"^INFLUXDB_VERSION\s*:=\s*(\S+)", (REPO / "Makefile").read_text(), re.MULTILINE)
        if pinned:
            version += f"; built by `make influxd` as {pinned.group(1)}"
    return version


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    load_before = os.getloadavg()
    levels = []
    if not args.skip_collector:
        print(f"  collector: {', '.join(f'{n:,}' for n in args.levels)} intents", file=sys.stderr, flush=True)
        levels = [bench_level(intents, args) for intents in args.levels]
    influx: Optional[dict[str, Any]] = None
    blocked = None
    if not args.skip_influx:
        try:
            influx = bench_influx(args)
        except BlockedError as exc:
            blocked = str(exc)
            print(f"  influx: blocked: {blocked}", file=sys.stderr, flush=True)
    return {
        "collector": {"levels": levels, "batch_lines": BATCH_LINES, "node": NODE},
        "influx": influx if blocked is None else {"blocked": blocked},
        "targets": targets(levels, influx),
        "kernel": platform.release(),
        "machine": machine_info() | {"influxd": influxd_version(args.influxd)},
        # 1-minute load average before and after: anything else running on the shared cores
        "load_average": {"start": round(load_before[0], 2), "end": round(os.getloadavg()[0], 2)},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - started, 1),
    }


def format_table(result: dict[str, Any]) -> str:
    lines = [
        f"DPP NetApp telemetry: NetAppService over the real data plane, kernel {result['kernel']}, "
        f"{result['machine']['cpus']} CPUs",
    ]
    levels = result["collector"]["levels"]
    if levels:
        headers = ("read", "build", "poll", "format (sink)")
        lines += [
            "",
            f"{'collector, ms: median / p95':<35}" + "".join(f"{h:>17}" for h in headers) + f"{'points':>11}",
        ]
        for level in levels:
            cells = "".join(_cell(level[key]) for key in ("read_ms", "build_ms", "poll_ms", "format_ms"))
            lines.append(
                f"{level['intents']:>11,} intents, {'steady':<14}{cells}{level['points_per_poll']:>11,}"
            )
        for level in levels:
            change = level["after_change"]
            if change["polls"]:
                cells = "".join(_cell(change[key]) for key in ("read_ms", "build_ms", "poll_ms"))
                lines.append(f"{level['intents']:>11,} intents, {'after a change':<14}{cells}")
        lines.append(
            "format with traffic (non-zero counters and rates), median ms: "
            + ", ".join(
                f"{level['intents']:,}: {level['format_with_traffic_ms']['p50']:.1f}" for level in levels
            )
        )
    influx = result["influx"]
    if influx is not None:
        lines.append("")
        if "blocked" in influx:
            lines.append(f"influx: blocked: {influx['blocked']}")
        else:
            lines += format_influx(influx)
    lines += ["", "targets (reported, not asserted):"]
    for target in result["targets"]:
        comparison = "<=" if target["unit"] == "ms" else ">="
        lines.append(
            f"  {target['name']}: {target['value']:,.1f} {target['unit']} "
            f"({comparison} {target['limit']:,.0f}) {'met' if target['met'] else 'NOT met'}"
        )
    return "\n".join(lines)


def _cell(stats: dict[str, Any]) -> str:
    return f"{stats.get('p50', float('nan')):>9.1f} /{stats.get('p95', float('nan')):>6.1f}"


def write_outputs(result: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(out.suffix + ".tmp")
    partial.write_text(json.dumps(result, indent=2) + "\n")
    partial.replace(out)
    print(format_table(result))
    print(f"\nwrote {out}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    if os.geteuid() != 0:
        print("bench.telemetry: the data plane (BPF maps, pinning) needs root", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except CheckError as exc:
        print(f"bench.telemetry: check failed, no results written: {exc}", file=sys.stderr)
        return 1
    except InfluxdFailed as exc:
        print(f"bench.telemetry: influxd: {exc}", file=sys.stderr)
        return 3
    write_outputs(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
