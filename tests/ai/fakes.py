"""What the AI tests put around the module: tokens and intents in a fake service behind the real
API (tests/api), and fakes of the loop's reader, NetApp and recorder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from netapp.ai.client import SteerRecord
from netapp.ai.loop import AiLoop, LoopSettings
from netapp.ai.policy import Policy, PolicyConfig
from netapp.ai.reader import CpuSeries
from netapp.ai.weights import WeightPolicy
from netapp.api.auth import TokenEntry, TokensFile, token_hash, write_tokens_file
from netapp.intents.models import Intent
from netapp.service.contract import IntentRecord, Scope
from tests.api.fake_service import FakeIntentService

ADMIN_TOKEN = "ai-admin-token"
READER_TOKEN = "ai-reader-token"


def write_tokens(path: Path) -> Path:
    write_tokens_file(
        path,
        TokensFile(
            tokens=[
                TokenEntry(
                    name="ai", sha256=token_hash(ADMIN_TOKEN), tenant="operator", scopes=[Scope.ADMIN]
                ),
                TokenEntry(
                    name="reader", sha256=token_hash(READER_TOKEN), tenant="operator", scopes=[Scope.READ]
                ),
            ]
        ),
    )
    return path


def add(
    service: FakeIntentService,
    tenant: str,
    body: dict[str, Any],
    source: str = "native",
    slice_id: Optional[str] = None,
) -> None:
    """An intent as the store would hold it, owned by `tenant`."""
    now = datetime.now(timezone.utc)
    intent = Intent.model_validate(body)
    service.intents[(tenant, intent.id)] = IntentRecord(
        intent=intent, tenant=tenant, source=source, slice_id=slice_id, created_at=now, updated_at=now
    )


def steer(name: str, cpu: int, teid: int, **extra: Any) -> dict[str, Any]:
    return {"id": name, "match": {"teid": teid}, "action": {"type": "steer", "cpu": cpu}, **extra}


# --- around the loop ------------------------------------------------------------------------------

RAMP = (0.2, 0.3, 0.4, 0.5, 0.6)  # forecast three polls ahead: 0.9
CALM = (0.1,) * 5


def series(cpu: int, loads: tuple[float, ...], capacity: int = 1000, overloaded: bool = False) -> CpuSeries:
    return CpuSeries(cpu, tuple(range(len(loads))), loads, True, overloaded, capacity)


@dataclass
class FakeReader:
    """Series and rates as given; `error` raised instead when set."""

    cpus: dict[int, CpuSeries]
    rates: dict[tuple[str, str], float] = field(default_factory=dict)
    error: Exception | None = None
    rtts: dict[tuple[str, str, int], float] = field(default_factory=dict)

    def cpu_series(self, window_s: float) -> dict[int, CpuSeries]:
        if self.error is not None:
            raise self.error
        return self.cpus

    def intent_rates(self, window_s: float) -> dict[tuple[str, str], float]:
        return self.rates

    def path_rtts(self, window_s: float) -> dict[tuple[str, str, int], float]:
        return self.rtts


@dataclass
class FakeNetApp:
    """Records every call; moves raise `error` when set."""

    records: list[SteerRecord]
    calls: list[tuple] = field(default_factory=list)
    error: Exception | None = None
    sessions: list[dict] = field(default_factory=list)  # AtsssSession bodies

    def steer_intents(self) -> list[SteerRecord]:
        self.calls.append(("steer_intents",))
        return self.records

    def move_intent(self, record: SteerRecord, cpu: int) -> dict:
        self.calls.append(("move_intent", record.tenant, record.id, cpu))
        if self.error is not None:
            raise self.error
        return {}

    def set_overloaded(self, cpu: int, overloaded: bool) -> dict:
        self.calls.append(("set_overloaded", cpu, overloaded))
        return {}

    def atsss_sessions(self) -> list[dict]:
        self.calls.append(("atsss_sessions",))
        return self.sessions

    def set_weights(self, tenant: str, session: str, weights: dict[int, int]) -> dict:
        self.calls.append(("set_weights", tenant, session, weights))
        if self.error is not None:
            raise self.error
        return {}


@dataclass
class ListRecorder:
    """Keeps each step's (forecasts, decisions, time) and weight decisions."""

    steps: list[tuple] = field(default_factory=list)
    weights: list[tuple] = field(default_factory=list)

    def record(self, forecasts, decisions, time_ns) -> None:
        self.steps.append((list(forecasts), list(decisions), time_ns))

    def record_weights(self, decisions, time_ns) -> None:
        self.weights.append((list(decisions), time_ns))


def record(name: str, cpu: int, tenant: str = "operator") -> SteerRecord:
    return SteerRecord(tenant, {"id": name, "match": {}, "action": {"type": "steer", "cpu": cpu}})


