"""python -m bench.frer: see bench/frer/__init__.py and bench/README.md."""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import random
import struct
import subprocess
import sys
from ctypes import c_uint32
from pathlib import Path
from typing import Callable, Optional, Sequence

from bench.harness import Harness, Walk, add_block_arguments, build_harness, interleaved_medians, write_results
from bench.libbpf import BpfObject, map_update
from netapp.dataplane import binding
from netapp.frer.abi import HISTORY_MAX, MAX_STREAMS, RTAG_ETHERTYPE, SEQ_SPACE, Algo, Flags, Recovery

DEFAULT_OUT = Path("bench/results/frer.json")
XDP_DROP, XDP_PASS = 1, 2
MACS = bytes.fromhex("020000000002" "020000000001")
TEST_ETHERTYPE = 0x88B5
STREAM_AT = 12 + 2 + 6  # struct frer_test_hdr.stream: after the R-tag (its EtherType, then 6 bytes)
FLAGS_AT = STREAM_AT + 4  # auto_seq, decision, reserved: the walk's second field, left 0
FRAME = 128
# The time every frame carries: a pipeline reads the clock once for every function of a packet, so
# the clock read (some 30 ns on a VM) is not the recovery's; no recovery timeout is configured.
GIVEN_NS = 10**12
COLD_STREAMS = MAX_STREAMS - 1
SEEN = 7  # the duplicates' number, passed already by every stream


def frame(stream: int, seq: int, auto_seq: bool) -> bytes:
    head = MACS + struct.pack("!HHHH", RTAG_ETHERTYPE, 0, seq, TEST_ETHERTYPE)
    test = struct.pack("!I", stream) + struct.pack("<BBHQ", int(auto_seq), 0, 0, GIVEN_NS)
    return head + test + bytes(FRAME - len(head) - len(test))


def recovery(flags: int = 0, seen: Optional[int] = None) -> Recovery:
    """A stream's slot after a reset, or (seen) one that has passed that number already: every
    repetition of that number is then a duplicate, the first included."""
    if seen is None:
        return Recovery(algo=Algo.VECTOR, history_len=HISTORY_MAX, flags=flags, take_any=1, seq=SEQ_SPACE - 1)
    return Recovery(algo=Algo.VECTOR, history_len=HISTORY_MAX, flags=flags, seq=seen, history=1, span=1)


