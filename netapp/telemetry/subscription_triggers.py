"""When a subscription notifies: every period of poll time, or when a field crosses a threshold
(edge-triggered per series). A trigger is handed each poll and answers the points to send, or None."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Optional, Union

from netapp.telemetry.poll import Point, PointFilter, Poll
from netapp.telemetry.subscription_models import Threshold


class PeriodTrigger:
    """Every `period` seconds of poll time, the points of the poll at hand."""

    name = "period"

    def __init__(self, period_s: float, which: PointFilter, slack_s: float):
        self._period_ns = int(period_s * 1e9)
        # Polls tick on a grid with some jitter: one a little early still counts as on time.
        self._slack_ns = int(slack_s * 1e9)
        self._which = which
        self._last_ns: Optional[int] = None

    def fire(self, poll: Poll) -> Optional[Iterator[Point]]:
        if self._last_ns is not None and poll.time_ns - self._last_ns < self._period_ns - self._slack_ns:
            return None
        self._last_ns = poll.time_ns
        return poll.points(self._which)


class ThresholdTrigger:
    """The points whose field crossed the threshold this poll, edge-triggered per series."""

    name = "threshold"

    def __init__(self, threshold: Threshold, which: PointFilter):
        self._threshold = threshold
        self._which = dataclasses.replace(which, measurements=frozenset({threshold.measurement}))
        self._fired: set[tuple[Any, ...]] = set()  # series that crossed and did not re-arm yet

    def fire(self, poll: Poll) -> Optional[Iterator[Point]]:
        crossed: list[Point] = []
        still_fired: set[tuple[Any, ...]] = set()
        for point in poll.points(self._which):
            key = (point.measurement, tuple(sorted(point.tags.items())))
            value = point.fields.get(self._threshold.field)
            if value is None:  # not this poll (no rate yet): nothing changes
                if key in self._fired:
                    still_fired.add(key)
            elif key in self._fired:
                if not self._threshold.rearmed(float(value)):
                    still_fired.add(key)
            elif self._threshold.beyond(float(value)):
                still_fired.add(key)
                crossed.append(point)
        # Series gone from the poll are forgotten: one that comes back and is beyond fires again.
        self._fired = still_fired
        return iter(crossed) if crossed else None


Trigger = Union[PeriodTrigger, ThresholdTrigger]
