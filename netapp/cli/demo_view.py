"""What `netapp demo` shows: each CPU against the capacity it is metered at, the traffic forwarded
to the alternative node instead of being dropped, the AI module's decisions, and the rates per
intent and slice.

Two forms of one set of figures (`Figures`, computed from successive `Snapshot`s):
- `render`: the live view for a terminal. It fits the terminal, down to 80x24: the status line,
  the CPUs, the forwarded traffic and the AI module's decisions always show, one line per row
  (long text is cut, not wrapped); the intents and slices take the lines left, a page at a time.
- `report`: a few plain lines for a log, when stdout is not a terminal.

Where the forwarded numbers come from (GET /api/v1/stats and the alternative node): a priority
intent's counter counts every packet it matched, a CPU's counter only what was steered to it, so
their difference is the priority traffic that overflowed; the rest of the `forward` action's count
is best effort; the alternative node's interface counts what arrived there. What a CPU is offered
is what the priority intents steered to it ask for, plus the best effort when the RAN side's
frames arrive on it (Snapshot.receiving_cpu); for the refresh in which a flow moved to or from it,
or the frames began to arrive elsewhere, it is unknown ("…"), not a guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from rich.console import ConsoleDimensions, Group
from rich.table import Table
from rich.text import Text

from netapp.ai.loop import describe
from netapp.cli.status import RateMeter
from netapp.testbed.demo import Snapshot

PAGE_S = 5.0  # seconds each page of the intents table shows
MIN_DECISIONS = 3  # decision rows kept before the intents table gets any line
MAX_DECISIONS = 8
# A CPU is over capacity when it is offered this much more than it takes (pkt/s, or this share of
# its capacity, whichever is more): counters read a moment apart differ by a few packets.
OVER_CAPACITY_PPS, OVER_CAPACITY_SHARE = 5.0, 0.05

Rate = Optional[float]  # packets per second; None until two samples


@dataclass(frozen=True)
class CpuFigures:
    cpu: int
    capacity_pps: int
    window_budget: int  # frames a meter window takes
    offered: Rate  # what the intents steered to it ask for, and the best effort arriving on it
    taken: Rate  # what its meter let through: steered to it, best effort passed there
    forecast: float  # the AI module's, NaN when it has none
    overloaded: str  # "no", or "yes, " and why


@dataclass(frozen=True)
class Count:
    packets: int
    rate: Rate


@dataclass(frozen=True)
class Row:
    name: str
    cpu: str
    count: Count


@dataclass(frozen=True)
class Figures:
    """One refresh of the view."""

    elapsed_s: float
    status: str
    meter_window_ms: int
    cpus: tuple[CpuFigures, ...]
    priority_forwarded: Count
    best_effort_forwarded: Count
    alternative: str
    alternative_received: Count
    decisions: tuple[tuple[int, str, str], ...]  # (time ns, what and why, outcome), oldest first
    rows: tuple[Row, ...]  # intents, then slices


class DemoView:
    """Turns successive snapshots into figures (rates need the one before), and figures into the
    live view or the report."""

    def __init__(self) -> None:
        self.meter = RateMeter()
        self._highest: dict[str, int] = {}
        self._assigned: dict[int, tuple[frozenset[str], bool]] = {}  # CPU -> its intents, receives
        self._reported_ns = 0

    # --- figures ---------------------------------------------------------------------------------

    def figures(self, snap: Snapshot) -> Figures:
        stats = snap.stats
        intents = {row["id"]: row for row in stats.get("intents", [])}
        rates = {name: self._rate(f"intent/{name}", row["packets"], snap.at) for name, row in intents.items()}
        steered = {int(cpu): view for cpu, view in (stats.get("cpus") or {}).items() if view}
        priority_matched = sum(intents[name]["packets"] for name in snap.steering if name in intents)
        priority_forwarded = self._derived("priority", priority_matched - sum(v["packets"] for v in steered.values()))
        best_effort = self._derived("best effort", _packets(stats.get("actions"), "forward") - priority_forwarded)
        local = self._rate("pass", _packets(stats.get("actions"), "pass"), snap.at)
        best_effort_asks = _total([rate for name, rate in rates.items() if name not in snap.steering])
        return Figures(
            elapsed_s=snap.elapsed_s,
            status=f"+{snap.elapsed_s:.0f}s {snap.note}; {snap.sent:,} frames sent by the RAN side",
            meter_window_ms=snap.meter_window_ms,
            cpus=tuple(
                self._cpu(cpu, view, snap, rates,
                          (best_effort_asks, local) if cpu == snap.receiving_cpu else (0.0, 0.0))
                for cpu, view in sorted(steered.items())
            ),
            priority_forwarded=Count(priority_forwarded, self._rate("priority", priority_forwarded, snap.at)),
            best_effort_forwarded=Count(best_effort, self._rate("best effort", best_effort, snap.at)),
            alternative=snap.alternative,
            alternative_received=Count(
                snap.alternative_received, self._rate("alternative", snap.alternative_received, snap.at)
            ),
            decisions=tuple(
                (time_ns, describe(decision), decision.outcome) for time_ns, decision in snap.ai.decisions
            ) if snap.ai else (),
            rows=self._rows(snap, intents, rates),
        )

    def _cpu(self, cpu: int, view: dict[str, Any], snap: Snapshot, rates: dict[str, Rate],
             best_effort: tuple[Rate, Rate]) -> CpuFigures:
        """`best_effort`: what the best effort received on this CPU asks for and what it took."""
        capacity = int(view.get("capacity_pps", 0))
        assigned = (frozenset(name for name, target in snap.steering.items() if target == cpu),
                    cpu == snap.receiving_cpu)
        offered = _total([rates.get(name) for name in assigned[0]] + [best_effort[0]])
        if self._assigned.setdefault(cpu, assigned) != assigned:  # moved since: whose rate was whose?
            self._assigned[cpu], offered = assigned, None
        taken = _total([self._rate(f"cpu/{cpu}", view.get("packets", 0), snap.at), best_effort[1]])
        ai_view = snap.ai.views.get(cpu) if snap.ai else None
        if view.get("overloaded"):
            overloaded = "yes, marked by the AI" if snap.ai and cpu in snap.ai.marked else "yes, marked"
        elif capacity and offered is not None and taken is not None and \
                offered - taken >= max(OVER_CAPACITY_PPS, OVER_CAPACITY_SHARE * capacity):
            overloaded = "yes, over capacity"
        else:
            overloaded = "no"
        return CpuFigures(cpu, capacity, int(view.get("window_budget", 0)), offered, taken,
                          ai_view.forecast if ai_view else math.nan, overloaded)

    def _rows(self, snap: Snapshot, intents: dict[str, dict], rates: dict[str, Rate]) -> tuple[Row, ...]:
        """Priority intents, then the others; a slice's intents as one row of the slice."""
        names = sorted((name for name in intents if name not in snap.slice_members),
                       key=lambda name: (name not in snap.steering, name))
        rows = [Row(name, str(snap.steering.get(name, "local")), Count(intents[name]["packets"], rates[name]))
                for name in names]
        for row in snap.stats.get("slices", []):
            name = f"slice {row['id']}"
            rows.append(Row(name, "local", Count(row["packets"], self._rate(name, row["packets"], snap.at))))
        return tuple(rows)

    def _rate(self, key: str, packets: int, now: float) -> Rate:
        rate = self.meter.update(key, packets, 0, now)
        return rate[0] if rate else None

    def _derived(self, key: str, packets: int) -> int:
        """A count derived from counters read a moment apart, kept from going back."""
        self._highest[key] = max(self._highest.get(key, 0), packets)
        return self._highest[key]

    # --- the live view ---------------------------------------------------------------------------

    def render(self, figures: Figures, size: ConsoleDimensions) -> Group:
        """The panels that fit `size`, one line kept free for the cursor: the status, the CPUs,
        the forwarded traffic and at least MIN_DECISIONS decisions (or fewer, when there are fewer)
        first; then a page of the intents table; then more decisions."""
        status = Text(figures.status, style="bold", no_wrap=True, overflow="ellipsis")
        cpus, forwarded = _cpu_panel(figures), _forwarded_panel(figures)
        room = size.height - 1 - 1 - cpus.height - forwarded.height - 2  # the status; AI title, header
        decisions = min(max(len(figures.decisions), 1), MIN_DECISIONS)
        room -= decisions
        rows = min(len(figures.rows), room - 2) if room >= 3 else 0
        room -= rows + 2 if rows else 0
        decisions = min(max(len(figures.decisions), 1), MAX_DECISIONS, decisions + max(room, 0))
        parts = [status, cpus, forwarded, _decision_panel(figures, decisions)]
        if rows:
            parts.append(_rows_panel(figures, rows))
        return Group(*(part.renderable if isinstance(part, Panel) else part for part in parts))

    # --- the report ------------------------------------------------------------------------------

    def report(self, figures: Figures) -> list[str]:
        """Plain lines: the status, each CPU, the forwarded traffic, and each decision not
        reported before."""
        lines = [figures.status]
        for cpu in figures.cpus:
            lines.append(
                f"  CPU {cpu.cpu}: capacity {cpu.capacity_pps} pkt/s ({_budget(cpu, figures)}), offered "
                f"{_pps(cpu.offered)}, taken {_pps(cpu.taken)}, load {_load(cpu)}, forecast {_share(cpu.forecast)}, "
                f"overloaded: {cpu.overloaded}")
        lines.append(
            f"  forwarded to the alternative node instead of dropped: priority overflow "
            f"{_count(figures.priority_forwarded)}, best effort {_count(figures.best_effort_forwarded)}; "
            f"{figures.alternative} received {_count(figures.alternative_received)}")
        for time_ns, what, outcome in figures.decisions:
            if time_ns > self._reported_ns:
                lines.append(f"  AI {_clock(time_ns)} {outcome}: {what}")
                self._reported_ns = time_ns
        return lines


