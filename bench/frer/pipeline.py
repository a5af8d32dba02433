"""python -m bench.frer.pipeline: what FRER costs in the NetApp's pipeline (dataplane/bpf/dpp.bpf.c, its
FRER stage nf/frer/stage.h), one run, every subject interleaved (bench/harness.py):

- a frame of no stream on a node without streams (the gate closed: one array read), the same on a
  node with streams (the stage runs, finds no stream and hands the frame back to the entry), and
  both against the empty program (the floor);
- a duplicate of a recovered stream eliminated, one stream (hot, best case) and a walk over 4,095
  streams (every repetition another stream: cold);
- a frame of a generated stream tagged and replicated (the broadcast is decided, not carried out:
  BPF_PROG_TEST_RUN without live frames; `python -m bench.frer.replicate` sends them).

Every repetition starts from the original frame (the harness writes it back); the pipeline is an
anonymous instance without trace or rules, opened by the NetApp's own code.

    python -m bench.frer.pipeline --out bench/results/frer_pipeline.json
"""

from __future__ import annotations

import argparse
import functools
import random
import struct
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

from bench.harness import Harness, Walk, add_block_arguments, build_harness, interleaved_medians, write_results
from netapp.dataplane.facade import Dataplane
from netapp.frer.abi import MAX_STREAMS, RTAG_ETHERTYPE, Algo, Gate, NullKey, Recovery, Role, Stream
from netapp.frer.dataplane import FrerDataplane

DEFAULT_OUT = Path("bench/results/frer_pipeline.json")
XDP_DROP, XDP_PASS, XDP_REDIRECT = 1, 2, 4
LISTENER_MAC, TALKER_MAC, OTHER_MAC = "02:00:00:00:00:02", "02:00:00:00:00:03", "02:00:00:00:00:09"
SOURCE_MAC = "02:00:00:00:00:01"
COLD_STREAMS = MAX_STREAMS - 1
GENERATED = COLD_STREAMS  # the handle of the one generated stream, after the recovered ones
GROUP = 1  # its group of ports in dpp_frer_tx
LOOPBACK_IFINDEX = 1  # the group's one port: the broadcast is decided, never sent (no live frames)
SEEN = 7  # the number every recovered stream has passed already: each copy of it is a duplicate
VLAN_TAG_AT = 12  # the VLAN tag (TPID, TCI), a big-endian word the walk writes: a stream per VLAN id
FRAME = 128


def mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def udp_frame(dst: str, vlan: int = 0, seq: Optional[int] = None) -> bytes:
    """An IPv4/UDP frame to `dst` in VLAN `vlan`, R-tagged with `seq` unless None, FRAME bytes."""
    head = mac(dst) + mac(SOURCE_MAC) + struct.pack("!HH", 0x8100, vlan)
    if seq is not None:
        head += struct.pack("!HHH", RTAG_ETHERTYPE, 0, seq)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, FRAME - len(head) - 2, 0, 0, 64, 17, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    body = head + struct.pack("!H", 0x0800) + ip + struct.pack("!HHHH", 4000, 5000, FRAME - len(head) - 22, 0)
    return body + bytes(FRAME - len(body))


def null_key(dst: str, vlan: int) -> NullKey:
    key = NullKey(vlan=vlan)
    key.dmac[:] = mac(dst)
    return key


def seen_recovery() -> Recovery:
    return Recovery(algo=Algo.VECTOR, history_len=32, seq=SEEN, history=1, span=1)


