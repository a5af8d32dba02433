"""The NetApp on an emulated edge site, start to finish: what `netapp demo` runs.

Builds the site, starts a local InfluxDB and the NetApp service (`netapp serve`, which attaches the
pipeline natively to the node's RAN-side interface and writes its telemetry into that InfluxDB),
configures it through its REST API like a slicing manager and an operator would (alternative node,
CPUs with a capacity, priority intents, the paper's legacy message, a slice), and keeps the paper's
traffic flowing from the RAN side while the caller shows live rates.

The priority services surge in turns: the flows steered to one CPU ramp up while the others stay
at their base rate. The reference AI module (netapp.ai) reads the load series back from InfluxDB,
forecasts a CPU crossing its threshold and moves a priority flow to the other CPU, or marks the CPU
overloaded when no CPU can take one (its traffic then goes to the alternative node), and clears
its mark when the surge is over. close() removes everything, also after Ctrl-C.

The traffic is paced, every frame at least MIN_GAP_S after the one before: a CPU with a capacity
is metered per millisecond (at most max(1, capacity x 1 ms) frames per window), so bursts, such as
the live-frame generator's, would overflow at any rate and the load would measure the bursts.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Optional

import httpx
import yaml
from influxdb_client import InfluxDBClient

from netapp.ai.client import NetAppClient
from netapp.ai.loop import AiLoop, LoopSettings
from netapp.ai.policy import Decision, Policy, PolicyConfig
from netapp.ai.reader import InfluxReader
from netapp.ai.record import InfluxRecorder
from netapp.api.auth import TokenEntry, TokensFile, new_token, token_hash, write_tokens_file
from netapp.dataplane import binding
from netapp.dataplane.facade import Dataplane
from netapp.service.contract import Scope
from netapp.telemetry.influxd import LocalInfluxd, bucket
from netapp.testbed import netns, scenario
from netapp.testbed.scenario import best_effort_slice
from netapp.testbed.topology import EdgeSite
from netapp.testbed.traffic import Sender

READY_TIMEOUT_S = 30.0
CAPACITY_PPS = 500  # per CPU; its meter then takes one frame per millisecond
MIN_GAP_S = 0.0012  # between any two frames the RAN side sends: never two in one meter window
BEST_EFFORT_PPS = 5.0  # each best-effort service
PRIORITY_BASE_PPS = 30.0  # each priority service, between surges
PRIORITY_PEAK_PPS = 140.0  # each surging priority service at its peak: four on one CPU are 1.1 x capacity
CALM_S, RAMP_S, HOLD_S = 10.0, 20.0, 8.0  # one surge cycle
TELEMETRY_INTERVAL_S = 1.0
INFLUX_DATABASE = "dpp"
AI_POLICY = PolicyConfig(high=0.8, low=0.6, confirm=2, cooldown_s=10.0)


def build_artifact(name: str) -> Path:
    return Path(binding.find_libdpp()).parent / name


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def interface_rx_packets(ns: str, ifname: str) -> int:
    link = json.loads(netns.run(["ip", "-s", "-j", "link", "show", ifname], netns=ns))[0]
    return int(link["stats64"]["rx"]["packets"])


class PacedTraffic(threading.Thread):
    """The RAN side: each flow's frames at its own rate (pps, a function of the seconds since
    start), every frame at least `min_gap_s` after the one before, until stopped. `sent[flow
    index]` counts what went out."""

    def __init__(self, site: EdgeSite, rates: dict[scenario.Flow, Callable[[float], float]],
                 min_gap_s: float = MIN_GAP_S):
        super().__init__(name="paced-traffic", daemon=True)
        self.sender = Sender(site.ns("ran"), site.ran0.ifname)
        self.frames = {flow.index: scenario.frame(site, flow) for flow in rates}
        self.rates = {flow.index: rate for flow, rate in rates.items()}
        self.min_gap_s = min_gap_s
        self.sent = dict.fromkeys(self.frames, 0)
        self.started = time.monotonic()
        self.error: Optional[BaseException] = None
        self._halt = threading.Event()

    @property
    def total_sent(self) -> int:
        return sum(self.sent.values())

    def run(self) -> None:
        self.started = last = time.monotonic()
        due = dict.fromkeys(self.frames, self.started)
        try:
            while not self._halt.is_set():
                index = min(due, key=due.__getitem__)  # the flow whose next frame is most overdue
                at = max(due[index], last + self.min_gap_s)
                self._halt.wait(max(0.0, at - time.monotonic()))
                self.sender.send([self.frames[index]])
                last = time.monotonic()
                self.sent[index] += 1
                due[index] = at + 1.0 / self.rates[index](at - self.started)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def snapshot(self) -> dict[int, int]:
        return dict(self.sent)

    def stop(self) -> dict[int, int]:
        """Stop sending; what each flow sent. Raises what stopped the sender early, if anything."""
        self._halt.set()
        if self.is_alive():
            self.join()
        self.sender.close()
        if self.error is not None:
            raise RuntimeError(f"the RAN-side sender failed: {self.error!r}")
        return self.snapshot()


class Surge:
    """When which priority services surge: cycles of calm, a ramp from the base to the peak rate,
    and a hold at the peak. Even cycles ramp the services first steered to the busy CPU, odd cycles
    the others, wherever they are steered by then."""

    CYCLE_S = CALM_S + RAMP_S + HOLD_S

    def __init__(self, cpus: int, busy_cpu: int):
        self.cpus, self.busy_cpu = cpus, busy_cpu

    def surging(self, flow: scenario.Flow, elapsed_s: float) -> bool:
        first_on_busy = scenario.target_cpu(flow, self.cpus) == self.busy_cpu
        return flow.priority and first_on_busy == (int(elapsed_s // self.CYCLE_S) % 2 == 0)

    def rate(self, flow: scenario.Flow, elapsed_s: float) -> float:
        """The flow's packets per second `elapsed_s` after the start."""
        if not flow.priority:
            return BEST_EFFORT_PPS
        into = elapsed_s % self.CYCLE_S - CALM_S
        if not self.surging(flow, elapsed_s) or into < 0:
            return PRIORITY_BASE_PPS
        return PRIORITY_BASE_PPS + (PRIORITY_PEAK_PPS - PRIORITY_BASE_PPS) * min(into / RAMP_S, 1.0)

    def describe(self, elapsed_s: float) -> str:
        """One line: which services surge now and at what rate."""
        into = elapsed_s % self.CYCLE_S
        if into < CALM_S:
            return f"calm: every priority service at {PRIORITY_BASE_PPS:.0f} pkt/s"
        flows = [flow for flow in scenario.flows() if self.surging(flow, elapsed_s)]
        names = ", ".join(flow.intent_id for flow in flows)
        verb = "ramping" if into < CALM_S + RAMP_S else "at peak"
        return f"surge {verb}: {names} at {self.rate(flows[0], elapsed_s):.0f} pkt/s each" if flows else "calm"


