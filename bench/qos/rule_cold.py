"""What policing a rule costs in the pipeline when its rule and policer are cold: N rules of one
kind each (UDP to a destination address of its own, pass), unpoliced or each with its own police
option (a policer of its own: N policers), frames walked over the N addresses so that every
repetition meets another rule, another policer and their counters (bench/harness.py's walk, with a
stride that defeats the prefetcher). With --drops, kinds whose policers drop every frame too (DROPS:
a bucket of one byte, a window that lets less than a byte through, as bench/qos/rule.py's drops),
each drop decided as in traffic over the rate: on what the CPU's line keeps of the policer's last
drop. The real program (dpp.bpf.c) of an anonymous instance, through
BPF_PROG_TEST_RUN; blocks that interleave the empty program (the floor), the unpoliced rules and
each policed kind in a shuffled order, medians. Every kind's verdict is checked first, for its first
and its last address. The hot counterpart, one rule repeated, is bench/qos/rule.py.

    python -m bench.qos.rule_cold --out bench/results/qos_rule_cold.json [--rules 10000] [--drops]

Methodology: bench/README.md, "bench/qos".
"""

from __future__ import annotations

import argparse
import ipaddress
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from bench.harness import Harness, Walk, add_block_arguments, build_harness, interleaved_samples
from bench.qos.rule import report, rows, spread
from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import CompiledRuleset, compile_intent, order_shapes, shape_maxima, sort_rules
from netapp.intents.models import Intent
from netapp.qos.abi import Clock

DEFAULT_OUT = Path("bench/results/qos_rule_cold.json")
XDP_DROP, XDP_PASS = 1, 2
PORT = 5000
FAST = {"rate_bps": 400 * 10**9, "burst_bytes": 1 << 30}  # never runs out in a run
SLOW = {"rate_bps": 8_000, "burst_bytes": 1}  # no frame ever fits: every one dropped


@dataclass(frozen=True)
class Kind:
    police: Optional[dict[str, Any]]  # its rules' police option; None: unpoliced
    verdict: int = XDP_PASS
    clock: Optional[Clock] = None  # bench-only: its policers rewritten on this clock once written


# kind -> its rules; each kind's rules take a /16 of their own
KINDS: dict[str, Kind] = {
    "unpoliced": Kind(None),
    "token_bucket": Kind({**FAST, "algorithm": "token_bucket"}),
    "gcra": Kind({**FAST, "algorithm": "gcra"}),
    "fixed_window": Kind({**FAST, "algorithm": "fixed_window"}),
}
# --drops: the control plane writes these precise (a burst under an MTU); the coarse ones, rewritten,
# keep no tick (none is written), so that their lines keep the U in ns a drop at realistic rates
# keeps and read the coarse clock's word (nf/qos/stamp.h, "A bucket seen short in ns")
DROPS: dict[str, Kind] = {
    "token_bucket drop": Kind({**SLOW, "algorithm": "token_bucket"}, XDP_DROP, Clock.COARSE),
    "gcra drop": Kind({**SLOW, "algorithm": "gcra"}, XDP_DROP, Clock.COARSE),
    "token_bucket drop, precise": Kind({**SLOW, "algorithm": "token_bucket"}, XDP_DROP),
    "fixed_window drop, precise": Kind({**SLOW, "algorithm": "fixed_window"}, XDP_DROP),
}
FIRST = int(ipaddress.IPv4Address("10.0.0.0"))
DST_AT, SRC_AT, IP_CSUM_AT = 30, 26, 24  # IPv4 destination, source and header checksum in the frame


def first_address(kind: int) -> int:
    return FIRST + (kind << 16)


def frame() -> bytes:
    """A 64-byte UDP frame; the walk writes its destination (and source) for every repetition."""
    head = Ether() / IP(src="192.168.0.1", dst="10.0.0.0") / UDP(sport=9, dport=PORT)
    return bytes(head / bytes(64 - len(head)))


def intent_id(name: str, n: int) -> str:
    return f"{name.replace(' ', '-').replace(',', '')}-{n}"


