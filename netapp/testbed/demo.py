"""The NetApp on an emulated edge site, start to finish: what `netapp demo` runs.

Builds the site, starts the NetApp service (`netapp serve`, which attaches the pipeline natively to
the node's RAN-side interface), configures it through its REST API like a slicing manager and an
operator would (alternative node, CPUs, priority intents, the paper's legacy message, a slice), and
keeps the paper's traffic flowing from the RAN side with the live-frame generator while the caller
shows live rates. Every few seconds the operator marks a CPU overloaded, then healthy again, so
the overflow to the alternative node shows. close() removes everything, also after Ctrl-C.
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
from pathlib import Path
from typing import Any, Optional

import httpx
import yaml
from scapy.utils import wrpcap

from netapp.api.auth import TokenEntry, TokensFile, new_token, token_hash, write_tokens_file
from netapp.dataplane import binding
from netapp.dataplane.facade import Dataplane
from netapp.service.contract import Scope
from netapp.testbed import netns, scenario
from netapp.testbed.topology import EdgeSite

READY_TIMEOUT_S = 30.0
FRAMES_PER_FLOW_AND_BURST = 4000  # one generator run: 16 services x this, about 0.1 s of traffic
PAUSE_BETWEEN_BURSTS_S = 0.4  # keeps the offered load where two small CPUs can show their work


def build_artifact(name: str) -> Path:
    return Path(binding.find_libdpp()).parent / name


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def interface_rx_packets(ns: str, ifname: str) -> int:
    link = json.loads(netns.run(["ip", "-s", "-j", "link", "show", ifname], netns=ns))[0]
    return int(link["stats64"]["rx"]["packets"])


def best_effort_slice() -> dict[str, Any]:
    """The experiment's best-effort services as an eMBB slice: no dedicated CPUs, so its traffic
    is processed locally and overflows to the alternative node when the local CPU is overloaded."""
    return {
        "id": "embb",
        "snssai": {"sst": 1, "sd": "000001"},
        "priority_level": 80,
        "mbr_kbps": 100_000,
        "members": {"teids": [flow.teid for flow in scenario.flows() if not flow.priority]},
        "alternative": 0,
    }


class TrafficSource:
    """The RAN side: bursts of the experiment's frames from the live-frame generator, until stopped."""

    def __init__(self, site: EdgeSite, pcap: Path):
        self.site, self.pcap = site, pcap
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="traffic", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        command = [str(build_artifact("dpp-pktgen")), "-i", self.site.ran0.ifname, "-r", str(self.pcap),
                   "-n", str(FRAMES_PER_FLOW_AND_BURST)]
        while not self._stop.is_set():
            report = json.loads(netns.run(command, netns=self.site.ns("ran")))
            self.sent += int(report["frames"])
            self._stop.wait(PAUSE_BETWEEN_BURSTS_S)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


class Demo:
    """Owns everything the demo creates, so that close() can remove all of it."""

    def __init__(self, cpus: Optional[int] = None):
        self.cpus = cpus or min(os.cpu_count() or 1, 2)
        self.site = EdgeSite()
        self.instance = f"demo-{self.site.tag}"
        self.workdir = Path(tempfile.mkdtemp(prefix="dpp-demo-"))
        self.token = new_token()
        self.port = free_port()
        self.server: Optional[subprocess.Popen] = None
        self.traffic: Optional[TrafficSource] = None
        self.busy_cpu = self.cpus - 1
        self.overloaded = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- start ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Site up, service up (it attaches to n3), the experiment configured through the API."""
        self.site.build()
        netns.attach_xdp_object(self.site.ns("alt"), self.site.alt0.ifname,
                                str(build_artifact("xdp_pass.bpf.o")))
        self._start_service()
        self._configure()
        pcap = self.workdir / "paper-traffic.pcap"
        wrpcap(str(pcap), [scenario.frame(self.site, flow) for flow in scenario.flows()], linktype=1)
        self.traffic = TrafficSource(self.site, pcap)
        self.traffic.start()

    def _write_settings(self) -> Path:
        tokens = self.workdir / "tokens.yaml"
        write_tokens_file(tokens, TokensFile(tokens=[
            TokenEntry(name="demo", sha256=token_hash(self.token), tenant="operator", scopes=[Scope.ADMIN])]))
        settings = {
            "state_dir": str(self.workdir / "state"),
            "instance": self.instance,
            "netns": self.site.ns("node"),  # the NetApp node: its n3, n6 and alt interfaces
            "interfaces": [{"name": self.site.n3.ifname, "mode": "native"}],
            "tokens_file": str(tokens),
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
            self.api("PUT", f"/api/v1/dataplane/cpus/{cpu['cpu']}", cpu)
        for intent in document["intents"]:
            self.api("POST", "/api/v1/intents", intent)  # native, or the paper's legacy message
        self.api("PUT", "/api/v1/slices/embb", best_effort_slice())

    # --- while running --------------------------------------------------------------------------

    def toggle_overload(self) -> str:
        """The operator (or an AI module) marks the busy CPU overloaded, or healthy again."""
        self.overloaded = not self.overloaded
        self.api("PUT", f"/api/v1/dataplane/cpus/{self.busy_cpu}",
                 {"cpu": self.busy_cpu, "overloaded": self.overloaded})
        state = "overloaded: its priority services and local best effort go to the alternative node" \
            if self.overloaded else "healthy again"
        return f"CPU {self.busy_cpu} marked {state}"

    def stats(self) -> dict[str, Any]:
        return self.api("GET", "/api/v1/stats")

    def alternative_rx_packets(self) -> int:
        return interface_rx_packets(self.site.ns("alt"), self.site.alt0.ifname)

    # --- stop -----------------------------------------------------------------------------------

    def close(self) -> None:
        """Traffic, service, pins, site, files: each step runs even when an earlier one failed."""
        steps = (self._stop_traffic, self._stop_service, self._unpin, self.site.destroy,
                 lambda: shutil.rmtree(self.workdir, ignore_errors=True))
        for step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - cleanup goes on; what is left is named by the caller
                pass

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

    def _unpin(self) -> None:
        """The service leaves its instance pinned on purpose (hitless restarts); the demo does not."""
        with netns.entered(self.site.ns("node")):
            dataplane = Dataplane.open(instance=self.instance)
            dataplane.unpin()
            dataplane.close()
