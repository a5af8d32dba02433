"""What loading the data plane's object costs the kernel: for each program, the verifier's own
statistics (BPF_LOG_STATS: verification time, processed instructions, states), read from the log
libbpf hands the kernel at each BPF_PROG_LOAD, and the wall-clock time of the whole load.

    sudo .venv/bin/python -m bench.load_cost                      # this checkout's dpp.bpf.o
    sudo .venv/bin/python -m bench.load_cost --baseline main --runs 3
    sudo .venv/bin/python -m bench.load_cost --before ../before/dataplane/build --runs 3

The object is opened as libdpp opens it, with its maps at their compiled sizes (the verifier's work
does not depend on them). With --baseline, REV's object is built apart (bench/baseline.py), with
--before another build's is taken as it is (a build directory or the object); the two are loaded
alternately, `--runs` times each, so the machine's load hits both alike; the medians
and the ratio this/REV are printed. A program's verification time is the kernel's, not the wall
clock's, and it moves with the machine's load; instructions and states do not.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Optional

from bench.harness import REPO
from bench.libbpf import load_libbpf

BPF_LOG_STATS = 4
LOG_SIZE = 1 << 16
OBJECT = REPO / "dataplane" / "build" / "dpp.bpf.o"

_STATS = {
    "usec": re.compile(r"verification time (\d+) usec"),
    "insns": re.compile(r"processed (\d+) insns"),
    "total_states": re.compile(r"total_states (\d+)"),
    "peak_states": re.compile(r"peak_states (\d+)"),
    "max_states_per_insn": re.compile(r"max_states_per_insn (\d+)"),
}




def parse_stats(log: str) -> dict[str, int]:
    """The numbers of the verifier's BPF_LOG_STATS lines; a missing one is left out."""
    found = {}
    for name, pattern in _STATS.items():
        match = pattern.search(log)
        if match:
            found[name] = int(match.group(1))
    return found


def load_once(path: Path) -> dict:
    """Open and load `path` once with stats logged; every program's statistics and the load's time."""
    lib = load_libbpf()
    obj = lib.bpf_object__open_file(str(path).encode(), None)
    if not obj:
        err = ctypes.get_errno()
        raise OSError(err, f"bpf_object__open_file({path}): {os.strerror(err)}")
    buffers = {}
    try:
        prog = lib.bpf_object__next_program(obj, None)
        while prog:
            if lib.bpf_program__autoload(prog):
                name = lib.bpf_program__name(prog).decode()
                buffers[name] = ctypes.create_string_buffer(LOG_SIZE)
                lib.bpf_program__set_log_buf(prog, buffers[name], LOG_SIZE)
                lib.bpf_program__set_log_level(prog, BPF_LOG_STATS)
            prog = lib.bpf_object__next_program(obj, prog)
        start = time.perf_counter()
        rc = lib.bpf_object__load(obj)
        seconds = time.perf_counter() - start
        if rc < 0:
            raise OSError(-rc, f"bpf_object__load({path}): {os.strerror(-rc)}")
    finally:
        lib.bpf_object__close(obj)
    programs = {name: parse_stats(buf.value.decode(errors="replace")) for name, buf in buffers.items()}
    return {"load_s": seconds, "programs": programs}


def summarise(runs: list[dict]) -> dict:
    """Medians over runs: the load's seconds; per program its time (ms) and its (fixed) counts."""
    names = runs[0]["programs"].keys()
    programs = {}
    for name in names:
        stats = [run["programs"][name] for run in runs]
        programs[name] = {
            "ms": statistics.median(s.get("usec", 0) for s in stats) / 1000,
            **{k: stats[0].get(k, 0) for k in ("insns", "total_states", "peak_states")},
        }
    return {
        "load_s": statistics.median(run["load_s"] for run in runs),
        "verify_ms": statistics.median(sum(p.get("usec", 0) for p in run["programs"].values()) for run in runs) / 1000,
        "insns": sum(p["insns"] for p in programs.values()),
        "programs": programs,
    }


def print_table(this: dict, before: Optional[dict]) -> None:
    head = f"{'program':28} {'insns':>9} {'states':>7} {'ms':>8}"
    if before:
        head += f"   {'insns before':>12} {'states':>7} {'ms':>8}"
    print(head)
    names = list(this["programs"]) + [n for n in (before or {}).get("programs", {}) if n not in this["programs"]]
    for name in names:
        p = this["programs"].get(name, {"insns": 0, "total_states": 0, "ms": 0})
        line = f"{name:28} {p['insns']:>9} {p['total_states']:>7} {p['ms']:>8.1f}"
        if before:
            b = before["programs"].get(name, {"insns": 0, "total_states": 0, "ms": 0})
            line += f"   {b['insns']:>12} {b['total_states']:>7} {b['ms']:>8.1f}"
        print(line)
    print(f"{'all (verifier)':28} {this['insns']:>9} {'':>7} {this['verify_ms']:>8.1f}", end="")
    print(f"   {before['insns']:>12} {'':>7} {before['verify_ms']:>8.1f}" if before else "")
    print(f"whole load, wall clock: {this['load_s']:.2f} s", end="")
    if before:
        print(f" against {before['load_s']:.2f} s: ratio {this['load_s'] / before['load_s']:.2f};"
              f" verifier {this['verify_ms'] / before['verify_ms']:.2f},"
              f" instructions processed {this['insns'] / before['insns']:.2f}")
    else:
        print()


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--object", type=Path, default=OBJECT, help="the object to load (default: this checkout's)")
    parser.add_argument("--baseline", metavar="REV", help="also build REV's object and load both alternately")
    parser.add_argument(
        "--before", type=Path, metavar="BUILD", help="another build's dpp.bpf.o, or its build directory"
    )
    parser.add_argument("--runs", type=int, default=3, help="loads of each object (medians are reported)")
    parser.add_argument("--out", type=Path, help="write the runs' summaries as JSON here")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("loading BPF programs needs root", file=sys.stderr)
        return 2
    before_path = args.before / OBJECT.name if args.before and args.before.is_dir() else args.before
    if args.baseline:
        from bench.baseline import prepare

        before_path = prepare(args.baseline).bpf_object
    runs, before_runs = [], []
    for _ in range(args.runs):
        runs.append(load_once(args.object))
        if before_path:
            before_runs.append(load_once(before_path))
    this = summarise(runs)
    before = summarise(before_runs) if before_runs else None
    print_table(this, before)
    if args.out:
        other = args.baseline or (str(args.before) if args.before else None)
        args.out.write_text(json.dumps({"this": this, "baseline": before, "baseline_of": other}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
