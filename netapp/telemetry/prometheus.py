"""Prometheus exposition of a poll: the metric names OSM's VNF monitoring parameters reference.

Every point becomes samples named `<measurement>_<field>` in Prometheus' base units: integer
counters as counters (`dpp_intent_packets_total`), states and sizes as gauges (`dpp_cpu_overloaded`,
`dpp_cpu_load_ratio`), the interfaces' kernel counters under node_exporter's words
(`dpp_interface_receive_bytes_total`), an ATSSS path's RTT in seconds though held in microseconds
(`dpp_atsss_path_rtt_seconds`). Rates are left out: Prometheus computes them itself
(`rate(dpp_intent_packets_total[1m])`), except the CPU load, which the data plane's capacity gives
meaning to. Labels are the point's tags. `dpp_build_info` says which NetApp answers. Events
(EVENT_MEASUREMENTS: a change at one poll, not a series) are not exposed.

HELP texts are the descriptions of api/telemetry.md's "Prometheus metrics" table, which a test
holds equal to HELP below.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Optional

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector as PrometheusCollector

from netapp import __version__
from netapp.telemetry.poll import CPU, EVENT_MEASUREMENTS, Point, PointFilter

if TYPE_CHECKING:
    from netapp.telemetry.collector import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
BUILD_INFO = "dpp_build_info"

# Integer fields that are levels, not counts since start, and float fields: exposed as gauges.
GAUGE_FIELDS = frozenset(
    {"capacity_pps", "intents", "points", "points_queued", "buffer_points", "poll_duration_s", "load", "held_packets",
     "held_bytes", "rtt_us", "weight", "share", "loss"}
)
# Booleans of the schema (CPU and alternative node state): gauges of 0 or 1.
BOOLEAN_FIELDS = frozenset({"enabled", "overloaded", "up"})
# Fields renamed to Prometheus' base units, the unit last (the interfaces' as node_exporter has them).
RENAMED = {
    "poll_duration_s": "poll_duration_seconds",
    "load": "load_ratio",
    "capacity_pps": "capacity_packets_per_second",
    "bytes_recv": "receive_bytes",
    "bytes_sent": "transmit_bytes",
    "packets_recv": "receive_packets",
    "packets_sent": "transmit_packets",
    "err_in": "receive_errors",
    "err_out": "transmit_errors",
    "drop_in": "receive_dropped_packets",
    "drop_out": "transmit_dropped_packets",
    "rtt_us": "rtt_seconds",
    "share": "share_ratio",
    "loss": "loss_ratio",
}
# Fields whose unit is not the base unit: the factor to it (microseconds to seconds).
SCALED = {"rtt_us": 1e-6}

# Exposed name -> HELP: api/telemetry.md "Prometheus metrics" says the same (tests/telemetry).
HELP = {
    "dpp_build_info": "The NetApp's version, always 1",
    "dpp_intent_packets_total": "Packets matched by the intent's rules",
    "dpp_intent_bytes_total": "Bytes matched by the intent's rules",
    "dpp_slice_packets_total": "Packets matched by the slice's intents",
    "dpp_slice_bytes_total": "Bytes matched by the slice's intents",
    "dpp_slice_intents": "Intents the slice has now",
    "dpp_cpu_packets_total": "Packets steered to the CPU",
    "dpp_cpu_bytes_total": "Bytes steered to the CPU",
    "dpp_cpu_enabled": "1 when the CPU takes steered traffic",
    "dpp_cpu_overloaded": "1 when the CPU is marked overloaded: priority overflow and best effort leave it",
    "dpp_cpu_capacity_packets_per_second": "The capacity the data plane meters the CPU against (0: unmetered)",
    "dpp_cpu_load_ratio": "Packets per second steered to the CPU over its capacity, in the latest poll",
    "dpp_rss_worker_packets_total": "GTP-U packets the dispatcher sent to this worker CPU (by the TEID hash or a steering rule)",
    "dpp_rss_worker_bytes_total": "Bytes of GTP-U packets the dispatcher sent to this worker CPU",
    "dpp_verdict_packets_total": "Packets the XDP program returned this verdict for",
    "dpp_verdict_bytes_total": "Bytes the XDP program returned this verdict for",
    "dpp_action_packets_total": "Packets the pipeline took this action on",
    "dpp_action_bytes_total": "Bytes the pipeline took this action on",
    "dpp_reason_packets_total": "Packets the parser or pipeline flagged with this reason",
    "dpp_reason_bytes_total": "Bytes the parser or pipeline flagged with this reason",
    "dpp_alternative_up": "1 when the alternative node answers GTP-U echo: the data plane forwards to it",
    "dpp_alternative_state_changes_total": "Changes of the alternative node's state (init, up, down)",
    "dpp_alternative_probes_total": "GTP-U Echo Requests sent to the alternative node",
    "dpp_alternative_answers_total": "GTP-U Echo Responses of the alternative node",
    "dpp_interface_receive_bytes_total": "Bytes the kernel received on the interface",
    "dpp_interface_transmit_bytes_total": "Bytes the kernel sent on the interface",
    "dpp_interface_receive_packets_total": "Packets the kernel received on the interface (XDP_PASS only)",
    "dpp_interface_transmit_packets_total": "Packets the kernel sent on the interface",
    "dpp_interface_receive_errors_total": "Receive errors of the interface",
    "dpp_interface_transmit_errors_total": "Transmit errors of the interface",
    "dpp_interface_receive_dropped_packets_total": "Received packets the interface dropped",
    "dpp_interface_transmit_dropped_packets_total": "Packets to send the interface dropped",
    "dpp_upf_association_ul_packets_total": (
        "Uplink packets counted on the URRs of the PFCP association's sessions, those gone included"
    ),
    "dpp_upf_association_ul_bytes_total": (
        "Uplink bytes counted on the URRs of the PFCP association's sessions, those gone included"
    ),
    "dpp_upf_association_dl_packets_total": (
        "Downlink packets counted on the URRs of the PFCP association's sessions, those gone included"
    ),
    "dpp_upf_association_dl_bytes_total": (
        "Downlink bytes counted on the URRs of the PFCP association's sessions, those gone included"
    ),
    "dpp_upf_urr_ul_packets_total": "Uplink packets counted on the URR (telemetry.upf_session_metrics only)",
    "dpp_upf_urr_ul_bytes_total": "Uplink bytes counted on the URR (telemetry.upf_session_metrics only)",
    "dpp_upf_urr_dl_packets_total": "Downlink packets counted on the URR (telemetry.upf_session_metrics only)",
    "dpp_upf_urr_dl_bytes_total": "Downlink bytes counted on the URR (telemetry.upf_session_metrics only)",
    "dpp_upf_buffering_buffered_total": "Packets of FARs with BUFF the UPF took into user space",
    "dpp_upf_buffering_overflow_total": "Packets of FARs with BUFF dropped past the buffer limits (upf.buffer_*)",
    "dpp_upf_buffering_replayed_total": "Buffered packets sent through the data path once their FAR forwards",
    "dpp_upf_buffering_replay_failed_total": "Buffered packets whose replay through the data path failed",
    "dpp_upf_buffering_discarded_total": "Buffered packets dropped: their FAR drops, or it or its session was removed",
    "dpp_upf_buffering_reported_total": "Downlink Data Reports sent to SMFs (FAR with BUFF and NOCP)",
    "dpp_upf_buffering_duplicated_total": "Copies of packets sent to the duplicating parameters' peers (FAR with DUPL)",
    "dpp_upf_buffering_duplicate_failed_total": "Copies of packets (FAR with DUPL) the UPF could not send",
    "dpp_upf_buffering_duplicate_refused_total": "Copies of packets (FAR with DUPL) not sent: their peer is outside upf.peer_networks",
    "dpp_upf_buffering_unknown_total": "Frames the data path handed to user space for no PDR that buffers or duplicates",
    "dpp_upf_buffering_held_packets": "Packets the UPF holds for FARs with BUFF now",
    "dpp_upf_buffering_held_bytes": "Bytes the UPF holds for FARs with BUFF now",
    "dpp_atsss_path_packets_total": "Downlink packets the ATSSS path sent (the UE's, before encapsulation) (telemetry.atsss_path_metrics only)",
    "dpp_atsss_path_bytes_total": "Bytes of the downlink packets the ATSSS path sent, before encapsulation (telemetry.atsss_path_metrics only)",
    "dpp_atsss_path_rx_packets_total": "Uplink packets received on the ATSSS path and decapsulated (telemetry.atsss_path_metrics only)",
    "dpp_atsss_path_rx_bytes_total": "Bytes of the uplink packets received on the ATSSS path, after decapsulation (telemetry.atsss_path_metrics only)",
    "dpp_atsss_path_rx_acks_total": "DCCP-Acks the UE sent on the ATSSS path (telemetry.atsss_path_metrics only)",
    "dpp_atsss_path_delivered_total": "DCCP numbers of the ATSSS path the UE's Ack Vectors reported received (telemetry.atsss_path_metrics only)",
    "dpp_atsss_path_lost_total": "DCCP numbers of the ATSSS path the UE's Ack Vectors reported not received (telemetry.atsss_path_metrics only)",
    "dpp_atsss_path_up": "1 when the scheduler may pick the ATSSS path (not reported down) (telemetry.atsss_path_metrics only)",
    "dpp_atsss_path_rtt_seconds": "The ATSSS path's RTT the scheduler holds, as fed through the API (0: unknown) (telemetry.atsss_path_metrics only)",
    "dpp_atsss_path_weight": "The ATSSS path's weight in weighted mode (telemetry.atsss_path_metrics only)",
    "dpp_atsss_path_loss_ratio": "The part of the ATSSS path's DCCP numbers judged in the latest poll's window that the UE reported lost (polls only: a scrape computes it with rate() of lost and delivered)",
    "dpp_atsss_path_share_ratio": "The ATSSS path's part of its session's downlink packets: the scheduler's split (telemetry.atsss_path_metrics only)",
    "dpp_atsss_ack_records_total": "Records of the ATSSS Ack ring by outcome: sent, refused by the kernel (errno), unreadable",
    "dpp_notification_delivered_total": "Notifications the notifier's callbacks took (2xx)",
    "dpp_notification_retried_total": "Attempts the notifier made again after a failed one",
    "dpp_notification_failed_total": "Notifications given up: out of retries, or refused by the callback",
    "dpp_notification_refused_total": "Notifications not sent: the callback's address is not allowed at that moment",
    "dpp_notification_dropped_total": "Notifications not sent: the queue was full, or the NetApp stopped first",
    "dpp_telemetry_polls_total": "Polls the collector made",
    "dpp_telemetry_polls_failed_total": "Polls that could not read the counters",
    "dpp_telemetry_polls_late_total": "Intervals skipped because a poll overran",
    "dpp_telemetry_poll_duration_seconds": "Seconds the collector's last poll took",
    "dpp_telemetry_points": "Points in the collector's last poll",
    "dpp_telemetry_points_offered_total": "Points the collector offered to the sink",
    "dpp_telemetry_points_written_total": "Points the sink delivered",
    "dpp_telemetry_points_dropped_total": "Points the sink could not keep (buffer full)",
    "dpp_telemetry_points_rejected_total": "Points the sink dropped because InfluxDB refused them as invalid",
    "dpp_telemetry_points_queued": "Points waiting in the sink (buffer and in flight)",
    "dpp_telemetry_points_retried_total": "Points the sink sent again after a failed write",
    "dpp_telemetry_write_errors_total": "Write requests of the sink that failed",
    "dpp_telemetry_batches_written_total": "Write requests of the sink that succeeded",
}


def metric_name(measurement: str, field: str) -> str:
    """The exposed name of a field: with `_total` for a counter."""
    name = f"{measurement}_{RENAMED.get(field, field)}"
    return f"{name}_total" if _is_counter(field) else name


def exposition(points: Iterable[Point], *, load: dict[str, float], build: Optional[dict[str, str]] = None) -> bytes:
    """The text format of `points` (and of the latest CPU loads, cpu -> ratio), with
    `dpp_build_info` labelled `build` when given."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_PointCollector(list(points), load, build))
    return generate_latest(registry)


