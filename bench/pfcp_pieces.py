"""Where the PFCP endpoint's CPU an establishment goes: bench.pfcp_process's run (template
establishments in groups of 32, one transaction and one COMMIT a group, over a store that holds the
warm-up's sessions, and a data-plane instance with `--applier dpp`) with each piece of the fast path
timed where it runs: its thread CPU, inclusive, summed over the timed establishments. This checkout's
code against REV's, the two alternating run by run (REV first), each run a process of its own (REV's
netapp and libdpp cannot share a process with this checkout's): per piece, us an establishment, its
share of the run's total, the medians and the ratio of each round.

    python -m bench.pfcp_pieces --baseline main --rounds 4 --sessions 3000 --warmup 3000

A piece is timed by a wrapper around the function named (two reads of the thread's clock a call);
what the wrappers add is measured in the same process (`wrapper_us`, `clock_us`) and taken out: of
each piece, its own read and the wrappers of the pieces timed inside it; of the total, every timed
call's. A piece that REV does not have is left out of REV's side. The pieces nest (the indentation): an inner one is part of its
outer one, and the outer's remainder is what no inner one names. Results: bench/README.md ("bench/pfcp.py").
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

# (depth, label, functions: "module:qualified name"), in the order of the report
PIECES: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (0, "receiving (datagram_received)", ("netapp.upf.pfcp.server:PfcpProtocol.datagram_received",)),
    (1, "the template match (Templates.match)", ("netapp.upf.pfcp.templates:Templates.match",)),
    (0, "the group's transaction (Upf.run_group)", ("netapp.upf.sessions:Upf.run_group",)),
    (1, "from the template (Templates.establish)", ("netapp.upf.pfcp.templates:Templates.establish",)),
    (2, "the session (Upf.establish_prepared)", ("netapp.upf.sessions:Upf.establish_prepared",)),
    (3, "the numbers (SEID, TEIDs, slots)", ("netapp.upf.sessions:new_seid", "netapp.upf.slots:Teids.choose_new",
                                            "netapp.upf.slots:Slots.choose_new_urr_slots",
                                            "netapp.upf.slots:Slots.choose_new_policers")),
    (3, "the stencil's fill (SessionStencil.session)", ("netapp.upf.prepared:SessionStencil.session",)),
    (3, "the pools' check (Pools.check)", ("netapp.upf.pools:Pools.check",)),
    (3, "the row and the tables in memory (Upf._save)", ("netapp.upf.sessions:Upf._save",)),
    (4, "the tables in memory (Upf._commit_sessions)", ("netapp.upf.sessions:Upf._commit_sessions",)),
    (1, "the rows written (SessionRows.write)", ("netapp.upf.store:SessionRows.write",)),
    (1, "the maps (SessionChange.apply_to_maps)", ("netapp.upf.held:SessionChange.apply_to_maps",)),
    (2, "the entries compiled and joined (_joined_apart)", ("netapp.upf.applier:_joined_apart",)),
    (2, "the slot tables' entries (BpfApplier._split, _split_downlink)", (
        "netapp.upf.applier:BpfApplier._split", "netapp.upf.applier:BpfApplier._split_downlink")),
    (2, "the other tables' guard (refuse_held)", ("netapp.upf.applier:refuse_held",)),
    (2, "dpp_upf_dl4's guard (refuse_held_ways)", ("netapp.upf.applier:refuse_held_ways",)),
    (2, "dpp_upf_dl4's plan (Ways.plan)", ("netapp.upf.ways:Ways.plan",)),
    (2, "the policers (BpfApplier._write_policers)", ("netapp.upf.applier:BpfApplier._write_policers",)),
    (3, "their values and writes (PolicerApplier.apply)", ("netapp.qos.applier:PolicerApplier.apply",)),
    (2, "the entries' deltas (write_delta)", ("netapp.upf.applier:write_delta",)),
    (2, "the ways published (Ways.publish)", ("netapp.upf.ways:Ways.publish",)),
    (2, "libdpp's calls (DppHandle.table_*)", tuple(f"netapp.dataplane.handle:DppHandle.{call}" for call in (
        "table_update", "table_fill", "table_lookup", "table_held", "table_delete", "table_wait_readers"))),
    (1, "the COMMIT (Transaction.commit)", ("netapp.service.store:Transaction.commit",)),
    (1, "once committed (SessionChange.committed)", ("netapp.upf.held:SessionChange.committed",)),
    (0, "the responses sent (PfcpProtocol._answer)", ("netapp.upf.pfcp.server:PfcpProtocol._answer",)),
)


ALL = "all: the thread's CPU an establishment"


class Piece:
    """One piece's thread CPU and calls; `depth` > 0 while inside it (a recursive call or a second
    function of the piece is not counted twice). `inner`: the timed calls of other pieces made
    inside it, whose wrappers' cost its CPU includes (`calls`: one list, shared by the pieces)."""

    def __init__(self, calls: list[int]) -> None:
        self.cpu, self.calls, self.depth, self.inner, self._all = 0.0, 0, 0, 0, calls

    def timed(self, function: Callable[..., Any]) -> Callable[..., Any]:
        clock, every = time.thread_time, self._all

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return function(*args, **kwargs)
            self.depth = 1
            before = every[0]
            started = clock()
            try:
                return function(*args, **kwargs)
            finally:
                self.cpu += clock() - started
                self.calls += 1
                self.inner += every[0] - before
                every[0] += 1
                self.depth = 0

        return wrapper

    def net_us(self, wrapper_us: float, read_us: float) -> float:
        """The piece's CPU without what the timing added inside it: the wrappers of the pieces within,
        and one read of the clock a call of its own (none below 0: a piece cheaper than the clock
        can tell)."""
        return max(0.0, self.cpu * 1e6 - self.inner * wrapper_us - self.calls * read_us)