def recovery_layout(path: Path) -> tuple[int, dict[str, tuple[int, int]]]:
    """The size of struct dpp_frer_recovery in object `path` and its members' (offset, size), read
    from the object's BTF: an object built from another revision may order them otherwise."""
    dumped = subprocess.run(["bpftool", "btf", "dump", "file", str(path), "--json"],
                            check=True, capture_output=True, text=True)  # fmt: skip
    types = {entry["id"]: entry for entry in json.loads(dumped.stdout)["types"]}
    struct_ = next(t for t in types.values() if t["kind"] == "STRUCT" and t.get("name") == "dpp_frer_recovery")

    def size(type_id: int) -> int:
        entry = types[type_id]
        while "size" not in entry and "type_id" in entry and entry["kind"] != "ARRAY":
            entry = types[entry["type_id"]]
        if entry["kind"] == "ARRAY":
            return entry["nr_elems"] * size(entry["type_id"])
        return entry["size"]

    return struct_["size"], {m["name"]: (m["bits_offset"] // 8, size(m["type_id"])) for m in struct_["members"]}


def in_layout(value: Recovery, layout: tuple[int, dict[str, tuple[int, int]]]) -> ctypes.Array:
    """This tree's slot `value` rewritten field by field in another object's layout."""
    size, members = layout
    raw, out = bytes(value), ctypes.create_string_buffer(size)
    for name, *_ in Recovery._fields_:
        if name in members:
            offset, width = members[name]
            field = getattr(Recovery, name)
            out[offset : offset + width] = raw[field.offset : field.offset + min(width, field.size)].ljust(width, b"\0")
    return out


class FrerObject:
    """One build's xdp_frer.bpf.o, loaded: its two programs and its recovery slots."""

    def __init__(self, path: Path):
        self.obj = BpfObject(path)
        self.layout = recovery_layout(path)
        self.frer_fd = self.obj.program_fd("xdp_frer")
        self.skip_fd = self.obj.program_fd("xdp_frer_skip")
        self.recovery_fd = self.obj.map_fd("dpp_frer_recovery")

    def configure(self, streams: int, flags: int = 0, seen: Optional[int] = None) -> None:
        value = in_layout(recovery(flags, seen), self.layout)
        for stream in range(1, streams + 1):
            map_update(self.recovery_fd, c_uint32(stream), value)


class FrerBench:
    def __init__(self, harness: Harness, build: Path, compare: Sequence[tuple[str, Path]] = ()):
        self.harness = harness
        self.objects = {"frer": FrerObject(build / "xdp_frer.bpf.o")}
        self.objects.update((name, FrerObject(path)) for name, path in compare)
        own = self.objects["frer"]
        self.frer_fd, self.skip_fd = own.frer_fd, own.skip_fd

    def close(self) -> None:
        self.harness.release_target()
        for obj in self.objects.values():
            obj.obj.close()

    def configure(self, name: str, streams: int, flags: int = 0, seen: Optional[int] = None) -> None:
        self.objects[name].configure(streams, flags, seen)

    def timed(self, run: Callable[[int], object], expected: int, repeat: int) -> int:
        result = run(repeat)
        if result.retval != expected:  # type: ignore[attr-defined]
            raise RuntimeError(f"verdict {result.retval}, expected {expected}: the case is not what it says")  # type: ignore[attr-defined]
        return result.duration_ns  # type: ignore[attr-defined]


def cases(bench: FrerBench) -> dict[str, tuple[int, int, Optional[int], Callable[[int, int], object], int]]:
    """name -> (streams, flags, the number the streams have passed already, run(prog_fd, repeat),
    expected verdict)."""
    h = bench.harness
    in_order = frame(1, 0, auto_seq=True)
    duplicate = frame(1, SEEN, auto_seq=False)
    cold = frame(1, SEEN, auto_seq=False)
    walk = Walk(COLD_STREAMS, teid_base=1, src_base=0, teid_off=STREAM_AT, src_off=FLAGS_AT)

    def cold_run(prog: int, repeat: int) -> object:
        h.set_walk(walk)
        return h.run_walk(prog, cold, repeat)

    def pop_run(prog: int, repeat: int) -> object:
        h.set_walk(Walk(1, teid_base=1, src_base=0, teid_off=STREAM_AT, src_off=FRAME - 4))
        return h.run_walk_head(prog, in_order, repeat, 0, FRAME)

    return {
        "in order, 1 stream (hot, best case)": (1, 0, None, lambda prog, n: h.run(prog, in_order, n), XDP_PASS),
        "in order, R-tag popped, 1 stream (hot)": (1, Flags.POP, None, pop_run, XDP_PASS),
        "duplicate, 1 stream (hot, best case)": (1, 0, SEEN, lambda prog, n: h.run(prog, duplicate, n), XDP_DROP),
        f"duplicate, {COLD_STREAMS} streams (cold)": (COLD_STREAMS, 0, SEEN, cold_run, XDP_DROP),
    }


def named_object(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    if not sep or not name or name in ("floor", "skip", "frer") or not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: want NAME=OBJECT, NAME not floor, skip or frer, OBJECT a file")
    return name, Path(path)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.frer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    parser.add_argument("--compare", type=named_object, action="append", default=[], metavar="NAME=OBJECT",
                        help="another build's xdp_frer.bpf.o (before a change, or a variant with one part left "
                        "out), timed in the same blocks as this tree's (NAME_ns, NAME_above_floor_ns)")
    add_block_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    build = Path(binding.find_libdpp()).parent
    rows = []
    with Harness(build_harness()) as harness:
        bench = FrerBench(harness, build, args.compare)
        try:
            for name, (streams, flags, seen, run, expected) in cases(bench).items():
                programs = {"floor": ("frer", harness.empty_fd, XDP_PASS), "skip": ("frer", bench.skip_fd, XDP_PASS),
                            **{obj: (obj, bench.objects[obj].frer_fd, expected) for obj in bench.objects}}  # fmt: skip

                def timed(obj: str, prog: int, verdict: int) -> int:
                    bench.configure(obj, streams, int(flags), seen)  # the state afresh
                    return bench.timed(lambda n: run(prog, n), verdict, args.repeat)

                subjects = {name: functools.partial(timed, *program) for name, program in programs.items()}
                medians = interleaved_medians(subjects, args.runs, rng)
                row = {
                    "case": name,
                    "floor_ns": medians["floor"],
                    "without_recovery_ns": medians["skip"],
                    "with_recovery_ns": medians["frer"],
                    "above_floor_ns": medians["frer"] - medians["floor"],
                    "above_without_ns": medians["frer"] - medians["skip"],
                }
                for other, _ in args.compare:
                    row.update({f"{other}_ns": medians[other], f"{other}_above_floor_ns": medians[other] - medians["floor"]})
                rows.append(row)
                print(f"{name:<40} floor {row['floor_ns']:6.1f}  without {row['without_recovery_ns']:6.1f}  "
                      f"with {row['with_recovery_ns']:6.1f}  above floor {row['above_floor_ns']:+6.1f} ns"
                      + "".join(f"  {other} {row[f'{other}_above_floor_ns']:+6.1f}" for other, _ in args.compare), flush=True)
        finally:
            bench.close()
    write_results(args.out, "frer", args.runs, args.repeat, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
