"""python -m bench.atsss: see bench/atsss/__init__.py and bench/README.md."""

from __future__ import annotations

import argparse
import ctypes
import functools
import ipaddress
import random
import statistics
import struct
import sys
from ctypes import c_uint32
from pathlib import Path
from typing import Optional, Sequence

from bench.atsss import flows, gate, live, split, uplink
from bench.atsss.ring import AckRing
from bench.atsss.sessions import SessionWriter
from bench.harness import (HARNESS_MAX_PACKET, Harness, Walk, add_block_arguments, build_harness, interleaved_medians,
                           interleaved_samples, paired_differences, write_results)
from bench.insns import count_instructions
from bench.libbpf import BpfObject, map_lookup, map_update, program_size, test_run
from bench.packets import internet_checksum
from netapp.atsss.abi import Mode, Path as PathValue, PathFlags, Session, SessionFlags, SessionKey, UplinkReason
from netapp.atsss.head4 import set_head4
from netapp.dataplane import binding
from netapp.dataplane.handle import possible_cpus

DEFAULT_OUT = Path("bench/results/atsss.json")
XDP_DROP, XDP_PASS, XDP_TX = 1, 2, 3
SESSIONS = 10_000
FIRST_UE = ipaddress.IPv4Address("10.64.0.0")
FRAME = 128  # Ethernet frame of the UE packet
UE_AT = 14 + 16  # the UE packet's IPv4 destination: the walk writes the UE's address there
PAYLOAD_AT = 14 + 20 + 8  # the walk's other field, a word of the UDP payload
ROOM = 256
HEADER = SessionFlags.HEADER_CHECKSUM
# scheduler -> (mode, weights, session flags); a --before build older than the flags ignores them
# (before CsCov 1 was a session's choice, b59ae22 and older: its header-checksum row is full coverage)
MODES = {"round-robin": (Mode.ROUND_ROBIN, [1, 1], 0),
         "round-robin, UDP checksum (sum derived)": (Mode.ROUND_ROBIN, [1, 1], 0),
         "round-robin, header checksum (CsCov 1)": (Mode.ROUND_ROBIN, [1, 1], HEADER),
         "weighted round-robin 3:1": (Mode.WEIGHTED, [3, 1], 0),
         "active-standby": (Mode.ACTIVE_STANDBY, [1, 1], 0), "smallest delay": (Mode.SMALLEST_DELAY, [1, 1], 0),
         "priority": (Mode.PRIORITY, [1, 1], 0), "redundant (marking, no group)": (Mode.REDUNDANT, [1, 1], 0)}
CASES = ("uplink", "acks", "downlink", "gate", "flows", "live", "split")
# what each scheduler's packets get in the harness: REDUNDANT's frame is marked, then dropped, as
# its session names no group of ports (tx_group 0 is empty here: no broadcast is carried out)
VERDICTS = {Mode.REDUNDANT: XDP_DROP}
# the cases whose UE packet carries a UDP checksum (the others': 0, none), from which the downlink
# takes the UE packet's sum (nf/atsss/inner_sum.h) instead of summing its bytes
CHECKSUMMED = {"round-robin, UDP checksum (sum derived)"}


def ue_frame(udp_checksum: bool = False, size: int = FRAME) -> bytes:
    """Ethernet / IPv4 / UDP to the first UE, `size` bytes; the UDP checksum made, or 0. The walk's
    writes keep it right at one session (the first UE, a payload word 0), not among 10,000."""
    udp_len = size - 14 - 20
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0, 0, 64, 17, 0, bytes(4), FIRST_UE.packed)
    udp = struct.pack("!HHHH", 443, 40000, udp_len, 0) + bytes(udp_len - 8)
    if udp_checksum:
        pseudo = bytes(4) + FIRST_UE.packed + struct.pack("!BBH", 0, 17, udp_len)
        udp = udp[:6] + struct.pack("!H", internet_checksum(pseudo + udp) or 0xFFFF) + udp[8:]
    return bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + udp