def _owner(target: str) -> Optional[tuple[Any, str]]:
    """The object holding the function `target` names and its attribute; None: not in this tree."""
    module_name, _, qualified = target.partition(":")
    *path, name = qualified.split(".")
    try:
        owner: Any = importlib.import_module(module_name)
        for part in path:
            owner = getattr(owner, part)
    except (ImportError, AttributeError):
        return None
    return (owner, name) if callable(owner.__dict__.get(name)) else None


class PieceTimers:
    """While entered, each piece's functions (PIECES) replaced by their timed wrappers."""

    def __init__(self, pieces: Sequence[tuple[int, str, tuple[str, ...]]] = PIECES):
        self.timed_calls = [0]
        self.pieces = {label: Piece(self.timed_calls) for _, label, _ in pieces}
        self._targets = [(label, target) for _, label, targets in pieces for target in targets]
        self._replaced: list[tuple[Any, str, Any]] = []
        self.missing: list[str] = []

    def __enter__(self) -> "PieceTimers":
        for label, target in self._targets:
            found = _owner(target)
            if found is None:
                self.missing.append(target)
                continue
            owner, name = found
            original = owner.__dict__[name]
            self._replaced.append((owner, name, original))
            setattr(owner, name, self.pieces[label].timed(original))
        return self

    def __exit__(self, *_: Any) -> None:
        for owner, name, original in reversed(self._replaced):
            setattr(owner, name, original)
        self._replaced.clear()


def clock_us(count: int = 100_000) -> float:
    """us of thread CPU one read of the thread's clock takes (a timed call makes two)."""
    clock = time.thread_time
    started = clock()
    for _ in range(count):
        clock()
    return (clock() - started) / count * 1e6


def wrapper_us(count: int = 100_000) -> float:
    """us of thread CPU a timed call adds to its caller: a wrapped no-op against the bare one."""
    def nothing() -> None:
        pass

    wrapped = Piece([0]).timed(nothing)
    times = []
    for function in (nothing, wrapped):
        started = time.thread_time()
        for _ in range(count):
            function()
        times.append(time.thread_time() - started)
    return max(0.0, (times[1] - times[0]) / count * 1e6)


# --- one run, in a process of its own (bench.pfcp_process.side_process) ----------------------------


def run_side(sessions: int, warmup: int, applier: str, group: int = 32) -> dict[str, Any]:
    """bench.pfcp_process's run (this checkout's bench/pfcp_process.py, whichever netapp is first on
    the path) with the pieces timed over its timed establishments."""
    spec = importlib.util.spec_from_file_location("pfcp_process_here", Path(__file__).with_name("pfcp_process.py"))
    process = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(process)  # type: ignore[union-attr]
    timers = PieceTimers()
    result = process.run_side(sessions, warmup, applier, around=timers, group=group)
    read, wrapper = clock_us(), wrapper_us()
    # the run's CPU without the wrappers' (each timed call's, outside any piece or not)
    total = result["cpu_us_per_establishment"] - timers.timed_calls[0] * wrapper / sessions
    result["timed_cpu_us_per_establishment"] = result["cpu_us_per_establishment"]
    result["cpu_us_per_establishment"] = round(total, 1)
    result["pieces"] = {label: {"us": round(piece.net_us(wrapper, read) / sessions, 2), "calls": piece.calls,
                                "share": round(piece.net_us(wrapper, read) / sessions / total, 4)}
                        for label, piece in timers.pieces.items() if piece.calls}
    result["missing"], result["clock_us"], result["wrapper_us"] = timers.missing, round(read, 3), round(wrapper, 3)
    return result