def make_loop(
    reader: FakeReader, netapp: FakeNetApp, dry_run: bool = False, clock: Optional[Callable[[], float]] = None,
    weights: Optional[WeightPolicy] = None,
) -> tuple[AiLoop, ListRecorder]:
    """A loop over the fakes; its clock ticks one second per step unless `clock` is given."""
    recorder = ListRecorder()
    ticks = iter(range(1000))
    loop = AiLoop(
        reader,
        netapp,
        Policy(PolicyConfig(cooldown_s=10)),
        recorder,
        LoopSettings(interval_s=0.01, horizon=3, dry_run=dry_run),
        clock=clock or (lambda: float(next(ticks))),
        wall_clock_ns=lambda: 1234,
        weights=weights,
    )
    return loop, recorder


def ramp_on_cpu_0() -> tuple[FakeReader, FakeNetApp]:
    """CPU 0 ramping (forecast 0.9) with two flows, the smaller of which brings it below 0.6;
    CPU 1 calm with one."""
    reader = FakeReader(
        {0: series(0, RAMP), 1: series(1, CALM)},
        rates={("operator", "prio-0"): 350.0, ("operator", "prio-2"): 450.0},
    )
    return reader, FakeNetApp([record("prio-0", 0), record("prio-2", 0), record("prio-1", 1)])


# --- a site under steady rates, for the loop to run against ----------------------------------------


class SteadySite:
    """Intents at fixed packet rates on two or more CPUs of one capacity: the reader and the NetApp
    of a loop at once. Each poll() is a collector poll: every CPU's load from the intents steered
    to it then (0 while marked overloaded: its traffic overflows). Moves and marks take effect at
    once, so the next poll shows them; the clocks are the simulated time."""

    def __init__(self, rates: dict[str, float], placement: dict[str, int], capacity: int = 1000):
        self.rates, self.placement, self.capacity = rates, dict(placement), capacity
        self.cpus = sorted(set(placement.values()) | {0, 1})
        self.overloaded = dict.fromkeys(self.cpus, False)
        self.polls: list[tuple[int, dict[int, float]]] = []  # (time in ns, load per CPU)
        self.now_ns = 0
        self.moves: list[tuple[float, str, int, int]] = []  # (seconds, intent, from CPU, to CPU)
        self.marks: list[tuple[float, int, bool]] = []

    def poll(self, now_s: float) -> None:
        self.now_ns = int(now_s * 1e9)
        self.polls.append((self.now_ns, {cpu: self._load(cpu) for cpu in self.cpus}))

    def _load(self, cpu: int) -> float:
        if self.overloaded[cpu]:
            return 0.0
        return sum(rate for intent, rate in self.rates.items() if self.placement[intent] == cpu) / self.capacity

    # the reader's side
    def cpu_series(self, window_s: float) -> dict[int, CpuSeries]:
        polls = [(at, loads) for at, loads in self.polls if at > self.now_ns - window_s * 1e9]
        times = tuple(at for at, _ in polls)
        return {
            cpu: CpuSeries(cpu, times, tuple(loads[cpu] for _, loads in polls), True, self.overloaded[cpu],
                           self.capacity)
            for cpu in self.cpus
        }

    def intent_rates(self, window_s: float) -> dict[tuple[str, str], float]:
        return {("operator", intent): float(rate) for intent, rate in self.rates.items()}

    # the NetApp's side
    def steer_intents(self) -> list[SteerRecord]:
        return [record(intent, cpu) for intent, cpu in self.placement.items()]

    def move_intent(self, steered: SteerRecord, cpu: int) -> dict:
        self.moves.append((self.now_ns / 1e9, steered.id, self.placement[steered.id], cpu))
        self.placement[steered.id] = cpu
        return {}

    def set_overloaded(self, cpu: int, overloaded: bool) -> dict:
        self.marks.append((self.now_ns / 1e9, cpu, overloaded))
        self.overloaded[cpu] = overloaded
        return {}


def run_steady(site: SteadySite, interval_s: float, duration_s: float, cooldown_s: float = 10.0) -> AiLoop:
    """The loop stepping right after each of the site's polls for `duration_s` simulated seconds."""
    loop = AiLoop(
        site,
        site,
        Policy(PolicyConfig(cooldown_s=cooldown_s)),
        ListRecorder(),
        LoopSettings(interval_s=interval_s, horizon=3, window_s=30.0),
        clock=lambda: site.now_ns / 1e9,
        wall_clock_ns=lambda: site.now_ns + 1000,  # a microsecond after the poll
    )
    for step in range(int(duration_s / interval_s)):
        site.poll(step * interval_s)
        loop.step()
    return loop