def path(i: int) -> PathValue:
    """Slot i: odd slots a session's first path (RTT 30 ms), even its second (10 ms: smallest delay's)."""
    value = PathValue(access=i & 1, family=4, flags=PathFlags.UP, rtt_us=30_000 if i & 1 else 10_000,
                      sport=0x8913, dport=0x8A13)
    value.local[0] = int.from_bytes(bytes([10, 0, i & 1, 1]), "little")
    value.peer[0] = int.from_bytes(bytes([10, 100 + (i & 1), (i >> 8) & 0xFF, i & 0xFF]), "little")
    set_head4(value)  # an IPv4 path's template (main's build before it reads reserved bytes: none)
    return value


class AtsssBench:
    """xdp_atsss.bpf.o of `build` (this tree's, or --before's), or another object of ATSSS's maps
    (`obj_path`, its program `program`), with SESSIONS sessions' paths."""

    def __init__(self, build: Path, obj_path: Optional[Path] = None, program: str = "xdp_atsss"):
        self.obj = BpfObject(obj_path or build / "xdp_atsss.bpf.o")
        self.prog_fd = self.obj.program_fd(program)
        self.paths_fd = self.obj.map_fd("dpp_atsss_paths")
        for slot in range(1, 2 * SESSIONS + 1):
            map_update(self.paths_fd, c_uint32(slot), path(slot))

    def configure(self, mode: Mode, weights: list[int], flags: int = 0, hashed: bool = False) -> None:
        """SESSIONS sessions of two paths each, the scheduler's state afresh; `hashed`: every one in
        dpp_atsss_sessions, none in the index."""
        writer = SessionWriter(self.obj, hashed)
        for i in range(SESSIONS):
            key = SessionKey(family=4)
            key.addr[0] = int.from_bytes((FIRST_UE + i).packed, "little")
            value = Session(mode=mode, n_paths=2, flags=flags, up=0b11)  # both paths up (main's build: padding)
            value.path[:2] = [2 * i + 1, 2 * i + 2]
            value.weight[:2] = weights
            value.priority[:2] = [1, 0]  # PRIORITY: the second path first
            writer.put(i + 1, key, value)
        writer.flush()

    def close(self) -> None:
        self.obj.close()


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.atsss", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--before", type=Path, metavar="BUILD",
                        help="a build directory of other code (its xdp_atsss.bpf.o and dpp.bpf.o, e.g. of the "
                        "commit before a change), measured in the same blocks as this tree's (*_before_ns): "
                        "uplink, downlink, acks, gate, flows")
    parser.add_argument("--cases", default=",".join(CASES), help=f"which, comma-separated, of {','.join(CASES)}")
    parser.add_argument("--schedulers", nargs="+", default=list(MODES), metavar="NAME",
                        help="downlink: which of the schedulers' cases, each name quoted (default: every one)")
    parser.add_argument("--frame", type=int, default=FRAME, metavar="BYTES",
                        help=f"downlink: the Ethernet frame's size (default {FRAME}; at most {HARNESS_MAX_PACKET}, what the "
                        "harness restores)")
    parser.add_argument("--split-packets", type=int, default=1_000_000, metavar="N",
                        help="packets of each weighted round-robin split case (split)")
    add_block_arguments(parser)
    args = parser.parse_args(argv)
    if not 64 <= args.frame <= HARNESS_MAX_PACKET:
        parser.error(f"--frame {args.frame}: an Ethernet frame of 64 to {HARNESS_MAX_PACKET} bytes (the harness's)")
    return args


def timed(harness: Harness, prog: int, walk: Walk, expected: int, repeat: int, frame: Optional[bytes] = None) -> int:
    harness.set_walk(walk)
    frame = frame or ue_frame()
    result = harness.run_walk_head(prog, frame, repeat, 0, len(frame) + ROOM)
    if result.retval != expected:
        raise RuntimeError(f"verdict {result.retval}, expected {expected}: the case is not what it says")
    return result.duration_ns