def _total(rates: list[Rate]) -> Rate:
    return None if None in rates else sum(rate or 0.0 for rate in rates)


def _packets(counters: Any, name: str) -> int:
    return int(((counters or {}).get(name) or {}).get("packets", 0))


@dataclass(frozen=True)
class Panel:
    """A title line over a table of one line per row, without borders: every line counts."""

    title: str
    table: Table

    @property
    def height(self) -> int:
        return 2 + self.table.row_count  # the title, the header, the rows

    @property
    def renderable(self) -> Group:
        return Group(Text(self.title, style="bold", no_wrap=True, overflow="ellipsis"), self.table)


NUMERIC = {"cpu", "capacity", "offered", "taken", "load", "forecast", "packets", "pkt/s"}
MIN_WIDTHS = {"time": 8, "outcome": 7, "overloaded": 10}


def _table(*columns: str) -> Table:
    """The last column takes what is left of the width and cuts its text short."""
    table = Table(box=None, padding=(0, 1), pad_edge=False, header_style="dim")
    for column in columns:
        table.add_column(column, justify="right" if column in NUMERIC else "left", no_wrap=True,
                         overflow="ellipsis", min_width=MIN_WIDTHS.get(column),
                         max_width=None if column == columns[-1] else 24)
    return table


def _cpu_panel(figures: Figures) -> Panel:
    table = _table("cpu", "capacity", "offered", "taken", "load", "forecast", "overloaded")
    for cpu in figures.cpus:
        style = "bold red" if cpu.overloaded != "no" else ""
        table.add_row(str(cpu.cpu), f"{cpu.capacity_pps:,}/s", _pps(cpu.offered), _pps(cpu.taken), _load(cpu),
                      _share(cpu.forecast), Text(cpu.overloaded, style=style))
    return Panel(f"CPUs: metered per {figures.meter_window_ms} ms window (steered + best effort received)", table)


