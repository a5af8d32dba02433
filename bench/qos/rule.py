"""What policing a rule costs in the pipeline: the same rule (UDP to a port, pass) unpoliced and with
the police option (nf/qos/rule.h: the rule's slot names its policers in dpp_rule_policers; one clock
read, the policer's line, its counters), the policer passing (400 Gb/s, a bucket or window that
never runs out) and dropping: at 8 kb/s, a bucket of one byte (no frame ever fits: the drop decided
at its first test), and a bucket or window of 3,000 bytes emptied by the frame before the runs, so
that the drop is decided as in traffic over the rate (a bucket's on what its CPU's last drop kept
in its line, a window's too; now and then a frame fits again and passes), and with its slice's
policer after its own (two policers). The real program (dpp.bpf.c) of an anonymous instance, one 64-byte frame
repeated (every line hot: the best case), through BPF_PROG_TEST_RUN; blocks that interleave the
empty program, the unpoliced rule and every policed one in a shuffled order, medians. Each case's
verdict is checked first.

With --parts, the policed rule taken apart: the same rules with their maps altered after they are
written (PARTS: the slot naming no policer, an empty policer, no credit, the other clock, a drop
rule without a policer), each part of the cost the difference of two cases in the same blocks.
With --before, another tree's build (its libdpp.so and dpp.bpf.o, the same rules written through
this tree's control plane: the maps' ABI must be the same) timed in the same blocks, both builds
loaded twice, this, before, before, this, the blocks alternating the pairs (as bench/qos's).

    python -m bench.qos.rule --out bench/results/qos_rule.json [--parts] [--before OTHER/dataplane]

Methodology: bench/README.md, "bench/qos".
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.harness import EMPTY_OBJECT, add_block_arguments, interleaved_samples, paired_differences, write_results
from bench.libbpf import BpfObject, test_run
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import CompiledRuleset, SharedPolice, compile_intent, order_shapes, shape_maxima, sort_rules
from netapp.intents.models import Intent
from netapp.qos.abi import Algo, Clock, PolicerStats, RulePolice
from netapp.qos.applier import coarse_tick_ns
from netapp.qos.slices import with_slice_police
from netapp.qos.spec import PolicerSpec

DEFAULT_OUT = Path("bench/results/qos_rule.json")
XDP_DROP, XDP_PASS = 1, 2
FAST = {"rate_bps": 400 * 10**9, "burst_bytes": 1 << 30}  # never runs out in a run
SLOW = {"rate_bps": 8_000, "burst_bytes": 1, "algorithm": "token_bucket"}  # drops every frame
# a bucket of 46 frames, a window of 33 (2^31 ns: some 2 s), refilled a frame in 64 ms: emptied
# before the runs (Case.emptied), every frame dropped but the few each refill or window lets by
EMPTIED = {"rate_bps": 8_000, "burst_bytes": 3_000}
# a coarse bucket of 312 frames at a realistic rate, refilled a frame in 51 us: emptied before the
# runs, dropping as in traffic over the rate; too fast for a jiffies stamp (no tick written)
EMPTIED_10M = {"rate_bps": 10**7, "burst_bytes": 20_000}
EMPTYING_FRAMES = 1_000
CHECKED_FRAMES = 21  # an emptied case's verdict: most of these frames' (a refill lets one by now and then)
# windows of 2^27 ns (134 ms, 33 ticks at HZ=250), which the control plane itself puts on the coarse
# clock with the tick: their CPUs' credits stamped in jiffies (police.h, "A window's credit without
# the clock"); a window's 838,860,800 bytes never run out in a run, a chunk of 1 MiB
TICKED = {"rate_bps": 50 * 10**9, "burst_bytes": 1 << 30}
# What a case's bench-only alteration does to its rule's maps once written: (dp, the rule's own policer).
Alter = Callable[[Dataplane, int], None]


@dataclass(frozen=True)
class Case:
    port: int
    police: Optional[dict[str, Any]]  # its police option; None: unpoliced
    verdict: int = XDP_PASS
    slice: Optional[SharedPolice] = None  # its slice's policer, which follows its own
    action: str = "pass"
    alter: Optional[Alter] = None  # --parts: the maps changed after they are written
    emptied: bool = False  # its policer emptied by its frames before its verdict is checked


SLICE = SharedPolice("slice bench/slice", PolicerSpec(rate=400 * 10**9, burst=1 << 30, algo=Algo.TOKEN_BUCKET))
CASES: dict[str, Case] = {
    "unpoliced": Case(1000, None),
    "token_bucket pass": Case(1001, {**FAST, "algorithm": "token_bucket"}),
    "gcra pass": Case(1006, {**FAST, "algorithm": "gcra"}),
    "fixed_window pass": Case(1002, {**FAST, "algorithm": "fixed_window"}),
    "sliding_window pass": Case(1003, {**FAST, "algorithm": "sliding_window"}),
    "token_bucket drop": Case(1004, SLOW, XDP_DROP),
    **{f"{algo} drop, emptied": Case(port, {**EMPTIED, "algorithm": algo}, XDP_DROP, emptied=True)
       for port, algo in ((1021, "token_bucket"), (1022, "gcra"), (1023, "fixed_window"), (1024, "sliding_window"))},
    **{f"{algo} drop at 10 Mbps, emptied": Case(port, {**EMPTIED_10M, "algorithm": algo}, XDP_DROP, emptied=True)
       for port, algo in ((1027, "token_bucket"), (1028, "gcra"))},
    "own + slice pass": Case(1005, {**FAST, "algorithm": "token_bucket"}, slice=SLICE),
    "fixed_window pass, coarse by jiffies": Case(1025, {**TICKED, "algorithm": "fixed_window"}),
    "sliding_window pass, coarse by jiffies": Case(1026, {**TICKED, "algorithm": "sliding_window"}),
}


def _policer(dp: Dataplane, policer: int, **fields: int) -> None:
    """Policer `policer`'s slot with `fields` rewritten (its state as it is)."""
    table = dp.table("dpp_policers")
    value = table.get(policer)
    for name, field in fields.items():
        setattr(value, name, field)
    table.update({policer: value})


