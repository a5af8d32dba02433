"""A local Prometheus server for the demo and the tests: Debian's `prometheus` package, scraping
the NetApp's metrics listener.

`LocalPrometheus` runs `prometheus` with a configuration of its own: one scrape job of the given
targets, the given rule files, its data (TSDB, log) under one directory, the web UI and API on
127.0.0.1 only. It never touches the system's service (`/etc/prometheus`, port 9090).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import yaml

from netapp.telemetry.influxd import LOOPBACK, free_loopback_port

INSTALL_HINT = "install Debian's `prometheus` package (apt-get install prometheus; `make setup` does)"
LOG_TAIL_LINES = 20
READY_POLL_S = 0.1
JOB = "dpp-netapp"


class PrometheusNotFoundError(FileNotFoundError):
    """No prometheus binary where we look for one."""


class PrometheusError(RuntimeError):
    """prometheus did not start, or a query it answered failed."""


def find_prometheus() -> Path:
    """The prometheus binary: $PROMETHEUS, else on PATH."""
    configured = os.environ.get("PROMETHEUS")
    if configured:
        path = Path(configured)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise PrometheusNotFoundError(f"PROMETHEUS={configured} is not an executable file")
        return path
    on_path = shutil.which("prometheus")
    if on_path:
        return Path(on_path)
    raise PrometheusNotFoundError(f"no prometheus: not in $PROMETHEUS or on PATH; {INSTALL_HINT}")


class LocalPrometheus:
    """One prometheus process over `data_dir`, on loopback, scraping `targets` ("host:port") at
    `/metrics` every `scrape_interval_s` and evaluating `rule_files` as often."""

    def __init__(
        self,
        data_dir: Path,
        targets: Sequence[str],
        *,
        rule_files: Sequence[Path] = (),
        scrape_interval_s: float = 1.0,
        port: int = 0,
        binary: Optional[Path] = None,
    ):
        self.data_dir = Path(data_dir)
        self.targets = list(targets)
        self.rule_files = [Path(path).resolve() for path in rule_files]
        self.scrape_interval_s = scrape_interval_s
        self.binary = binary if binary is not None else find_prometheus()
        self.port = port or free_loopback_port()
        self._process: Optional[subprocess.Popen[bytes]] = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "prometheus.yml"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "prometheus.log"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self, timeout_s: float = 30.0) -> "LocalPrometheus":
        """Write the config, start prometheus and wait until /-/ready says so."""
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        command = [
            str(self.binary),
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.data_dir / 'data'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            "--log.level=warn",
        ]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop it in order
            )
        try:
            self._wait_ready(timeout_s)
        except PrometheusError:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within `timeout_s`."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> "LocalPrometheus":
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def config(self) -> dict[str, Any]:
        """prometheus.yml: one job over the targets, the rule files, one interval for both."""
        interval = f"{self.scrape_interval_s:g}s"
        return {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": [str(path) for path in self.rule_files],
            "scrape_configs": [
                {"job_name": JOB, "metrics_path": "/metrics", "static_configs": [{"targets": self.targets}]}
            ],
        }

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running:
                raise PrometheusError(f"prometheus exited while starting; {self._log_excerpt()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1.0) as response:
                    if response.status == 200:
                        return
            except OSError:  # refused until it listens, 503 while it replays its WAL
                pass
            time.sleep(READY_POLL_S)
        raise PrometheusError(f"prometheus was not ready on {self.url} within {timeout_s:g} s; {self._log_excerpt()}")

    def _log_excerpt(self) -> str:
        try:
            with open(self.log_path, errors="replace") as log:
                tail = "".join(deque(log, maxlen=LOG_TAIL_LINES))
        except FileNotFoundError:
            tail = "(no log)"
        return f"the end of {self.log_path}:\n{tail}"

    # --- HTTP API ------------------------------------------------------------------------------

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>: its `data`. Raises PrometheusError when it says error."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10.0) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as exc:
            raise PrometheusError(f"{path} {params}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from exc
        if answer.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {answer.get('error')}")
        return answer["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's vector: [{"metric": labels, "value": [time, "text"]}, ...]."""
        return self.api("query", query=promql)["result"]

    def alerts(self) -> list[dict[str, Any]]:
        """Active alerts: labels, annotations, state ("pending" or "firing"), value."""
        return self.api("alerts")["alerts"]