def _forwarded_panel(figures: Figures) -> Panel:
    table = _table("packets", "pkt/s", "traffic")
    for what, count in (("priority overflow: its CPU over capacity or marked", figures.priority_forwarded),
                        ("best effort: the CPU it arrived on overloaded", figures.best_effort_forwarded),
                        (f"received by the alternative node ({figures.alternative})", figures.alternative_received)):
        table.add_row(f"{count.packets:,}", _pps(count.rate, unit=""), what)
    return Panel("forwarded to the alternative node instead of dropped", table)


def _decision_panel(figures: Figures, shown: int) -> Panel:
    table = _table("time", "outcome", "decision")
    for time_ns, what, outcome in figures.decisions[-shown:]:
        table.add_row(_clock(time_ns), outcome, what)
    if not figures.decisions:
        table.add_row("", "", "none yet: forecasting each CPU's load")
    return Panel("AI module: decisions (also in InfluxDB, dpp_ai_decision)", table)


def _rows_panel(figures: Figures, rows: int) -> Panel:
    pages = math.ceil(len(figures.rows) / rows)
    page = int(figures.elapsed_s // PAGE_S) % pages
    first = page * rows
    shown = figures.rows[first:first + rows]
    which = f" ({first + 1}-{first + len(shown)} of {len(figures.rows)})" if pages > 1 else ""
    table = _table("cpu", "packets", "pkt/s", "intent or slice")
    for row in shown:
        table.add_row(row.cpu, f"{row.count.packets:,}", _pps(row.count.rate, unit=""), row.name)
    return Panel(f"intents and slices{which}", table)


def _pps(rate: Rate, unit: str = "/s") -> str:
    return "…" if rate is None else f"{rate:,.0f}{unit}"


def _load(cpu: CpuFigures) -> str:
    return "…" if cpu.taken is None or not cpu.capacity_pps else f"{cpu.taken / cpu.capacity_pps:.2f}"


def _share(value: float) -> str:
    return "…" if math.isnan(value) else f"{value:.2f}"


def _budget(cpu: CpuFigures, figures: Figures) -> str:
    return f"{cpu.window_budget} per {figures.meter_window_ms} ms"


def _count(count: Count) -> str:
    return f"{count.packets:,} ({_pps(count.rate, unit=' pkt/s')})"


def _clock(time_ns: int) -> str:
    return datetime.fromtimestamp(time_ns / 1e9).strftime("%H:%M:%S")