class PipelineBench:
    """One anonymous instance: streams 1..COLD_STREAMS recovered (null identification: the listener's
    MAC, VLAN id = handle), stream GENERATED generated (the talker's MAC) to group GROUP: the loopback
    (a stream without a group is not replicated: it takes the node's default verdict, frer_no_group)."""

    def __init__(self, harness: Harness):
        self.harness = harness
        self.dp = Dataplane.open()
        self.frer = FrerDataplane(self.dp)
        self.prog = self.dp.program_fd("dpp_xdp")
        handles = range(1, COLD_STREAMS)
        self.dp.table("dpp_frer_null").update(
            [(null_key(LISTENER_MAC, h), h) for h in handles] + [(null_key(TALKER_MAC, 1), GENERATED)])
        self.dp.table("dpp_frer_streams").update(
            [(h, Stream(role=Role.RECOVER)) for h in handles] + [(GENERATED, Stream(role=Role.GENERATE, tx_group=GROUP))])
        self.frer.groups_set({GROUP: {LOOPBACK_IFINDEX: False}})

    def close(self) -> None:
        self.harness.release_target()
        self.dp.close()

    def reset(self, gate: bool) -> None:
        """Every recovered stream has passed SEEN (each repetition's copy is a duplicate)."""
        self.dp.table("dpp_frer_recovery").update([(h, seen_recovery()) for h in range(1, COLD_STREAMS)])
        self.frer.gate_set(Gate.NULL if gate else Gate(0))

    def timed(self, run: Callable[[int, int], object], prog: int, gate: bool, expected: int, repeat: int) -> int:
        self.reset(gate)
        result = run(prog, repeat)
        if result.retval != expected:  # type: ignore[attr-defined]
            raise RuntimeError(f"verdict {result.retval}, expected {expected}: the case is not what it says")  # type: ignore[attr-defined]
        return result.duration_ns  # type: ignore[attr-defined]


def cases(bench: PipelineBench) -> dict[str, tuple[Callable[[int, int], object], int, int]]:
    """name -> (run(prog, repeat), verdict with the gate closed, verdict with it open)."""
    h = bench.harness
    walk = Walk(COLD_STREAMS - 1, teid_base=0x8100 << 16 | 1, src_base=0, teid_off=VLAN_TAG_AT, src_off=FRAME - 4)

    def plain(frame: bytes) -> Callable[[int, int], object]:
        return lambda prog, n: h.run(prog, frame, n)

    def pushed(frame: bytes) -> Callable[[int, int], object]:
        """For a frame whose head moves (an R-tag pushed): the walk's head-restoring harness, one flow
        (the walk rewrites the frame's own VLAN tag)."""
        def run(prog: int, n: int) -> object:
            h.set_walk(Walk(1, teid_base=0x8100 << 16 | 1, src_base=0, teid_off=VLAN_TAG_AT, src_off=FRAME - 4))
            return h.run_walk_head(prog, frame, n, 0, FRAME + 64)
        return run

    def cold(prog: int, n: int) -> object:
        h.set_walk(walk)
        return h.run_walk(prog, udp_frame(LISTENER_MAC, 0, SEEN), n)

    return {
        "no stream (other traffic)": (plain(udp_frame(OTHER_MAC, 1)), XDP_PASS, XDP_PASS),
        "duplicate, 1 stream (hot, best case)": (plain(udp_frame(LISTENER_MAC, 1, SEEN)), XDP_PASS, XDP_DROP),
        f"duplicate, {COLD_STREAMS - 1} streams (cold)": (cold, XDP_PASS, XDP_DROP),
        "generated: tagged and replicated (hot)": (pushed(udp_frame(TALKER_MAC, 1)), XDP_PASS, XDP_REDIRECT),
    }


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.frer.pipeline", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON")
    add_block_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    rows = []
    with Harness(build_harness()) as harness:
        bench = PipelineBench(harness)
        try:
            for name, (run, closed, opened) in cases(bench).items():
                subjects = {
                    "floor": functools.partial(bench.timed, run, harness.empty_fd, False, XDP_PASS, args.repeat),
                    "closed": functools.partial(bench.timed, run, bench.prog, False, closed, args.repeat),
                    "open": functools.partial(bench.timed, run, bench.prog, True, opened, args.repeat),
                }
                medians = interleaved_medians(subjects, args.runs, rng)
                row = {
                    "case": name,
                    "floor_ns": medians["floor"],
                    "gate_closed_ns": medians["closed"],
                    "gate_open_ns": medians["open"],
                    "closed_above_floor_ns": medians["closed"] - medians["floor"],
                    "open_above_floor_ns": medians["open"] - medians["floor"],
                }
                rows.append(row)
                print(f"{name:<42} floor {row['floor_ns']:6.1f}  pipeline {row['gate_closed_ns']:6.1f}  "
                      f"with FRER {row['gate_open_ns']:6.1f} ns ({row['open_above_floor_ns']:+.1f} above floor)", flush=True)
        finally:
            bench.close()
    write_results(args.out, "frer_pipeline", args.runs, args.repeat, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