def no_policer(dp: Dataplane, policer: int) -> None:
    table = dp.table("dpp_rule_policers")
    table.update({slot: RulePolice() for slot, value in table.items() if value.policer == policer})


def empty_policer(dp: Dataplane, policer: int) -> None:
    _policer(dp, policer, algo=Algo.NONE)


def no_credit(dp: Dataplane, policer: int) -> None:
    dp.table("dpp_policer_stats").fill([policer], PolicerStats())


def precise(dp: Dataplane, policer: int) -> None:
    _policer(dp, policer, clock=Clock.PRECISE)


def coarse(dp: Dataplane, policer: int) -> None:
    _policer(dp, policer, clock=Clock.COARSE)


def ticked(dp: Dataplane, policer: int) -> None:
    """The kernel's tick written where the control plane writes none (bucket_tick_for): as the
    buckets were written before it, a tick on every coarse bucket."""
    _policer(dp, policer, previous=coarse_tick_ns())


def precise_no_credit(dp: Dataplane, policer: int) -> None:
    no_credit(dp, policer)
    precise(dp, policer)


TOKEN_BUCKET = {**FAST, "algorithm": "token_bucket"}
# The policed rule taken apart (--parts): each a case above with its maps altered, bench-only.
PARTS: dict[str, Case] = {
    "unpoliced drop": Case(1010, None, XDP_DROP, action="drop"),
    "policed, no policer": Case(1011, TOKEN_BUCKET, alter=no_policer),
    "policed, empty policer": Case(1012, TOKEN_BUCKET, alter=empty_policer),
    "token_bucket pass, no credit": Case(1013, TOKEN_BUCKET, alter=no_credit),
    "token_bucket pass, precise, no credit": Case(1014, TOKEN_BUCKET, alter=precise_no_credit),
    "gcra pass, no credit": Case(1015, {**FAST, "algorithm": "gcra"}, alter=no_credit),
    "fixed_window pass, coarse": Case(1016, {**FAST, "algorithm": "fixed_window"}, alter=coarse),
    "sliding_window pass, coarse": Case(1017, {**FAST, "algorithm": "sliding_window"}, alter=coarse),
    "token_bucket drop, coarse": Case(1018, SLOW, XDP_DROP, alter=coarse),
    "gcra drop": Case(1019, {**SLOW, "algorithm": "gcra"}, XDP_DROP),
    "fixed_window drop": Case(1020, {**SLOW, "algorithm": "fixed_window"}, XDP_DROP),
    **{f"{algo} drop at 10 Mbps, emptied, ticked": Case(port, {**EMPTIED_10M, "algorithm": algo}, XDP_DROP,
                                                        alter=ticked, emptied=True)
       for port, algo in ((1029, "token_bucket"), (1030, "gcra"))},
    **{f"{algo} drop at 10 Mbps, emptied, precise": Case(port, {**EMPTIED_10M, "algorithm": algo}, XDP_DROP,
                                                         alter=precise, emptied=True)
       for port, algo in ((1031, "token_bucket"), (1032, "gcra"))},
}