def build_labels(node: str) -> dict[str, str]:
    """The labels of `dpp_build_info`."""
    return {"node": node, "version": __version__}


def scrape(collector: "Collector", tenant: Optional[str]) -> bytes:
    """What a scrape answers: the counters read now for one tenant (None: all, as admins see
    them, with the CPU loads of the latest poll and the build)."""
    which = PointFilter(tenant=tenant)
    latest = collector.latest
    load = cpu_loads(latest.points(which)) if latest is not None and tenant is None else {}
    build = build_labels(collector.node) if tenant is None else None
    return exposition(collector.snapshot().points(which), load=load, build=build)


class _PointCollector(PrometheusCollector):
    def __init__(self, points: list[Point], load: dict[str, float], build: Optional[dict[str, str]]):
        self._points = points
        self._load = load
        self._build = build

    def collect(self) -> Iterator[Metric]:
        if self._build is not None:
            info = GaugeMetricFamily(BUILD_INFO, HELP[BUILD_INFO], labels=sorted(self._build))
            info.add_metric([self._build[name] for name in sorted(self._build)], 1)
            yield info
        # A family's samples must all have the same labels: a tag some points lack (an intent
        # outside any slice) is an empty label on them.
        label_names = _label_names(self._points)
        families: dict[str, Metric] = {}
        for point in self._points:
            if point.measurement in EVENT_MEASUREMENTS:
                continue
            names = label_names[point.measurement]
            values = [point.tags.get(name, "") for name in names]
            for field, value in _exposed_fields(point, self._load):
                name = metric_name(point.measurement, field)
                if name not in families:
                    families[name] = _family(name, field, names)
                families[name].add_metric(values, value)
        yield from families.values()


