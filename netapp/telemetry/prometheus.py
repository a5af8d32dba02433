"""Prometheus exposition of a poll: the metric names OSM's VNF monitoring parameters reference.

Every point becomes samples named `<measurement>_<field>`: integer counters as counters
(`dpp_intent_packets_total`), states and sizes as gauges (`dpp_cpu_overloaded`, `dpp_cpu_load_ratio`).
Rates are left out: Prometheus computes them itself (`rate(dpp_intent_packets_total[1m])`), except
the CPU load, which the data plane's capacity gives meaning to. Labels are the point's tags.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Optional

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector as PrometheusCollector

from netapp.telemetry.poll import CPU, Point, PointFilter

if TYPE_CHECKING:
    from netapp.telemetry.collector import Collector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Integer fields that are levels, not counts since start: exposed as gauges.
GAUGE_FIELDS = frozenset({"capacity_pps", "intents", "points", "points_queued", "buffer_points"})
# Booleans of the schema (CPU and alternative node state): gauges of 0 or 1.
BOOLEAN_FIELDS = frozenset({"enabled", "overloaded", "up"})
# Fields renamed to Prometheus' base units.
RENAMED = {"poll_duration_s": "poll_duration_seconds", "load": "load_ratio"}


def metric_name(measurement: str, field: str) -> str:
    return f"{measurement}_{RENAMED.get(field, field)}"


def exposition(points: Iterable[Point], *, load: dict[str, float]) -> bytes:
    """The text format of `points` (and of the latest CPU loads, cpu -> ratio)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_PointCollector(list(points), load))
    return generate_latest(registry)


def scrape(collector: "Collector", tenant: Optional[str]) -> bytes:
    """What a scrape answers: the counters read now for one tenant (None: all, as admins see
    them), with the CPU loads of the latest poll."""
    which = PointFilter(tenant=tenant)
    latest = collector.latest
    load = cpu_loads(latest.points(which)) if latest is not None and tenant is None else {}
    return exposition(collector.snapshot().points(which), load=load)


class _PointCollector(PrometheusCollector):
    def __init__(self, points: list[Point], load: dict[str, float]):
        self._points = points
        self._load = load

    def collect(self) -> Iterator[Metric]:
        # A family's samples must all have the same labels: a tag some points lack (an intent
        # outside any slice) is an empty label on them.
        label_names = _label_names(self._points)
        families: dict[str, Metric] = {}
        for point in self._points:
            names = label_names[point.measurement]
            values = [point.tags.get(name, "") for name in names]
            for field, value in _exposed_fields(point, self._load):
                name = metric_name(point.measurement, field)
                if name not in families:
                    families[name] = _family(point.measurement, field, names)
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
        yield field, float(value)
    if point.measurement == CPU and point.tags.get("cpu") in load:
        yield "load", load[point.tags["cpu"]]


def _family(measurement: str, field: str, labels: list[str]) -> Metric:
    name = metric_name(measurement, field)
    what = f"{measurement} {field}"
    if _is_counter(field):
        # The family is named without _total; the client adds it to the samples.
        return CounterMetricFamily(name, f"{what} (cumulative)", labels=labels)
    return GaugeMetricFamily(name, what, labels=labels)


def _is_counter(field: str) -> bool:
    return field not in GAUGE_FIELDS and field not in RENAMED and field not in BOOLEAN_FIELDS


def cpu_loads(points: Iterable[Point]) -> dict[str, float]:
    """cpu -> load ratio, from a poll's CPU points that have one."""
    return {
        point.tags["cpu"]: float(point.fields["load"])
        for point in points
        if point.measurement == CPU and "load" in point.fields
    }
