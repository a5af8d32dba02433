"""How much of the BPF stack each call chain of a loaded program takes, as the verifier counts it,
and whether it would still load on a kernel that rounds frames to 32 bytes.

    sudo .venv/bin/python -m bench.stack                 # every object of this checkout's build
    sudo .venv/bin/python -m bench.stack --object dataplane/build/dpp.bpf.o

A program's functions (the entry and each BPF-to-BPF subprogram the verifier did not see inlined)
each have a frame; the verifier adds the frames of every chain of calls from the entry and refuses
the program when a chain passes 512 bytes (MAX_BPF_STACK). Each frame is rounded first: to 16 bytes
on the kernels since 6.9 when the program is JITed, to 32 bytes (a frame of 0 counting 32) on older
ones such as Ubuntu 24.04's 6.8, which then refuse a program this kernel takes. A subprogram that
makes a tail call must also be reached with less than 256 bytes of frames above it.

The figures are the verifier's own: each function's frame from the "stack depth A+B+C" line of its
BPF_LOG_STATS log (in the order of the program's functions), the functions' names from their
kallsyms, and who calls whom from the verified instructions (a BPF-to-BPF call's imm holds the
callee's number; a callback handed to a helper such as bpf_loop runs in a frame below the caller's,
so it counts as a call; a BPF timer's callback, which runs on a stack of its own, is counted so too,
which can only overstate). The verifier only counts the stack the paths it explores touch, and the
load-time knobs (.rodata) decide which paths those are: an object is loaded once for every
combination of its one-byte knobs and each chain kept at its deepest. The line's depths include
the 24 bytes an inlined bpf_loop adds to its caller's frame after the stack check (its counter,
bound and context, below the frame the check saw): they are taken off again where a function loads
a callback and calls it itself with no call to bpf_loop left, which is what the inlining leaves.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import re
import struct
import subprocess
import sys
from ctypes import Structure, c_size_t, c_uint32, c_uint64
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from bench.harness import REPO
from bench.libbpf import load_libbpf

MAX_BPF_STACK = 512
TAIL_CALL_STACK = 256  # the frames a subprogram making a tail call may be reached under
BPF_LOG_STATS = 4
LOG_SIZE = 1 << 16
BUILD = REPO / "dataplane" / "build"
BPF_FUNC_TAIL_CALL = 12
INLINED_LOOP_STACK = 24  # three 8-byte slots the verifier adds below an inlined bpf_loop's caller
BPF_PSEUDO_CALL, BPF_PSEUDO_FUNC = 1, 4
KNOB_PREFIX = "cfg_"

_DEPTHS = re.compile(r"stack depth ([0-9+]+)")



class ProgInfo(Structure):
    """struct bpf_prog_info (linux/bpf.h) up to nr_func_info."""

    _fields_ = [
        ("type", c_uint32), ("id", c_uint32), ("tag", ctypes.c_uint8 * 8),
        ("jited_prog_len", c_uint32), ("xlated_prog_len", c_uint32),
        ("jited_prog_insns", c_uint64), ("xlated_prog_insns", c_uint64),
        ("load_time", c_uint64), ("created_by_uid", c_uint32), ("nr_map_ids", c_uint32),
        ("map_ids", c_uint64), ("name", ctypes.c_char * 16), ("ifindex", c_uint32),
        ("gpl_compatible", c_uint32), ("netns_dev", c_uint64), ("netns_ino", c_uint64),
        ("nr_jited_ksyms", c_uint32), ("nr_jited_func_lens", c_uint32),
        ("jited_ksyms", c_uint64), ("jited_func_lens", c_uint64),
        ("btf_id", c_uint32), ("func_info_rec_size", c_uint32), ("func_info", c_uint64),
        ("nr_func_info", c_uint32),
    ]  # fmt: skip


class FuncInfo(Structure):
    """struct bpf_func_info: where a function's instructions start."""

    _fields_ = [("insn_off", c_uint32), ("type_id", c_uint32)]