def row(name: tuple[str, str], sessions: int, what: str, medians: dict[str, float]) -> dict:
    """A result row (printed as it comes): the case's name, the floor, the case, the difference; and
    the same of the --before build when it ran."""
    result = {name[0]: name[1], "sessions": sessions, "floor_ns": medians["floor"], f"{what}_ns": medians["atsss"],
              "above_floor_ns": medians["atsss"] - medians["floor"]}  # fmt: skip
    line = (f"{name[1]:<40} {sessions:>6} sessions  floor {medians['floor']:6.1f}  {what} {medians['atsss']:6.1f}  "
            f"above floor {result['above_floor_ns']:+6.1f} ns")
    if "before" in medians:
        result.update({f"{what}_before_ns": medians["before"], "before_above_floor_ns": medians["before"] - medians["floor"]})
        line += f"  (before: {result['before_above_floor_ns']:+6.1f})"
    print(line, flush=True)
    return result


def blocks(samples: dict[str, list[int]]) -> dict:
    """The downlink's differences taken block by block (harness.paired_differences), with their
    spread: this build above the floor, --before's above the floor, this build less --before's."""
    result = {"above_floor_blocks_ns": paired_differences(samples, "atsss", "floor")}
    if "before" in samples:
        result["before_above_floor_blocks_ns"] = paired_differences(samples, "before", "floor")
        result["minus_before_blocks_ns"] = paired_differences(samples, "atsss", "before")
    return result


def blocks_line(stats: dict) -> str:
    def show(name: str, what: str) -> str:
        q = stats[what]
        return f"{name} {q['median']:+6.1f} [{q['q1']:+.0f}, {q['q3']:+.0f}]"

    parts = [show("this - floor", "above_floor_blocks_ns")]
    if "minus_before_blocks_ns" in stats:
        parts += [show("before - floor", "before_above_floor_blocks_ns"), show("this - before", "minus_before_blocks_ns")]
    return "    by block, median [quartiles]: " + "  ".join(parts)


def path_instructions(bench: "AtsssBench", frame: bytes, expected: int) -> Optional[int]:
    """The instructions xdp_atsss executes on `frame` (the first UE's: one session), run in Python
    (bench/insns.py) and checked against the kernel's own run of the frame: the same verdict, the
    same packet out. None, said, when the path takes what bench/insns.py does not run."""
    try:
        counted = count_instructions(bench.prog_fd, frame, len(frame) + ROOM)
    except NotImplementedError as missing:
        print(f"    instructions not counted ({bench.obj.path}): {missing}", flush=True)
        return None
    kernel = test_run(bench.prog_fd, frame, 1, 0, len(frame) + ROOM)
    if counted.verdict != expected or (counted.verdict, counted.packet) != (kernel.retval, kernel.data):
        raise RuntimeError(f"the instructions counted are not the kernel's path: verdict {counted.verdict}, the "
                           f"kernel's {kernel.retval}, packets {'equal' if counted.packet == kernel.data else 'differ'}")
    return counted.instructions


def program_sizes(benches: dict[str, "AtsssBench"]) -> dict[str, dict[str, int]]:
    """xdp_atsss's size in each build, printed: instructions after the verifier, JITed bytes."""
    sizes = {}
    for name, bench in benches.items():
        size = program_size(bench.prog_fd)
        sizes[name] = {"xlated_insns": size.xlated_insns, "jited_bytes": size.jited_bytes}
        print(f"xdp_atsss ({name}, {bench.obj.path}): {size.xlated_insns} instructions, {size.jited_bytes} bytes JITed",
              flush=True)  # fmt: skip
    return sizes


