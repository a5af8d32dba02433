"""What policing a rule costs in the pipeline: the same rule (UDP to a port, pass) unpoliced and with
the police option (nf/qos/rule.h: the rule's slot names its policers in dpp_rule_policers; one clock
read, the policer's line, its counters), the policer passing (400 Gb/s, a bucket or window that
never runs out) and dropping (8 kb/s, a bucket of one byte), and with its slice's policer after its
own (two policers). The real program (dpp.bpf.c) of an anonymous instance, one 64-byte frame
repeated (every line hot: the best case), through BPF_PROG_TEST_RUN; blocks that interleave the
empty program, the unpoliced rule and every policed one in a shuffled order, medians. Each case's
verdict is checked first.

    python -m bench.qos.rule --out bench/results/qos_rule.json

Methodology: bench/README.md, "bench/qos".
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.harness import EMPTY_OBJECT, add_block_arguments, interleaved_samples, paired_differences, write_results
from bench.libbpf import BpfObject, test_run
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import CompiledRuleset, SharedPolice, compile_intent, order_shapes, shape_maxima, sort_rules
from netapp.intents.models import Intent
from netapp.qos.abi import Algo
from netapp.qos.slices import with_slice_police
from netapp.qos.spec import PolicerSpec

DEFAULT_OUT = Path("bench/results/qos_rule.json")
XDP_DROP, XDP_PASS = 1, 2
FAST = {"rate_bps": 400 * 10**9, "burst_bytes": 1 << 30}  # never runs out in a run
SLOW = {"rate_bps": 8_000, "burst_bytes": 1, "algorithm": "token_bucket"}  # drops every frame
# case -> (its port, its police option, whether its slice's policer follows, the verdict)
CASES: dict[str, tuple[int, Optional[dict[str, Any]], bool, int]] = {
    "unpoliced": (1000, None, False, XDP_PASS),
    "token_bucket pass": (1001, {**FAST, "algorithm": "token_bucket"}, False, XDP_PASS),
    "gcra pass": (1006, {**FAST, "algorithm": "gcra"}, False, XDP_PASS),
    "fixed_window pass": (1002, {**FAST, "algorithm": "fixed_window"}, False, XDP_PASS),
    "sliding_window pass": (1003, {**FAST, "algorithm": "sliding_window"}, False, XDP_PASS),
    "token_bucket drop": (1004, SLOW, False, XDP_DROP),
    "own + slice pass": (1005, {**FAST, "algorithm": "token_bucket"}, True, XDP_PASS),
}
SLICE = SharedPolice("slice bench/slice", PolicerSpec(rate=400 * 10**9, burst=1 << 30, algo=Algo.TOKEN_BUCKET))


def frame(port: int) -> bytes:
    head = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=9, dport=port)
    return bytes(head / bytes(64 - len(head)))


def ruleset() -> CompiledRuleset:
    """A rule per case, the sliced one through the slice's policer too."""
    rules = []
    for name, (port, police, sliced, _) in CASES.items():
        action = {"type": "pass", **({"police": police} if police else {})}
        body = {"id": name.replace(" ", "-").replace("+", "and"), "match": {"protocol": "udp", "dst_port": port},
                "action": action}
        rule = compile_intent(Intent.model_validate(body), {})
        rules.append(with_slice_police(rule, SLICE if sliced else None))
    shapes, maxima = order_shapes(shape_maxima(rules))
    return CompiledRuleset(sort_rules(rules, shapes), shapes, maxima)


def measure(runs: int, repeat: int, rng: random.Random) -> list[dict[str, Any]]:
    with Dataplane.open() as dp, BpfObject(EMPTY_OBJECT) as empty:
        dp.apply(ruleset())
        dp_fd, empty_fd = dp.program_fd("dpp_xdp"), empty.program_fd("xdp_pass")
        for name, (port, _, _, verdict) in CASES.items():
            got = test_run(dp_fd, frame(port), 1).retval
            if got != verdict:
                raise SystemExit(f"{name}: verdict {got}, expected {verdict}: the case is not what it says")
        subjects = {"floor": lambda: test_run(empty_fd, frame(1000), repeat).duration_ns}
        for name, (port, *_rest) in CASES.items():
            subjects[name] = lambda packet=frame(port): test_run(dp_fd, packet, repeat).duration_ns
        samples = interleaved_samples(subjects, runs, rng)
    return rows(samples, CASES)


def rows(samples: dict[str, list[int]], cases: Iterable[str]) -> list[dict[str, Any]]:
    """Each case's medians against the unpoliced rule's and the floor's, and its difference to the
    unpoliced rule taken block by block, with its spread (harness.paired_differences; rule_cold's
    too)."""
    medians = {name: statistics.median(values) for name, values in samples.items()}
    unpoliced = medians["unpoliced"]
    return [
        {
            "case": name,
            "floor_ns": medians["floor"],
            "unpoliced_ns": unpoliced,
            "ns": medians[name],
            "above_unpoliced_ns": medians[name] - unpoliced,
            "ratio_to_unpoliced": round(medians[name] / unpoliced, 3),
            "ratio_above_floor": round((medians[name] - medians["floor"]) / (unpoliced - medians["floor"]), 3),
            "above_unpoliced_blocks_ns": paired_differences(samples, name, "unpoliced"),
        }
        for name in cases
    ]


def report(args: argparse.Namespace, name: str, rows: list[dict[str, Any]], line: Callable[[dict], str]) -> int:
    """Each row's line printed, the rows written to args.out (bench/qos/rule_cold.py's too)."""
    for row in rows:
        print(line(row), flush=True)
    write_results(args.out, name, args.runs, args.repeat, rows)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.qos.rule", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    add_block_arguments(parser)
    args = parser.parse_args(argv)
    return report(args, "qos_rule", measure(args.runs, args.repeat, random.Random(args.seed)), lambda row: (
        f"{row['case']:<20} {row['ns']:6.1f} ns  above unpoliced {row['above_unpoliced_ns']:+6.1f} ns  "
        f"x{row['ratio_to_unpoliced']:.3f}  (above the floor x{row['ratio_above_floor']:.3f})  by block "
        f"{spread(row['above_unpoliced_blocks_ns'])}"))


def spread(q: dict[str, float]) -> str:
    """A block-by-block difference: its median [first, third quartile]."""
    return f"{q['median']:+.1f} [{q['q1']:+.0f}, {q['q3']:+.0f}]"


if __name__ == "__main__":
    sys.exit(main())
