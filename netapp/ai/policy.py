"""What to do when a CPU will be overloaded: move one of its priority flows to the least-loaded
CPU that can take it, or, when none can, mark it overloaded (its steered traffic then overflows to
the alternative node). A CPU this module marked is cleared again once the flows steered to it ask
for little enough.

No I/O here: the loop hands in what it read and carries out what comes back.

Which flow moves: one that carries packets (an intent at 0 pkt/s, or with no rate in the last
polls, relieves nothing and is never chosen); the smallest that brings the hot CPU below `low`,
else the largest that fits.

Against flapping:
- hysteresis: a CPU is relieved at `high`, preferably down to below `low`; a CPU takes a flow only
  while it stays below `low` with it, so it ends the whole band short of `high`: while the rates
  hold, it is never relieved of that flow, and the flow does not come back;
- confirmation: the forecast must reach `high` on `confirm` decisions in a row;
- cool-down: a CPU that gave or took a flow, or was marked or cleared, is left alone for
  `cooldown_s`, so a hot CPU gives at most one flow per cool-down; its forecast then starts over
  from the first poll wholly after the change (netapp.ai.loop): Holt would read the step the
  change made in its series as a ramp going on, for as long as the trend takes to fade.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Optional

MOVE = "move"
MARK_OVERLOADED = "mark_overloaded"
CLEAR_OVERLOADED = "clear_overloaded"
Action = Literal["move", "mark_overloaded", "clear_overloaded"]


@dataclass(frozen=True)
class PolicyConfig:
    high: float = 0.8  # forecast load (packets_rate / capacity_pps) at which a CPU is relieved
    low: float = 0.6  # a CPU takes a flow only while it stays below this; a marked CPU is cleared below it
    confirm: int = 2  # decisions in a row the forecast must reach `high`
    cooldown_s: float = 10.0  # how long a CPU that changed is left alone

    def __post_init__(self) -> None:
        if not 0 < self.low < self.high:
            raise ValueError(f"thresholds must satisfy 0 < low < high (got low {self.low}, high {self.high})")
        if self.confirm < 1:
            raise ValueError(f"confirm must be >= 1, got {self.confirm}")
        if self.cooldown_s < 0:
            raise ValueError(f"cooldown_s must be >= 0, got {self.cooldown_s}")


@dataclass(frozen=True)
class CpuView:
    """A CPU as the policy sees it: its state, its last load and its forecast (NaN: unknown)."""

    cpu: int
    enabled: bool
    overloaded: bool
    capacity_pps: int
    load: float
    forecast: float

    @property
    def metered(self) -> bool:
        """Whether its load means anything: a capacity and a forecast."""
        return self.capacity_pps > 0 and not math.isnan(self.forecast)

    def share(self, rate_pps: float) -> float:
        """The load `rate_pps` adds to this CPU."""
        return rate_pps / self.capacity_pps


@dataclass(frozen=True)
class SteerIntent:
    """A priority intent that steers to a CPU, with its last packet rate (0 when unknown)."""

    tenant: str
    id: str
    cpu: int
    rate_pps: float


@dataclass(frozen=True)
class Decision:
    """One thing to do, and why. `cpu` is the CPU it is about (a move's source); `load` and
    `forecast` are its last load and forecast, except for clear_overloaded, where both are what
    its flows ask for (their rates over its capacity: its own load is nil while marked).
    `outcome` is filled in by whoever carries it out."""

    action: Action
    cpu: int
    load: float
    forecast: float
    reason: str
    target_cpu: Optional[int] = None
    intent: Optional[str] = None
    tenant: Optional[str] = None
    outcome: str = "proposed"


class Policy:
    """Decides, one call per loop step; remembers streaks, cool-downs and its own marks."""

    def __init__(self, config: PolicyConfig = PolicyConfig()):
        self.config = config
        self._streaks: dict[int, int] = {}
        self._changed_at: dict[int, float] = {}
        self._marked: set[int] = set()

    @property
    def marked(self) -> frozenset[int]:
        """CPUs this policy marked overloaded and has not cleared yet."""
        return frozenset(self._marked)

    def decide(
        self, cpus: Sequence[CpuView], intents: Callable[[], Sequence[SteerIntent]], now: float
    ) -> list[Decision]:
        """What to do now (`now`: a monotonic clock in seconds). `intents` is called only when a
        decision needs the flows: most steps have nothing to decide and read no intent."""
        self._forget_marks_cleared_by_others(cpus, now)
        decisions = []
        for hot in self._confirmed_hot(cpus):
            if self._cooling(hot.cpu, now):
                continue
            decisions.append(self._remember(self._relieve(hot, cpus, intents, now), now))
        for cpu in cpus:
            decision = self._recovery(cpu, intents, now)
            if decision is not None:
                decisions.append(self._remember(decision, now))
        return decisions

    # --- which CPUs ------------------------------------------------------------------------------

    def _confirmed_hot(self, cpus: Iterable[CpuView]) -> list[CpuView]:
        """CPUs forecast at `high` or above for `confirm` decisions in a row, hottest first."""
        hot = []
        for cpu in cpus:
            if cpu.enabled and not cpu.overloaded and cpu.metered and cpu.forecast >= self.config.high:
                self._streaks[cpu.cpu] = self._streaks.get(cpu.cpu, 0) + 1
            else:
                self._streaks.pop(cpu.cpu, None)
            if self._streaks.get(cpu.cpu, 0) >= self.config.confirm:
                hot.append(cpu)
        return sorted(hot, key=lambda cpu: (-cpu.forecast, cpu.cpu))

    def _targets(self, hot: CpuView, cpus: Iterable[CpuView], now: float) -> list[CpuView]:
        """CPUs that may take a flow from `hot`, least loaded first."""
        usable = [
            cpu
            for cpu in cpus
            if cpu.cpu != hot.cpu
            and cpu.enabled
            and not cpu.overloaded
            and cpu.metered
            and cpu.forecast < self.config.low
            and not self._cooling(cpu.cpu, now)
        ]
        return sorted(usable, key=lambda cpu: (cpu.forecast, cpu.cpu))

    def _cooling(self, cpu: int, now: float) -> bool:
        changed = self._changed_at.get(cpu)
        return changed is not None and now - changed < self.config.cooldown_s

    # --- what to do ------------------------------------------------------------------------------

    def _relieve(
        self, hot: CpuView, cpus: Sequence[CpuView], intents: Callable[[], Sequence[SteerIntent]], now: float
    ) -> Decision:
        """Move a flow to the least-loaded CPU that can take one; else mark the CPU overloaded."""
        steered = [intent for intent in intents() if intent.cpu == hot.cpu]
        # A flow with no packets relieves nothing: moving it would only spend the cool-down.
        movable = [intent for intent in steered if intent.rate_pps > 0]
        targets = self._targets(hot, cpus, now)
        intent = self._flow_to_move(movable, hot, targets[0]) if targets else None
        if intent is not None:
            target = targets[0]
            return Decision(
                MOVE,
                hot.cpu,
                hot.load,
                hot.forecast,
                f"forecast {hot.forecast:.2f} >= {self.config.high}; CPU {target.cpu} at {target.forecast:.2f} "
                f"takes {intent.rate_pps:.0f} pkt/s (+{target.share(intent.rate_pps):.2f})",
                target_cpu=target.cpu,
                intent=intent.id,
                tenant=intent.tenant,
            )
        if not steered:
            why = "it steers no priority flow that could move"
        elif not movable:
            count = len(steered)
            why = f"none of its {count} priority flows carries packets (moving one relieves nothing)"
        elif not targets:
            why = f"no other CPU is forecast below {self.config.low}"
        else:
            why = f"none of its {len(movable)} priority flows with packets fits on CPU {targets[0].cpu}"
        return Decision(
            MARK_OVERLOADED,
            hot.cpu,
            hot.load,
            hot.forecast,
            f"forecast {hot.forecast:.2f} >= {self.config.high} and {why}",
        )

    def _flow_to_move(
        self, movable: Sequence[SteerIntent], hot: CpuView, target: CpuView
    ) -> Optional[SteerIntent]:
        """The smallest flow whose move brings `hot` below `low`, not merely under `high`, so that
        a load still rising does not cross again at once; failing that, the largest one that
        fits. A flow fits when `target` stays below `low` with it: a CPU that took a flow is then
        the whole band short of `high`, so that, while the rates hold, it is never relieved of
        it (the flow does not come back)."""
        fitting = [i for i in movable if target.forecast + target.share(i.rate_pps) < self.config.low]
        relieving = [i for i in fitting if hot.forecast - hot.share(i.rate_pps) < self.config.low]
        if relieving:
            return min(relieving, key=lambda i: (i.rate_pps, i.tenant, i.id))
        if fitting:
            return max(fitting, key=lambda i: (i.rate_pps, i.tenant, i.id))
        return None

    def _recovery(
        self, cpu: CpuView, intents: Callable[[], Sequence[SteerIntent]], now: float
    ) -> Optional[Decision]:
        """Clear a mark of ours once the flows steered to the CPU would load it below `low`."""
        if cpu.cpu not in self._marked or not cpu.overloaded or cpu.capacity_pps <= 0:
            return None
        if self._cooling(cpu.cpu, now):
            return None
        demand = cpu.share(sum(intent.rate_pps for intent in intents() if intent.cpu == cpu.cpu))
        if demand >= self.config.low:
            return None
        return Decision(
            CLEAR_OVERLOADED,
            cpu.cpu,
            demand,
            demand,
            f"its flows ask for {demand:.2f} of its capacity, below {self.config.low}",
        )

    # --- memory ----------------------------------------------------------------------------------

    def _remember(self, decision: Decision, now: float) -> Decision:
        for cpu in (decision.cpu, decision.target_cpu):
            if cpu is not None:
                self._changed_at[cpu] = now
                self._streaks.pop(cpu, None)
        if decision.action == MARK_OVERLOADED:
            self._marked.add(decision.cpu)
        elif decision.action == CLEAR_OVERLOADED:
            self._marked.discard(decision.cpu)
        return decision

    def _forget_marks_cleared_by_others(self, cpus: Iterable[CpuView], now: float) -> None:
        """A mark of ours that is gone once the CPU's series had time to show it was cleared by
        someone else (an operator): it is theirs to manage now."""
        for cpu in cpus:
            if cpu.cpu in self._marked and not cpu.overloaded and not self._cooling(cpu.cpu, now):
                self._marked.discard(cpu.cpu)
