"""The closed loop: every interval, read each CPU's load series from InfluxDB, forecast it a few
polls ahead (Holt), let the policy decide, carry the decisions out through the NetApp's REST API
(or only report them, in dry-run mode), and write forecasts and decisions back to InfluxDB. With a
weight policy (netapp.ai.weights), the same step weighs the ATSSS sessions' paths by their RTTs.

    InfluxDB --dpp_cpu--> forecast --> policy --> REST API --> data plane --> collector --+
       ^     --dpp_atsss_path--> weight policy --'                                        |
       +------ dpp_ai_forecast, dpp_ai_decision, dpp_ai_weight    dpp_cpu, dpp_intent,    |
                                                                  dpp_atsss_path <--------+

A step that fails (InfluxDB or the API unreachable) is logged and counted; the next one tries
again. Run it at the collector's interval: the policy's confirmation counts steps, not seconds.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional, Protocol

from netapp.ai.client import ApiError, SteerRecord
from netapp.ai.forecast import Forecast, Holt
from netapp.ai.policy import CLEAR_OVERLOADED, MARK_OVERLOADED, MOVE, CpuView, Decision, Policy, SteerIntent
from netapp.ai.reader import CpuSeries, ReadError
from netapp.ai.record import Recorder
from netapp.ai.weights import WEIGHTED, SessionState, WeightDecision, WeightPolicy

log = logging.getLogger("netapp.ai")

RECENT_DECISIONS = 50  # kept for whoever shows the loop (the demo's live view)


class SeriesReader(Protocol):
    """InfluxReader, or a test's fake."""

    def cpu_series(self, window_s: float) -> dict[int, CpuSeries]: ...

    def intent_rates(self, window_s: float) -> dict[tuple[str, str], float]: ...

    def path_rtts(self, window_s: float) -> dict[tuple[str, str, int], float]: ...


class NetApp(Protocol):
    """NetAppClient, or a test's fake."""

    def steer_intents(self) -> list[SteerRecord]: ...

    def move_intent(self, record: SteerRecord, cpu: int) -> object: ...

    def set_overloaded(self, cpu: int, overloaded: bool) -> object: ...

    def atsss_sessions(self) -> list[dict]: ...

    def set_weights(self, tenant: str, session: str, weights: dict[int, int]) -> object: ...


@dataclass(frozen=True)
class LoopSettings:
    interval_s: float = 1.0  # one step per collector poll
    horizon: int = 3  # how many polls ahead the forecast looks
    window_s: float = 30.0  # the history a forecast starts from
    min_points: int = 3  # loads a CPU needs before its forecast counts
    dry_run: bool = False  # decide and record, change nothing

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.window_s <= 0:
            raise ValueError("interval_s and window_s must be > 0")
        if self.horizon < 1 or self.min_points < 2:
            raise ValueError("horizon must be >= 1 and min_points >= 2 (a trend needs two points)")


@dataclass(frozen=True)
class LoopStats:
    steps: int = 0
    failed_steps: int = 0
    last_error: str = ""


def forecast_cpu(
    series: CpuSeries, model: Holt, horizon: int, min_points: int, changed_ns: Optional[int] = None
) -> tuple[CpuView, Optional[Forecast]]:
    """The CPU as the policy sees it; its forecast is NaN (and None returned) with too few loads.

    `changed_ns`: when a flow last moved to or from the CPU, or its mark changed (wall clock). Only
    the loads measured wholly after it count, those whose poll followed one taken after the change:
    across the change the series steps, and Holt would read the step as a ramp that goes on (the
    CPU that took a flow forecast above its load for many polls, the one that gave it below).
    """
    loads = [load for load in _loads_since(series, changed_ns) if not math.isnan(load)]
    forecast = model.forecast(loads, horizon) if len(loads) >= min_points else None
    # A falling trend can project below zero; no CPU runs a negative load.
    value = max(0.0, forecast.value) if forecast is not None else math.nan
    view = CpuView(
        series.cpu, series.enabled, series.overloaded, series.capacity_pps, series.last_load, value
    )
    return view, forecast


def _loads_since(series: CpuSeries, changed_ns: Optional[int]) -> Sequence[float]:
    """The loads of polls whose previous poll was at or after `changed_ns` (a load covers the time
    since the poll before it); all of them when there was no change."""
    if changed_ns is None:
        return series.loads
    return [load for previous_ns, load in zip(series.times_ns, series.loads[1:]) if previous_ns >= changed_ns]


