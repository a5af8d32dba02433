"""The AI module's closed loop on an emulated edge site, end to end.

`netapp serve` (a child process, as deployed) runs the pipeline on the node's n3 and writes its
telemetry into a real InfluxDB. Two priority flows steered to CPU 0 ramp up from the RAN side,
while CPU 1 carries one quiet flow; both CPUs have the same capacity_pps. The AI module (netapp.ai,
in this process) reads the load series back with Flux, forecasts CPU 0 crossing the threshold and
moves one of its flows to CPU 1 through the REST API. Then:

- the API holds the moved intent on CPU 1, the other still on CPU 0;
- the per-CPU steer counters show it: from the move on, CPU 1 takes the moved flow's frames and
  CPU 0 only those of the flow that stayed;
- InfluxDB holds the loop: the rising dpp_cpu load of CPU 0, the decision (dpp_ai_decision), the
  forecasts (dpp_ai_forecast), and CPU 1's load rising after the move.

About the meter: a CPU with capacity_pps takes at most max(1, capacity x 1 ms) frames per 1 ms
window, the rest overflows to the alternative node. With the capacities here that is one frame per
millisecond, so the generator spaces every frame at least 1.2 ms from the previous one: the
load the collector reports is then the load offered, not what bursts left of it (the demo's
generator, netapp.testbed.demo.PacedTraffic, does the same).

Needs root, libdpp and influxd (skipped outside CI, a failure under CI) and two CPUs.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

import httpx
import pytest
from influxdb_client import InfluxDBClient

from netapp.ai.client import NetAppClient
from netapp.ai.loop import AiLoop, LoopSettings
from netapp.ai.policy import MOVE, Decision, Policy, PolicyConfig
from netapp.ai.reader import InfluxReader
from netapp.ai.record import InfluxRecorder
from netapp.telemetry.influxd import LocalInfluxd, bucket
from netapp.testbed import scenario
from netapp.testbed.demo import PacedTraffic
from netapp.testbed.topology import EdgeSite
from tests.utils.influxd import require_influxd
from tests.utils.kernel import edge_site_with_alternative
from tests.utils.maps import pinned_instance
from tests.utils.serve import ServeProcess, free_port, write_node_settings

CPUS = 2
NODE = "ai-edge"
DATABASE = "dpp"
CAPACITY_PPS = 250  # per CPU: a meter budget of one frame per millisecond
TELEMETRY_INTERVAL_S = 0.5
TELEMETRY_INTERVAL_NS = int(TELEMETRY_INTERVAL_S * 1e9)
RAMP = (scenario.Flow(0), scenario.Flow(2))  # both steered to CPU 0 (flow index % 2)
QUIET = scenario.Flow(1)  # steered to CPU 1
# Per ramping flow. The ramp levels off at a CPU 0 load of 0.76, under the threshold, while the
# smoothed trend still carries the forecast over it for a few polls: the loop then decides while the
# load is below the threshold even when a loaded machine delays its polls by seconds (a ramp that kept
# rising made the test a race between the loop's lag and the ramp).
RAMP_START_PPS, RAMP_SLOPE_PPS, RAMP_TOP_PPS = 40.0, 15.0, 95.0
QUIET_PPS = 25.0
DECISION_TIMEOUT_S = 15.0
AFTER_MOVE_S = 2.5  # traffic goes on at least this long after the move (polls of the moved load)
AFTER_MOVE_FRAMES = 300  # and until each ramping flow sent this many since (a loaded machine sends slower)
DEADLINE_S = 60.0  # for each wait below; only a failure waits it out
POLICY = PolicyConfig(high=0.8, low=0.6, confirm=2, cooldown_s=60.0)  # one decision in this test


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
def site() -> Iterator[EdgeSite]:
    require_influxd()
    if (os.cpu_count() or 1) < CPUS:
        pytest.skip(f"needs {CPUS} CPUs to move a flow between")
    with edge_site_with_alternative() as edge:  # overflow is forwarded to the alternative node
        yield edge


@pytest.fixture
def instance(site: EdgeSite) -> Iterator[str]:
    """A pinned instance of this test only; its pins and links go whatever happened."""
    with pinned_instance("ai", site.ns("node")) as name:
        yield name


@pytest.fixture
def influxd(tmp_path: Path) -> Iterator[LocalInfluxd]:
    with LocalInfluxd(tmp_path / "influxd") as server:
        server.create_database(DATABASE)
        yield server


@pytest.fixture
def serve(
    site: EdgeSite, instance: str, influxd: LocalInfluxd, tmp_path: Path
) -> Iterator[tuple[ServeProcess, str]]:
    """`netapp serve` on the site with telemetry into `influxd`, started; (process, admin token)."""
    config, token = write_node_settings(
        tmp_path,
        instance,
        site.ns("node"),
        [site.n3.ifname],
        "operator",
        max_rules=1024,
        telemetry={
            "interval_s": TELEMETRY_INTERVAL_S,
            "node": NODE,
            "influxdb": {
                "url": influxd.url,
                "token": "netapp:unused",
                "org": "-",
                "bucket": bucket(DATABASE),
                "flush_interval_ms": 100,
            },
        },
    )
    process = ServeProcess(config, free_port(), tmp_path)
    try:
        process.start()
        yield process, token
    finally:
        process.stop()


def configure(api: httpx.Client, site: EdgeSite) -> None:
    """The alternative node, two CPUs of equal capacity, three priority intents."""
    document = scenario.document(site, CPUS)
    for group in document["alternatives"]:
        api.put(f"/api/v1/alternatives/{group['id']}", json=group).raise_for_status()
    for cpu in range(CPUS):
        api.put(
            f"/api/v1/dataplane/cpus/{cpu}", json={"cpu": cpu, "capacity_pps": CAPACITY_PPS}
        ).raise_for_status()
    for flow in (*RAMP, QUIET):
        response = api.post("/api/v1/intents", json=scenario.priority_intent(site, flow, CPUS))
        assert response.status_code == 201, response.text


# --- traffic -------------------------------------------------------------------------------------


def ramp_rate(elapsed_s: float) -> float:
    return min(RAMP_START_PPS + RAMP_SLOPE_PPS * elapsed_s, RAMP_TOP_PPS)


# --- the loop ------------------------------------------------------------------------------------


@dataclass
class MoveWitness:
    """What the counters and the sender said the moment the AI module's change was applied."""

    decisions: list[Decision] = field(default_factory=list)
    sent: dict[int, int] = field(default_factory=dict)
    steered: dict[int, int] = field(default_factory=dict)
    at_ns: int = 0
    done: threading.Event = field(default_factory=threading.Event)


