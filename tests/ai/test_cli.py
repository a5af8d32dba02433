"""`netapp ai run`: one-line failures for what is missing or wrong, and a whole run against a real
InfluxDB holding a ramp and the real API over a fake service: the flow moves, and says so."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from influxdb_client.client.write_api import SYNCHRONOUS
from typer.testing import CliRunner

from netapp.cli.main import app
from netapp.steering.models import CpuSpec
from netapp.telemetry.poll import CPU, INTENT, Point
from tests.ai.fakes import ADMIN_TOKEN, add, steer

REPO = Path(__file__).resolve().parents[2]
NODE = "edge-1"
S = 1_000_000_000


@pytest.fixture(autouse=True)
def no_settings_from_the_environment(monkeypatch):
    for name in [name for name in os.environ if name.startswith("NETAPP_")]:
        monkeypatch.delenv(name)


def ai_run(*args: str):
    return CliRunner().invoke(app, ["ai", "run", *args])


def influx_options(url: str, bucket: str) -> list[str]:
    return ["--influx-url", url, "--influx-token", "netapp:unused", "--bucket", bucket, "--node", NODE]


def error_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


def test_given_no_influxdb_options_then_exit_2_names_each_with_its_variable():
    result = ai_run()
    assert result.exit_code == 2
    assert error_line(result) == (
        "netapp: ai run: where to read from: --influx-url (or $NETAPP_TELEMETRY__INFLUXDB__URL), "
        "--influx-token (or $NETAPP_TELEMETRY__INFLUXDB__TOKEN), --bucket (or $NETAPP_TELEMETRY__INFLUXDB__BUCKET)"
    )


def test_the_influxdb_options_come_from_the_variables_serve_reads(monkeypatch):
    monkeypatch.setenv("NETAPP_TELEMETRY__INFLUXDB__URL", "ftp://nowhere")
    monkeypatch.setenv("NETAPP_TELEMETRY__INFLUXDB__TOKEN", "u:p")
    monkeypatch.setenv("NETAPP_TELEMETRY__INFLUXDB__BUCKET", "dpp/autogen")
    result = ai_run()
    assert result.exit_code == 2
    assert error_line(result).startswith("netapp: ai run: --influx-url: String should match pattern")


def test_given_low_not_below_high_then_exit_2():
    result = ai_run(*influx_options("http://127.0.0.1:9", "dpp/autogen"), "--low", "0.9", "--high", "0.8")
    assert result.exit_code == 2
    assert (
        error_line(result) == "netapp: ai run: thresholds must satisfy 0 < low < high (got low 0.9, high 0.8)"
    )


def test_given_a_weight_tolerance_outside_0_1_then_exit_2_names_the_option():
    result = ai_run(*influx_options("http://127.0.0.1:9", "dpp/autogen"), "--atsss-weights", "--weight-tolerance", "2")
    assert result.exit_code == 2
    assert error_line(result) == (
        "netapp: ai run: --weight-tolerance: tolerance must satisfy 0 < tolerance < 1 (a share of packets), got 2.0"
    )


def test_given_influxdb_down_then_exit_3_names_it():
    result = ai_run(*influx_options("http://127.0.0.1:9", "dpp/autogen"))
    assert result.exit_code == 3
    assert error_line(result) == (
        "netapp: ai run: cannot reach InfluxDB at http://127.0.0.1:9 (is it running? --influx-url)"
    )


def test_given_the_netapp_down_then_exit_3_says_where_it_looked(influxd, test_bucket):
    result = ai_run(*influx_options(influxd.url, test_bucket), "--url", "http://127.0.0.1:9")
    assert result.exit_code == 3
    assert "cannot reach the NetApp at http://127.0.0.1:9" in error_line(result)


def test_given_a_wrong_token_then_exit_2_asks_for_an_admin_one(influxd, test_bucket, api_server, service):
    result = ai_run(*influx_options(influxd.url, test_bucket), "--url", api_server.url, "--token", "wrong")
    assert result.exit_code == 2
    assert error_line(result).startswith("netapp: ai run: GET /api/v1/intents: 401 ")
    assert error_line(result).endswith(
        "(give a token with --token or NETAPP_TOKEN); the AI module needs an admin token"
    )


def write_ramp(client, bucket: str) -> None:
    """Ten polls of CPU 0 climbing to 0.7 of its capacity, CPU 1 idle; two flows on CPU 0."""
    now = time.time_ns()
    lines = []
    for poll in range(10):
        at = now - (10 - poll) * S // 2
        for cpu, rate in ((0, 250 + 50 * poll), (1, 50)):
            fields = {
                "packets": 0,
                "bytes": 0,
                "packets_rate": float(rate),
                "enabled": True,
                "overloaded": False,
                "capacity_pps": 1000,
                "load": rate / 1000,
            }
            lines.append(Point(CPU, {"node": NODE, "cpu": str(cpu)}, fields, at).line())
        for name in ("prio-0", "prio-2"):
            rate = (250 + 50 * poll) / 2
            tags = {"node": NODE, "tenant": "operator", "intent": name}
            lines.append(
                Point(INTENT, tags, {"packets": 0, "bytes": 0, "packets_rate": rate}, now - S // 10).line()
            )
    client.write_api(write_options=SYNCHRONOUS).write(bucket=bucket, record="\n".join(lines))


def test_a_run_moves_a_flow_off_the_rising_cpu_and_records_it(
    influxd, influx_client, database, test_bucket, api_server, service
):
    write_ramp(influx_client, test_bucket)
    for cpu in (0, 1):
        service.cpus[cpu] = CpuSpec(cpu=cpu, capacity_pps=1000)
    add(service, "operator", steer("prio-0", 0, 1))
    add(service, "operator", steer("prio-2", 0, 3))

    result = ai_run(
        *influx_options(influxd.url, test_bucket),
        "--url",
        api_server.url,
        "--token",
        ADMIN_TOKEN,
        "--interval",
        "0.2",
        "--duration",
        "1.5",
    )

    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith(
        f"ai: node {NODE}, {influxd.url} bucket {test_bucket}, NetApp {api_server.url}"
    )
    assert lines[1].startswith("applied: move operator/prio-0 from CPU 0 to CPU 1 (forecast ")
    assert lines[-1].startswith("ai: stopped after ") and lines[-1].endswith(" 1 decisions")
    assert service.intents[("operator", "prio-0")].intent.action.cpu == 1
    assert service.intents[("operator", "prio-2")].intent.action.cpu == 0
    answer = influxd.query("SELECT intent, target_cpu, outcome FROM dpp_ai_decision", db=database)
    (values,) = answer["results"][0]["series"][0]["values"]
    assert values[1:] == ["prio-0", 1, "applied"]


def test_sigterm_stops_a_running_module_cleanly(influxd, test_bucket, api_server, service):
    command = [
        sys.executable,
        "-m",
        "netapp.cli.main",
        "ai",
        "run",
        *influx_options(influxd.url, test_bucket),
        "--url",
        api_server.url,
        "--token",
        ADMIN_TOKEN,
        "--interval",
        "0.2",
    ]
    env = {name: value for name, value in os.environ.items() if not name.startswith("NETAPP_")}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.rstrip().endswith("Ctrl-C stops"), first + process.stdout.read()  # the handlers are in place
        time.sleep(0.5)  # running a while (any number of steps): not a wait for anything
        process.send_signal(signal.SIGTERM)
        rest = process.stdout.read()
        assert process.wait(10) == 0, rest
    finally:
        process.kill()
        process.wait()
    assert re.match(r"ai: stopped after \d+ steps \(0 failed\), 0 decisions", rest.strip()), rest
