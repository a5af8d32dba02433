"""The demo's view on given snapshots: the figures (what overflowed, what each CPU is asked for and
takes), the live view at 80x24 and larger (the CPUs, the forwarded traffic and the AI module's
decisions always on screen, the intents table paged into what is left), and the plain report
`netapp demo` prints when stdout is not a terminal. The view on the real demo, in a terminal:
tests/integration/test_demo_screen.py."""

from __future__ import annotations

import io
import math
from dataclasses import replace

import pytest
from rich.console import Console, ConsoleDimensions

from netapp.ai.loop import describe
from netapp.ai.policy import CLEAR_OVERLOADED, MARK_OVERLOADED, MOVE, CpuView, Decision
from netapp.cli import demo as demo_cli
from netapp.cli.demo_view import MAX_DECISIONS, MIN_DECISIONS, PAGE_S, DemoView, Figures
from netapp.testbed.demo import AiSnapshot, Snapshot

PRIORITY = [f"prio-{i}" for i in range(8)]
MEMBERS = [f"embb-teid-{i}" for i in range(8)]
T0_NS = 1_700_000_000_000_000_000


def decision(n: int) -> tuple[int, Decision]:
    kind = (MOVE, MARK_OVERLOADED, CLEAR_OVERLOADED)[n % 3]
    made = Decision(kind, 1, 0.9, 0.95, f"reason number {n}", target_cpu=0 if kind == MOVE else None,
                    intent=f"prio-{n}" if kind == MOVE else None, tenant="operator", outcome="applied")
    return T0_NS + n * 1_000_000_000, made


def snapshot(at: float, *, priority: int, steered: tuple[int, int], forward: int, passed: int,
             best_effort: int = 0, marked: bool = False, decisions: int = 0, received: int = 0) -> Snapshot:
    """Counters at `at` seconds: each priority intent matched `priority` packets, CPU 0 and 1 took
    `steered`, the program forwarded `forward` and passed `passed`; each slice member matched
    `best_effort`. Priority intents alternate between the CPUs; the RAN side sends from CPU 1."""
    intents = [{"tenant": "operator", "id": name, "packets": priority, "bytes": 0} for name in PRIORITY]
    intents.append({"tenant": "operator", "id": "best-effort", "packets": 0, "bytes": 0})
    intents += [{"tenant": "operator", "id": name, "packets": best_effort, "bytes": 0} for name in MEMBERS]
    cpus = {str(cpu): {"enabled": 1, "overloaded": int(marked and cpu == 1), "capacity_pps": 300,
                       "window_budget": 30, "packets": steered[cpu], "bytes": 0} for cpu in (0, 1)}
    stats = {
        "intents": intents,
        "slices": [{"tenant": "operator", "id": "embb", "packets": best_effort * len(MEMBERS), "bytes": 0}],
        "cpus": cpus,
        "actions": {"forward": {"packets": forward, "bytes": 0}, "pass": {"packets": passed, "bytes": 0}},
    }
    views = {0: CpuView(0, True, False, 300, 0.5, 0.55), 1: CpuView(1, True, marked, 300, 0.9, 1.02)}
    ai = AiSnapshot(views, frozenset({1}) if marked else frozenset(),
                    tuple(decision(n) for n in range(decisions)))
    return Snapshot(
        at=at, elapsed_s=at, note="surge at peak: prio-1, prio-3, prio-5, prio-7 at 120 pkt/s each", sent=1000,
        stats=stats, steering={name: i % 2 for i, name in enumerate(PRIORITY)}, slice_members=frozenset(MEMBERS),
        receiving_cpu=1, alternative="alt0", alternative_received=received, meter_window_ms=100, ai=ai,
    )


def two(first: Snapshot, second: Snapshot) -> tuple[DemoView, Figures]:
    view = DemoView()
    view.figures(first)
    return view, view.figures(second)


def screen(view: DemoView, figures: Figures, width: int, height: int) -> list[str]:
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, color_system=None,
                      record=True)
    console.print(view.render(figures, ConsoleDimensions(width, height)))
    return console.export_text().splitlines()


@pytest.fixture
def overloaded() -> tuple[DemoView, Figures]:
    """One second in which each of the 4 priority intents of a CPU asked for 100 pkt/s, CPU 0 took
    all 400, CPU 1 its 300 less 20 of best effort; best effort (8 x 5 pkt/s) arrived on CPU 1,
    20 passed, 20 forwarded."""
    return two(
        snapshot(10.0, priority=1000, steered=(4000, 4000), forward=0, passed=0, best_effort=50, decisions=1),
        snapshot(11.0, priority=1100, steered=(4400, 4280), forward=140, passed=20, best_effort=55, decisions=5,
                 received=140),
    )


