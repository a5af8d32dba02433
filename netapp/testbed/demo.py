"""The NetApp on an emulated edge site, start to finish: what `netapp demo` runs.

Builds the site, starts a local InfluxDB and the NetApp service (`netapp serve`, which attaches the
pipeline natively to the node's RAN-side interface, writes its telemetry into that InfluxDB and
answers PFCP (N4) as the UPF on a loopback port, which the demo checks with a heartbeat),
and, when Debian's `prometheus` is installed, a Prometheus scraping the service's metrics listener
with the VNFD's scaling alerts (loopback only, its data in the demo's directory),
configures it through its REST API like a slicing manager and an operator would (alternative node,
CPUs with a capacity, priority intents, the paper's legacy message, a slice), and keeps the paper's
traffic flowing from the RAN side while the caller shows what happens (snapshot()).

The priority services surge in turns: the flows steered to one CPU ramp up while the others stay
at their base rate, far enough to exceed that CPU's capacity. The data plane meters every CPU
against its capacity and forwards what exceeds it to the alternative node at once; the reference
AI module (netapp.ai) reads the load series back from InfluxDB, forecasts a CPU crossing its
threshold and moves a priority flow to the other CPU; when the surge goes on and no CPU can take a
flow any more, it marks the CPU overloaded, and then all of that CPU's traffic, priority and best
effort, goes to the alternative node instead of being dropped. It clears its mark when the surge
is over. close() removes everything, also after Ctrl-C.

Pacing and metering. A CPU's capacity is metered per window (at most capacity x window frames in
each, the rest overflows). The library's window is 1 ms, which at the demo's hundreds of frames
per second takes a single frame: a sender paced to one frame a millisecond could never exceed it,
while two frames the kernel happens to process in one millisecond (a softirq delayed on a busy
machine) would overflow at any rate. So the demo's service meters over METER_WINDOW_MS (a
capacity of 300 pkt/s is 30 frames per 100 ms), and the RAN side paces its frames (every one at
least MIN_GAP_S after the one before): what overflows is what a surge offers beyond the capacity.

Where frames are received. XDP on a veth runs on the CPU that sent the frame, so the RAN side
sends from the CPU whose services surge (as RSS would put a busy cell's tunnels there): the best
effort arriving with them is metered against that CPU too, and goes to the alternative node with
its priority traffic while that CPU is overloaded.
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
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Optional

import httpx
import yaml
from influxdb_client import InfluxDBClient

from netapp.ai.client import NetAppClient
from netapp.ai.loop import AiLoop, LoopSettings
from netapp.ai.policy import CpuView, Decision, Policy, PolicyConfig
from netapp.ai.reader import InfluxReader
from netapp.ai.record import InfluxRecorder
from netapp.api.auth import TokenEntry, TokensFile, new_token, token_hash, write_tokens_file
from netapp.dataplane import binding
from netapp.dataplane.facade import Dataplane
from netapp.service.contract import Scope
from netapp.telemetry.influxd import LocalInfluxd, bucket
from netapp.telemetry.loopback import free_loopback_port
from netapp.telemetry.prometheusd import LocalPrometheus, PrometheusNotFoundError, find_prometheus
from netapp.testbed import netns, scenario
from netapp.testbed.scenario import best_effort_slice
from netapp.testbed.topology import EdgeSite
from netapp.testbed.traffic import Sender
from netapp.upf.pfcp.probe import NoAnswer, heartbeat

READY_TIMEOUT_S = 30.0
N4_TIMEOUT_S = 5.0  # the UPF's answer to the demo's PFCP heartbeat
CAPACITY_PPS = 300  # per CPU, metered over METER_WINDOW_MS: 30 frames a window
METER_WINDOW_MS = 100
MIN_GAP_S = 0.0012  # between any two frames the RAN side sends: at most 833 a second in all
BEST_EFFORT_PPS = 5.0  # each best-effort service: 40 pkt/s in all, metered on the sending CPU
PRIORITY_BASE_PPS = 20.0  # each priority service, between surges: 4 on a CPU are 0.27 of it
# Each surging priority service at its peak. The AI module moves one of the four off the busy CPU
# early in the ramp; the three left then ask for 360 pkt/s and the best effort for 40, well over
# the 300 the CPU takes, while the other CPU, at 80 + 120, cannot take another flow (0.67 > low).
PRIORITY_PEAK_PPS = 120.0
CALM_S, RAMP_S, HOLD_S = 8.0, 12.0, 20.0  # one surge cycle
TELEMETRY_INTERVAL_S = 1.0
INFLUX_DATABASE = "dpp"
AI_POLICY = PolicyConfig(high=0.8, low=0.6, confirm=2, cooldown_s=10.0)
SCRAPE_INTERVAL_S = 1.0
# The VNFD's scaling policy as alerting rules: in a source tree, Prometheus evaluates them too.
SCALING_RULES = Path(__file__).resolve().parents[2] / "vnfd" / "prometheus" / "dpp-netapp-rules.yml"


def build_artifact(name: str) -> Path:
    return Path(binding.find_libdpp()).parent / name


def interface_rx_packets(ns: str, ifname: str) -> int:
    link = json.loads(netns.run(["ip", "-s", "-j", "link", "show", ifname], netns=ns))[0]
    return int(link["stats64"]["rx"]["packets"])


class PacedTraffic(threading.Thread):
    """The RAN side: each flow's frames at its own rate (pps, a function of the seconds since
    start), every frame at least `min_gap_s` after the one before, until stopped. `sent[flow
    index]` counts what went out. With `sending_cpu` (seconds since start -> a CPU), the thread
    sends from that CPU, so the data plane receives the frames there."""

    def __init__(self, site: EdgeSite, rates: dict[scenario.Flow, Callable[[float], float]],
                 min_gap_s: float = MIN_GAP_S, sending_cpu: Optional[Callable[[float], int]] = None):
        super().__init__(name="paced-traffic", daemon=True)
        self.sender = Sender(site.ns("ran"), site.ran0.ifname)
        self.frames = {flow.index: scenario.frame(site, flow) for flow in rates}
        self.rates = {flow.index: rate for flow, rate in rates.items()}
        self.min_gap_s = min_gap_s
        self.sending_cpu = sending_cpu
        self.on_cpu: Optional[int] = None  # the CPU this thread sends from, None: any
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
        wanted: Optional[int] = None
        try:
            while not self._halt.is_set():
                index = min(due, key=due.__getitem__)  # the flow whose next frame is most overdue
                at = max(due[index], last + self.min_gap_s)
                if self.sending_cpu is not None and self.sending_cpu(at - self.started) != wanted:
                    wanted = self.sending_cpu(at - self.started)
                    self.on_cpu = self._send_from(wanted)
                self._halt.wait(max(0.0, at - time.monotonic()))
                self.sender.send([self.frames[index]])
                last = time.monotonic()
                self.sent[index] += 1
                due[index] = at + 1.0 / self.rates[index](at - self.started)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    @staticmethod
    def _send_from(cpu: int) -> Optional[int]:
        """Run this thread (only) on `cpu`, and return it; where the process may not use it,
        anywhere (None)."""
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:
            os.sched_setaffinity(0, os.sched_getaffinity(os.getpid()))
            return None
        return cpu

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
        return flow.priority and first_on_busy == self._busy_turn(elapsed_s)

    def _busy_turn(self, elapsed_s: float) -> bool:
        return int(elapsed_s // self.CYCLE_S) % 2 == 0

    def sending_cpu(self, elapsed_s: float) -> int:
        """The CPU the services surging in this cycle were first steered to: the RAN side sends
        from it (the module's docstring says why)."""
        return self.busy_cpu if self._busy_turn(elapsed_s) else (self.busy_cpu + 1) % self.cpus

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


@dataclass(frozen=True)
class AiSnapshot:
    """The AI module as it last saw the CPUs, and its recent decisions (time in ns, decision)."""

    views: dict[int, CpuView]
    marked: frozenset[int]
    decisions: tuple[tuple[int, Decision], ...]


@dataclass(frozen=True)
class Snapshot:
    """Everything the demo's view shows, read at one moment (`at`, monotonic seconds)."""

    at: float
    elapsed_s: float  # since the traffic started
    note: str  # what the RAN side (or the operator) is doing
    sent: int  # frames the RAN side sent
    stats: dict[str, Any]  # GET /api/v1/stats, as an admin: intents, slices, cpus, actions, reasons
    steering: dict[str, int]  # priority intent -> the CPU it steers to now
    slice_members: frozenset[str]  # intents a slice owns (counted in the slice's row)
    receiving_cpu: Optional[int]  # the CPU the RAN side's frames are received on (None: any)
    alternative: str  # the alternative node's interface
    alternative_received: int  # frames it received
    meter_window_ms: int
    ai: Optional[AiSnapshot] = None


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
        self.port = free_loopback_port()
        self.metrics_port = free_loopback_port()
        self.pfcp_port = free_loopback_port(socket.SOCK_DGRAM)
        self.n4_recovery_time_stamp: Optional[int] = None  # the UPF's, from the demo's heartbeat
        self.server: Optional[subprocess.Popen] = None
        self.influxd: Optional[LocalInfluxd] = None
        self.prometheus: Optional[LocalPrometheus] = None
        self.prometheus_missing = ""  # why no Prometheus runs, when none does
        self.traffic: Optional[PacedTraffic] = None
        self.ai: Optional[AiLoop] = None
        self._ai_clients: list[Any] = []  # the AI module's InfluxDB and REST clients, closed last
        self.busy_cpu = self.cpus - 1
        self.surge = Surge(self.cpus, self.busy_cpu)
        self.overloaded = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pfcp_address(self) -> str:
        """Where the UPF answers PFCP (N4): loopback, beside the API."""
        return f"127.0.0.1:{self.pfcp_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    # --- start ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Site, InfluxDB and service up (it attaches to n3), the experiment configured through
        the API, traffic flowing, the AI module watching."""
        self.site.build()
        netns.attach_xdp_object(self.site.ns("alt"), self.site.alt0.ifname,
                                str(build_artifact("xdp_pass.bpf.o")))
        self._start_influxd()
        self._start_service()
        self._check_n4()
        self._start_prometheus()
        self._configure()
        self.traffic = PacedTraffic(self.site, {flow: partial(self.surge.rate, flow) for flow in scenario.flows()},
                                    sending_cpu=self.surge.sending_cpu)
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
            "meter_window_ms": METER_WINDOW_MS,
            # the group the site document names: the paper's message names none
            "default_alternative": scenario.document(self.site, self.cpus)["default_alternative"],
            "tokens_file": str(tokens),
            "telemetry": {
                "interval_s": TELEMETRY_INTERVAL_S,
                "node": self.node,
                "influxdb": {"url": self.influxd.url, "token": "demo:unused", "org": "-",
                             "bucket": bucket(INFLUX_DATABASE), "flush_interval_ms": 200},
                "metrics_listener": {"enabled": True, "host": "127.0.0.1", "port": self.metrics_port},
            },
            # the UPF's N4 endpoint, for SMFs on this host only; the TEIDs it chooses are on the node's n3
            "pfcp": {"address": self.pfcp_address, "n3_ipv4": self.site.n3.ip, "peers": ["127.0.0.1"]},
            # GTP-U goes to gNBs of the RAN's network only (the demo's ran0)
            "upf": {"peer_networks": [f"{self.site.ran0.ip}/32"]},
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

    def _check_n4(self) -> None:
        """A PFCP Heartbeat, as an SMF would send: the N4 endpoint answers, with its Recovery Time Stamp."""
        host, port = self.pfcp_address.rsplit(":", 1)
        try:
            self.n4_recovery_time_stamp = heartbeat(host, int(port), timeout_s=N4_TIMEOUT_S)
        except NoAnswer as exc:
            raise RuntimeError(f"{exc}: {self.service_log()}") from exc

    def _start_prometheus(self) -> None:
        """Prometheus scraping the metrics listener, when installed; otherwise say why not."""
        try:
            binary = find_prometheus()
        except PrometheusNotFoundError as exc:
            self.prometheus_missing = str(exc)
            return
        rules = [SCALING_RULES] if SCALING_RULES.is_file() else []
        self.prometheus = LocalPrometheus(self.workdir / "prometheus", [f"127.0.0.1:{self.metrics_port}"],
                                          rule_files=rules, scrape_interval_s=SCRAPE_INTERVAL_S, binary=binary)
        self.prometheus.start()

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

    def snapshot(self, note: Optional[str] = None) -> Snapshot:
        """What the view shows: the API's counters and steering, the alternative node's receive
        counter, the AI module's view. `note` replaces the surge's phase (an operator's action)."""
        stats = self.stats()
        records = self.api("GET", "/api/v1/intents?limit=1000")["items"]
        owned = [record for record in records if record.get("source") != "slice"]
        ai = None
        if self.ai is not None:
            ai = AiSnapshot(dict(self.ai.views), self.ai.marked, tuple(self.ai_decisions()))
        return Snapshot(
            at=time.monotonic(),
            elapsed_s=time.monotonic() - self.traffic.started if self.traffic else 0.0,
            note=note or self.traffic_note(),
            sent=self.traffic.total_sent if self.traffic else 0,
            stats=stats,
            steering={str(record["intent"]["id"]): int(record["intent"]["action"]["cpu"])
                      for record in owned if record["intent"]["action"]["type"] == "steer"},
            slice_members=frozenset(str(r["intent"]["id"]) for r in records if r.get("source") == "slice"),
            receiving_cpu=self.traffic.on_cpu if self.traffic else None,
            alternative=self.site.alt0.ifname,
            alternative_received=self.alternative_rx_packets(),
            meter_window_ms=METER_WINDOW_MS,
            ai=ai,
        )

    # --- stop -----------------------------------------------------------------------------------

    def close(self) -> None:
        """AI module, traffic, Prometheus, service, pins, InfluxDB, site, files: each step runs even
        when an earlier one failed."""
        steps = (self._stop_ai, self._stop_traffic, self._stop_prometheus, self._stop_service, self._unpin,
                 self._stop_influxd, self.site.destroy, lambda: shutil.rmtree(self.workdir, ignore_errors=True))
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

    def _stop_prometheus(self) -> None:
        if self.prometheus is not None:
            self.prometheus.stop()

    def _stop_influxd(self) -> None:
        if self.influxd is not None:
            self.influxd.stop()

    def _unpin(self) -> None:
        """The service leaves its instance pinned on purpose (hitless restarts); the demo does not."""
        with netns.entered(self.site.ns("node")):
            dataplane = Dataplane.open(instance=self.instance)
            dataplane.unpin()
            dataplane.close()
