"""python -m bench.qos.insns: the instructions the pipeline (dpp.bpf.c's dpp_xdp) executes on one
64-byte frame of a rule (bench/qos/rule.py's: UDP to a port, pass) unpoliced, and policed by its
own policer (an intent's police option) or by its slice's alone (the rule without one of its own,
nf/qos/rule.h), with each algorithm passing and dropping (bench/insns.py: the program as the kernel
holds it, run here), with its calls of other BPF functions and of helpers, beside the timings of
`python -m bench.qos.rule`. A count the machine's load does not move: a change that takes
instructions or a call off a policer's path shows in one run.

Passing: 1 Gb/s, a burst of 1 GiB: a token bucket on the coarse clock on its CPU's credit,
a window of 2^32 ns (4.3 s) on its CPU's credit too: a frame never waits on the window's turn in
the run here, which reads the clock after the kernel (once in some thousands of runs at most).
Passing on the shared state (`shared`): 400 Gb/s, a burst of 8 KiB: too small a burst for a
CPU's chunk (netapp/qos/applier.py chunk_for: under an MTU, none), so every frame is decided on the
policer's shared bucket or window (the lock, the compare-and-swap, the precise clock), as a pass
the credit does not cover is; the bucket refills (or the window of 128 ns ends) between two runs.
Dropping: 8 kb/s, a burst of 1 byte: no frame ever fits, every frame is dropped as a policer over
its rate drops it. Each case's frame runs SETTLING_FRAMES times in the kernel on CPU 0 (the
CPU's line the run here reads) before it is counted, so that the count is of a frame in steady
state, not of the first one after the write (which carves its CPU's first credit): then once more
in the kernel, whose verdict must be the case's, and the run here must come out as that run did.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import Optional, Sequence

from netapp.dataplane.facade import Dataplane
from netapp.intents.compiler import SharedPolice
from netapp.qos.abi import Algo
from netapp.qos.spec import PolicerSpec

from bench import insns_command
from bench.insns import Counted
from bench.libbpf import test_run
from bench.measure import WrongPathError
from bench.qos.rule import XDP_DROP, XDP_PASS, Case, frame, written

ALGORITHMS = ("token_bucket", "gcra", "fixed_window", "sliding_window")
PASSING = {"rate_bps": 10**9, "burst_bytes": 1 << 30}
SHARED = {"rate_bps": 400 * 10**9, "burst_bytes": 8 << 10}
DROPPING = {"rate_bps": 8_000, "burst_bytes": 1}
DECISIONS = {"pass": (PASSING, XDP_PASS), "shared": (SHARED, XDP_PASS), "drop": (DROPPING, XDP_DROP)}
SETTLING_FRAMES = 3
FIRST_PORT = 1100


def slice_police(algorithm: str, decision: str) -> SharedPolice:
    """A case's slice policer, a slice of its own (a slice's rules share its policer)."""
    police, _ = DECISIONS[decision]
    spec = PolicerSpec(rate=police["rate_bps"], burst=police["burst_bytes"], algo=Algo[algorithm.upper()])
    return SharedPolice(f"slice bench/{algorithm}-{decision}", spec)


def case_title(owner: str, algorithm: str, decision: str) -> str:
    whose = "its own policer" if owner == "own" else "its slice's policer"
    return f"{whose}, {algorithm.replace('_', ' ')}: {decision}"


def policed_cases() -> dict[str, tuple[str, Case]]:
    """name -> (title, case): the rule unpoliced, then each algorithm passing and dropping on the
    rule's own policer, then on its slice's."""
    cases = {"unpoliced": ("the rule unpoliced", Case(FIRST_PORT, None))}
    for owner in ("own", "slice"):
        for algorithm in ALGORITHMS:
            for decision, (police, verdict) in DECISIONS.items():
                port = FIRST_PORT + len(cases)
                if owner == "own":
                    case = Case(port, {**police, "algorithm": algorithm}, verdict)
                else:
                    case = Case(port, None, verdict, slice=slice_police(algorithm, decision))
                cases[f"{owner} {algorithm} {decision}"] = (case_title(owner, algorithm, decision), case)
    return cases


CASES = policed_cases()
TITLES = {name: title for name, (title, _) in CASES.items()}


def count_case(prog_fd: int, name: str, case: Case) -> Counted:
    """The case's frame SETTLING_FRAMES times in the kernel, once more, then here."""
    packet = frame(case.port)
    test_run(prog_fd, packet, SETTLING_FRAMES)
    kernel = test_run(prog_fd, packet, 1)
    if kernel.retval != case.verdict:
        raise WrongPathError(f"{name}: the kernel's verdict {kernel.retval}, the case's {case.verdict}")
    return insns_command.checked_count(name, prog_fd, packet, len(packet), 0, kernel.retval, kernel.data)


def count_cases(names: Sequence[str], top: int = 0) -> dict[str, Counted]:
    """Each case's rule written into one anonymous instance, its frame counted on CPU 0; with `top`,
    each case's `top` source lines by instructions executed printed too."""
    cases = {name: CASES[name][1] for name in names}
    counted: dict[str, Counted] = {}
    with ExitStack() as stack:
        insns_command.on_cpu0(stack)
        prog_fd = written(stack.enter_context(Dataplane.open()), cases).program_fd("dpp_xdp")
        for name, case in cases.items():
            counted[name] = count_case(prog_fd, name, case)
            insns_command.print_lines(name, counted[name], prog_fd, top)
    return counted


def main(argv: Optional[Sequence[str]] = None) -> int:
    return insns_command.main(argv, "python -m bench.qos.insns", __doc__, list(CASES), count_cases, TITLES)


if __name__ == "__main__":
    sys.exit(main())
