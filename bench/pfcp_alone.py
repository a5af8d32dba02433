"""Two pieces of an establishment's applier timed alone, as a group of 32 establishments makes them:
this checkout's code against REV's, alternated in one process, the thread's CPU an establishment.

- policers: a group's 64 policers (each session's uplink and downlink MBR: two policies, two chunks)
  written by netapp.qos.applier's PolicerApplier, into a data-plane instance's dpp_policers and
  dpp_policer_stats (root), the ids moving on through the UPF's range group after group;
- slots: a group's entries split into the slot tables' (dpp_upf_teids, dpp_upf_ue4: a copy of each
  action with ENTRY set) and the hashed ones, by netapp.upf.applier's BpfApplier._split and
  _split_downlink.

    python -m bench.pfcp_alone --baseline main --rounds 7

REV's netapp/qos/applier.py and netapp/upf/applier.py are loaded as modules of their own (their imports
are this checkout's). A piece of bench.pfcp_pieces' table, timed apart from the run's noise. Results:
bench/README.md ("bench/pfcp.py").
"""

from __future__ import annotations

import argparse
import ipaddress
import time
from types import ModuleType, SimpleNamespace
from typing import Any, Callable, Optional, Sequence

from bench.pfcp_numbers import alternated, sides

GROUP = 32  # establishments a group
RATES = (100_000_000, 50_000_000)  # a session's downlink and uplink MBR: two chunks


def policers(qos: ModuleType, table_of: Callable[[str], Any], groups: int) -> float:
    """us of thread CPU an establishment for its two policers, `groups` groups of GROUP."""
    from netapp.qos.ids import upf_ids
    from netapp.qos.spec import PoliceDefaults, PolicerSpec

    applier = qos.PolicerApplier(table_of, window_credit=False)
    defaults = PoliceDefaults()
    specs = [PolicerSpec(rate=rate, burst=defaults.burst(rate), algo=defaults.algo) for rate in RATES]
    ids = upf_ids(applier.max_entries)
    span = (len(ids) // (2 * GROUP)) * 2 * GROUP
    started = time.thread_time()
    for group in range(groups):
        first = ids.start + (group * 2 * GROUP) % span
        applier.apply({first + at: specs[at % 2] for at in range(2 * GROUP)})
    return (time.thread_time() - started) / (groups * GROUP) * 1e6


def slots(upf: ModuleType, groups: int) -> float:
    """us of thread CPU an establishment for its entries split (one uplink, one downlink), `groups`
    groups of GROUP (each group's own entries: none made again)."""
    from netapp.upf.abi import QFI_ANY, PdrAction
    from netapp.upf.compiler import Entries

    base = int(ipaddress.IPv4Address("10.64.0.0"))
    owner = SimpleNamespace(teid_slots=1 << 20, _pools={1: (base, 1 << 16, 0)})
    made = []
    for group in range(groups):
        first = group * GROUP
        made.append(Entries(
            uplink={(first + at, QFI_ANY): PdrAction(teid=first + at) for at in range(GROUP)},
            downlink={(1, 4, (base + first + at).to_bytes(4, "big") + bytes(12)): PdrAction(teid=at)
                      for at in range(GROUP)}))
    split, split_downlink = upf.BpfApplier._split, upf.BpfApplier._split_downlink
    started = time.thread_time()
    for entries in made:
        split(owner, entries)
        split_downlink(owner, entries)
    return (time.thread_time() - started) / (groups * GROUP) * 1e6


def main(argv: Optional[Sequence[str]] = None) -> int:
    from netapp.dataplane.facade import Dataplane

    parser = argparse.ArgumentParser(prog="python -m bench.pfcp_alone", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REV", default="main", help="git revision to compare with")
    parser.add_argument("--rounds", type=int, default=7, help="runs of each side, alternating")
    parser.add_argument("--groups", type=int, default=200, help="groups of 32 establishments a run")
    args = parser.parse_args(argv)
    commit, modules = sides(args.baseline, ["netapp/qos/applier.py", "netapp/upf/applier.py"])
    with Dataplane.open() as dataplane:
        pieces = {"policers": lambda side: policers(side[0], dataplane.table, args.groups),
                  "slots": lambda side: slots(side[1], args.groups)}
        print(f"pieces of a group's applier, us of CPU an establishment; baseline {commit[:12]}")
        for piece, timed in pieces.items():
            print("\n".join([f" {piece}:", *alternated(args.rounds, modules, timed)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
