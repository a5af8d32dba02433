"""What policing a rule costs in the pipeline when its rule and policer are cold: N rules of one
kind each (UDP to a destination address of its own, pass), unpoliced or each with its own police
option (a policer of its own: N policers), frames walked over the N addresses so that every
repetition meets another rule, another policer and their counters (bench/harness.py's walk, with a
stride that defeats the prefetcher). The real program (dpp.bpf.c) of an anonymous instance, through
BPF_PROG_TEST_RUN; blocks that interleave the empty program (the floor), the unpoliced rules and
each policed kind in a shuffled order, medians. Every kind's verdict is checked first, for its first
and its last address. The hot counterpart, one rule repeated, is bench/qos/rule.py.

    python -m bench.qos.rule_cold --out bench/results/qos_rule_cold.json [--rules 10000]

Methodology: bench/README.md, "bench/qos".
"""

from __future__ import annotations

import argparse
import ipaddress
import random
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.harness import Harness, Walk, add_block_arguments, build_harness, interleaved_samples
from bench.qos.rule import report, rows, spread
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import CompiledRuleset, compile_intent, order_shapes, shape_maxima, sort_rules
from netapp.intents.models import Intent

DEFAULT_OUT = Path("bench/results/qos_rule_cold.json")
XDP_PASS = 2
PORT = 5000
FAST = {"rate_bps": 400 * 10**9, "burst_bytes": 1 << 30}  # never runs out in a run
# kind -> its police option (None: unpoliced); each kind's rules take a /16 of their own
KINDS: dict[str, Optional[dict[str, Any]]] = {
    "unpoliced": None,
    "token_bucket": {**FAST, "algorithm": "token_bucket"},
    "gcra": {**FAST, "algorithm": "gcra"},
    "fixed_window": {**FAST, "algorithm": "fixed_window"},
}
FIRST = int(ipaddress.IPv4Address("10.0.0.0"))
DST_AT, SRC_AT, IP_CSUM_AT = 30, 26, 24  # IPv4 destination, source and header checksum in the frame


def first_address(kind: int) -> int:
    return FIRST + (kind << 16)


def frame() -> bytes:
    """A 64-byte UDP frame; the walk writes its destination (and source) for every repetition."""
    head = Ether() / IP(src="192.168.0.1", dst="10.0.0.0") / UDP(sport=9, dport=PORT)
    return bytes(head / bytes(64 - len(head)))


def ruleset(rules: int) -> CompiledRuleset:
    """`rules` rules per kind, one destination address each."""
    compiled = []
    for kind, (name, police) in enumerate(KINDS.items()):
        action = {"type": "pass", **({"police": police} if police else {})}
        for n in range(rules):
            dst = ipaddress.IPv4Address(first_address(kind) + n)
            body = {"id": f"{name}-{n}", "match": {"protocol": "udp", "dst": f"{dst}/32", "dst_port": PORT},
                    "action": action}
            compiled.append(compile_intent(Intent.model_validate(body), {}))
    shapes, maxima = order_shapes(shape_maxima(compiled))
    return CompiledRuleset(sort_rules(compiled, shapes), shapes, maxima)


def walk(rules: int, kind: int) -> Walk:
    """Destination first + f of the kind's /16 for flow f (the source moves along, the checksum kept)."""
    return Walk(rules, teid_base=first_address(kind), src_base=int(ipaddress.IPv4Address("192.168.0.1")),
                teid_off=DST_AT, src_off=SRC_AT, csum_off=IP_CSUM_AT)


def check_verdicts(harness: Harness, dp_fd: int, rules: int) -> None:
    for kind, name in enumerate(KINDS):
        for position in (0, rules - 1):
            harness.set_walk(walk(rules, kind), position)
            got = harness.run_walk(dp_fd, frame(), 1).retval
            if got != XDP_PASS:
                raise SystemExit(f"{name}: verdict {got}, expected {XDP_PASS}: the case is not what it says")


def measure(rules: int, runs: int, repeat: int, rng: random.Random) -> list[dict[str, Any]]:
    policers = 2 * len(KINDS) * rules + 2  # the upper half for rules (netapp.qos.ids)
    sizes = {"dpp_policers": policers, "dpp_rule_policers": len(KINDS) * rules + 1}
    with Harness(build_harness()) as harness, Dataplane.open(max_rules=len(KINDS) * rules + 1, map_sizes=sizes) as dp:
        try:
            dp.apply(ruleset(rules))
            dp_fd = dp.program_fd("dpp_xdp")
            check_verdicts(harness, dp_fd, rules)

            def timed(prog_fd: int, kind: int) -> int:
                harness.set_walk(walk(rules, kind))
                return harness.run_walk(prog_fd, frame(), repeat).duration_ns

            subjects = {"floor": lambda: timed(harness.empty_fd, 0)}
            for kind, name in enumerate(KINDS):
                subjects[name] = lambda kind=kind: timed(dp_fd, kind)
            samples = interleaved_samples(subjects, runs, rng)
        finally:
            harness.release_target()
    return [{"rules": rules, **row} for row in rows(samples, KINDS)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.qos.rule_cold", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--rules", type=int, default=10_000, help="rules (and policers) of each kind, walked cold")
    add_block_arguments(parser)
    args = parser.parse_args(argv)
    return report(args, "qos_rule_cold", measure(args.rules, args.runs, args.repeat, random.Random(args.seed)),
                  lambda row: f"{row['rules']:>7} {row['case']:<14} {row['ns']:6.1f} ns  above unpoliced "
                  f"{row['above_unpoliced_ns']:+6.1f} ns  (floor {row['floor_ns']:.1f})  by block "
                  f"{spread(row['above_unpoliced_blocks_ns'])}")


if __name__ == "__main__":
    sys.exit(main())
