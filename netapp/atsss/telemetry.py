"""ATSSS in the telemetry: a point source of the collector (netapp.telemetry.collector), one
`dpp_atsss_path` point per path of every session in the data path, each poll (api/telemetry.md).

A point says what the path sent (downlink: the UE's packets and bytes, their rates since the last
poll) and received (uplink packets, bytes, DCCP-Acks), the state the scheduler holds for it (up,
RTT, weight) and the scheduler's split: the path's share of the session's packets. InfluxDB gets
them every poll, `/metrics` at every scrape; an AI module reads them back to set the weights
(netapp.ai.weights), through the REST API.

Rates follow the collector's rules (netapp.telemetry.collector.RateKeeper): a path is the same
counter from poll to poll only in the same slot, so a path given another slot, or a slot emptied
and given again (its counters zeroed), starts its rates over. A scrape reads counters only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Optional

from netapp.atsss.models import PathCounters, SessionCounters
from netapp.telemetry.collector import RateKeeper
from netapp.telemetry.poll import ATSSS_PATH, FieldValue, Point, counter_fields

CountersOf = Callable[[], Iterable[SessionCounters]]


class AtsssPoints:
    """The paths' counters of `read()` (netapp.atsss.service.Atsss.all_counters) as points."""

    name = "atsss"

    def __init__(self, read: CountersOf, node: str):
        self.read = read
        self.node = node
        self._rates = RateKeeper()

    def poll(self, time_ns: int) -> list[Point]:
        sessions = list(self.read())
        self._rates.keep_only({rate_key(session, path) for session in sessions for path in session.paths})
        return self._points(sessions, time_ns, self._rates)

    def snapshot(self, time_ns: int) -> list[Point]:
        return self._points(list(self.read()), time_ns, None)

    def _points(self, sessions: list[SessionCounters], time_ns: int, rates: Optional[RateKeeper]) -> list[Point]:
        return [
            Point(ATSSS_PATH, self._tags(session, path), path_fields(session, path, time_ns, rates), time_ns)
            for session in sessions
            for path in session.paths
        ]

    def _tags(self, session: SessionCounters, path: PathCounters) -> dict[str, str]:
        return {"node": self.node, "tenant": session.tenant, "session": session.name, "path": str(path.index),
                "access": path.access.value}


def path_fields(session: SessionCounters, path: PathCounters, time_ns: int,
                rates: Optional[RateKeeper]) -> dict[str, FieldValue]:
    """The path's counters, their rates where `rates` knows the previous ones, its state and share."""
    values = (path.packets, path.bytes)
    nan = float("nan")
    measured = rates.rates(rate_key(session, path), time_ns, values) if rates is not None else (nan, nan)
    fields = counter_fields(*values, *measured)
    fields.update(rx_packets=path.rx_packets, rx_bytes=path.rx_bytes, rx_acks=path.rx_acks, up=path.up,
                  rtt_us=path.rtt_us, weight=path.weight)
    if path.share is not None:  # no packet sent on the session yet: no split to tell
        fields["share"] = path.share
    return fields


def rate_key(session: SessionCounters, path: PathCounters) -> tuple[str, str, int, int]:
    """A path's identity for its rates: its session, position and slot."""
    return session.tenant, session.name, path.index, path.slot