@dataclass(frozen=True)
class Function:
    """One frame of a program: its name, its stack as the verifier's log gives it, whom it calls
    (by number in the program), whether it makes a tail call and whether a bpf_loop of it was
    inlined."""

    name: str
    depth: int
    callees: tuple[int, ...]
    tail_call: bool
    inlined_loop: bool = False

    @property
    def frame(self) -> int:
        """The stack the verifier's check counted: the log's depth without the inlined loop's
        slots, added after the check."""
        return self.depth - INLINED_LOOP_STACK if self.inlined_loop else self.depth


@dataclass(frozen=True)
class Program:
    name: str
    functions: tuple[Function, ...]

    def chains(self) -> Iterator[tuple[int, ...]]:
        """Every chain of calls from the entry to a function that calls no other. The verifier
        refuses recursion; should a timer's callback hand itself to the timer again (counted as a
        call here), a chain stops where a function would come back (clock_timer_run re-arms with
        bpf_timer_start and names no callback)."""

        def walk(chain: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
            callees = [callee for callee in self.functions[chain[-1]].callees if callee not in chain]
            if not callees:
                yield chain
            for callee in callees:
                yield from walk(chain + (callee,))

        return walk((0,))

    def names(self, chain: tuple[int, ...]) -> list[str]:
        return [self.functions[index].name for index in chain]


def rounded(depth: int, granule: int) -> int:
    """A frame as the verifier adds it: rounded up to 16 bytes (6.9 on, JITed), or to 32 with a
    frame of 0 counting 32 (before, and the interpreter's)."""
    if granule == 32:
        depth = max(depth, 1)
    return -(-depth // granule) * granule


def chain_stack(program: Program, chain: tuple[int, ...], granule: int) -> int:
    return sum(rounded(program.functions[index].frame, granule) for index in chain)


def tail_call_stack(program: Program, chain: tuple[int, ...], granule: int) -> int:
    """The frames down to (and with) the deepest subprogram of the chain that makes a tail call, 0
    when none does: the verifier wants it under 256 bytes (the entry's own tail calls are free)."""
    deepest = max((at for at in range(1, len(chain)) if program.functions[chain[at]].tail_call), default=0)
    return chain_stack(program, chain[: deepest + 1], granule) if deepest else 0



def _info(fd: int, info: ProgInfo) -> ProgInfo:
    size = c_uint32(ctypes.sizeof(info))
    if load_libbpf().bpf_obj_get_info_by_fd(fd, ctypes.byref(info), ctypes.byref(size)):
        raise OSError(ctypes.get_errno(), "bpf_obj_get_info_by_fd")
    return info


def read_functions(fd: int, depths: list[int]) -> tuple[Function, ...]:
    """The loaded program's functions: names from kallsyms, calls and tail calls from the verified
    instructions, split where each function starts (its BTF func info)."""
    head = _info(fd, ProgInfo())
    count = head.nr_func_info
    insns = ctypes.create_string_buffer(head.xlated_prog_len)
    ksyms = (c_uint64 * count)()
    starts = (FuncInfo * count)()
    _info(fd, ProgInfo(xlated_prog_len=head.xlated_prog_len, xlated_prog_insns=ctypes.addressof(insns),
                       nr_jited_ksyms=count, jited_ksyms=ctypes.addressof(ksyms),
                       nr_func_info=count, func_info_rec_size=ctypes.sizeof(FuncInfo),
                       func_info=ctypes.addressof(starts)))  # fmt: skip
    if count != len(depths):
        raise RuntimeError(f"{count} functions but {len(depths)} stack depths in the verifier's log")
    symbols = bpf_symbols()
    loop = helper_imm("bpf_loop")
    raw = insns.raw
    bounds = [start.insn_off for start in starts] + [len(raw) // 8]
    functions = []
    for index in range(count):
        name = symbols.get(ksyms[index], f"function {index}")
        functions.append(read_calls(name, depths[index], raw, range(bounds[index], bounds[index + 1]), loop))
    return tuple(functions)


def read_calls(name: str, depth: int, raw: bytes, pcs: range, loop: Optional[int]) -> Function:
    """The function whose verified instructions are `pcs` of `raw`: whom it calls and whether a
    bpf_loop of it was inlined (`loop`: the imm a call to the bpf_loop helper has in the dump)."""
    called, callbacks, tail_call, loop_called = set(), set(), False, False
    for pc in pcs:
        code, regs, _off, imm = instruction(raw, pc)
        if code == 0x85 and regs >> 4 == BPF_PSEUDO_CALL:
            called.add(imm)  # a JITed program's dump: the callee's number
        elif code == 0x85 and regs >> 4 == 0:
            tail_call |= imm == BPF_FUNC_TAIL_CALL
            loop_called |= imm == loop
        elif code == 0x18 and regs >> 4 == BPF_PSEUDO_FUNC:
            callbacks.add(instruction(raw, pc + 1)[3])  # a callback: its number in the next half
    # an inlined bpf_loop calls its callback from the caller's code; a timer's callback is only handed on
    inlined_loop = loop is not None and bool(callbacks & called) and not loop_called
    return Function(name, depth, tuple(sorted(called | callbacks)), tail_call, inlined_loop)


def bpf_symbols() -> dict[int, str]:
    """Address -> name of the loaded BPF functions (/proc/kallsyms' bpf_prog_<tag>_<name>; root
    reads real addresses). Read afresh: each load puts its functions at new addresses."""
    symbols = {}
    with open("/proc/kallsyms") as lines:
        for line in lines:
            address, _kind, name = line.split()[:3]
            if name.startswith("bpf_prog_"):
                symbols[int(address, 16)] = name.split("_", 3)[-1]
    return symbols


def helper_imm(helper: str) -> Optional[int]:
    """The imm a call to `helper` has in a loaded program's dump: the helper's address less
    __bpf_call_base's (the kernel's own fix-up), None when kallsyms does not show both."""
    wanted = {helper: 0, "__bpf_call_base": 0}
    with open("/proc/kallsyms") as lines:
        for line in lines:
            address, _kind, name = line.split()[:3]
            if name in wanted:
                wanted[name] = int(address, 16)
    if not all(wanted.values()):
        return None
    return wanted[helper] - wanted["__bpf_call_base"]


def instruction(raw: bytes, pc: int) -> tuple[int, int, int, int]:
    """Instruction `pc` as (code, registers byte, off, imm)."""
    return struct.unpack_from("<BBhi", raw, pc * 8)


def knobs(path: Path) -> dict[str, int]:
    """The object's one-byte load-time knobs (cfg_* in .rodata): name -> offset."""
    dumped = subprocess.run(["bpftool", "btf", "dump", "file", str(path), "--json"], check=True,
                            capture_output=True, text=True)  # fmt: skip
    types = {entry["id"]: entry for entry in json.loads(dumped.stdout)["types"]}
    rodata = next((t for t in types.values() if t["kind"] == "DATASEC" and t["name"] == ".rodata"), None)
    found = {}
    for var in (rodata or {}).get("vars", []):
        name = types[var["type_id"]]["name"]
        if name.startswith(KNOB_PREFIX) and var["size"] == 1:
            found[name] = var["offset"]
    return found


def load_programs(path: Path, settings: Optional[dict[int, int]] = None) -> list[Program]:
    """Load `path` once (knobs at .rodata offsets set to the values of `settings`) and read each
    program's functions; the programs are unloaded before this returns."""
    lib = load_libbpf()
    obj = lib.bpf_object__open_file(str(path).encode(), None)
    if not obj:
        err = ctypes.get_errno()
        raise OSError(err, f"bpf_object__open_file({path}): {os.strerror(err)}")
    try:
        _set_knobs(lib, obj, settings or {})
        logs = {}
        prog = lib.bpf_object__next_program(obj, None)
        while prog:
            if lib.bpf_program__autoload(prog):
                logs[prog] = ctypes.create_string_buffer(LOG_SIZE)
                lib.bpf_program__set_log_buf(prog, logs[prog], LOG_SIZE)
                lib.bpf_program__set_log_level(prog, BPF_LOG_STATS)
            prog = lib.bpf_object__next_program(obj, prog)
        rc = lib.bpf_object__load(obj)
        if rc < 0:
            raise OSError(-rc, f"bpf_object__load({path.name}): {os.strerror(-rc)}")
        return [_program(lib, prog, log.value.decode(errors="replace")) for prog, log in logs.items()]
    finally:
        lib.bpf_object__close(obj)


def _set_knobs(lib: ctypes.CDLL, obj: int, settings: dict[int, int]) -> None:
    if not settings:
        return
    rodata = lib.bpf_object__find_map_by_name(obj, b".rodata")
    size = c_size_t()
    data = lib.bpf_map__initial_value(rodata, ctypes.byref(size))
    for offset, value in settings.items():
        ctypes.c_uint8.from_address(data + offset).value = value


def _program(lib: ctypes.CDLL, prog: int, log: str) -> Program:
    name = lib.bpf_program__name(prog).decode()
    match = _DEPTHS.search(log)
    if not match:
        raise RuntimeError(f"{name}: no stack depth in the verifier's log")
    depths = [int(depth) for depth in match.group(1).split("+")]
    return Program(name, read_functions(lib.bpf_program__fd(prog), depths))


def deepest_programs(path: Path) -> list[Program]:
    """Each program of `path` as loaded under every combination of its one-byte knobs (0 or 1),
    each function at the deepest frame any load gave it (its calls are the same in every load
    where it is not cut out; a knob that cuts a call out only takes chains away)."""
    offsets = sorted(knobs(path).values())
    merged: dict[str, Program] = {}
    for values in itertools.product((0, 1), repeat=len(offsets)):
        for program in load_programs(path, dict(zip(offsets, values))):
            merged[program.name] = _deeper(merged.get(program.name), program)
    return list(merged.values())


def _deeper(known: Optional[Program], program: Program) -> Program:
    if known is None:
        return program
    by_name = {function.name: function for function in known.functions}
    functions = []
    for function in program.functions:
        other = by_name.get(function.name)
        if other is not None and other.frame > function.frame:
            function = Function(function.name, other.depth, function.callees,
                                function.tail_call or other.tail_call, other.inlined_loop)
        functions.append(function)
    # the load with the most functions keeps the most chains
    return Program(program.name, tuple(functions)) if len(functions) >= len(known.functions) else known


def report(path: Path) -> list[dict]:
    """Every chain of every program of `path`: its functions, frames and sums at 16 and 32."""
    return [row for program in deepest_programs(path) for row in rows(path, program)]


def rows(path: Path, program: Program) -> list[dict]:
    """Every chain of `program` (of `path`): its functions, frames and sums at 16 and 32."""
    found = []
    for chain in program.chains():
        found.append({
            "object": path.name,
            "program": program.name,
            "chain": program.names(chain),
            "frames": [program.functions[index].frame for index in chain],
            "stack16": chain_stack(program, chain, 16),
            "stack32": chain_stack(program, chain, 32),
            "tail_call32": tail_call_stack(program, chain, 32),
        })  # fmt: skip
    return found


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--object", type=Path, action="append", help="an object to load (default: every one built)")
    parser.add_argument("--all", action="store_true", help="print every chain, not only those of two functions or more")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("loading BPF programs needs root", file=sys.stderr)
        return 2
    worst = 0
    print(f"{'object':22} {'at16':>4} {'at32':>4}  chain (the verifier's frames)")
    for path in args.object or sorted(BUILD.glob("*.bpf.o")):
        for row in report(path):
            worst = max(worst, row["stack32"])
            if len(row["chain"]) > 1 or args.all:
                frames = "+".join(map(str, row["frames"]))
                print(f"{row['object']:22} {row['stack16']:>4} {row['stack32']:>4}  {' -> '.join(row['chain'])}"
                      f" ({frames})")
    print(f"deepest chain rounded to 32: {worst} of {MAX_BPF_STACK} bytes")
    return 0 if worst <= MAX_BPF_STACK else 1


if __name__ == "__main__":
    sys.exit(main())
