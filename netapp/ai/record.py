"""The loop, visible in InfluxDB next to the series it reads: each step's forecast per CPU
(`dpp_ai_forecast`) and each decision (`dpp_ai_decision`).

    dpp_ai_forecast,node=N,cpu=C   load, forecast (floats), horizon (polls), observations
    dpp_ai_decision,node=N,cpu=C,action=A
        forecast, load (floats), reason, outcome (strings); for a move: intent, tenant (strings)
        and target_cpu (integer); dry_run (boolean)

    dpp_ai_weight,node=N,tenant=T,session=S,path=P
        weight, previous (integers), rtt_us (float, for a path weighed), reason, outcome (strings),
        dry_run (boolean)

`cpu` is the CPU the decision is about (for a move: the one the flow leaves). A weight decision
is one point per path of the session. Writes are synchronous and few (one small batch per step); a
failed write is logged, never fatal.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Optional, Protocol

from influxdb_client import InfluxDBClient, Point
from influxdb_client.client.write_api import SYNCHRONOUS

from netapp.ai.forecast import Forecast
from netapp.ai.policy import CpuView, Decision
from netapp.ai.weights import WeightDecision

log = logging.getLogger("netapp.ai")

FORECAST_MEASUREMENT = "dpp_ai_forecast"
DECISION_MEASUREMENT = "dpp_ai_decision"
WEIGHT_MEASUREMENT = "dpp_ai_weight"


class Recorder(Protocol):
    """Where the loop reports a step: InfluxDB, or a test's list."""

    def record(
        self, forecasts: Sequence[tuple[CpuView, Forecast]], decisions: Sequence[Decision], time_ns: int
    ) -> None: ...

    def record_weights(self, decisions: Sequence[WeightDecision], time_ns: int) -> None: ...


def forecast_point(node: str, cpu: CpuView, forecast: Forecast, time_ns: int) -> Point:
    point = Point(FORECAST_MEASUREMENT).tag("node", node).tag("cpu", str(cpu.cpu))
    if not math.isnan(cpu.load):
        point = point.field("load", float(cpu.load))
    point = point.field("forecast", float(forecast.value)).field("horizon", forecast.horizon)
    return point.field("observations", forecast.observations).time(time_ns)


def decision_point(node: str, decision: Decision, dry_run: bool, time_ns: int) -> Point:
    point = (
        Point(DECISION_MEASUREMENT)
        .tag("node", node)
        .tag("cpu", str(decision.cpu))
        .tag("action", decision.action)
        .field("forecast", float(decision.forecast))
        .field("reason", decision.reason)
        .field("outcome", decision.outcome)
        .field("dry_run", dry_run)
    )
    if not math.isnan(decision.load):
        point = point.field("load", float(decision.load))
    if decision.intent is not None:
        point = point.field("intent", decision.intent).field("tenant", decision.tenant or "")
    if decision.target_cpu is not None:
        point = point.field("target_cpu", decision.target_cpu)
    return point.time(time_ns)


def weight_points(node: str, decision: WeightDecision, dry_run: bool, time_ns: int) -> list[Point]:
    points = []
    for index, (weight, previous, rtt) in enumerate(zip(decision.weights, decision.previous, decision.rtts_us)):
        point = (
            Point(WEIGHT_MEASUREMENT)
            .tag("node", node).tag("tenant", decision.tenant).tag("session", decision.session).tag("path", str(index))
            .field("weight", weight).field("previous", previous)
            .field("reason", decision.reason).field("outcome", decision.outcome).field("dry_run", dry_run)
        )
        if rtt is not None:
            point = point.field("rtt_us", float(rtt))
        points.append(point.time(time_ns))
    return points


class InfluxRecorder:
    """Writes each step's points into one bucket."""

    def __init__(self, client: InfluxDBClient, bucket: str, node: str, *, dry_run: bool = False):
        self.bucket = bucket
        self.node = node
        self.dry_run = dry_run
        self.failures = 0
        self._org: Optional[str] = client.org
        self._write_api = client.write_api(write_options=SYNCHRONOUS)

    def record(
        self, forecasts: Sequence[tuple[CpuView, Forecast]], decisions: Sequence[Decision], time_ns: int
    ) -> None:
        points = [forecast_point(self.node, cpu, forecast, time_ns) for cpu, forecast in forecasts]
        points += [decision_point(self.node, decision, self.dry_run, time_ns) for decision in decisions]
        self._write(points)

    def record_weights(self, decisions: Sequence[WeightDecision], time_ns: int) -> None:
        self._write([point for decision in decisions
                     for point in weight_points(self.node, decision, self.dry_run, time_ns)])

    def _write(self, points: list[Point]) -> None:
        if not points:
            return
        try:
            self._write_api.write(bucket=self.bucket, org=self._org, record=points)
        except Exception as exc:  # InfluxDB down or slow: the loop must go on acting
            self.failures += 1
            log.warning(
                "ai: could not write %d points to InfluxDB: %s", len(points), str(exc).splitlines()[0]
            )
