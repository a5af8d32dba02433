"""Holt's linear trend method (double exponential smoothing): where a CPU's load will be a few
polls from now, from the polls so far.

    level_t = alpha * y_t + (1 - alpha) * (level_{t-1} + trend_{t-1})
    trend_t = beta * (level_t - level_{t-1}) + (1 - beta) * trend_{t-1}
    forecast_{t+h} = level_t + h * trend_t

Started with level_0 = y_0 and trend_0 = y_1 - y_0, so a straight line is followed exactly and a
constant stays constant. The series is taken as evenly spaced (the collector polls on a fixed
grid); the horizon is counted in polls, not seconds.

It is a deliberately simple model: no seasonality, no confidence interval, and a ramp is assumed
to go on. The policy's thresholds and cool-down make up for its overshoot on noisy series.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# Weight of the newest poll in the level. At one poll a second, 0.5 halves an old poll's weight
# every second: the level catches up with a change in two or three polls, and one odd poll moves
# it only half way.
DEFAULT_ALPHA = 0.5
# Weight of the newest level change in the trend. 0.3 follows a steady ramp within a few polls,
# while a single spike adds only 30 % of its jump to the slope that is projected ahead.
DEFAULT_BETA = 0.3


@dataclass(frozen=True)
class Forecast:
    """The smoothed state after the last observation, and the value `horizon` polls ahead."""

    level: float
    trend: float
    horizon: int
    value: float
    observations: int


@dataclass(frozen=True)
class Holt:
    """Holt's method with fixed smoothing weights, both in (0, 1]."""

    alpha: float = DEFAULT_ALPHA
    beta: float = DEFAULT_BETA

    def __post_init__(self) -> None:
        for name in ("alpha", "beta"):
            weight = getattr(self, name)
            if not 0 < weight <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {weight}")

    def forecast(self, series: Iterable[float], horizon: int) -> Forecast:
        """The value `horizon` polls after the last one of `series` (NaNs skipped: a poll with no
        honest rate). Needs at least one observation; the trend needs two."""
        if horizon < 0:
            raise ValueError(f"horizon must be >= 0, got {horizon}")
        values = [float(value) for value in series if not math.isnan(value)]
        if not values:
            raise ValueError("no observations to forecast from")
        level, trend = self._smooth(values)
        return Forecast(level, trend, horizon, level + horizon * trend, len(values))

    def _smooth(self, values: list[float]) -> tuple[float, float]:
        level = values[0]
        trend = values[1] - values[0] if len(values) > 1 else 0.0
        for value in values[1:]:
            previous = level
            level = self.alpha * value + (1 - self.alpha) * (level + trend)
            trend = self.beta * (level - previous) + (1 - self.beta) * trend
        return level, trend
