"""`netapp ai run`: the reference AI module. Reads the NetApp's telemetry from InfluxDB, forecasts
each CPU's load a few polls ahead and, when one will be overloaded, moves a priority flow to
another CPU or marks it overloaded through the REST API; with --atsss-weights, also weighs the
paths of the weighted ATSSS sessions inversely to their RTTs. Runs until Ctrl-C or SIGTERM.

The InfluxDB options default to the variables `netapp serve` reads (NETAPP_TELEMETRY__INFLUXDB__*,
NETAPP_TELEMETRY__NODE), so the module reads what the NetApp writes.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
from typing import Annotated, Any, Optional

import typer
from pydantic import ValidationError

from netapp.ai.client import ApiError, NetAppClient
from netapp.ai.forecast import DEFAULT_ALPHA, DEFAULT_BETA, Holt
from netapp.ai.loop import AiLoop, LoopSettings, describe
from netapp.ai.policy import Decision, Policy, PolicyConfig
from netapp.ai.reader import InfluxReader, influx_client
from netapp.ai.record import InfluxRecorder
from netapp.ai.weights import WeightConfig, WeightPolicy
from netapp.cli.client_config import Address, resolve_address
from netapp.cli.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_FAILED, fail
from netapp.cli.options import TokenOption, UrlOption
from netapp.core.config import InfluxSettings

INFLUX_ENV = "NETAPP_TELEMETRY__INFLUXDB__"
NODE_ENV = "NETAPP_TELEMETRY__NODE"
INFLUX_OPTIONS = {"url": "--influx-url", "token": "--influx-token", "org": "--influx-org", "bucket": "--bucket"}

app = typer.Typer(
    help="The reference AI module: forecast CPU load from InfluxDB, act through the REST API.",
    no_args_is_help=True,
)

@app.command("run")
def run(
    influx_url: Annotated[
        Optional[str], typer.Option("--influx-url", envvar=f"{INFLUX_ENV}URL", help="InfluxDB the NetApp writes to.")
    ] = None,
    influx_token: Annotated[
        Optional[str],
        typer.Option("--influx-token", envvar=f"{INFLUX_ENV}TOKEN", show_default=False,
                     help='Its token; InfluxDB 1.8: "user:password".'),
    ] = None,
    influx_org: Annotated[str, typer.Option("--influx-org", envvar=f"{INFLUX_ENV}ORG", help='1.8: "-".')] = "-",
    bucket: Annotated[
        Optional[str],
        typer.Option("--bucket", envvar=f"{INFLUX_ENV}BUCKET", help='1.8: "database/retention-policy".'),
    ] = None,
    node: Annotated[
        Optional[str], typer.Option("--node", envvar=NODE_ENV, help="The node tag to read (default: host name).")
    ] = None,
    url: UrlOption = None,
    token: TokenOption = None,
    interval: Annotated[
        float, typer.Option("--interval", min=0.05, help="Seconds between steps: the collector's interval.")
    ] = 1.0,
    horizon: Annotated[int, typer.Option("--horizon", min=1, help="Polls ahead to forecast.")] = 3,
    window: Annotated[float, typer.Option("--window", min=1, help="Seconds of history per forecast.")] = 30.0,
    high: Annotated[float, typer.Option("--high", help="Forecast load at which a CPU is relieved.")] = 0.8,
    low: Annotated[
        float, typer.Option("--low", help="A CPU takes a flow only while it stays below this load with it.")
    ] = 0.6,
    confirm: Annotated[int, typer.Option("--confirm", min=1, help="Steps in a row at --high before acting.")] = 2,
    cooldown: Annotated[
        float, typer.Option("--cooldown", min=0, help="Seconds a CPU that changed is left alone.")
    ] = 10.0,
    alpha: Annotated[float, typer.Option("--alpha", help="Holt: weight of the newest load.")] = DEFAULT_ALPHA,
    beta: Annotated[float, typer.Option("--beta", help="Holt: weight of the newest trend.")] = DEFAULT_BETA,
    atsss_weights: Annotated[
        bool, typer.Option("--atsss-weights", help="Weigh the weighted ATSSS sessions' paths inversely to their RTTs.")
    ] = False,
    weight_tolerance: Annotated[
        float, typer.Option("--weight-tolerance", help="The least change of a path's share worth new weights.")
    ] = WeightConfig.tolerance,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Decide and record; change nothing.")] = False,
    duration: Annotated[
        Optional[float], typer.Option("--duration", min=0.1, help="Stop after this many seconds (default: never).")
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "warning",
) -> None:
    """Run the closed loop: InfluxDB -> forecast -> policy -> REST API, decisions back to InfluxDB."""
    logging.basicConfig(level=log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    influx = _influx_settings(influx_url, influx_token, influx_org, bucket)
    try:
        policy = Policy(PolicyConfig(high=high, low=low, confirm=confirm, cooldown_s=cooldown))
        settings = LoopSettings(interval_s=interval, horizon=horizon, window_s=window, dry_run=dry_run)
        model = Holt(alpha, beta)
    except ValueError as exc:
        fail(f"ai run: {exc}", EXIT_BAD_INPUT)
    try:
        weight_config = WeightConfig(tolerance=weight_tolerance)
    except ValueError as exc:
        fail(f"ai run: --weight-tolerance: {exc}", EXIT_BAD_INPUT)
    weights = WeightPolicy(weight_config) if atsss_weights else None
    node = node or socket.gethostname()
    client = influx_client(influx)
    address = resolve_address(url, token)  # as every other command finds them
    netapp = NetAppClient(address.url, address.token, verify=address.verify)
    try:
        _check_reachable(client, influx.url, netapp, address)
        loop = AiLoop(
            InfluxReader(client, influx.bucket, node), netapp, policy,
            InfluxRecorder(client, influx.bucket, node, dry_run=dry_run), settings, model,
            on_decision=_print_decision, weights=weights,
        )
        banner = (f"ai: node {node}, {influx.url} bucket {influx.bucket}, NetApp {netapp.http.base_url}"
                  f"{' (dry run)' if dry_run else ''}; Ctrl-C stops")
        _run_until_stopped(loop, duration, banner)
        typer.echo(f"ai: stopped after {loop.stats.steps} steps ({loop.stats.failed_steps} failed), "
                   f"{len(loop.decisions())} decisions")
    finally:
        netapp.close()
        client.close()


def _influx_settings(url: Optional[str], token: Optional[str], org: str, bucket: Optional[str]) -> InfluxSettings:
    missing = [f"--{name} (or ${INFLUX_ENV}{name.split('-')[-1].upper()})"
               for name, value in (("influx-url", url), ("influx-token", token), ("bucket", bucket)) if not value]
    if missing:
        fail(f"ai run: where to read from: {', '.join(missing)}", EXIT_BAD_INPUT)
    try:
        return InfluxSettings(url=url, token=token, org=org, bucket=bucket)
    except ValidationError as exc:
        error = exc.errors()[0]
        fail(f"ai run: {INFLUX_OPTIONS.get(str(error['loc'][0]), error['loc'][0])}: {error['msg']}", EXIT_BAD_INPUT)


def _check_reachable(client: Any, influx_url: str, netapp: NetAppClient, address: Address) -> None:
    """Both ends answer before the loop starts: a typo fails now, with one line, not every second."""
    if not client.ping():
        fail(f"ai run: cannot reach InfluxDB at {influx_url} (is it running? --influx-url)", EXIT_ENVIRONMENT)
    try:
        netapp.steer_intents()
    except ApiError as exc:
        if exc.status is None:
            fail(f"ai run: {exc}; {address.unreachable_hint()}", EXIT_ENVIRONMENT)
        hint = "; the AI module needs an admin token" if exc.status in (401, 403) else ""
        fail(f"ai run: {exc}{hint}", EXIT_BAD_INPUT if exc.status in (401, 403) else EXIT_FAILED)


def _print_decision(decision: Decision) -> None:
    typer.echo(f"{decision.outcome}: {describe(decision)}")


def _run_until_stopped(loop: AiLoop, duration: Optional[float], banner: str) -> None:
    """The loop on its thread until `duration` passes, Ctrl-C or SIGTERM; handlers restored after.
    `banner` is printed once they are in place: whoever reads it may stop the loop at once."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        typer.echo(banner)
        loop.start()
        stop.wait(duration)
    finally:
        loop.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)

