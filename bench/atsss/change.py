"""python -m bench.atsss.change: what changing a stored ATSSS session costs the control plane among N
stored sessions, a path's PATCH (its RTT: a path's own words) and a session's (its mode, weighted
and round-robin in turn: the session's own words), each stored in place as this checkout does it
against the whole-value write it replaced, in the same process and run.

In place: a path's changed words stored through the map's mmap (dpp_words_store), a session's by the
data plane's writer (dpp_atsss_session_set, one BPF_PROG_TEST_RUN syscall a session). Whole value:
what the control plane does where it has no writer (netapp.atsss.table's fallback, main's where the
instance has none): a path read whole by one lookup syscall and written whole by one update, its
numbers carried over; a session read, written whole into another slot, then, after a wait for the
programs' runs (a grace period), back into its own (netapp.atsss.index, 2. and 6.). Everything else
is the same code: the service's call (netapp.atsss.service.Atsss.patch_session: the store's
transaction, the checks, the sync of the UE's entries) over an anonymous data-plane instance
(loaded, attached nowhere) and a SQLite file store holding N sessions of two paths
(bench.atsss.telemetry's), reconciled into the maps.

Per round, each (way, kind) times `--changes` PATCHes of sessions drawn at random, the ways in an
order that alternates from round to round; reported per (way, kind): the medians over the rounds
of the changes' median microseconds, for the whole call and for the maps' part alone (AtsssMaps.sync,
where the words are written) and for the writes of paths and sessions in it alone
(`_write_paths`, `_write_sessions`: a lookup of the slots' paths, then the words), changes per
second (of the whole call), and the medians of the rounds' ratios of the two ways. No packet runs meanwhile:
this is the control plane's cost, not the race's (tests/atsss/test_changes_in_flight.py).

    python -m bench.atsss.change --sessions 10000 --changes 500 --rounds 7

Needs root and `make -C dataplane`. Methodology and results: bench/README.md ("bench/atsss").
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

DEFAULT_OUT = Path("bench/results/atsss_change.json")
WAYS = ("in place", "whole value")
KINDS = ("path", "session")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.atsss.change", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--sessions", type=int, default=10000, help="sessions stored")
    parser.add_argument("--changes", type=int, default=500, help="timed PATCHes per (round, way, kind)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


@contextlib.contextmanager
def whole_values() -> Iterator[None]:
    """The control plane as it writes without a writer: no session writer program found (the whole
    session read and written, its numbers carried), a path's words patched into the whole value
    read and written (InPlace without the map's mmap)."""
    from netapp.dataplane.tables import InPlace, Table

    program_fd, in_place = Table.program_fd, Table.in_place

    @contextlib.contextmanager
    def whole(self: Table) -> Iterator[InPlace]:
        yield InPlace(self, None)

    Table.program_fd = lambda self, name: None  # type: ignore[method-assign]
    Table.in_place = whole  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        Table.program_fd, Table.in_place = program_fd, in_place  # type: ignore[method-assign]


class Clock:
    """The time the service's changes spend in some of the maps' methods (an instance's attributes
    wrapped): the sync, and in it the writes of paths and sessions (where the words are written)."""

    def __init__(self, maps: Any, names: tuple[str, ...]):
        self.spent = 0.0
        for name in names:
            setattr(maps, name, self._timed(getattr(maps, name)))

    def _timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - started

        return timed


def patch_body(kind: str, modes: dict[str, str], name: str, rng: random.Random) -> dict[str, Any]:
    """A path's RTT, or the session's mode turned to the other of weighted and round-robin."""
    if kind == "path":
        return {"paths": [{"index": rng.randrange(2), "rtt_us": rng.randrange(1, 100_000)}]}
    modes[name] = "round_robin" if modes.get(name, "weighted") == "weighted" else "weighted"
    return {"mode": modes[name]}


def timed_changes(patch: Callable[[str, dict[str, Any]], None], clocks: dict[str, Clock], names: list[str],
                  kind: str, count: int, modes: dict[str, str], rng: random.Random) -> dict[str, list[float]]:
    """Microseconds of each of `count` PATCHes of sessions drawn from `names`: the call's, and each
    clock's part of it."""
    took: dict[str, list[float]] = {"call": [], **{name: [] for name in clocks}}
    for _ in range(count):
        name = rng.choice(names)
        body = patch_body(kind, modes, name, rng)
        for clock in clocks.values():
            clock.spent = 0.0
        started = time.perf_counter()
        patch(name, body)
        took["call"].append((time.perf_counter() - started) * 1e6)
        for what, clock in clocks.items():
            took[what].append(clock.spent * 1e6)
    return took


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    from bench.atsss.replace import stored_service
    from netapp.atsss.models import AtsssSessionPatch
    from netapp.dataplane.facade import Dataplane
    from netapp.service.contract import Principal, Scope
    from netapp.service.store import Store

    admin = Principal("operator", frozenset({Scope.ADMIN}))
    rng = random.Random(args.seed)
    names = [f"t{i % 10}/ue{i}" for i in range(args.sessions)]
    modes: dict[str, str] = {}
    medians: dict[tuple[str, str], dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as state, Dataplane.open() as dataplane:
        store = Store.open(Path(state) / "netapp.db", synchronous="NORMAL")
        try:
            atsss = stored_service(store, dataplane, admin, args.sessions)
            # the writes first: the sync's clock wraps the method that calls them
            clocks = {"words": Clock(atsss._maps, ("_write_paths", "_write_sessions")),
                      "sync": Clock(atsss._maps, ("sync",))}

            def patch(name: str, body: dict[str, Any]) -> None:
                atsss.patch_session(admin, name, AtsssSessionPatch.model_validate(body))

            for number in range(args.rounds):
                for way in WAYS if number % 2 == 0 else WAYS[::-1]:
                    with whole_values() if way == "whole value" else contextlib.nullcontext():
                        for kind in KINDS:
                            took = timed_changes(patch, clocks, names, kind, args.changes, modes, rng)
                            row = medians.setdefault((way, kind), {f"{what}_us": [] for what in took})
                            for what, values in took.items():
                                row[f"{what}_us"].append(statistics.median(values))
        finally:
            store.close()
    rows = []
    for (way, kind), row in medians.items():
        summary = {what: round(statistics.median(values), 1) for what, values in row.items()}
        rows.append({"way": way, "kind": kind, **summary, "changes_per_s": round(1e6 / summary["call_us"]),
                     **{f"rounds_{what}": [round(value, 1) for value in values] for what, values in row.items()}})
    return rows


def round_ratios(rows: list[dict[str, Any]], kind: str, what: str) -> list[float]:
    """In place over whole value, round by round (the two ways of a round ran one after the other)."""
    by_way = {row["way"]: row[f"rounds_{what}"] for row in rows if row["kind"] == kind}
    return [a / b for a, b in zip(by_way["in place"], by_way["whole value"])]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    from bench.dataplane import machine_info

    rows = run(args)
    for row in rows:
        print(f"{row['kind']:<8} {row['way']:<12} call {row['call_us']:8.1f} us ({row['changes_per_s']:5}/s)  "
              f"sync {row['sync_us']:7.1f} us  words {row['words_us']:7.1f} us", flush=True)
    ratios = {}
    for kind in KINDS:
        ratios[kind] = {what: round(statistics.median(round_ratios(rows, kind, what)), 3)
                        for what in ("call_us", "sync_us", "words_us")}
        print(f"{kind:<8} in place / whole value, median of the rounds' ratios: "
              + "  ".join(f"{what[:-3]} {ratio:.3f}" for what, ratio in ratios[kind].items()), flush=True)
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    result = {"benchmark": "atsss_change", "date": when, "machine": machine_info(), "seed": args.seed,
              "sessions": args.sessions, "changes": args.changes, "rounds": args.rounds, "results": rows,
              "in_place_over_whole_value": ratios}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