# --- the rounds ------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench import pfcp_process
    from bench.baseline import prepare_baseline

    baseline = prepare_baseline(args.baseline, dataplane=args.applier != "none")
    rounds = []
    for index in range(args.rounds):
        order = ["baseline", "head"] if index % 2 == 0 else ["head", "baseline"]
        runs = {side: pfcp_process.side_process(
            args, baseline.root if side == "baseline" else None,  # type: ignore[union-attr]
            baseline.libdpp if side == "baseline" and args.applier == "dpp" else None,  # type: ignore[union-attr]
            script=__file__) for side in order}
        rounds.append({"order": order, **runs})
    return {"baseline": baseline.describe(), "settings": vars(args) | {"out": None}, "rounds": rounds}  # type: ignore[union-attr]


def _median(rounds: list[dict[str, Any]], side: str, label: Optional[str]) -> Optional[float]:
    values = [each[side]["cpu_us_per_establishment"] if label is None else each[side]["pieces"][label]["us"]
              for each in rounds if label is None or label in each[side]["pieces"]]
    return statistics.median(values) if values else None


def format_table(result: dict[str, Any]) -> str:
    """The pieces as a Markdown table: each side's median (us an establishment, share of its total),
    head / baseline by round."""
    rounds, commit = result["rounds"], result["baseline"]["commit"][:12]
    lines = ["| piece | baseline " + commit + ": us (share) | this checkout: us (share) | ratio by round |",
             "|---|---|---|---|"]
    totals = {side: _median(rounds, side, None) for side in ("baseline", "head")}
    for depth, label, _ in [(0, ALL, ()), *PIECES]:
        cells = []
        for side in ("baseline", "head"):
            value = _median(rounds, side, None if label == ALL else label)
            cells.append("-" if value is None else f"{value:.1f} ({value / totals[side]:.0%})")  # type: ignore[operator]
        ratios = [round(_us(each["head"], label) / _us(each["baseline"], label), 2) for each in rounds
                  if _us(each["head"], label) and _us(each["baseline"], label)]
        lines.append(f"| {'. ' * depth}{label} | {cells[0]} | {cells[1]} | {ratios or '-'} |")
    clocks = [each[side]["clock_us"] for each in rounds for side in ("baseline", "head")]
    wrappers = [each[side]["wrapper_us"] for each in rounds for side in ("baseline", "head")]
    timed = [each[side]["timed_cpu_us_per_establishment"] for each in rounds for side in ("baseline", "head")]
    lines.append(f"\nwhat the timing added, taken out of the figures: a timed call {min(wrappers)}-{max(wrappers)} us "
                 f"(one read of the thread's clock {min(clocks)}-{max(clocks)} us); the runs' CPU with it "
                 f"{min(timed)}-{max(timed)} us an establishment")
    return "\n".join(lines)


def _us(run_: dict[str, Any], label: str) -> Optional[float]:
    if label == ALL:
        return run_["cpu_us_per_establishment"]
    piece = run_["pieces"].get(label)
    return None if piece is None else piece["us"]


def main(argv: Optional[Sequence[str]] = None) -> int:
    from bench.pfcp import report

    parser = argparse.ArgumentParser(prog="python -m bench.pfcp_pieces", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REV", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=4, help="runs of each side, alternating")
    parser.add_argument("--sessions", type=int, default=3000, help="timed establishments a run")
    parser.add_argument("--warmup", type=int, default=3000, help="sessions installed before")
    parser.add_argument("--applier", choices=("dpp", "none"), default="dpp", help="the endpoint's data path")
    parser.add_argument("--group", type=int, default=32, help="requests handled together (one transaction)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/pfcp_pieces.json"), help="result document")
    args = parser.parse_args(argv)
    result = run(args)
    report(result, format_table(result), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
