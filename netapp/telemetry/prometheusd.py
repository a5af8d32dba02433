"""A local Prometheus server for the demo and the tests: Debian's `prometheus` package, scraping
the NetApp's metrics listener.

`LocalPrometheus` runs `prometheus` with a configuration of its own: one scrape job of the given
targets, the given rule files, its data (TSDB, log) under one directory, the web UI and API on
127.0.0.1 only. It never touches the system's service (`/etc/prometheus`, port 9090).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import yaml

from netapp.telemetry.loopback import LOOPBACK, LoopbackServer, find_executable

INSTALL_HINT = "install Debian's `prometheus` package (`apt-get install prometheus`; `make system-deps` does)"
JOB = "dpp-netapp"


class PrometheusNotFoundError(FileNotFoundError):
    """No prometheus binary where we look for one."""


class PrometheusError(RuntimeError):
    """prometheus did not start, or a query it answered failed."""


def find_prometheus() -> Path:
    """The prometheus binary: $PROMETHEUS, else on PATH."""
    return find_executable("PROMETHEUS", "prometheus", INSTALL_HINT, PrometheusNotFoundError)


class LocalPrometheus(LoopbackServer):
    """One prometheus process over `data_dir`, on loopback, scraping `targets` ("host:port") at
    `/metrics` every `scrape_interval_s` and evaluating `rule_files` as often."""

    NAME = "prometheus"
    ERROR = PrometheusError

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
        super().__init__(data_dir, port, binary if binary is not None else find_prometheus())
        self.targets = list(targets)
        self.rule_files = [Path(path).resolve() for path in rule_files]
        self.scrape_interval_s = scrape_interval_s

    @property
    def config_path(self) -> Path:
        return self.data_dir / "prometheus.yml"

    def start(self, timeout_s: float = 30.0) -> "LocalPrometheus":
        """Write the config, start prometheus and wait until /-/ready says so (after its WAL)."""
        return super().start(timeout_s)

    def __enter__(self) -> "LocalPrometheus":
        return self.start()

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

    def _command(self) -> Sequence[str]:
        self.config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        return [
            str(self.binary),
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.data_dir / 'data'}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            "--log.level=warn",
        ]

    def _is_ready(self) -> bool:
        return self._answers("/-/ready", 200)

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