def _label_names(points: list[Point]) -> dict[str, list[str]]:
    found: dict[str, set[str]] = {}
    for point in points:
        found.setdefault(point.measurement, set()).update(point.tags)
    return {measurement: sorted(names) for measurement, names in found.items()}


def _exposed_fields(point: Point, load: dict[str, float]) -> Iterator[tuple[str, float]]:
    for field, value in point.fields.items():
        if field.endswith("_rate") or field == "load":
            continue
        yield field, float(value) * SCALED.get(field, 1)
    if point.measurement == CPU and point.tags.get("cpu") in load:
        yield "load", load[point.tags["cpu"]]


def _family(name: str, field: str, labels: list[str]) -> Metric:
    # A field the table lacks still scrapes (a test keeps the table complete).
    documented = HELP.get(name, name)
    if _is_counter(field):
        # The family is named without _total; the client adds it to the samples.
        return CounterMetricFamily(name.removesuffix("_total"), documented, labels=labels)
    return GaugeMetricFamily(name, documented, labels=labels)


def _is_counter(field: str) -> bool:
    return field not in GAUGE_FIELDS and field not in BOOLEAN_FIELDS


def cpu_loads(points: Iterable[Point]) -> dict[str, float]:
    """cpu -> load ratio, from a poll's CPU points that have one."""
    return {
        point.tags["cpu"]: float(point.fields["load"])
        for point in points
        if point.measurement == CPU and "load" in point.fields
    }
