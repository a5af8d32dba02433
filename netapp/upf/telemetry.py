"""The UPF's usage in the telemetry: a point source of the collector (netapp.telemetry.collector),
which runs the URR logic (netapp.upf.usage) on the collector's cadence and writes what it read.

Every poll: `dpp_upf_urr` per URR (tags tenant = the association's Node ID, seid, urr_id) and
`dpp_upf_association` per association (the sum over its URRs, those gone included), each with the
packets and bytes each way since the URR was created (api/telemetry.md). InfluxDB gets both. A
scrape (/metrics) reads the counters without reporting anything and shows the associations only,
unless `telemetry.upf_session_metrics`: a million sessions would be a million series per metric.

`BufferingPoints`: the counters of buffering and duplication (`dpp_upf_buffering`), every poll.

Without telemetry (`telemetry.enabled: false`) the URR logic runs alone on the same grid
(`UsageTicker`), every `telemetry.interval_s`.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Iterable, Optional

from netapp.telemetry.collector import ticks
from netapp.telemetry.poll import UPF_ASSOCIATION, UPF_BUFFERING, UPF_URR, FieldValue, Point
from netapp.upf.usage import COUNTS, UrrUsage, UsageMonitor

log = logging.getLogger("netapp.upf")


class UsagePoints:
    """The URR logic as a point source of the collector."""

    name = "upf"

    def __init__(self, monitor: UsageMonitor, node: str, session_metrics: bool = False):
        self.monitor = monitor
        self.node = node
        self.session_metrics = session_metrics

    def poll(self, time_ns: int) -> list[Point]:
        return self._points(self.monitor.step(time_ns / 1e9), time_ns, per_urr=True)

    def snapshot(self, time_ns: int) -> list[Point]:
        return self._points(self.monitor.counts(), time_ns, per_urr=self.session_metrics)

    def _points(self, usages: list[UrrUsage], time_ns: int, per_urr: bool) -> list[Point]:
        points = [
            Point(UPF_ASSOCIATION, {"node": self.node, "tenant": node_id}, _fields(counts), time_ns)
            for node_id, counts in sorted(self.monitor.totals(usages).items())
        ]
        if per_urr:
            points += [
                Point(UPF_URR, {"node": self.node, "tenant": usage.node_id, "seid": str(usage.seid),
                                "urr_id": str(usage.urr_id)}, _fields(usage.counts), time_ns)
                for usage in usages
            ]
        return points


class BufferingPoints:
    """FAR BUFF, NOCP and DUPL in user space (netapp.upf.buffering) as a point source: one
    `dpp_upf_buffering` point a poll, node-wide (api/telemetry.md)."""

    name = "upf_buffering"

    def __init__(self, buffering: Any, node: str):
        self.buffering = buffering
        self.node = node

    def poll(self, time_ns: int) -> list[Point]:
        return [Point(UPF_BUFFERING, {"node": self.node}, dict(self.buffering.stats()), time_ns)]

    snapshot = poll


def _fields(counts: Iterable[int]) -> dict[str, FieldValue]:
    return dict(zip(COUNTS, counts))


class UsageTicker:
    """The URR logic on its own thread, every `interval_s` (when no collector runs it)."""

    def __init__(self, monitor: UsageMonitor, interval_s: float):
        self.monitor = monitor
        self.interval_s = interval_s
        self.late = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="upf-usage", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        for _ in ticks(self.interval_s, self._stop, self._missed):
            try:
                self.monitor.step()
            except Exception:  # the next tick tries again
                log.exception("the URR logic's poll failed")

    def _missed(self, missed: int) -> None:
        self.late += missed
