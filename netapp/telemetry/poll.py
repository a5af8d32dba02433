"""One poll of the data plane as points: the measurement schema of api/telemetry.md.

Every point of a poll carries the poll's one timestamp. Counters are cumulative integers; rates
(per second, from the previous poll) are floats and are left out, never faked, when there is no
honest previous value: the first poll, a program reload, a counter that went backwards, a new
intent. Tags are bounded sets only (node, tenant, intent, slice, cpu, verdict, action, reason,
interface, sink, ATSSS session and path, MEC 015 session and status, notifier); addresses, ports and TEIDs never become tags.

A poll holds the per-intent counters as arrays, so a million intents cost no Python object until
someone asks for their points (`points`) or their line protocol (`line_chunks`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional, Union

import numpy

from netapp.telemetry.sample import IntentTable

FieldValue = Union[int, float, bool]

INTENT = "dpp_intent"
SLICE = "dpp_slice"
CPU = "dpp_cpu"
VERDICT = "dpp_verdict"
ACTION = "dpp_action"
REASON = "dpp_reason"
INTERFACE = "dpp_interface"
TELEMETRY = "dpp_telemetry"
ALTERNATIVE = "dpp_alternative"
RSS_WORKER = "dpp_rss_worker"  # the GTP-U dispatcher's worker CPUs (netapp.qos.dispatch)
UPF_URR = "dpp_upf_urr"
UPF_ASSOCIATION = "dpp_upf_association"
UPF_COUNTS = ("ul_packets", "ul_bytes", "dl_packets", "dl_bytes")  # the fields of both UPF measurements
UPF_BUFFERING = "dpp_upf_buffering"
# netapp.upf.buffering's counters (its COUNTERS), then what it holds now (gauges)
UPF_BUFFERING_COUNTERS = ("buffered", "overflow", "replayed", "replay_failed", "discarded", "reported", "duplicated",
                          "duplicate_failed", "duplicate_refused", "unknown")
UPF_BUFFERING_FIELDS = (*UPF_BUFFERING_COUNTERS, "held_packets", "held_bytes")
ATSSS_PATH = "dpp_atsss_path"
# netapp.atsss.telemetry's fields: what the path sent and received, then its state and split
ATSSS_PATH_COUNTERS = ("packets", "bytes", "rx_packets", "rx_bytes", "rx_acks", "delivered", "lost")
ATSSS_PATH_FIELDS = (*ATSSS_PATH_COUNTERS, "packets_rate", "bytes_rate", "up", "rtt_us", "weight", "share", "loss")
ATSSS_QOS = "dpp_atsss_qos"
# netapp.atsss.telemetry.qos_point's: an MEC 015 QoS session's qosStatus changed (tags previous, status);
# a loss field per path, netapp.atsss.abi.MAX_PATHS_PER_SESSION of them (a test holds the two together)
ATSSS_QOS_FIELDS = ("paths_up", *(f"loss_{index}" for index in range(4)))
ATSSS_ACK = "dpp_atsss_ack"
# netapp.atsss.telemetry.AckPoints': the Ack sender's records by outcome (tag outcome, errno when refused)
ATSSS_ACK_FIELDS = ("records",)
ATSSS_ACK_OUTCOMES = ("sent", "refused", "unreadable")
NOTIFICATION = "dpp_notification"
# netapp.telemetry.notifications' fields: what became of a notifier's notifications (tag notifier)
NOTIFICATION_FIELDS = ("delivered", "retried", "failed", "refused", "dropped")

# Measurements about the whole node, not one tenant's objects: admins only.
NODE_MEASUREMENTS = frozenset({CPU, VERDICT, ACTION, REASON, INTERFACE, TELEMETRY, ALTERNATIVE, UPF_BUFFERING,
                               ATSSS_ACK, RSS_WORKER, NOTIFICATION})
TENANT_MEASUREMENTS = frozenset({INTENT, SLICE, UPF_URR, UPF_ASSOCIATION, ATSSS_PATH, ATSSS_QOS})
MEASUREMENTS = NODE_MEASUREMENTS | TENANT_MEASUREMENTS
# Points that tell a change seen at one poll, not the state of a series: InfluxDB, the stream and the
# subscriptions get them with their poll, /metrics never (a gauge of the last change would stay).
EVENT_MEASUREMENTS = frozenset({ATSSS_QOS})


@dataclass(frozen=True)
class Point:
    """One measurement at one time: what InfluxDB stores as a point, what a subscriber receives."""

    measurement: str
    tags: dict[str, str]
    fields: dict[str, FieldValue]
    time_ns: int

    def line(self) -> str:
        """InfluxDB line protocol, tags sorted (what InfluxDB sorts them to anyway)."""
        tags = "".join(f",{escape_key(k)}={escape_key(v)}" for k, v in sorted(self.tags.items()))
        fields = ",".join(f"{escape_key(k)}={format_field(v)}" for k, v in self.fields.items())
        return f"{escape_measurement(self.measurement)}{tags} {fields} {self.time_ns}"

    def to_json(self) -> dict[str, Any]:
        return {
            "measurement": self.measurement,
            "time": rfc3339_ns(self.time_ns),
            "tags": dict(self.tags),
            "fields": dict(self.fields),
        }


@dataclass(frozen=True)
class PointFilter:
    """Which points of a poll someone sees.

    `tenant` None sees every tenant and the node-wide measurements (an admin); a tenant sees its
    own intents and slices only. `intents`/`slices` (plain ids) narrow the tenant measurements:
    an intent point passes when its id is listed or its slice is; a slice point when its slice
    is. `measurements` narrows by measurement name.
    """

    tenant: Optional[str] = None
    intents: Optional[frozenset[str]] = None
    slices: Optional[frozenset[str]] = None
    measurements: Optional[frozenset[str]] = None

    def wants(self, measurement: str) -> bool:
        if self.measurements is not None and measurement not in self.measurements:
            return False
        return self.tenant is None or measurement in TENANT_MEASUREMENTS

    @property
    def narrowed(self) -> bool:
        return self.intents is not None or self.slices is not None

    def wants_intent(self, tenant: str, intent: str, slice_id: Optional[str]) -> bool:
        if self.tenant is not None and tenant != self.tenant:
            return False
        if not self.narrowed:
            return True
        return (self.intents is not None and intent in self.intents) or (
            self.slices is not None and slice_id is not None and slice_id in self.slices
        )

    def wants_slice(self, tenant: str, slice_id: str) -> bool:
        if self.tenant is not None and tenant != self.tenant:
            return False
        if not self.narrowed:
            return True
        return self.slices is not None and slice_id in self.slices


EVERYTHING = PointFilter()


@dataclass(frozen=True)
class IntentSeries:
    """The per-intent counters of one poll, as arrays aligned with `table`'s rows. Rates are NaN
    where there is no honest previous value."""

    table: IntentTable
    packets: numpy.ndarray
    bytes: numpy.ndarray
    packets_rate: numpy.ndarray
    bytes_rate: numpy.ndarray
    # Line-protocol prefixes ("dpp_intent,intent=..,node=..,tenant=..") per row, shared by the
    # polls of one store revision.
    prefixes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Poll:
    """Every counter of the data plane at `time_ns`, with rates since the previous poll."""

    seq: int
    time_ns: int
    node: str
    intents: IntentSeries
    # Every point that is not a per-intent one (slices, CPUs, verdicts, ...), built eagerly.
    points_other: tuple[Point, ...] = ()
    # Seconds since the previous poll, None on the first one or after a program reload.
    elapsed_s: Optional[float] = None
    reset: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def point_count(self) -> int:
        return len(self.intents.table) + len(self.points_other)

    def points(self, which: PointFilter = EVERYTHING) -> Iterator[Point]:
        """The poll's points that `which` lets through, intents first."""
        if which.wants(INTENT):
            yield from self._intent_points(which)
        for point in self.points_other:
            if which.wants(point.measurement) and _other_point_wanted(which, point):
                yield point

    def _intent_points(self, which: PointFilter) -> Iterator[Point]:
        series = self.intents
        table = series.table
        for row, (packets, size, packets_rate, bytes_rate) in enumerate(
            zip(
                series.packets.tolist(),
                series.bytes.tolist(),
                series.packets_rate.tolist(),
                series.bytes_rate.tolist(),
            )
        ):
            tenant, intent, slice_id = table.tenants[row], table.ids[row], table.slices[row]
            if not which.wants_intent(tenant, intent, slice_id):
                continue
            tags = {"node": self.node, "tenant": tenant, "intent": intent}
            if slice_id is not None:
                tags["slice"] = slice_id
            yield Point(INTENT, tags, counter_fields(packets, size, packets_rate, bytes_rate), self.time_ns)

    def line_chunks(self, lines_per_chunk: int = 5000) -> Iterator[tuple[str, int]]:
        """The whole poll as line protocol, in chunks of at most `lines_per_chunk` lines:
        (text, number of lines). The per-intent lines reuse the series' precomputed prefixes."""
        chunk: list[str] = []
        for line in self._all_lines():
            chunk.append(line)
            if len(chunk) >= lines_per_chunk:
                yield "\n".join(chunk), len(chunk)
                chunk = []
        if chunk:
            yield "\n".join(chunk), len(chunk)

    def _all_lines(self) -> Iterator[str]:
        yield from intent_lines(self.intents, self.time_ns)
        for point in self.points_other:
            yield point.line()


