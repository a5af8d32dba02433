"""`netapp demo`: the NetApp on an emulated edge site (network namespaces, veth, real XDP, the
service and its REST API, telemetry in InfluxDB, the reference AI module), shown live until
Ctrl-C (netapp.cli.demo_view: what is shown, and how it fits the terminal)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.live import Live
from rich.text import Text

from netapp.cli.client_config import PublishedClient, publish_client
from netapp.cli.demo_view import DemoView
from netapp.cli.errors import EXIT_ENVIRONMENT, EXIT_FAILED, fail
from netapp.dataplane.binding import DataplaneError, LibraryNotFoundError
from netapp.telemetry.influxd import InfluxdError, InfluxdNotFoundError
from netapp.testbed import scenario
from netapp.testbed.demo import Demo, Snapshot
from netapp.testbed.netns import TestbedError

REFRESH_S = 1.0  # the live view
REPORT_EVERY_S = 5.0  # the report, when stdout is not a terminal


def demo(
    duration: Annotated[
        Optional[float], typer.Option("--duration", min=1, help="Stop after this many seconds (default: Ctrl-C).")
    ] = None,
    toggle_every: Annotated[
        Optional[float],
        typer.Option("--toggle-every", min=2, help="Seconds between CPU overload / recovery by hand "
                     "(default: never; the AI module decides)."),
    ] = None,
    report_every: Annotated[
        float,
        typer.Option("--report-every", min=1, help="Seconds between reports of a few lines when stdout is not "
                     "a terminal (a pipe, a log); a terminal shows the live view."),
    ] = REPORT_EVERY_S,
) -> None:
    """Build an edge site, start the NetApp, configure it through its API, send the paper's
    traffic in surges, and show each CPU against its capacity, what goes to the alternative node
    instead of being dropped, what the AI module forecasts and decides, and rates per intent and
    slice."""
    if os.geteuid() != 0:
        fail("the demo needs root (network namespaces, XDP)", EXIT_ENVIRONMENT)
    console = Console()
    _interrupt_on(signal.SIGTERM, signal.SIGHUP)
    session = Demo()
    client: Optional[PublishedClient] = None
    try:
        console.print("building the edge site and starting the NetApp service…")
        session.start()
        client = publish_client(session.url, session.token, written_by="netapp demo")
        console.print(intro(session))
        console.print(prometheus_line(session), highlight=False, markup=False, soft_wrap=True)
        console.print(client.instructions(), highlight=False, markup=False, soft_wrap=True)  # one line to copy
        watch(console, session, duration, toggle_every, report_every)
    except KeyboardInterrupt:
        pass
    except (DataplaneError, LibraryNotFoundError, TestbedError, InfluxdNotFoundError, InfluxdError,
            RuntimeError) as exc:
        fail(f"demo: {exc}", EXIT_FAILED)
    finally:
        if client is not None:
            client.withdraw()
        session.close()
        console.print("\nstopped: removed the service, its pins, the site and its files")


def _interrupt_on(*signals: signal.Signals) -> None:
    """These signals (a kill, a closed terminal) end the demo like Ctrl-C: everything is removed,
    the InfluxDB server too, which runs in a session of its own."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    for stop_signal in signals:
        signal.signal(stop_signal, interrupt)


def intro(session: Demo) -> Text:
    return Text(
        f"edge site {session.site.tag}: ran ─ node (XDP on n3) ─ core, alternative node on 'alt'\n"
        f"NetApp API at {session.url} (instance {session.instance})\n"
        f"UPF: N4 (PFCP) at {session.pfcp_address} answers a heartbeat (recovery time stamp "
        f"{session.n4_recovery_time_stamp}); N3 TEIDs on {session.site.n3.ip}\n"
        f"configured through the API: 1 alternative group, {session.cpus} CPUs, "
        f"{scenario.PRIORITY_FLOWS} priority intents (one as the paper's legacy message), a best-effort "
        f"intent, and slice 'embb' holding the {scenario.FLOWS - scenario.PRIORITY_FLOWS} best-effort services\n"
        "traffic: 16 GTP-U services in VXLAN from the RAN side, the priority ones surging in turns; Ctrl-C stops\n"
        f"telemetry: InfluxDB at {session.influxd.url if session.influxd else '?'} (bucket dpp/autogen, "
        f"node {session.node}); the AI module reads it and acts through the API"
    )


def prometheus_line(session: Demo) -> str:
    """Where Prometheus shows the NetApp's metrics, or one line on why none runs."""
    if session.prometheus is None:
        return f"Prometheus: none started ({session.prometheus_missing}); metrics at {session.metrics_url}"
    alerts = ", with the VNFD's scaling alerts" if session.prometheus.rule_files else ""
    return (f"Prometheus at {session.prometheus.url} scrapes {session.metrics_url} every "
            f"{session.prometheus.scrape_interval_s:g} s{alerts}")


def watch(console: Console, session: Demo, duration: Optional[float], toggle_every: Optional[float],
          report_every: float = REPORT_EVERY_S) -> None:
    """The live view, refreshed every second, on a terminal; a report every `report_every`
    seconds otherwise (a pipe, a log). Toggles the CPU's overload now and then, if asked."""
    view = DemoView()
    note = ""
    last_toggle = time.monotonic()

    def snapshot() -> Snapshot:
        nonlocal note, last_toggle
        if toggle_every is not None and time.monotonic() - last_toggle >= toggle_every:
            note, last_toggle = session.toggle_overload(), time.monotonic()
        return session.snapshot(note)

    if not console.is_terminal:
        for tick in _ticks(duration, report_every):
            figures = view.figures(snapshot())
            if tick:  # the first sets where the rates of the first report start
                print("\n".join(view.report(figures)), flush=True)
        return
    with Live(console=console, auto_refresh=False) as live:
        for _ in _ticks(duration, REFRESH_S):
            live.update(view.render(view.figures(snapshot()), console.size), refresh=True)


def _ticks(duration: Optional[float], period: float) -> Iterator[int]:
    """0, 1, 2, ... every `period` seconds (0 at once) until `duration` has passed."""
    started = time.monotonic()
    tick = 0
    while duration is None or time.monotonic() - started < duration:
        yield tick
        tick += 1
        time.sleep(max(0.0, period - (time.monotonic() - started) % period))