def frame(port: int) -> bytes:
    head = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=9, dport=port)
    return bytes(head / bytes(64 - len(head)))


def intent_id(name: str) -> str:
    return name.replace(" ", "-").replace("+", "and").replace(",", "")


def ruleset(cases: dict[str, Case]) -> CompiledRuleset:
    """A rule per case, through its slice's policer too where it has one."""
    rules = []
    for name, case in cases.items():
        action = {"type": case.action, **({"police": case.police} if case.police else {})}
        body = {"id": intent_id(name), "match": {"protocol": "udp", "dst_port": case.port}, "action": action}
        rule = compile_intent(Intent.model_validate(body), {})
        rules.append(with_slice_police(rule, case.slice))
    shapes, maxima = order_shapes(shape_maxima(rules))
    return CompiledRuleset(sort_rules(rules, shapes), shapes, maxima)


def written(dp: Dataplane, cases: dict[str, Case]) -> Dataplane:
    """`dp` with the cases' rules written, each case's alteration made and its verdict checked."""
    dp.apply(ruleset(cases))
    fd = dp.program_fd("dpp_xdp")
    for name, case in cases.items():
        if case.alter:
            case.alter(dp, policer_of(dp, name))
        got = verdict_of(fd, case)
        if got != case.verdict:
            raise SystemExit(f"{name}: verdict {got}, expected {case.verdict}: the case is not what it says")
    return dp


def verdict_of(fd: int, case: Case) -> int:
    """The verdict the case's frame gets; an emptied policer's after EMPTYING_FRAMES, the most of
    CHECKED_FRAMES runs' last frames (a frame's refill, 64 ms at 8 kb/s, may let one of them by; at
    10 Mb/s a frame refills in 51 us, less than a run's call takes: each run's frames back to back,
    as the timed runs')."""
    if not case.emptied:
        return test_run(fd, frame(case.port), 1).retval
    test_run(fd, frame(case.port), EMPTYING_FRAMES)
    verdicts = [test_run(fd, frame(case.port), EMPTYING_FRAMES).retval for _ in range(CHECKED_FRAMES)]
    return statistics.mode(verdicts)


def policer_of(dp: Dataplane, name: str) -> int:
    """The own policer of case `name`'s rule, as its slot names it in dpp_rule_policers."""
    slot = dp.installed_intents[intent_id(name)]
    return dp.table("dpp_rule_policers").get(slot).policer


def measure(runs: int, repeat: int, rng: random.Random, cases: dict[str, Case],
            before: Optional[Path] = None) -> list[dict[str, Any]]:
    with contextlib.ExitStack() as stack:
        empty = stack.enter_context(BpfObject(EMPTY_OBJECT))
        open_build = lambda lib=None: written(stack.enter_context(Dataplane.open(libdpp_path=lib)), cases)  # noqa: E731
        if before is None:
            builds = [[open_build()]]
        else:
            lib = str(before / "build" / "libdpp.so")
            this, other, other_again, this_again = open_build(), open_build(lib), open_build(lib), open_build()
            builds = [[this, this_again], [other, other_again]]
        empty_fd = empty.program_fd("xdp_pass")
        subjects = {"floor": lambda: test_run(empty_fd, frame(1000), repeat).duration_ns}
        for side, loads in zip(("", "before "), builds):
            fds = [dp.program_fd("dpp_xdp") for dp in loads]
            for name, case in cases.items():
                subjects[side + name] = alternating(fds, frame(case.port), repeat)
        samples = interleaved_samples(subjects, runs, rng)
    return rows(samples, cases, before is not None)


