"""python -m bench.upf.insns: the instructions each UPF case executes on one session's packet
(bench/insns.py: the program as the kernel holds it, run here), with its calls of other BPF functions
and of helpers, beside the timings of `python -m bench.upf`. A count the machine's load does not
move: a change that takes instructions or a call off a case's path shows in one run.

Each case's packet first runs once in the kernel on CPU 0 (the route cache's slot the run here
reads), and the run here must come out with the kernel's verdict and frame.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from contextlib import ExitStack
from typing import Optional, Sequence

from netapp.testbed import netns

from bench.harness import Harness, build_harness
from bench.insns import Counted, count_instructions
from bench.libbpf import prog_id
from bench.measure import WrongPathError
from bench.upf import run, workload

HOT_CASES = ("uplink", "downlink", "downlink_pool", "n9", "uplink_tx", "downlink_tx", "downlink_pool_tx", "miss")


def source_lines(prog_fd: int) -> list[str]:
    """Each instruction's source line (file:line, the text), as the loaded program's line info says
    (bpftool's xlated dump): an instruction without its own takes the one before's. A 16-byte load
    (ld_imm64) takes two indexes, as in the instructions bench/insns.py runs."""
    dump = subprocess.run(["bpftool", "-j", "prog", "dump", "xlated", "id", str(prog_id(prog_fd)), "linum"],
                          check=True, capture_output=True, text=True).stdout
    lines: list[str] = []
    where = "?"
    for insn in json.loads(dump):
        if "line_num" in insn:
            where = f"{os.path.basename(insn['file'])}:{insn['line_num']} {insn.get('src', '').strip()}"
        lines += [where] * (2 if insn["disasm"].startswith("(18)") else 1)
    return lines


def by_line(pcs: dict[int, int], lines: list[str], top: int) -> list[tuple[str, int]]:
    """The source lines whose instructions the run executed most, with their counts."""
    counts: Counter[str] = Counter()
    for pc, n in pcs.items():
        counts[lines[pc]] += n
    return counts.most_common(top)


def count_case(harness: Harness, case: workload.Case, instance: run.Instance) -> Counted:
    """The case's packet (session 0) through the instance's program in the kernel, then here."""
    subject = run.case_subject(case, instance, 1)
    _, output = subject.run(harness, 1)
    counted = count_instructions(instance.prog_fd, subject.packet, len(subject.packet) + workload.OUTPUT_ROOM,
                                 subject.ifindex)
    if counted.verdict != subject.verdict or counted.packet != output:
        raise WrongPathError(f"{case.name}: counted verdict {counted.verdict} and frame {counted.packet.hex()}, "
                             f"the kernel's {subject.verdict} and {output.hex()}")
    return counted


def count_cases(names: Sequence[str], top: int = 0) -> dict[str, Counted]:
    """Each case counted on an instance of its kind with one session, in the benchmark's site; with
    `top`, each case's `top` source lines by instructions executed printed too."""
    counted: dict[str, Counted] = {}
    with Harness(build_harness()) as harness, ExitStack() as stack:
        stack.callback(os.sched_setaffinity, 0, os.sched_getaffinity(0))
        os.sched_setaffinity(0, {0})
        stack.enter_context(netns.entered(run.make_site(stack)))
        instances: dict[str, run.Instance] = {}
        stack.callback(lambda: [instance.close() for instance in instances.values()])
        stack.callback(harness.release_target)
        for name in names:
            case = workload.CASES[name]
            if case.instance not in instances:
                instances[case.instance] = run.open_instance(case.instance, 1)
            counted[name] = count_case(harness, case, instances[case.instance])
            if top:
                print(format_lines(name, by_line(counted[name].pcs, source_lines(instances[case.instance].prog_fd), top)))
    return counted


def format_counts(counted: dict[str, Counted]) -> str:
    lines = ["| case | instructions | BPF calls | helper calls |", "|---|---|---|---|"]
    for name, c in counted.items():
        helpers = ", ".join(f"{helper} {n}" for helper, n in sorted(c.helpers.items())) or "none"
        lines.append(f"| {workload.CASES[name].title} | {c.instructions} | {c.calls} | {helpers} |")
    return "\n".join(lines)


def format_lines(name: str, lines: list[tuple[str, int]]) -> str:
    return "\n".join([f"{name}:", *(f"{n:5d}  {where}" for where, n in lines), ""])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.upf.insns", description=__doc__)
    parser.add_argument("--cases", default=",".join(HOT_CASES), help="cases to count, comma-separated")
    parser.add_argument("--lines", type=int, default=0, metavar="N",
                        help="also print each case's N source lines that executed the most instructions")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench.upf.insns: loading BPF programs and building a namespace need root", file=sys.stderr)
        return 2
    print(format_counts(count_cases([name for name in args.cases.split(",") if name], args.lines)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
