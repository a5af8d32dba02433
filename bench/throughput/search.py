"""The RFC 2544 throughput search and the offered-load sweep (pure: trials are callables).

Throughput (RFC 2544, 26.1) is the highest rate at which every frame sent is received. The search
starts at the most the generator can offer against the system; if that passes, the result is a
lower bound set by the generator (`limited_by` "generator"). Otherwise it halves the interval
between the highest rate known to pass and the lowest known to fail until it is narrower than
`resolution` of the starting rate. The result is the rate the fastest passing trial offered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Probe:
    """One trial as the search sees it."""

    target_pps: float
    offered_pps: float  # what the generator achieved
    passed: bool
    limited_by: str | None  # None when passed; "loss" or "invalid"
    record: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass
class SearchResult:
    zero_loss_pps: float  # offered rate of the fastest passing trial (0: none passed)
    target_pps: float  # the rate that trial asked for
    limited_by: str  # what failed just above: "loss" or "invalid"; "generator" when the highest
    # rate passed, which is all the generator can offer
    high_pps: float
    resolution: float
    trials: list[Probe] = field(default_factory=list)

    @property
    def lower_bound_only(self) -> bool:
        return self.limited_by == "generator"

    def as_dict(self) -> dict[str, Any]:
        return {
            "pps": self.zero_loss_pps,
            "target_pps": self.target_pps,
            "limited_by": self.limited_by,
            "lower_bound_only": self.lower_bound_only,
            "high_pps": self.high_pps,
            "resolution": self.resolution,
            "trials": [probe.record for probe in self.trials],
        }


def binary_search(trial: Callable[[float], Probe], high: float, resolution: float) -> SearchResult:
    """Search (0, high] for the zero-loss rate; trials are run at most log2(1/resolution) + 1 times."""
    if high <= 0 or not 0 < resolution < 1:
        raise ValueError(f"need high > 0 and 0 < resolution < 1, got {high}, {resolution}")
    result = SearchResult(0.0, 0.0, "loss", high, resolution)
    low, top, limit = 0.0, high, "generator"
    probe = trial(high)
    while True:
        result.trials.append(probe)
        if probe.passed:
            low = probe.target_pps
            if probe.offered_pps > result.zero_loss_pps:
                result.zero_loss_pps, result.target_pps = probe.offered_pps, probe.target_pps
        else:
            top, limit = probe.target_pps, probe.limited_by or "loss"
        if low >= high or top - low <= resolution * high:
            break
        probe = trial((low + top) / 2)
    result.limited_by = limit
    return result


def sweep_rates(
    high: float, points: int, knee: float = 0.0, knee_factors: Sequence[float] = ()
) -> list[float]:
    """Offered loads from low to `high`: `points` evenly spaced ones, plus `knee` times each of
    `knee_factors` (around the zero-loss rate, where the curves bend) when below `high`."""
    if points < 1 or high <= 0:
        raise ValueError(f"need points >= 1 and high > 0, got {points}, {high}")
    rates = {round(high * k / points) for k in range(1, points + 1)}
    rates |= {round(knee * f) for f in knee_factors if 0 < knee * f < high}
    return sorted(rates)
