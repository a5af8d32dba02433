"""What the instruction-count commands (`python -m bench.upf.insns`, `python -m bench.qos.insns`)
share, over bench/insns.py's run: a count checked against the kernel's run of the same packet, the
source line of each instruction, a case's instructions summed by line, the table of counts, and the
command line (--cases, --lines N).

A count is only worth its case if the run here took the kernel's path: each command runs the
packet in the kernel first and `checked` refuses a count whose verdict or frame differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from contextlib import ExitStack
from typing import Callable, Mapping, Optional, Sequence

from bench.insns import Counted, count_instructions
from bench.libbpf import prog_id
from bench.measure import WrongPathError

# (case names, N) -> each case's count; with N, each case's N busiest source lines printed too
CountCases = Callable[[Sequence[str], int], dict[str, Counted]]


def on_cpu0(stack: ExitStack) -> None:
    """This thread on CPU 0 until `stack` closes: the counts read CPU 0's per-CPU entries, which the
    kernel's run before each count wrote."""
    stack.callback(os.sched_setaffinity, 0, os.sched_getaffinity(0))
    os.sched_setaffinity(0, {0})


def checked_count(name: str, prog_fd: int, packet: bytes, out_room: int, ifindex: int, verdict: int,
                  output: bytes) -> Counted:
    """`packet` counted through the program here, which must come out with the kernel's `verdict`
    and `output` for the same packet (run just before), else WrongPathError naming case `name`."""
    counted = count_instructions(prog_fd, packet, out_room, ifindex)
    if counted.verdict != verdict or counted.packet != output:
        raise WrongPathError(f"{name}: counted verdict {counted.verdict} and frame {counted.packet.hex()}, "
                             f"the kernel's {verdict} and {output.hex()}")
    return counted


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


def format_lines(name: str, lines: list[tuple[str, int]]) -> str:
    return "\n".join([f"{name}:", *(f"{n:5d}  {where}" for where, n in lines), ""])


def print_lines(name: str, counted: Counted, prog_fd: int, top: int) -> None:
    """Case `name`'s `top` source lines by instructions executed (none with `top` 0)."""
    if top:
        print(format_lines(name, by_line(counted.pcs, source_lines(prog_fd), top)))


def format_counts(counted: Mapping[str, Counted], titles: Mapping[str, str]) -> str:
    lines = ["| case | instructions | BPF calls | helper calls |", "|---|---|---|---|"]
    for name, c in counted.items():
        helpers = ", ".join(f"{helper} {n}" for helper, n in sorted(c.helpers.items())) or "none"
        lines.append(f"| {titles[name]} | {c.instructions} | {c.calls} | {helpers} |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]], prog: str, description: Optional[str], default_cases: Sequence[str],
         count_cases: CountCases, titles: Mapping[str, str]) -> int:
    """A command that counts the cases asked (--cases, of `titles`; `default_cases` unless told)
    and prints their table, each case's busiest lines first with --lines."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--cases", default=",".join(default_cases),
                        help=f"cases to count, comma-separated, of: {', '.join(titles)}")
    parser.add_argument("--lines", type=int, default=0, metavar="N",
                        help="also print each case's N source lines that executed the most instructions")
    args = parser.parse_args(argv)
    names = [name for name in args.cases.split(",") if name]
    unknown = [name for name in names if name not in titles]
    if unknown:
        parser.error(f"no such case: {', '.join(unknown)}")
    if os.geteuid() != 0:
        print(f"{prog}: loading BPF programs needs root", file=sys.stderr)
        return 2
    print(format_counts(count_cases(names, args.lines), titles))
    return 0