class Demo:
    """Owns everything the demo creates, so that close() can remove all of it."""

    def __init__(self, cpus: Optional[int] = None):
        self.cpus = cpus or min(os.cpu_count() or 1, 2)
        self.site = EdgeSite()
        self.instance = f"demo-{self.site.tag}"
        self.node = f"demo-{self.site.tag}"  # the node tag of the telemetry
        self.workdir = Path(tempfile.mkdtemp(prefix="dpp-demo-"))
        self.state_dir = self.workdir / "state"
        self.token = new_token()
        self.port = free_port()
        self.server: Optional[subprocess.Popen] = None
        self.influxd: Optional[LocalInfluxd] = None
        self.traffic: Optional[PacedTraffic] = None
        self.ai: Optional[AiLoop] = None
        self._ai_clients: list[Any] = []  # the AI module's InfluxDB and REST clients, closed last
        self.busy_cpu = self.cpus - 1
        self.surge = Surge(self.cpus, self.busy_cpu)
        self.overloaded = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- start ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Site, InfluxDB and service up (it attaches to n3), the experiment configured through
        the API, traffic flowing, the AI module watching."""
        self.site.build()
        netns.attach_xdp_object(self.site.ns("alt"), self.site.alt0.ifname,
                                str(build_artifact("xdp_pass.bpf.o")))
        self._start_influxd()
        self._start_service()
        self._configure()
        self.traffic = PacedTraffic(self.site, {flow: partial(self.surge.rate, flow) for flow in scenario.flows()})
        self.traffic.start()
        self._start_ai()

    def _start_influxd(self) -> None:
        """InfluxDB for the telemetry, its data under the demo's state directory."""
        self.influxd = LocalInfluxd(self.state_dir / "influxd").start()
        self.influxd.create_database(INFLUX_DATABASE)

    def _write_settings(self) -> Path:
        tokens = self.workdir / "tokens.yaml"
        write_tokens_file(tokens, TokensFile(tokens=[
            TokenEntry(name="demo", sha256=token_hash(self.token), tenant="operator", scopes=[Scope.ADMIN])]))
        assert self.influxd is not None
        settings = {
            "state_dir": str(self.state_dir),
            "instance": self.instance,
            "netns": self.site.ns("node"),  # the NetApp node: its n3, n6 and alt interfaces
            "interfaces": [{"name": self.site.n3.ifname, "mode": "native"}],
            # the group the site document names: the paper's message names none
            "default_alternative": scenario.document(self.site, self.cpus)["default_alternative"],
            "tokens_file": str(tokens),
            "telemetry": {
                "interval_s": TELEMETRY_INTERVAL_S,
                "node": self.node,
                "influxdb": {"url": self.influxd.url, "token": "demo:unused", "org": "-",
                             "bucket": bucket(INFLUX_DATABASE), "flush_interval_ms": 200},
            },
        }
        path = self.workdir / "netapp.yaml"
        path.write_text(yaml.safe_dump(settings))
        return path

    def _start_service(self) -> None:
        config = self._write_settings()
        log = open(self.workdir / "serve.log", "w")
        self.server = subprocess.Popen(
            [sys.executable, "-m", "netapp.cli.main", "serve", "--config", str(config), "--port", str(self.port),
             "--log-level", "warning"],
            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"netapp serve exited: {self.service_log()}")
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"netapp serve did not become ready: {self.service_log()}")

    def service_log(self) -> str:
        path = self.workdir / "serve.log"
        return path.read_text()[-2000:] if path.exists() else ""

    def api(self, method: str, path: str, body: Any = None) -> Any:
        response = httpx.request(method, self.url + path, json=body, timeout=10,
                                 headers={"Authorization": f"Bearer {self.token}"})
        if response.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:500]}")
        return response.json() if response.content else None

    def _configure(self) -> None:
        """What a slicing manager and an operator would send: site first, then intents, then a slice."""
        document = scenario.document(self.site, self.cpus)
        for group in document["alternatives"]:
            self.api("PUT", f"/api/v1/alternatives/{group['id']}", group)
        for cpu in document["cpus"]:
            self.api("PUT", f"/api/v1/dataplane/cpus/{cpu['cpu']}", {**cpu, "capacity_pps": CAPACITY_PPS})
        for intent in document["intents"]:
            self.api("POST", "/api/v1/intents", intent)  # native, or the paper's legacy message
        self.api("PUT", "/api/v1/slices/embb", best_effort_slice())

    def _start_ai(self) -> None:
        """The reference AI module on a thread of its own, at the collector's pace."""
        assert self.influxd is not None
        influx = InfluxDBClient(url=self.influxd.url, token="demo:unused", org="-")
        netapp = NetAppClient(self.url, self.token)
        self._ai_clients = [influx, netapp]
        self.ai = AiLoop(
            InfluxReader(influx, bucket(INFLUX_DATABASE), self.node), netapp, Policy(AI_POLICY),
            InfluxRecorder(influx, bucket(INFLUX_DATABASE), self.node),
            LoopSettings(interval_s=TELEMETRY_INTERVAL_S, horizon=3, window_s=30.0),
        )
        self.ai.start()

    # --- while running --------------------------------------------------------------------------

    def toggle_overload(self) -> str:
        """The operator marks the busy CPU overloaded, or healthy again (its capacity kept)."""
        self.overloaded = not self.overloaded
        self.api("PUT", f"/api/v1/dataplane/cpus/{self.busy_cpu}",
                 {"cpu": self.busy_cpu, "capacity_pps": CAPACITY_PPS, "overloaded": self.overloaded})
        state = "overloaded: its priority services and local best effort go to the alternative node" \
            if self.overloaded else "healthy again"
        return f"CPU {self.busy_cpu} marked {state}"

    def stats(self) -> dict[str, Any]:
        return self.api("GET", "/api/v1/stats")

    def alternative_rx_packets(self) -> int:
        return interface_rx_packets(self.site.ns("alt"), self.site.alt0.ifname)

    def traffic_note(self) -> str:
        """What the RAN side is doing now: the surge's phase."""
        if self.traffic is None:
            return "no traffic"
        return self.surge.describe(time.monotonic() - self.traffic.started)

    def ai_decisions(self) -> list[tuple[int, Decision]]:
        """The AI module's recent decisions, oldest first: (time in ns, decision)."""
        return self.ai.decisions() if self.ai is not None else []

    # --- stop -----------------------------------------------------------------------------------

    def close(self) -> None:
        """AI module, traffic, service, pins, InfluxDB, site, files: each step runs even when an
        earlier one failed."""
        steps = (self._stop_ai, self._stop_traffic, self._stop_service, self._unpin, self._stop_influxd,
                 self.site.destroy, lambda: shutil.rmtree(self.workdir, ignore_errors=True))
        for step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - cleanup goes on; what is left is named by the caller
                pass

    def _stop_ai(self) -> None:
        if self.ai is not None:
            self.ai.stop()
        for client in self._ai_clients:
            client.close()

    def _stop_traffic(self) -> None:
        if self.traffic is not None:
            self.traffic.stop()

    def _stop_service(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(10)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()

    def _stop_influxd(self) -> None:
        if self.influxd is not None:
            self.influxd.stop()

    def _unpin(self) -> None:
        """The service leaves its instance pinned on purpose (hitless restarts); the demo does not."""
        with netns.entered(self.site.ns("node")):
            dataplane = Dataplane.open(instance=self.instance)
            dataplane.unpin()
            dataplane.close()
