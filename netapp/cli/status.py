"""`netapp status` and `netapp stats [--watch]`: what the data plane is doing, through the REST API."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Annotated, Any, Optional

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from netapp.cli.client import Api
from netapp.cli.errors import EXIT_FAILED
from netapp.cli.options import TokenOption, UrlOption
from netapp.cli.present import cell


def status(url: UrlOption = None, token: TokenOption = None) -> None:
    """Readiness, the program and its maps, interfaces and CPUs; exits 1 when the NetApp is not ready."""
    api = Api.from_options(url, token)
    ready = api.request("GET", "/readyz", answers=(503,)).json()  # 503: not ready, and why
    console = Console(highlight=False)
    console.print(readiness_line(ready), markup=False)
    if not ready.get("ready"):
        raise typer.Exit(EXIT_FAILED)
    plane = api.get("/api/v1/dataplane")
    interfaces = plane.get("interfaces") or []
    console.print(attachment_line(interfaces), markup=False)
    labels = {"instance": "instance", "program_id": "program id", "rules": "rules", "shapes": "shapes",
              "reconciled": "maps reconciled:"}
    program = [f"{label} {cell(plane[key])}" for key, label in labels.items() if plane.get(key) is not None]
    if program:
        console.print(", ".join(program), markup=False)
    table = Table("interface", "netns", "mode", "ifindex", "attached", title="interfaces", title_justify="left")
    for view in interfaces:
        table.add_row(*(cell(view.get(key)) for key in ("name", "netns", "mode", "ifindex", "attached")))
    console.print(table)
    console.print(_maps_table(plane.get("maps") or {}))


def readiness_line(readiness: dict[str, Any]) -> str:
    """/readyz in a line: ready or not, and the checks, those that passed named together."""
    checks = readiness.get("checks") or {}
    passed = [name for name, state in checks.items() if state == "ok"]
    failed = [f"{name}: {state}" for name, state in checks.items() if state != "ok"]
    words = [f"ready: {cell(bool(readiness.get('ready')))}"]
    if passed:
        words.append(f"{', '.join(passed)} ok")
    return "; ".join(words + failed)


def attachment_line(interfaces: list[dict[str, Any]]) -> str:
    """Which interfaces the program sees packets of: being ready says nothing about that."""
    attached = [f"{view['name']} ({view.get('mode')})" for view in interfaces if view.get("attached")]
    if attached:
        return f"attached: {', '.join(attached)}"
    return ("attached: no interface, so no packet reaches the program (name interfaces in the settings, "
            "or POST /api/v1/dataplane/attach)")


def _maps_table(maps: Any) -> Table:
    table = Table("map", "id", "entries", "capacity", title="maps", title_justify="left")
    items = maps.items() if isinstance(maps, dict) else ((m.get("name"), m) for m in maps)
    for name, info in items:
        table.add_row(cell(name), *(cell(info.get(key)) for key in ("id", "entries", "max_entries")))
    return table


@dataclass
class RateMeter:
    """Rates from successive cumulative counters: (packets, bytes) per key per second."""

    last: dict[str, tuple[float, int, int]] = field(default_factory=dict)

    def update(self, key: str, packets: int, size: int, now: float) -> Optional[tuple[float, float]]:
        previous = self.last.get(key)
        self.last[key] = (now, packets, size)
        if previous is None or now <= previous[0] or packets < previous[1]:
            return None  # first sample, or counters reset (program reloaded)
        elapsed = now - previous[0]
        return (packets - previous[1]) / elapsed, (size - previous[2]) * 8 / elapsed


def _rate_cells(rate: Optional[tuple[float, float]]) -> tuple[str, str]:
    if rate is None:
        return "…", "…"
    return f"{rate[0]:,.0f}", f"{rate[1] / 1e6:,.2f}"


def rates_view(stats: dict[str, Any], meter: RateMeter, now: float) -> Group:
    """Tables of packets, packet rate and Mbit/s per intent, slice and (for admins) CPU."""
    tables = []
    for section, rows in (("intents", stats.get("intents", [])), ("slices", stats.get("slices", []))):
        table = Table(section, "tenant", "packets", "pkt/s", "Mbit/s", title=section, title_justify="left")
        for row in rows:
            rate = meter.update(f"{section}/{row['tenant']}/{row['id']}", row["packets"], row["bytes"], now)
            table.add_row(row["id"], row["tenant"], f"{row['packets']:,}", *_rate_cells(rate))
        tables.append(table)
    cpus = stats.get("cpus") or {}
    if cpus:
        table = Table("cpu", "steered", "pkt/s", "Mbit/s", "overloaded", title="steered to CPU",
                      title_justify="left")
        for cpu, view in sorted(cpus.items(), key=lambda item: int(item[0])):
            view = view or {}
            rate = meter.update(f"cpu/{cpu}", view.get("packets", 0), view.get("bytes", 0), now)
            table.add_row(str(cpu), f"{view.get('packets', 0):,}", *_rate_cells(rate),
                          cell(bool(view.get("overloaded"))))
        tables.append(table)
    return Group(*tables)


def stats(
    watch: Annotated[bool, typer.Option("--watch", help="Refresh a live table of rates until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes.")] = 1.0,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Counters per intent and slice (per CPU, verdict and reason for admin tokens)."""
    api = Api.from_options(url, token)
    meter = RateMeter()
    console = Console()
    if not watch:
        console.print(rates_view(api.get("/api/v1/stats"), meter, time.monotonic()))
        return
    with Live(console=console, refresh_per_second=4) as live:
        try:
            while True:
                live.update(rates_view(api.get("/api/v1/stats"), meter, time.monotonic()))
                time.sleep(interval)
        except KeyboardInterrupt:
            pass