def timed_walk(harness: Harness, prog: int, frame: bytes, expected: int, repeat: int) -> int:
    """As timed, the walk going on from where it was (set by the caller)."""
    result = harness.run_walk_head(prog, frame, repeat, 0, len(frame) + ROOM)
    if result.retval != expected:
        raise RuntimeError(f"verdict {result.retval}, expected {expected}: the case is not what it says")
    return result.duration_ns


def acks_lost(bench: AtsssBench) -> int:
    values = (ctypes.c_uint64 * possible_cpus())()
    map_lookup(bench.obj.map_fd("dpp_atsss_uplink_stats"), c_uint32(UplinkReason.ACK_LOST), values)
    return sum(values)


UPLINK_CASES = {"uplink Data, no Ack owed": uplink.NEVER, "uplink Data + Ack every packet": 1}
# the UE's Acks on one path: (options, numbers each judges)
ACK_CASES = {"uplink Ack, no Ack Vector": (b"", 2),
             "uplink Ack + short Ack Vector (1 byte), 2 numbers judged": (uplink.short_vector(), 2),
             "uplink Ack + long Ack Vector (64 bytes), 2 numbers judged": (uplink.long_vector(), 2),
             "uplink Ack + long Ack Vector (64 bytes), 61 numbers judged": (uplink.long_vector(), 61)}


def uplink_rows(args: argparse.Namespace, harness: Harness, benches: dict[str, AtsssBench],
                rng: random.Random) -> list[dict]:
    """The uplink's rows: decapsulation alone and with an Ack into the ring for every Data packet,
    one session and 10,000, against the floor; "before" too if given, each build's ring its own."""
    rows = []
    frame = uplink.data_frame(FIRST_UE)
    rings = {}
    for name, bench in benches.items():
        uplink.install(bench.obj, SESSIONS, FIRST_UE)
        rings[name] = AckRing(bench.obj.map_fd("dpp_atsss_acks"))
    try:
        for case, ratio in UPLINK_CASES.items():
            for bench in benches.values():
                uplink.set_ack_ratio(bench.obj, ratio)
            for sessions in (1, SESSIONS):
                harness.set_walk(uplink.walk(sessions, FIRST_UE))
                floor = functools.partial(timed_walk, harness, harness.empty_fd, frame, XDP_PASS)
                subjects = {"floor": functools.partial(uplink.drained_runs, floor, rings["atsss"], args.repeat)}
                for name, bench in benches.items():
                    run = functools.partial(timed_walk, harness, bench.prog_fd, frame, XDP_PASS)
                    subjects[name] = functools.partial(uplink.drained_runs, run, rings[name], args.repeat)
                lost = {name: acks_lost(bench) for name, bench in benches.items()}
                samples = interleaved_samples(subjects, args.runs, rng)
                if any(acks_lost(bench) != lost[name] for name, bench in benches.items()):
                    raise RuntimeError("the ring lost Acks: the case is not what it says")
                medians = {name: statistics.median(values) for name, values in samples.items()}
                rows.append({**row(("case", case), sessions, "uplink", medians), **blocks(samples)})
                print(blocks_line(rows[-1]), flush=True)
    finally:
        for ring in rings.values():
            ring.close()
    return rows


def ack_rows(args: argparse.Namespace, harness: Harness, benches: dict[str, AtsssBench], rng: random.Random) -> list[dict]:
    """The UE's Acks on one path, each judging its numbers (uplink.AckWalk), against the floor;
    "before" too if given (say, the build before the loss estimate: the same Acks without it)."""
    rows = []
    for bench in benches.values():
        uplink.install(bench.obj, 1, FIRST_UE)
    for case, (options, step) in ACK_CASES.items():
        frame = uplink.ack_frame(options)
        for bench in benches.values():
            uplink.restart_loss(bench.obj)
        harness.set_walk(uplink.ack_walk(step))  # one walk for all: every subject's Acks go on from the last
        subjects = {"floor": functools.partial(timed_walk, harness, harness.empty_fd, frame, XDP_PASS, args.repeat)}
        for name, bench in benches.items():
            subjects[name] = functools.partial(timed_walk, harness, bench.prog_fd, frame, XDP_DROP, args.repeat)
        medians = interleaved_medians(subjects, args.runs, rng)
        if options and uplink.judged(benches["atsss"].obj) < (args.runs * args.repeat - 1) * step:
            raise RuntimeError("the Acks judged fewer numbers than they carry: the case is not what it says")
        rows.append(row(("case", case), 1, "uplink", medians))
    return rows


