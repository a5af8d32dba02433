"""The ATSSS weight policy: the paths of each weighted session weighted inversely to their RTT, so
that a path twice as slow is given half the packets, and the UE's reordering buffer waits less for
the slow path's packets.

No I/O here: the loop hands in the sessions as the REST API has them and each path's RTT as the
telemetry measured it (the mean of `dpp_atsss_path` `rtt_us` over the loop's window, InfluxDB), and
carries out what comes back (PATCH /api/v1/atsss/sessions/{name}).

Which sessions: those whose scheduler runs weighted mode (`effective_mode`); the other modes do not
read the weights. Which paths: those up and not weighted 0 (an operator's "never pick it"); a path
down keeps its weight, as does every path of a session one of whose paths is up with no RTT known
yet (nothing to compare it with), or of a session with fewer than two such paths.

The weights are 1/RTT scaled to sum to `scale` over the paths weighed (each rounded, at least 1). Against
flapping, a session is changed only when some path's share of the weighed paths' packets would
move by `tolerance` or more: RTTs that wobble a little leave it alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

WEIGHTED = "weighted"
MAX_WEIGHT = 65535  # the data path's 16-bit weights

PathRtts = Mapping[tuple[str, str, int], float]  # (tenant, session, path index) -> RTT in µs


@dataclass(frozen=True)
class WeightConfig:
    scale: int = 100  # what the weights of a session's weighed paths sum to
    tolerance: float = 0.05  # the least change of a path's share worth a change of the session

    def __post_init__(self) -> None:
        if not 2 <= self.scale <= MAX_WEIGHT:
            raise ValueError(f"scale must be within 2..{MAX_WEIGHT} (the data path's weights), got {self.scale}")
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must satisfy 0 < tolerance < 1 (a share of packets), got {self.tolerance}")


@dataclass(frozen=True)
class PathState:
    """A path as the REST API has it: its position, whether it is up, its weight."""

    index: int
    up: bool
    weight: int


@dataclass(frozen=True)
class SessionState:
    """A session as the REST API has it (admins see every tenant's)."""

    tenant: str
    name: str
    mode: str  # the mode its scheduler runs (effective_mode)
    paths: tuple[PathState, ...]

    @classmethod
    def from_api(cls, body: Mapping[str, Any]) -> "SessionState":
        """From an AtsssSession of GET /api/v1/atsss/sessions."""
        paths = tuple(PathState(index, bool(path["up"]), int(path["weight"]))
                      for index, path in enumerate(body["paths"]))
        return cls(str(body["tenant"]), str(body["name"]), str(body["effective_mode"]), paths)


@dataclass(frozen=True)
class WeightDecision:
    """New weights for a session's paths, by position, and why; `outcome` is filled in by whoever
    carries it out. `rtts_us`: the RTT each path was weighed by (None: a path not weighed)."""

    tenant: str
    session: str
    weights: tuple[int, ...]
    previous: tuple[int, ...]
    rtts_us: tuple[Optional[float], ...]
    reason: str
    outcome: str = "proposed"

    def changed(self) -> dict[int, int]:
        """path index -> its new weight, for the paths whose weight changes."""
        return {index: new for index, (new, old) in enumerate(zip(self.weights, self.previous)) if new != old}


class WeightPolicy:
    """Decides, one call per loop step; it keeps no state (the sessions' weights are the memory)."""

    def __init__(self, config: WeightConfig = WeightConfig()):
        self.config = config

    def decide(self, sessions: Sequence[SessionState], rtts: PathRtts) -> list[WeightDecision]:
        """New weights for the weighted sessions whose split by RTT differs enough from their own."""
        decisions = []
        for session in sessions:
            decision = self._reweigh(session, rtts) if session.mode == WEIGHTED else None
            if decision is not None:
                decisions.append(decision)
        return decisions

    def _reweigh(self, session: SessionState, rtts: PathRtts) -> Optional[WeightDecision]:
        weighed = [path for path in session.paths if path.up and path.weight > 0]
        measured = {path.index: rtts.get((session.tenant, session.name, path.index), 0.0) for path in weighed}
        if len(weighed) < 2 or not all(rtt > 0 for rtt in measured.values()):
            return None
        inverse = {index: 1.0 / rtt for index, rtt in measured.items()}
        total = sum(inverse.values())
        proposed = {index: max(1, round(self.config.scale * value / total)) for index, value in inverse.items()}
        previous = tuple(path.weight for path in session.paths)
        moved = _largest_share_change({path.index: path.weight for path in weighed}, proposed)
        if moved < self.config.tolerance:
            return None
        weights = tuple(proposed.get(path.index, path.weight) for path in session.paths)
        rtts_us = tuple(measured.get(path.index) for path in session.paths)
        described = ", ".join(f"path {index} {rtt / 1000:.1f} ms" for index, rtt in sorted(measured.items()))
        reason = (f"RTT {described}: weights {':'.join(map(str, weights))} inversely to them "
                  f"(a share moves by {moved:.2f} >= {self.config.tolerance})")
        return WeightDecision(session.tenant, session.name, weights, previous, rtts_us, reason)


def _largest_share_change(before: Mapping[int, int], after: Mapping[int, int]) -> float:
    """The largest change of a path's share of the packets between two weightings of the same paths."""
    old_total, new_total = sum(before.values()), sum(after.values())
    return max(abs(after[index] / new_total - before[index] / old_total) for index in before)