def steered_per_cpu(api: httpx.Client) -> dict[int, int]:
    cpus = api.get("/api/v1/stats").json()["cpus"]
    return {int(cpu): view["packets"] for cpu, view in cpus.items()}


def ai_loop(netapp: NetAppClient, client: InfluxDBClient, on_decision: Callable[[Decision], None]) -> AiLoop:
    return AiLoop(
        InfluxReader(client, bucket(DATABASE), NODE),
        netapp,
        Policy(POLICY),
        InfluxRecorder(client, bucket(DATABASE), NODE),
        LoopSettings(interval_s=TELEMETRY_INTERVAL_S, horizon=3, window_s=10.0, min_points=3),
        on_decision=on_decision,
    )


def wait_until(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not in {DEADLINE_S} s: {what}"
        time.sleep(0.1)


def loads_after(influxd: LocalInfluxd, at_ns: int) -> bool:
    """InfluxDB holds a load of every CPU polled after `at_ns`: the sink sends its batches in order,
    so the polls before it went to InfluxDB before it."""
    return all(
        rows(influxd, f"SELECT load FROM dpp_cpu WHERE node = '{NODE}' AND cpu = '{cpu}' AND time > {at_ns}")
        for cpu in range(CPUS)
    )


def rows(influxd: LocalInfluxd, influxql: str) -> list[dict[str, Any]]:
    answer = influxd.query(influxql, db=DATABASE)
    found = []
    for series in answer["results"][0].get("series", []):
        found += [dict(zip(series["columns"], values)) for values in series["values"]]
    return found


# --- the test ------------------------------------------------------------------------------------


def test_given_a_load_ramp_on_one_cpu_then_the_ai_module_moves_a_priority_flow_and_the_loop_shows_in_influxdb(
    site, influxd, serve
):
    process, token = serve
    api = httpx.Client(base_url=process.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
    influx = InfluxDBClient(url=influxd.url, token="netapp:unused", org="-")
    witness = MoveWitness()
    traffic = PacedTraffic(site, {RAMP[0]: ramp_rate, RAMP[1]: ramp_rate, QUIET: lambda _: QUIET_PPS})

    def witness_the_move(decision: Decision) -> None:
        witness.sent, witness.steered, witness.at_ns = (
            traffic.snapshot(),
            steered_per_cpu(api),
            time.time_ns(),
        )
        witness.decisions.append(decision)
        witness.done.set()

    netapp = NetAppClient(process.url, token)
    loop = ai_loop(netapp, influx, witness_the_move)
    try:
        configure(api, site)
        traffic.start()
        loop.start()
        assert witness.done.wait(DECISION_TIMEOUT_S), (
            f"no decision in {DECISION_TIMEOUT_S} s; last views {loop.views}, stats {loop.stats}\n{process.log_tail()}"
        )
        time.sleep(AFTER_MOVE_S)  # the traffic's duration after the move, not a wait for anything
        wait_until(f"{AFTER_MOVE_FRAMES} frames of each ramping flow after the move", lambda: all(
            traffic.snapshot()[flow.index] - witness.sent[flow.index] >= AFTER_MOVE_FRAMES for flow in RAMP))
        sent = traffic.stop()
        stopped_ns = time.time_ns()
        wait_until("the polls after the traffic stopped in InfluxDB", lambda: loads_after(influxd, stopped_ns))
        steered = steered_per_cpu(api)
        records = api.get("/api/v1/intents").json()["items"]
    finally:
        loop.stop()
        with contextlib.suppress(RuntimeError):  # stopped already, or failed: said above
            traffic.stop()
        for client in (netapp, influx, api):
            client.close()

    # One decision: a priority flow of CPU 0 moved to CPU 1, before CPU 0's load reached the threshold.
    (move,) = witness.decisions
    assert (move.action, move.cpu, move.target_cpu, move.outcome) == (MOVE, 0, 1, "applied"), move
    assert move.forecast >= POLICY.high > move.load
    moved = next(flow for flow in RAMP if flow.intent_id == move.intent)
    stayed = next(flow for flow in RAMP if flow is not moved)

    # The API holds the change.
    intents = {record["intent"]["id"]: record["intent"] for record in records}
    assert intents[moved.intent_id]["action"] == {"type": "steer", "cpu": 1}
    assert intents[stayed.intent_id]["action"] == {"type": "steer", "cpu": 0}

    # The per-CPU steer counters show the traffic moving: from the move on, CPU 1 takes the moved
    # flow besides its own, CPU 0 only the flow that stayed (a few frames in flight either way, and
    # a frame that the veth happens to batch with another overflows to the alternative node).
    after = {index: sent[index] - witness.sent[index] for index in sent}
    gained = {cpu: steered[cpu] - witness.steered[cpu] for cpu in range(CPUS)}
    assert after[moved.index] > 200, after  # enough frames to tell
    assert gained[1] >= 0.9 * (after[QUIET.index] + after[moved.index]), (gained, after)
    assert gained[1] <= after[QUIET.index] + after[moved.index] + 5, (gained, after)
    assert gained[0] <= after[stayed.index] + 5, (gained, after)
    assert gained[0] >= 0.9 * after[stayed.index], (gained, after)

    # InfluxDB holds the loop: the load that rose, the decision, the forecasts, the load that moved.
    loads = {
        cpu: [
            (row["time"], row["load"])
            for row in rows(influxd, f"SELECT load FROM dpp_cpu WHERE node = '{NODE}' AND cpu = '{cpu}'")
            if row["load"] is not None
        ]
        for cpu in range(CPUS)
    }
    before_move = {cpu: [load for at, load in loads[cpu] if at < witness.at_ns] for cpu in range(CPUS)}
    after_move = {  # once the rates span only polls after the move, until the traffic stopped
        cpu: [load for at, load in loads[cpu] if witness.at_ns + 2 * TELEMETRY_INTERVAL_NS < at < stopped_ns]
        for cpu in range(CPUS)
    }
    assert before_move[0][-1] > before_move[0][0] + 0.2, loads[0]  # CPU 0 ramped up
    # CPU 1 took the flow: its load over the polls of each phase (one poll may count a sender's
    # stall or its catching up after one: the generator is a thread of this process)
    assert mean(before_move[1]) < 0.2 < mean(after_move[1]), loads[1]
    (decision,) = rows(influxd, f"SELECT * FROM dpp_ai_decision WHERE node = '{NODE}'")
    assert (decision["action"], decision["cpu"], decision["target_cpu"]) == ("move", "0", 1)
    assert (decision["intent"], decision["tenant"], decision["outcome"]) == (
        moved.intent_id,
        "operator",
        "applied",
    )
    forecasts = rows(influxd, f"SELECT forecast FROM dpp_ai_forecast WHERE node = '{NODE}' AND cpu = '0'")
    assert max(row["forecast"] for row in forecasts) >= POLICY.high