def _other_point_wanted(which: PointFilter, point: Point) -> bool:
    if point.measurement == SLICE:
        return which.wants_slice(point.tags["tenant"], point.tags["slice"])
    if point.measurement in (UPF_URR, UPF_ASSOCIATION, ATSSS_PATH, ATSSS_QOS):  # no intent nor slice of theirs to narrow to
        return not which.narrowed and which.tenant in (None, point.tags["tenant"])
    return True


def counter_fields(packets: int, size: int, packets_rate: float, bytes_rate: float) -> dict[str, FieldValue]:
    """packets, bytes and, where known, their rates per second."""
    fields: dict[str, FieldValue] = {"packets": packets, "bytes": size}
    if not math.isnan(packets_rate):
        fields["packets_rate"] = packets_rate
    if not math.isnan(bytes_rate):
        fields["bytes_rate"] = bytes_rate
    return fields


def intent_prefixes(
    table: IntentTable, node: str, known: Optional[dict[tuple[str, str, Optional[str]], str]] = None
) -> tuple[str, ...]:
    """Measurement and tags of each intent row as line protocol, sorted by tag key. `known`: the
    prefixes of a previous table by (tenant, intent, slice), reused rather than formatted again."""
    known = known or {}
    node_tag = escape_key(node)
    prefixes = []
    for key in zip(table.tenants, table.ids, table.slices):
        prefix = known.get(key)
        if prefix is None:
            tenant, intent, slice_id = key
            slice_tag = "" if slice_id is None else f",slice={escape_key(slice_id)}"
            prefix = (
                f"{INTENT},intent={escape_key(intent)},node={node_tag}{slice_tag},tenant={escape_key(tenant)}"
            )
        prefixes.append(prefix)
    return tuple(prefixes)


