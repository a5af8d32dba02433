"""`netapp demo`: the NetApp on an emulated edge site (network namespaces, veth, real XDP, the
service and its REST API, telemetry in InfluxDB, the reference AI module), with live rates until
Ctrl-C."""

from __future__ import annotations

import os
import signal
import time
from typing import Annotated, Optional

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from netapp.cli.ai import loop_view
from netapp.cli.client_config import PublishedClient, publish_client
from netapp.cli.errors import EXIT_ENVIRONMENT, EXIT_FAILED, fail
from netapp.cli.status import RateMeter, rates_view
from netapp.dataplane.binding import DataplaneError, LibraryNotFoundError
from netapp.telemetry.influxd import InfluxdError, InfluxdNotFoundError
from netapp.testbed import scenario
from netapp.testbed.demo import Demo
from netapp.testbed.netns import TestbedError

REFRESH_S = 1.0


def demo(
    duration: Annotated[
        Optional[float], typer.Option("--duration", min=1, help="Stop after this many seconds (default: Ctrl-C).")
    ] = None,
    toggle_every: Annotated[
        Optional[float],
        typer.Option("--toggle-every", min=2, help="Seconds between CPU overload / recovery by hand "
                     "(default: never; the AI module decides)."),
    ] = None,
) -> None:
    """Build an edge site, start the NetApp, configure it through its API, send the paper's
    traffic in surges, and show live rates per intent, slice and CPU, what goes to the alternative
    node, and what the AI module forecasts and decides."""
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
        console.print(client.instructions(), highlight=False, markup=False, soft_wrap=True)  # one line to copy
        watch(console, session, duration, toggle_every)
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
        f"configured through the API: 1 alternative group, {session.cpus} CPUs, "
        f"{scenario.PRIORITY_FLOWS} priority intents (one as the paper's legacy message), a best-effort "
        f"intent, and slice 'embb' holding the {scenario.FLOWS - scenario.PRIORITY_FLOWS} best-effort services\n"
        "traffic: 16 GTP-U services in VXLAN from the RAN side, the priority ones surging in turns; Ctrl-C stops\n"
        f"telemetry: InfluxDB at {session.influxd.url if session.influxd else '?'} (bucket dpp/autogen, "
        f"node {session.node}); the AI module reads it and acts through the API"
    )


def watch(console: Console, session: Demo, duration: Optional[float], toggle_every: Optional[float]) -> None:
    """Refresh the live view every second; toggle the CPU's overload now and then, if asked."""
    meter = RateMeter()
    started = last_toggle = time.monotonic()
    note = ""
    with Live(console=console, refresh_per_second=2) as live:
        while duration is None or time.monotonic() - started < duration:
            now = time.monotonic()
            if toggle_every is not None and now - last_toggle >= toggle_every:
                note, last_toggle = session.toggle_overload(), now
            live.update(view(session, meter, now, note or session.traffic_note()))
            time.sleep(REFRESH_S)


def view(session: Demo, meter: RateMeter, now: float, note: str) -> Group:
    alternative = Table("alternative node", "received", "pkt/s", title="forwarded instead of dropped",
                        title_justify="left")
    received = session.alternative_rx_packets()
    rate = meter.update("alternative", received, 0, now)
    alternative.add_row("alt0", f"{received:,}", f"{rate[0]:,.0f}" if rate else "…")
    sent = session.traffic.total_sent if session.traffic else 0
    parts = [Text(f"{note}; frames sent by the RAN side: {sent:,}", style="bold"),
             rates_view(session.stats(), meter, now), alternative]
    if session.ai is not None:
        parts.append(loop_view(session.ai))
    return Group(*parts)
