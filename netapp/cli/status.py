"""`netapp status` and `netapp stats [--watch]`: what the data plane is doing, through the REST API."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Optional

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from netapp.cli.client import Api, ApiError
from netapp.cli.errors import EXIT_FAILED, fail
from netapp.cli.options import TokenOption, UrlOption
from netapp.cli.present import cell


def status(url: UrlOption = None, token: TokenOption = None) -> None:
    """Readiness, the program and its maps, the policers' clock, interfaces and CPUs; exits 1 when the
    NetApp is not ready."""
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
    if plane.get("clock"):
        console.print(clock_line(plane["clock"]), markup=False)
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


def clock_line(clock: dict[str, Any]) -> str:
    """The COARSE policers' clock in `dppctl status`'s words: how old the word its timer writes is,
    or that the policers read the helper (the timer stopped, or programs built without it)."""
    if clock.get("state") == "running":
        return f"clock: word {clock.get('word_age_us')} us old"
    return f"clock: {clock.get('state')}: coarse policers read the helper"


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


RETRY_S = 2.0  # how often `stats --watch` asks a NetApp that does not answer


@dataclass
class StatsWatch:
    """What `stats --watch` shows: a status line (when the tables are from; since when the NetApp
    has not answered), then the latest tables, which stay on screen while it is away."""

    api: Api
    meter: RateMeter = field(default_factory=RateMeter)
    view: Optional[Group] = None
    updated: Optional[datetime] = None  # the last answer
    down_since: Optional[datetime] = None  # the first failure since then
    problem: Optional[ApiError] = None

    def poll(self) -> Group:
        """Ask for the counters once; the frame to show. Raises the ApiError that asking again
        cannot mend (a token refused, a bad request)."""
        now = datetime.now()
        try:
            stats = self.api.send("GET", "/api/v1/stats").json()
        except ApiError as exc:
            if not exc.transient:
                raise
            self.down_since, self.problem = self.down_since or now, exc
            return self.frame()
        if self.down_since is not None:
            self.meter = RateMeter()  # a restarted NetApp counts from zero: no rate across the gap
        self.down_since, self.problem, self.updated = None, None, now
        self.view = rates_view(stats, self.meter, time.monotonic())
        return self.frame()

    def pause(self, interval: float) -> float:
        """Seconds until the next poll."""
        return interval if self.down_since is None else max(interval, RETRY_S)

    def status_line(self) -> Text:
        if self.down_since is None or self.problem is None:
            return Text(f"{self.api.url}, updated {_clock(self.updated)}; Ctrl-C stops", style="dim")
        state = "unreachable" if self.problem.status is None else f"failing ({self.problem.status})"
        shown = f"; the tables below are from {_clock(self.updated)}" if self.updated else ""
        return Text(f"server {state} since {_clock(self.down_since)}, retrying every {RETRY_S:g} s{shown}: "
                    f"{self.problem.line}", style="bold red")

    def frame(self) -> Group:
        return Group(self.status_line(), *([self.view] if self.view is not None else []))


def _clock(moment: Optional[datetime]) -> str:
    return moment.strftime("%H:%M:%S") if moment else "never"


def watch_stats(api: Api, interval: float, console: Console, stop: threading.Event) -> None:
    """Poll until `stop` is set (or Ctrl-C): a live view on a terminal, frame after frame elsewhere.
    A failure that retrying cannot mend leaves the loop, and so the live view, as an ApiError: its
    line is printed after the tables, never under them."""
    watcher = StatsWatch(api)
    live = Live(console=console, auto_refresh=False) if console.is_interactive else None
    with live or contextlib.nullcontext():
        while True:
            frame = watcher.poll()
            if live is not None:
                live.update(frame, refresh=True)
            else:
                console.print(frame)
            if stop.wait(watcher.pause(interval)):
                return


def stats(
    watch: Annotated[
        bool, typer.Option("--watch", help="Refresh a live table of rates until Ctrl-C; rides out restarts.")
    ] = False,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes.")] = 1.0,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Counters per intent and slice (per CPU, verdict and reason for admin tokens). With --watch, a
    NetApp that stops answering is asked again every 2 s, and a line above the tables says since when."""
    api = Api.from_options(url, token)
    console = Console()
    if not watch:
        console.print(rates_view(api.get("/api/v1/stats"), RateMeter(), time.monotonic()))
        return
    try:
        watch_stats(api, interval, console, threading.Event())
    except KeyboardInterrupt:
        pass
    except ApiError as exc:
        fail(exc.line, exc.exit_code)