def intent_lines(series: IntentSeries, time_ns: int) -> Iterator[str]:
    prefixes = series.prefixes or intent_prefixes(series.table, "")
    for prefix, packets, size, packets_rate, bytes_rate in zip(
        prefixes,
        series.packets.tolist(),
        series.bytes.tolist(),
        series.packets_rate.tolist(),
        series.bytes_rate.tolist(),
    ):
        if packets_rate != packets_rate:  # NaN: no rate this poll
            yield f"{prefix} packets={packets}i,bytes={size}i {time_ns}"
        else:
            yield (
                f"{prefix} packets={packets}i,bytes={size}i,"
                f"packets_rate={packets_rate!r},bytes_rate={bytes_rate!r} {time_ns}"
            )


# --- line protocol ---------------------------------------------------------------------------


_NEEDS_ESCAPE = re.compile(r"[, =\\]")


def escape_measurement(name: str) -> str:
    return name.replace(",", r"\,").replace(" ", r"\ ")


def escape_key(text: str) -> str:
    """Tag keys, tag values and field keys: commas, equals signs and spaces are escaped."""
    if _NEEDS_ESCAPE.search(text) is None:  # the common case, tested once per string
        return text
    return text.replace("\\", "\\\\").replace(",", r"\,").replace("=", r"\=").replace(" ", r"\ ")


def format_field(value: FieldValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value}i"
    return repr(float(value))


def rfc3339_ns(time_ns: int) -> str:
    """2026-11-22T10:00:00.123456789Z: nanoseconds kept (datetime stops at microseconds)."""
    seconds, nanos = divmod(time_ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{nanos:09d}Z"


def lines_of(points: Iterable[Point]) -> str:
    return "\n".join(point.line() for point in points)
