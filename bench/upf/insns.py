"""python -m bench.upf.insns: the instructions each UPF case executes on one session's packet
(bench/insns.py: the program as the kernel holds it, run here), with its calls of other BPF functions
and of helpers, beside the timings of `python -m bench.upf`. A count the machine's load does not
move: a change that takes instructions or a call off a case's path shows in one run.

Each case's packet first runs once in the kernel on CPU 0 (the route cache's slot the run here
reads), and the run here must come out with the kernel's verdict and frame.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from typing import Optional, Sequence

from netapp.testbed import netns

from bench import insns_command
from bench.harness import Harness, build_harness
from bench.insns import Counted
from bench.upf import run, workload

HOT_CASES = ("uplink", "downlink", "downlink_pool", "n9", "uplink_tx", "downlink_tx", "downlink_pool_tx", "miss")


def count_case(harness: Harness, case: workload.Case, instance: run.Instance) -> Counted:
    """The case's packet (session 0) through the instance's program in the kernel, then here."""
    subject = run.case_subject(case, instance, 1)
    _, output = subject.run(harness, 1)
    return insns_command.checked_count(case.name, instance.prog_fd, subject.packet,
                                       len(subject.packet) + workload.OUTPUT_ROOM, subject.ifindex,
                                       subject.verdict, output)


def count_cases(names: Sequence[str], top: int = 0) -> dict[str, Counted]:
    """Each case counted on an instance of its kind with one session, in the benchmark's site; with
    `top`, each case's `top` source lines by instructions executed printed too."""
    counted: dict[str, Counted] = {}
    with Harness(build_harness()) as harness, ExitStack() as stack:
        insns_command.on_cpu0(stack)
        stack.enter_context(netns.entered(run.make_site(stack)))
        instances: dict[str, run.Instance] = {}
        stack.callback(lambda: [instance.close() for instance in instances.values()])
        stack.callback(harness.release_target)
        for name in names:
            case = workload.CASES[name]
            if case.instance not in instances:
                instances[case.instance] = run.open_instance(case.instance, 1)
            counted[name] = count_case(harness, case, instances[case.instance])
            insns_command.print_lines(name, counted[name], instances[case.instance].prog_fd, top)
    return counted


def main(argv: Optional[Sequence[str]] = None) -> int:
    titles = {name: case.title for name, case in workload.CASES.items()}
    return insns_command.main(argv, "python -m bench.upf.insns", __doc__, HOT_CASES, count_cases, titles)


if __name__ == "__main__":
    sys.exit(main())
