"""ATSSS in the telemetry: a point source of the collector (netapp.telemetry.collector), one
`dpp_atsss_path` point per path of every session in the data path, each poll (api/telemetry.md).
/metrics shows them only when asked (`telemetry.atsss_path_metrics`): a series per path of every
session is 16 MB a scrape at 10,000 sessions (python -m bench.atsss.telemetry).

The Ack sender (netapp.atsss.acks) is a node-wide source: `dpp_atsss_ack` points, one per outcome
of the records it read from the ring (sent; refused by the kernel, one point per errno; unreadable).

A point says what the path sent (downlink: the UE's packets and bytes, their rates since the last
poll) and received (uplink packets, bytes, DCCP-Acks), the state the scheduler holds for it (up,
RTT, weight), the scheduler's split (the path's share of the session's packets) and its loss: the
numbers of the path the UE's Ack Vectors reported delivered and lost (counters), and each poll the
loss of the window since the previous one, lost over judged (the rates of both, whose interval
cancels out; left out when the window judged none). InfluxDB gets
them every poll, `/metrics` at every scrape when asked; an AI module reads them back to set the weights
(netapp.ai.weights), through the REST API.
Each poll's window loss goes to the service too (`on_losses`: netapp.atsss.qos_watch.QosWatch), whose
MEC 015 QoS sessions are checked against it; each change of their qosStatus it returns is a
`dpp_atsss_qos` point of the same poll (`qos_point`), a tenant's like its paths'.

Rates follow the collector's rules (netapp.telemetry.collector.RateKeeper): a path is the same
counter from poll to poll only in the same slot as the same path (its subflow and access:
netapp.atsss.readings.PathKey), so a path given another slot, or a slot emptied and given to
another path (its counters zeroed), starts its rates over. A path a poll did not read while
its session still serves it (the session changed while the poll read its slots: its readings
dropped, netapp.atsss.readings.unchanged) keeps its previous counters: the next poll's rates and
window span both polls. A scrape reads counters only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Optional

from netapp.atsss.acks import AckCounters
from netapp.atsss.readings import PathKey, PathReading, ServedPaths, still_served
from netapp.telemetry.collector import RateKeeper
from netapp.telemetry.poll import ATSSS_ACK, ATSSS_PATH, ATSSS_QOS, FieldValue, Point, counter_fields

if TYPE_CHECKING:  # the watch's module serves MEC 015 (FastAPI): not imported for a type
    from netapp.atsss.qos_watch import QosChange

Readings = Callable[[], Iterable[PathReading]]
# Told each poll's window loss of every path read (None: the window judged no number), by rate_key:
# netapp.atsss.qos_watch.QosWatch, which checks MEC 015's QoS sessions against it and returns the
# changes of their qosStatus.
LossListener = Callable[[dict[PathKey, Optional[float]]], Iterable["QosChange"]]


class AtsssPoints:
    """The paths of `read()` (netapp.atsss.service.Atsss.readings) as points: every poll's, and
    every scrape's when `path_metrics`. `served` (Atsss.served_paths) says which paths a poll did
    not read are still served, and keep their previous counters; without it none does."""

    name = "atsss"

    def __init__(self, read: Readings, node: str, path_metrics: bool = False,
                 on_losses: Optional[LossListener] = None, served: Optional[ServedPaths] = None):
        self.read = read
        self.node = node
        self.path_metrics = path_metrics
        self.on_losses = on_losses
        self.served = served
        self._rates = RateKeeper()
        self._losses = RateKeeper()
        self._known: set[PathKey] = set()  # the paths whose previous counters the keepers hold

    def poll(self, time_ns: int) -> list[Point]:
        paths = list(self.read())
        self._keep_previous({rate_key(path) for path in paths})
        points = self._points(paths, time_ns, self._rates)
        windows: dict[PathKey, Optional[float]] = {}
        for path, point in zip(paths, points):
            loss = windows[rate_key(path)] = window_loss(path, time_ns, self._losses)
            if loss is not None:
                point.fields["loss"] = loss
        if self.on_losses is not None:
            points += [qos_point(change, self.node, time_ns) for change in self.on_losses(windows)]
        return points

    def _keep_previous(self, read: set[PathKey]) -> None:
        """The previous counters of the paths `read` kept, and of those not read but still served
        (readings.still_served), whose reading the poll dropped as their session changed while it
        read their slots: the counters are cumulative, so the next poll's differences, over both
        polls' interval, are that interval's rates and loss window, as right as over one (forgotten,
        the path's rates would start over, its points missing them twice). Those no longer served are
        forgotten: a slot given to another session, maybe another tenant's, is keyed by that session,
        never diffed against the counters of the one that held it."""
        kept = read | (still_served(self._known - read, self.served) if self.served is not None else set())
        self._rates.keep_only(kept)
        self._losses.keep_only(kept)
        self._known = kept

    def snapshot(self, time_ns: int) -> list[Point]:
        if not self.path_metrics:
            return []  # not even read: the scrape costs nothing per session
        return self._points(list(self.read()), time_ns, None)

    def _points(self, paths: list[PathReading], time_ns: int, rates: Optional[RateKeeper]) -> list[Point]:
        return [Point(ATSSS_PATH, self._tags(path), path_fields(path, time_ns, rates), time_ns) for path in paths]

    def _tags(self, path: PathReading) -> dict[str, str]:
        session = path.session
        return {"node": self.node, "tenant": session.tenant, "session": session.name, "path": str(path.index),
                "access": session.paths[path.index].access.value}


def path_fields(path: PathReading, time_ns: int, rates: Optional[RateKeeper]) -> dict[str, FieldValue]:
    """The path's counters, their rates where `rates` knows the previous ones, its state and share."""
    counts = path.counts
    values = (counts.packets, counts.bytes)
    nan = float("nan")
    measured = rates.rates(rate_key(path), time_ns, values) if rates is not None else (nan, nan)
    fields = counter_fields(*values, *measured)
    fields.update(rx_packets=counts.rx_packets, rx_bytes=counts.rx_bytes, rx_acks=counts.rx_acks, up=path.up,
                  rtt_us=path.rtt_us, weight=path.session.paths[path.index].weight, delivered=path.loss.delivered,
                  lost=path.loss.lost)
    if path.share is not None:  # no packet sent on the session yet: no split to tell
        fields["share"] = path.share
    return fields


def window_loss(path: PathReading, time_ns: int, losses: RateKeeper) -> Optional[float]:
    """The part of the numbers judged since the previous poll that the UE reported lost; None on the
    first poll of the path, or when the window judged none."""
    delivered, lost = losses.rates(rate_key(path), time_ns, tuple(path.loss))
    judged = delivered + lost
    return lost / judged if judged > 0 else None  # NaN (unknown) compares false too


def qos_point(change: "QosChange", node: str, time_ns: int) -> Point:
    """A change of an MTS session's qosStatus as a point: the statuses as tags (three values each),
    each path's loss as checked as a field (left out when unknown)."""
    tags = {"node": node, "tenant": change.tenant, "mts_session": change.mts_session, "session": change.session,
            "app": tag_text(change.app), "previous": change.before.value, "status": change.after.value}
    fields: dict[str, FieldValue] = {"paths_up": sum(change.up)}
    fields.update((f"loss_{index}", loss) for index, loss in enumerate(change.losses) if loss is not None)
    return Point(ATSSS_QOS, tags, fields, time_ns)


def tag_text(text: str) -> str:
    """`text` (an application's, any string) fit for a tag: line protocol has no escape for a
    control character (a newline would end the line, the rest read as another point), so each
    becomes U+FFFD."""
    return "".join("\ufffd" if ord(char) < 0x20 or ord(char) == 0x7F else char for char in text)


def rate_key(path: PathReading) -> PathKey:
    """A path's identity for its rates: its session, its slot and the path written in it (readings.PathKey)."""
    return path.key


class AckPoints:
    """The Ack sender's counters (netapp.atsss.acks.AckCounters, kept by its thread) as
    `dpp_atsss_ack` points, every poll and scrape: a point per outcome, a refused one per errno."""

    name = "atsss_acks"

    def __init__(self, counters: AckCounters, node: str):
        self.counters = counters
        self.node = node

    def poll(self, time_ns: int) -> list[Point]:
        counters = self.counters
        refused = dict(counters.failed)  # one copy: the sender's thread may add an errno meanwhile
        points = [self._point("sent", counters.sent, time_ns), self._point("unreadable", counters.malformed, time_ns)]
        return points + [self._point("refused", count, time_ns, errno=name) for name, count in sorted(refused.items())]

    snapshot = poll

    def _point(self, outcome: str, records: int, time_ns: int, **tags: str) -> Point:
        return Point(ATSSS_ACK, {"node": self.node, "outcome": outcome, **tags}, {"records": records}, time_ns)
