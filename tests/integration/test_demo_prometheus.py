"""`netapp demo` with Prometheus: when Debian's `prometheus` is installed, the demo starts one that
scrapes the service's metrics listener (loopback, its data in the demo's directory), says where it
is, and stops it on exit; when it is not, one line says so and the demo runs as before.

The demo runs whole, its output in a pipe (the report mode). Needs root, libdpp, influxd and, for
the first test, prometheus (each skipped outside CI, a failure under CI).
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Optional

import pytest

from netapp.telemetry.prometheusd import LocalPrometheus
from netapp.testbed.topology import leftover_sites
from tests.utils.influxd import require_influxd
from tests.utils.kernel import require_kernel
from tests.utils.prometheus import require_prometheus

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90.0
EXIT_TIMEOUT_S = 30.0
SITE_LINE = re.compile(r"^edge site (\w+): ")
PROMETHEUS_LINE = re.compile(r"^Prometheus at (http://127\.0\.0\.1:(\d+)) scrapes (\S+) every 1 s, with the VNFD's "
                             r"scaling alerts$")
EXPORT_LINE = re.compile(r"^\s+export ")  # the client instructions, the last line before the view


class DemoProcess:
    """`netapp demo` with its stdout in a pipe, read line by line with a deadline."""

    def __init__(self, duration_s: float, **env: str):
        require_kernel()
        environment = {name: value for name, value in os.environ.items() if not name.startswith("NETAPP_")}
        environment.update(INFLUXD=str(require_influxd()), **env)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "netapp.cli.main", "demo", "--duration", str(duration_s)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=environment, cwd=REPO,
        )
        self.lines: list[str] = []
        self._pending = b""

    def line_matching(self, pattern: re.Pattern[str]) -> re.Match[str]:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for line in self.lines:
                found = pattern.match(line)
                if found:
                    return found
            if not self._read(1.0):
                break
        pytest.fail(f"no line matching {pattern.pattern}:\n" + "\n".join(self.lines))

    def _read(self, timeout: float) -> bool:
        """False once the demo closed its output."""
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            return True
        data = os.read(self.process.stdout.fileno(), 1 << 16)
        self._pending += data
        *complete, self._pending = self._pending.split(b"\n")
        self.lines += [line.decode(errors="replace").rstrip() for line in complete]
        return bool(data)

    def stop(self) -> int:
        """SIGTERM (the demo's Ctrl-C) and the exit code, the rest of its output read."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while time.monotonic() < deadline and self._read(0.5):
            pass
        return self.process.wait(EXIT_TIMEOUT_S)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2):
            return True
    except OSError:
        return False


def test_the_demo_starts_a_prometheus_that_scrapes_the_netapp_and_stops_it(tmp_path):
    require_prometheus()
    demo = DemoProcess(duration_s=START_TIMEOUT_S + 60)
    try:
        site = demo.line_matching(SITE_LINE).group(1)
        shown = demo.line_matching(PROMETHEUS_LINE)
        url, port, metrics_url = shown.group(1), int(shown.group(2)), shown.group(3)
        # A client of the demo's server: LocalPrometheus's queries, nothing started.
        prometheus = LocalPrometheus(tmp_path, [], port=port)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not prometheus.query("dpp_build_info == 1 and on(node) dpp_cpu_packets_total > 0"):
            assert time.monotonic() < deadline, f"Prometheus at {url} has no NetApp metrics: {prometheus.api('targets')}"
            time.sleep(0.5)
        (target,) = prometheus.api("targets")["activeTargets"]
        rules = [rule["name"] for group in prometheus.api("rules")["groups"] for rule in group["rules"]]
        code = demo.stop()
    finally:
        demo.kill()

    assert target["scrapeUrl"] == metrics_url and target["health"] == "up"
    assert rules == ["DppNetAppScaleOut", "DppNetAppScaleIn"]
    assert code == 0, "\n".join(demo.lines)
    assert not answers(url)
    assert site not in leftover_sites()  # others' sites may come and go meanwhile


def test_without_prometheus_one_line_says_so_and_the_demo_runs(tmp_path):
    missing = tmp_path / "no-prometheus"
    demo = DemoProcess(duration_s=1, PROMETHEUS=str(missing))
    try:
        shown = demo.line_matching(re.compile(r"^Prometheus: none started \((.*)\); metrics at (\S+)$"))
        # Stopped only once the demo has printed its last line before the live view: a SIGTERM
        # that lands while a line is being written makes the console write it again as it stops.
        demo.line_matching(EXPORT_LINE)
        code: Optional[int] = demo.stop()
    finally:
        demo.kill()

    assert shown.group(1) == f"PROMETHEUS={missing} is not an executable file"
    assert code == 0, "\n".join(demo.lines)
    assert sum(line.startswith("Prometheus") for line in demo.lines) == 1, "\n".join(demo.lines)