def test_the_figures_split_what_was_forwarded_into_priority_overflow_and_best_effort(overloaded):
    _, figures = overloaded
    # The priority intents matched 8 x 1100, the CPUs took 4400 + 4280: 120 overflowed.
    assert (figures.priority_forwarded.packets, figures.priority_forwarded.rate) == (120, 120.0)
    assert (figures.best_effort_forwarded.packets, figures.best_effort_forwarded.rate) == (20, 20.0)
    assert (figures.alternative_received.packets, figures.alternative_received.rate) == (140, 140.0)


def test_a_cpu_is_asked_for_its_priority_flows_and_the_best_effort_received_on_it(overloaded):
    _, figures = overloaded
    cpu0, cpu1 = figures.cpus
    assert (cpu0.offered, cpu0.taken, cpu0.overloaded) == (400.0, 400.0, "no")  # no best effort: not its CPU
    assert (cpu1.offered, cpu1.taken) == (400.0 + 40.0, 280.0 + 20.0)
    assert cpu1.overloaded == "yes, over capacity"
    assert (cpu1.capacity_pps, cpu1.window_budget, cpu1.forecast) == (300, 30, 1.02)


def test_a_marked_cpu_says_who_marked_it_and_rates_wait_for_a_second_sample():
    first = snapshot(1.0, priority=0, steered=(0, 0), forward=0, passed=0, marked=True)
    figures = DemoView().figures(first)
    assert figures.cpus[1].overloaded == "yes, marked by the AI"
    assert figures.cpus[0].offered is None and figures.priority_forwarded.rate is None
    by_hand = replace(first, ai=replace(first.ai, marked=frozenset()))
    assert DemoView().figures(by_hand).cpus[1].overloaded == "yes, marked"


def test_while_a_flow_moved_or_the_traffic_arrives_elsewhere_what_a_cpu_was_offered_is_unknown(overloaded):
    view, _ = overloaded
    later = snapshot(12.0, priority=1200, steered=(4800, 4560), forward=280, passed=40, best_effort=60)
    moved = replace(later, steering={**later.steering, "prio-1": 0})
    cpu0, cpu1 = view.figures(moved).cpus
    assert cpu0.offered is None and cpu1.offered is None  # prio-1 went from CPU 1 to CPU 0
    assert cpu1.overloaded == "no"  # not a guess
    cpu0, cpu1 = view.figures(replace(moved, at=13.0, receiving_cpu=0)).cpus
    assert cpu0.offered is None and cpu1.offered is None
    cpu0, cpu1 = view.figures(replace(moved, at=14.0, receiving_cpu=0)).cpus
    assert cpu0.offered is not None and cpu1.offered is not None


def test_derived_counts_never_go_back_though_counters_are_read_a_moment_apart():
    view, figures = two(snapshot(1.0, priority=100, steered=(300, 400), forward=100, passed=0),
                        snapshot(2.0, priority=100, steered=(300, 410), forward=100, passed=0))
    assert figures.priority_forwarded.packets == 100  # 800 - 700 before; 800 - 710 read later
    assert figures.priority_forwarded.rate == 0.0


def test_at_80x24_the_cpus_the_forwarded_traffic_and_the_decisions_show_and_the_intents_page(overloaded):
    view, figures = overloaded
    lines = screen(view, figures, 80, 24)
    assert len(lines) <= 23 and all(len(line) <= 80 for line in lines)
    text = "\n".join(lines)
    assert lines[0].startswith("+11s surge at peak: prio-1")
    assert "CPUs: metered per 100 ms window" in text
    assert any(line.split()[:6] == ["1", "300/s", "440/s", "300/s", "1.00", "1.02"] for line in lines), text
    assert "forwarded to the alternative node instead of dropped" in text
    assert any(line.split()[:2] == ["120", "120"] and "priority overflow" in line for line in lines), text
    assert "AI module: decisions" in text
    # The newest decisions, at least MIN_DECISIONS of them, each on one line.
    shown = [line for line in lines if "applied" in line]
    assert len(shown) >= MIN_DECISIONS and "reason number 4" in shown[-1]
    title = next(line for line in lines if line.startswith("intents and slices"))
    assert title.startswith("intents and slices (") and title.endswith(" of 10)"), title  # 8 + best-effort + slice