def downlink_rows(args: argparse.Namespace, harness: Harness, benches: dict[str, AtsssBench],
                  rng: random.Random) -> list[dict]:
    """Each scheduler's downlink, one session and 10,000, against the floor; "before" too if given."""
    rows = []
    chosen = args.schedulers
    unknown = set(chosen) - set(MODES)
    if unknown:
        raise SystemExit(f"--schedulers: no case {', '.join(sorted(unknown))}; the cases: {', '.join(MODES)}")
    for scheduler, (mode, weights, flags) in MODES.items():
        if scheduler not in chosen:
            continue
        for bench in benches.values():
            bench.configure(mode, weights, flags)
        frame = ue_frame(udp_checksum=scheduler in CHECKSUMMED, size=args.frame)
        expected = VERDICTS.get(mode, XDP_TX)
        counts = {name: path_instructions(bench, frame, expected) for name, bench in benches.items()}
        print(f"{scheduler:<40}      1 session   instructions executed: "
              + ", ".join(f"{name} {count}" for name, count in counts.items()), flush=True)  # fmt: skip
        for sessions in (1, SESSIONS):
            walk = Walk(sessions, teid_base=0, src_base=int(FIRST_UE), teid_off=PAYLOAD_AT, src_off=UE_AT)
            subjects = {"floor": functools.partial(timed, harness, harness.empty_fd, walk, XDP_PASS, args.repeat, frame)}
            for name, bench in benches.items():
                subjects[name] = functools.partial(timed, harness, bench.prog_fd, walk, expected, args.repeat, frame)
            samples = interleaved_samples(subjects, args.runs, rng)
            medians = {name: statistics.median(values) for name, values in samples.items()}
            rows.append({**row(("scheduler", scheduler), sessions, "downlink", medians), **blocks(samples),
                         **({"instructions": counts} if sessions == 1 else {})})  # fmt: skip
            print(blocks_line(rows[-1]), flush=True)
    return rows


def gate_rows(args: argparse.Namespace, harness: Harness, builds: dict[str, Path], rng: random.Random) -> list[dict]:
    """A frame not ATSSS's through the pipeline, the gate closed and open, at one session and 10,000;
    "before" too if given."""
    rows = []
    pipelines = {name: gate.Pipeline(build) for name, build in builds.items()}
    try:
        for sessions in (1, SESSIONS):
            for pipeline in pipelines.values():
                pipeline.install(FIRST_UE, sessions)
            walk = gate.other_walk(sessions, UE_AT, PAYLOAD_AT)
            for open_ in (False, True):
                for pipeline in pipelines.values():
                    pipeline.set_gate(open_)
                subjects = {"floor": functools.partial(timed, harness, harness.empty_fd, walk, XDP_PASS, args.repeat)}
                for name, pipeline in pipelines.items():
                    subjects[name] = functools.partial(timed, harness, pipeline.prog_fd, walk, XDP_PASS, args.repeat)
                medians = interleaved_medians(subjects, args.runs, rng)
                case = f"not ATSSS's, gate {'open' if open_ else 'closed'}"
                rows.append(row(("pipeline", case), sessions, "pipeline", medians))
    finally:
        harness.release_target()
        for pipeline in pipelines.values():
            pipeline.close()
    return rows