def alternating(fds: list[int], packet: bytes, repeat: int) -> Callable[[], int]:
    """A subject timing the loads of one build in turn, one a call (a block): with two loads, made
    first and last (this) or second and third (before), the blocks hold either load order alike."""
    calls = iter(range(1 << 62))
    return lambda: test_run(fds[next(calls) % len(fds)], packet, repeat).duration_ns


def rows(samples: dict[str, list[int]], cases: Iterable[str], before: bool = False) -> list[dict[str, Any]]:
    """Each case's medians against the unpoliced rule's and the floor's, and its difference to the
    unpoliced rule taken block by block, with its spread (harness.paired_differences; rule_cold's
    too); with `before`, the other build's case against its own unpoliced rule, and this build less
    the other's, block by block."""
    medians = {name: statistics.median(values) for name, values in samples.items()}
    unpoliced = medians["unpoliced"]
    result = []
    for name in cases:
        row = {
            "case": name,
            "floor_ns": medians["floor"],
            "unpoliced_ns": unpoliced,
            "ns": medians[name],
            "above_unpoliced_ns": medians[name] - unpoliced,
            "ratio_to_unpoliced": round(medians[name] / unpoliced, 3),
            "ratio_above_floor": round((medians[name] - medians["floor"]) / (unpoliced - medians["floor"]), 3),
            "above_unpoliced_blocks_ns": paired_differences(samples, name, "unpoliced"),
        }
        if before:
            row.update(
                before_ns=medians["before " + name],
                before_above_unpoliced_blocks_ns=paired_differences(samples, "before " + name, "before unpoliced"),
                minus_before_blocks_ns=paired_differences(samples, name, "before " + name),
            )
        result.append(row)
    return result


def report(args: argparse.Namespace, name: str, rows: list[dict[str, Any]], line: Callable[[dict], str]) -> int:
    """Each row's line printed, the rows written to args.out (bench/qos/rule_cold.py's too)."""
    for row in rows:
        print(line(row), flush=True)
    write_results(args.out, name, args.runs, args.repeat, rows)
    return 0


def line(row: dict[str, Any]) -> str:
    text = (f"{row['case']:<38} {row['ns']:6.1f} ns  above unpoliced {row['above_unpoliced_ns']:+6.1f} ns  "
            f"x{row['ratio_to_unpoliced']:.3f}  (above the floor x{row['ratio_above_floor']:.3f})  by block "
            f"{spread(row['above_unpoliced_blocks_ns'])}")
    if "before_ns" in row:
        text += (f"  before: above unpoliced {spread(row['before_above_unpoliced_blocks_ns'])}, "
                 f"this - before {spread(row['minus_before_blocks_ns'])}")
    return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.qos.rule", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--parts", action="store_true", help="the policed rule taken apart too (PARTS)")
    parser.add_argument("--before", type=Path, metavar="DATAPLANE",
                        help="another tree's built dataplane/ timed in the same blocks (loaded this, before, "
                        "before, this); its maps' ABI must be this tree's")
    add_block_arguments(parser)
    args = parser.parse_args(argv)
    cases = {**CASES, **(PARTS if args.parts else {})}
    return report(args, "qos_rule", measure(args.runs, args.repeat, random.Random(args.seed), cases, args.before), line)


def spread(q: dict[str, float]) -> str:
    """A block-by-block difference: its median [first, third quartile]."""
    return f"{q['median']:+.1f} [{q['q1']:+.0f}, {q['q3']:+.0f}]"


if __name__ == "__main__":
    sys.exit(main())
