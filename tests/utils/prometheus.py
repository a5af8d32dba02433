"""Prometheus for the tests: Debian's `prometheus` package (the server and `promtool`), and how a
test skips without it. Outside CI a missing binary skips with the reason; under CI (CI=true) it is
a failure, so a green CI always means the Prometheus tests ran (as tests/utils/kernel.py does)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest

from netapp.telemetry.prometheusd import PrometheusNotFoundError, find_prometheus
from tests.utils.kernel import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "vnfd" / "prometheus" / "dpp-netapp-rules.yml"
RULES_TEST = REPO / "tests" / "telemetry" / "dpp-netapp-rules.test.yml"


def _missing(reason: str) -> None:
    skip_or_fail(reason, "run the Prometheus tests")


def require_prometheus() -> Path:
    try:
        return find_prometheus()
    except PrometheusNotFoundError as exc:
        _missing(str(exc))
        raise  # not reached: _missing fails or skips


def require_promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        _missing("no promtool on PATH: Debian's `prometheus` package ships it (`make system-deps`)")
    assert found is not None
    return found


def promtool(*args: str, stdin: Optional[bytes] = None, cwd: Optional[Path] = None) -> subprocess.CompletedProcess:
    """`promtool args...`, its output captured (text)."""
    return subprocess.run(
        [require_promtool(), *args], input=stdin, capture_output=True, cwd=cwd, timeout=60, check=False
    )