def ruleset(rules: int, kinds: dict[str, Kind]) -> CompiledRuleset:
    """`rules` rules per kind, one destination address each."""
    compiled = []
    for kind, (name, spec) in enumerate(kinds.items()):
        action = {"type": "pass", **({"police": spec.police} if spec.police else {})}
        for n in range(rules):
            dst = ipaddress.IPv4Address(first_address(kind) + n)
            body = {"id": intent_id(name, n), "match": {"protocol": "udp", "dst": f"{dst}/32", "dst_port": PORT},
                    "action": action}
            compiled.append(compile_intent(Intent.model_validate(body), {}))
    shapes, maxima = order_shapes(shape_maxima(compiled))
    return CompiledRuleset(sort_rules(compiled, shapes), shapes, maxima)


def rewrite_clocks(dp: Dataplane, rules: int, kinds: dict[str, Kind]) -> None:
    """Each kind's policers on the clock it asks for (Kind.clock), their state as it is."""
    slots = dp.table("dpp_rule_policers")
    policers = dp.table("dpp_policers")
    for name, spec in kinds.items():
        if spec.clock is None:
            continue
        ids = [slots.get(dp.installed_intents[intent_id(name, n)]).policer for n in range(rules)]
        values = policers.lookup(ids)
        for value in values:
            value.clock = spec.clock
        policers.update(zip(ids, values))


def walk(rules: int, kind: int) -> Walk:
    """Destination first + f of the kind's /16 for flow f (the source moves along, the checksum kept)."""
    return Walk(rules, teid_base=first_address(kind), src_base=int(ipaddress.IPv4Address("192.168.0.1")),
                teid_off=DST_AT, src_off=SRC_AT, csum_off=IP_CSUM_AT)


def check_verdicts(harness: Harness, dp_fd: int, rules: int, kinds: dict[str, Kind]) -> None:
    for kind, (name, spec) in enumerate(kinds.items()):
        for position in (0, rules - 1):
            harness.set_walk(walk(rules, kind), position)
            got = harness.run_walk(dp_fd, frame(), 1).retval
            if got != spec.verdict:
                raise SystemExit(f"{name}: verdict {got}, expected {spec.verdict}: the case is not what it says")


def measure(rules: int, runs: int, repeat: int, rng: random.Random, kinds: dict[str, Kind]) -> list[dict[str, Any]]:
    policers = 2 * len(kinds) * rules + 2  # the upper half for rules (netapp.qos.ids)
    sizes = {"dpp_policers": policers, "dpp_rule_policers": len(kinds) * rules + 1}
    with Harness(build_harness()) as harness, Dataplane.open(max_rules=len(kinds) * rules + 1, map_sizes=sizes) as dp:
        try:
            dp.apply(ruleset(rules, kinds))
            rewrite_clocks(dp, rules, kinds)
            dp_fd = dp.program_fd("dpp_xdp")
            check_verdicts(harness, dp_fd, rules, kinds)

            def timed(prog_fd: int, kind: int) -> int:
                harness.set_walk(walk(rules, kind))
                return harness.run_walk(prog_fd, frame(), repeat).duration_ns

            subjects = {"floor": lambda: timed(harness.empty_fd, 0)}
            for kind, name in enumerate(kinds):
                subjects[name] = lambda kind=kind: timed(dp_fd, kind)
            samples = interleaved_samples(subjects, runs, rng)
        finally:
            harness.release_target()
    return [{"rules": rules, **row} for row in rows(samples, kinds)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.qos.rule_cold", description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--rules", type=int, default=10_000, help="rules (and policers) of each kind, walked cold")
    parser.add_argument("--drops", action="store_true", help="the kinds whose policers drop every frame too (DROPS)")
    add_block_arguments(parser)
    args = parser.parse_args(argv)
    kinds = {**KINDS, **(DROPS if args.drops else {})}
    return report(args, "qos_rule_cold", measure(args.rules, args.runs, args.repeat, random.Random(args.seed), kinds),
                  lambda row: f"{row['rules']:>7} {row['case']:<26} {row['ns']:6.1f} ns  above unpoliced "
                  f"{row['above_unpoliced_ns']:+6.1f} ns  (floor {row['floor_ns']:.1f})  by block "
                  f"{spread(row['above_unpoliced_blocks_ns'])}")


if __name__ == "__main__":
    sys.exit(main())