def test_the_intents_table_pages_through_every_row_one_page_every_few_seconds(overloaded):
    view, figures = overloaded
    seen: list[str] = []
    for page in range(4):
        lines = screen(view, replace(figures, elapsed_s=page * PAGE_S), 80, 24)
        start = next(i for i, line in enumerate(lines) if line.startswith("intents and slices"))
        seen += [line.split()[-1] for line in lines[start + 2:] if line.strip()]
    assert set(seen) == {*PRIORITY, "best-effort", "embb"}


def test_a_large_terminal_shows_every_row_and_more_decisions(overloaded):
    view, figures = overloaded
    lines = screen(view, figures, 200, 50)
    text = "\n".join(lines)
    assert any(line.rstrip() == "intents and slices" for line in lines), text  # one page: no "(1-6 of 10)"
    assert sum("applied" in line for line in lines) == min(5, MAX_DECISIONS)
    assert all(f" {name}" in text for name in PRIORITY) and "slice embb" in text
    assert not any(name in text for name in MEMBERS)  # counted in the slice's row


def test_a_short_terminal_drops_the_intents_before_the_decisions(overloaded):
    view, figures = overloaded
    lines = screen(view, figures, 80, 16)
    text = "\n".join(lines)
    assert len(lines) <= 15
    assert "intents and slices" not in text
    assert "AI module: decisions" in text and "reason number 4" in text


def test_before_any_decision_the_ai_panel_says_so():
    view, figures = two(snapshot(1.0, priority=0, steered=(0, 0), forward=0, passed=0),
                        snapshot(2.0, priority=20, steered=(80, 80), forward=0, passed=40))
    text = "\n".join(screen(view, figures, 80, 24))
    assert "none yet: forecasting each CPU's load" in text


def test_the_report_has_each_cpu_the_forwarded_traffic_and_each_decision_once(overloaded):
    view, figures = overloaded
    first = view.report(figures)
    assert first[0].startswith("+11s surge at peak")
    assert first[1] == ("  CPU 0: capacity 300 pkt/s (30 per 100 ms), offered 400/s, taken 400/s, load 1.33, "
                        "forecast 0.55, overloaded: no")
    assert first[2].endswith("load 1.00, forecast 1.02, overloaded: yes, over capacity")
    assert first[3] == ("  forwarded to the alternative node instead of dropped: priority overflow 120 (120 pkt/s), "
                        "best effort 20 (20 pkt/s); alt0 received 140 (140 pkt/s)")
    assert [line.split(": ", 1)[1] for line in first[4:]] == [describe(decision(n)[1]) for n in range(5)]
    assert view.report(figures)[4:] == []  # reported once


class SteppedTime:
    """The demo's clock and sleep, time passing only as it sleeps: the ticks do not depend on how
    soon a loaded machine wakes the loop (on the real clock a wake-up 1.1 s late would skip a tick)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeSession:
    """Snapshots as a Demo would take them, one per call; each taking `work` of `clock`'s time."""

    def __init__(self, clock: SteppedTime, work: float) -> None:
        self.calls = 0
        self.clock, self.work = clock, work

    def snapshot(self, note: str = "") -> Snapshot:
        self.calls += 1
        self.clock.sleep(self.work)
        return snapshot(float(self.calls), priority=100 * self.calls, steered=(400 * self.calls, 300 * self.calls),
                        forward=100 * self.calls, passed=0, decisions=min(self.calls, 2))


def test_without_a_terminal_the_demo_prints_a_report_every_period(capsys, monkeypatch):
    clock = SteppedTime()
    session = FakeSession(clock, work=0.4)  # the ticks keep to the period, whatever a snapshot takes
    console = Console(file=io.StringIO())  # not a terminal
    monkeypatch.setattr(demo_cli, "time", clock)
    demo_cli.watch(console, session, duration=2.5, toggle_every=None, report_every=1.0)
    out = capsys.readouterr().out.splitlines()
    assert session.calls == 3  # at once (where the rates start), then every second
    assert [line[:4] for line in out if line.startswith("+")] == ["+2s ", "+3s "]
    assert sum(line.startswith("  forwarded to the alternative node") for line in out) == 2
    assert "(100 pkt/s)" in out[3]  # a rate from the first report on
    assert sum(line.startswith("  AI ") for line in out) == 2  # two decisions, each once
    assert console.file.getvalue() == ""  # no live view


def test_the_demo_view_never_shows_nan():
    view, figures = two(snapshot(1.0, priority=0, steered=(0, 0), forward=0, passed=0),
                        snapshot(2.0, priority=0, steered=(0, 0), forward=0, passed=0))
    figures = replace(figures, cpus=tuple(replace(cpu, forecast=math.nan) for cpu in figures.cpus))
    text = "\n".join(screen(view, figures, 80, 24) + view.report(figures))
    assert "nan" not in text.lower()