class _Once:
    """Calls `read` the first time it is asked, then answers from memory (one step's intents)."""

    def __init__(self, read: Callable[[], Sequence[SteerIntent]]):
        self._read = read
        self._value: Optional[Sequence[SteerIntent]] = None

    def __call__(self) -> Sequence[SteerIntent]:
        if self._value is None:
            self._value = self._read()
        return self._value


class AiLoop:
    """Reads, forecasts, decides, acts, records: `step()` once, `run()` until stopped, or
    `start()`/`stop()` on a thread of its own."""

    def __init__(
        self,
        reader: SeriesReader,
        netapp: NetApp,
        policy: Policy,
        recorder: Recorder,
        settings: LoopSettings = LoopSettings(),
        model: Holt = Holt(),
        clock: Callable[[], float] = time.monotonic,
        wall_clock_ns: Callable[[], int] = time.time_ns,
        on_decision: Optional[Callable[[Decision], None]] = None,
        weights: Optional[WeightPolicy] = None,
    ):
        self.reader = reader
        self.netapp = netapp
        self.policy = policy
        self.recorder = recorder
        self.settings = settings
        self.model = model
        self.stats = LoopStats()
        # For display, read from other threads: replaced whole, or guarded by the lock.
        self.views: dict[int, CpuView] = {}  # the last step's
        self.marked: frozenset[int] = frozenset()  # CPUs the policy marked overloaded
        self._recent: deque[tuple[int, Decision]] = deque(maxlen=RECENT_DECISIONS)
        self._recent_lock = threading.Lock()
        self._clock = clock
        self._wall_clock_ns = wall_clock_ns
        self._on_decision = on_decision
        self.weights = weights
        self.weight_decisions: list[WeightDecision] = []  # the last step's, each with its outcome
        self._records: dict[tuple[str, str], SteerRecord] = {}
        self._changed_ns: dict[int, int] = {}  # CPU -> when a decision last changed it (wall clock)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # --- one step --------------------------------------------------------------------------------

    def step(self) -> list[Decision]:
        """One turn of the loop; returns what was decided, each with its outcome."""
        time_ns = self._wall_clock_ns()
        self._forget_changes_before(time_ns - int(self.settings.window_s * 1e9))
        settings = self.settings
        forecasts = [
            forecast_cpu(series, self.model, settings.horizon, settings.min_points, self._changed_ns.get(cpu))
            for cpu, series in self.reader.cpu_series(settings.window_s).items()
        ]
        cpus = [view for view, _ in forecasts]
        self.views = {view.cpu: view for view in cpus}
        self._records = {}
        decisions = self.policy.decide(cpus, _Once(self._steer_intents), self._clock())
        self.marked = self.policy.marked
        done = [self._carry_out(decision) for decision in decisions]
        self._remember_changes(done)
        self.recorder.record([(view, f) for view, f in forecasts if f is not None], done, time_ns)
        with self._recent_lock:
            self._recent.extend((time_ns, decision) for decision in done)
        for decision in done:
            if self._on_decision is not None:
                self._on_decision(decision)
        if self.weights is not None:
            self.weight_decisions = self._reweigh_paths(self.weights, time_ns)
        return done

    def _reweigh_paths(self, policy: WeightPolicy, time_ns: int) -> list[WeightDecision]:
        """The weight policy's turn: the weighted sessions' paths by their RTTs in the window."""
        sessions = [SessionState.from_api(body) for body in self.netapp.atsss_sessions()]
        if not any(session.mode == WEIGHTED for session in sessions):
            return []  # no session reads weights: nothing to ask InfluxDB
        decided = policy.decide(sessions, self.reader.path_rtts(self.settings.window_s))
        done = [self._set_weights(decision) for decision in decided]
        self.recorder.record_weights(done, time_ns)
        return done

    def _set_weights(self, decision: WeightDecision) -> WeightDecision:
        if self.settings.dry_run:
            return dataclasses.replace(decision, outcome="dry-run")
        try:
            self.netapp.set_weights(decision.tenant, decision.session, decision.changed())
        except ApiError as exc:
            log.warning("ai: weights of %s/%s failed: %s", decision.tenant, decision.session, exc)
            return dataclasses.replace(decision, outcome=f"failed: {exc}")
        log.info("ai: applied: weights of %s/%s (%s)", decision.tenant, decision.session, decision.reason)
        return dataclasses.replace(decision, outcome="applied")

    def _remember_changes(self, done: Sequence[Decision]) -> None:
        """When the CPUs of the applied decisions changed: their forecasts start over from there."""
        applied = [decision for decision in done if decision.outcome == "applied"]
        if not applied:
            return
        changed_ns = self._wall_clock_ns()  # after the API answered: the maps hold the change
        for decision in applied:
            for cpu in (decision.cpu, decision.target_cpu):
                if cpu is not None:
                    self._changed_ns[cpu] = changed_ns

    def _forget_changes_before(self, start_ns: int) -> None:
        """Changes older than the window: every load in it came after them."""
        self._changed_ns = {cpu: at for cpu, at in self._changed_ns.items() if at >= start_ns}

    def decisions(self) -> list[tuple[int, Decision]]:
        """The latest decisions (at most RECENT_DECISIONS), oldest first: (time in ns, decision)."""
        with self._recent_lock:
            return list(self._recent)

    def _steer_intents(self) -> list[SteerIntent]:
        """The priority steer intents with their last rates (0 when the collector has none)."""
        records = self.netapp.steer_intents()
        rates = self.reader.intent_rates(max(3 * self.settings.interval_s, 2.0))
        self._records = {(record.tenant, record.id): record for record in records}
        return [
            SteerIntent(record.tenant, record.id, record.cpu, rates.get((record.tenant, record.id), 0.0))
            for record in records
        ]

    def _carry_out(self, decision: Decision) -> Decision:
        if self.settings.dry_run:
            return dataclasses.replace(decision, outcome="dry-run")
        try:
            self._apply(decision)
        except ApiError as exc:
            log.warning("ai: %s on CPU %d failed: %s", decision.action, decision.cpu, exc)
            return dataclasses.replace(decision, outcome=f"failed: {exc}")
        log.info("ai: applied: %s", describe(decision))
        return dataclasses.replace(decision, outcome="applied")

    def _apply(self, decision: Decision) -> None:
        if decision.action == MOVE:
            assert (
                decision.tenant is not None
                and decision.intent is not None
                and decision.target_cpu is not None
            )
            self.netapp.move_intent(self._records[(decision.tenant, decision.intent)], decision.target_cpu)
        elif decision.action == MARK_OVERLOADED:
            self.netapp.set_overloaded(decision.cpu, True)
        elif decision.action == CLEAR_OVERLOADED:
            self.netapp.set_overloaded(decision.cpu, False)

    # --- running ---------------------------------------------------------------------------------

    def run(self) -> None:
        """Step every interval on a fixed grid until stop(); a failed step is logged and counted."""
        next_tick = time.monotonic()
        while not self._stop.is_set():
            self._guarded_step()
            next_tick += self.settings.interval_s
            next_tick = max(next_tick, time.monotonic())  # a slow step: skip the ticks it overran
            self._stop.wait(max(0.0, next_tick - time.monotonic()))

    def _guarded_step(self) -> None:
        try:
            self.step()
        except (ReadError, ApiError) as exc:
            self._failed(str(exc))
        except Exception as exc:  # a reference loop keeps going; the traceback says what broke
            log.exception("ai: step failed")
            self._failed(f"{exc.__class__.__name__}: {exc}")
        else:
            self.stats = dataclasses.replace(self.stats, steps=self.stats.steps + 1)

    def _failed(self, error: str) -> None:
        if error != self.stats.last_error:
            log.warning("ai: step failed: %s", error)
        self.stats = LoopStats(self.stats.steps + 1, self.stats.failed_steps + 1, error)

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self.run, name="ai-loop", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None


def describe(decision: Decision) -> str:
    """One line for people: what was decided about which CPU, and why."""
    if decision.action == MOVE:
        what = (
            f"move {decision.tenant}/{decision.intent} from CPU {decision.cpu} to CPU {decision.target_cpu}"
        )
    elif decision.action == MARK_OVERLOADED:
        what = f"mark CPU {decision.cpu} overloaded"
    else:
        what = f"clear CPU {decision.cpu}'s overload mark"
    return f"{what} ({decision.reason})"