def flow_rows(args: argparse.Namespace, harness: Harness, builds: dict[str, Path], rng: random.Random) -> list[dict]:
    """A downlink frame through the pipeline, its session without flow rules and with (the frame
    matched by an MTS session's rule, in active-standby, round-robin or weighted, and not); "before"
    too if given, with flow rules only when its build looks them up."""
    rows = []
    pipelines = {name: flows.FlowPipeline(build, FIRST_UE, path) for name, build in builds.items()}
    walk = Walk(1, teid_base=0, src_base=int(FIRST_UE), teid_off=PAYLOAD_AT, src_off=UE_AT)
    try:
        for case, flow_case in flows.CASES.items():
            chosen = {name: pipeline for name, pipeline in pipelines.items()
                      if name == "atsss" or not flow_case.flags or pipeline.classifies_flows}
            for pipeline in chosen.values():
                pipeline.configure(flow_case)
                pipeline.check(ue_frame(), flow_case)
            subjects = {"floor": functools.partial(timed, harness, harness.empty_fd, walk, XDP_PASS, args.repeat)}
            for name, pipeline in chosen.items():
                subjects[name] = functools.partial(timed, harness, pipeline.prog_fd, walk, XDP_TX, args.repeat)
            samples = interleaved_samples(subjects, args.runs, rng)
            medians = {name: statistics.median(values) for name, values in samples.items()}
            rows.append({**row(("pipeline downlink, 1 hot flow (best case)", case), 1, "pipeline", medians),
                         **blocks(samples)})
            print(blocks_line(rows[-1]), flush=True)
    finally:
        harness.release_target()
        for pipeline in pipelines.values():
            pipeline.close()
    return rows


def split_rows(args: argparse.Namespace, harness: Harness, bench: AtsssBench) -> list[dict]:
    """Weighted round-robin's split over --split-packets packets, for each weights of split.WEIGHTS,
    one session and 10,000."""
    rows = []
    paths_fd = bench.obj.map_fd("dpp_atsss_paths")
    for sessions in (1, SESSIONS):
        walk = Walk(sessions, teid_base=0, src_base=int(FIRST_UE), teid_off=PAYLOAD_AT, src_off=UE_AT)
        harness.set_walk(walk)
        run = functools.partial(timed_walk, harness, bench.prog_fd, ue_frame(), XDP_TX)
        for weights in split.WEIGHTS:
            rows.append(split.split_row(run, bench.configure, paths_fd, sessions, weights, args.split_packets))
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    build = Path(binding.find_libdpp()).parent
    builds = {"atsss": build, **({"before": args.before} if args.before else {})}
    cases = args.cases.split(",")
    rows: list[dict] = []
    extra: dict = {}
    with Harness(build_harness()) as harness:
        benches = {name: AtsssBench(path) for name, path in builds.items()}
        bench = benches["atsss"]
        try:
            if "uplink" in cases:
                rows += uplink_rows(args, harness, benches, rng)
            if "acks" in cases:
                rows += ack_rows(args, harness, benches, rng)
            if "downlink" in cases:
                extra["programs"] = program_sizes(benches)
                rows += downlink_rows(args, harness, benches, rng)
            if "gate" in cases:
                harness.release_target()
                rows += gate_rows(args, harness, builds, rng)
            if "flows" in cases:
                harness.release_target()
                rows += flow_rows(args, harness, builds, rng)
            if "split" in cases:
                rows += split_rows(args, harness, bench)
            if "live" in cases:
                site = live.LiveSite(build, bench.obj)
                try:
                    rows += live.live_rows(site, bench.prog_fd, ue_frame(), lambda mode: bench.configure(mode, [1, 1]),
                                           args.runs, args.repeat)  # fmt: skip
                finally:
                    site.close()
        finally:
            harness.release_target()
            for each in benches.values():
                each.close()
    write_results(args.out, "atsss", args.runs, args.repeat, rows, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
