"""What replicating a frame costs: the talker side (dpp_frer_talker: stream identification, the next
number by atomic add, the R-tag pushed, the metadata, the broadcast to the stream's group of ports,
and the egress program of a port that has one: every port had one before the groups) run in
live-frame mode (BPF_F_TEST_XDP_LIVE_FRAMES: the broadcast is carried out, into two veth ports),
against the same live frames through a program that drops them (the floor of a live run) and through
a bare broadcast to the same ports (xdp_frer_broadcast: what any XDP replication pays there, FRER's
work aside).

Every run must start from the original frame, and live-frame mode does not write it again: the
kernel copies it into a page once and reuses the page as the last run left it, R-tag pushed and
addresses moved. The ports' peers run xdp_frer_sink (dataplane/bpf/xdp_frer_live.bpf.c), which
counts the copies and writes the original head back in place; a run whose copies are not two per
frame, each put back, is an error, not a figure. With many streams the sink writes back the next
stream's address of a walk (cold: consecutive frames are different streams').

    python -m bench.frer.replicate [--runs 7] [--repeat 200000] [--baseline REV]

--baseline REV builds REV's data plane (bench/baseline.py) and times its talker in the same
interleaved runs, configured by this checkout's ABI mirror: refused unless REV's FRER maps have the
same key and value sizes. Printed and written into bench/results/frer.json beside the elimination
figures (bench/README.md, "bench/frer")."""

from __future__ import annotations

import argparse
import json
import random
import secrets
import socket
import struct
import sys
from ctypes import Structure, c_uint8, c_uint16, c_uint32, c_uint64
from pathlib import Path
from typing import Callable, Optional, Sequence

from bench.baseline import prepare_baseline
from bench.frer.__main__ import DEFAULT_OUT
from bench.harness import Walk, interleaved_medians
from bench.libbpf import BpfObject, inner_map_set, map_lookup, map_update, test_run_live
from bench.throughput.sink import attach_native
from netapp.core import netns as namespaces
from netapp.dataplane import binding
from netapp.frer.abi import MAX_PORTS, MAX_STREAMS, Member, MemberKey, NullKey, Role, Stream
from netapp.testbed import netns

DMAC_PREFIX = bytes.fromhex("0200")  # a stream's destination: this, then its handle (4 bytes)
ETHERTYPE = 0x88B5
FRAME_LEN = 128
PORTS = ("out1", "out2")
COLD_STREAMS = MAX_STREAMS - 1
# The maps the benchmark writes in a talker's object, with this checkout's mirror.
BPF_MAP_TYPE_ARRAY_OF_MAPS, BPF_MAP_TYPE_DEVMAP_HASH = 12, 25
WRITTEN_MAPS = ("dpp_frer_null", "dpp_frer_streams", "dpp_frer_members")  # and dpp_frer_tx, by its type


def dmac(handle: int) -> bytes:
    return DMAC_PREFIX + struct.pack("!I", handle)


def frame(handle: int = 1) -> bytes:
    head = dmac(handle) + bytes.fromhex("020000000001") + struct.pack("!H", ETHERTYPE)
    return head + bytes(FRAME_LEN - len(head))


class SinkConfig(Structure):
    """struct frer_sink_config of xdp_frer_live.bpf.c."""

    _fields_ = [("head", c_uint8 * 14), ("reserved", c_uint16), ("streams", c_uint32), ("stride", c_uint32)]


class SinkStats(Structure):
    """struct frer_sink_stats of xdp_frer_live.bpf.c."""

    _fields_ = [("copies", c_uint64), ("rewound", c_uint64), ("other", c_uint64), ("position", c_uint64)]


def stride(streams: int) -> int:
    """A step through `streams` coprime with it, about streams / golden ratio (bench.harness.Walk's)."""
    return Walk(streams, 0, 0, 0, 0).stride


class ReplicateBench:
    """A namespace with the ingress port and two FRER ports whose peers run the sink, and talkers
    (name -> their dpp_frer.bpf.o) each configured for `streams` streams replicated to both."""

    def __init__(self, build: Path, talkers: dict[str, Path], streams: int):
        self.ns = f"dppfrer-{secrets.token_hex(3)}"
        self.streams = streams
        self.objects: list[BpfObject] = []
        try:
            netns.add_namespace(self.ns)
            netns.add_ports(self.ns, ("in0", *PORTS))
            self.drop = self._load(build / "xdp_drop.bpf.o")
            self.live = self._load(build / "xdp_frer_live.bpf.o")
            self.talkers = {name: self._load(path) for name, path in talkers.items()}
            with namespaces.entered(self.ns):
                self.ifindexes = [socket.if_nametoindex(port) for port in PORTS]
                self.ingress = socket.if_nametoindex("in0")
                self._configure_live()
                for talker in self.talkers.values():
                    self._configure_talker(talker)
        except BaseException:
            self.close()
            raise

    def _load(self, path: Path) -> BpfObject:
        obj = BpfObject(path)
        self.objects.append(obj)
        return obj

    def _configure_live(self) -> None:
        config = SinkConfig(streams=self.streams, stride=stride(self.streams))
        config.head[:] = frame()[:14]
        map_update(self.live.map_fd("frer_sink_config"), c_uint32(0), config)
        for ifindex in self.ifindexes:
            map_update(self.live.map_fd("frer_live_tx"), c_uint32(ifindex), (c_uint32 * 2)(ifindex, 0))
        for port in PORTS:
            attach_native(socket.if_nametoindex(f"{port}p"), self.live.program_fd("xdp_frer_sink"))

    def _configure_talker(self, talker: BpfObject) -> None:
        fd = talker.map_fd
        layout = talker.map_shape("dpp_frer_tx")[0]
        if layout == BPF_MAP_TYPE_ARRAY_OF_MAPS:  # one group of the two ports (tx_group 0), no egress program
            inner_map_set(fd("dpp_frer_tx"), 0, BPF_MAP_TYPE_DEVMAP_HASH, MAX_PORTS,
                          [(c_uint32(i), (c_uint32 * 2)(i, 0)) for i in self.ifindexes], 4, 8)
        else:  # before: the node's ports, each copy's egress program keeping the stream's members
            egress = talker.program_fd("dpp_frer_egress")
            for slot, ifindex in enumerate(self.ifindexes):
                key = ifindex if layout == BPF_MAP_TYPE_DEVMAP_HASH else slot  # a DEVMAP has slots
                map_update(fd("dpp_frer_tx"), c_uint32(key), (c_uint32 * 2)(ifindex, egress))
        for handle in range(1, self.streams + 1):
            map_update(fd("dpp_frer_null"), NullKey(dmac=(c_uint8 * 6)(*dmac(handle)), vlan=0), c_uint32(handle))
            map_update(fd("dpp_frer_streams"), c_uint32(handle), Stream(role=Role.GENERATE))
            for ifindex in self.ifindexes:
                map_update(fd("dpp_frer_members"), MemberKey(handle, ifindex), Member())

    def sink_stats(self) -> SinkStats:
        stats = SinkStats()
        map_lookup(self.live.map_fd("frer_sink_stats"), c_uint32(0), stats)
        return stats

    def time(self, prog_fd: int, repeat: int, tagged: bool) -> int:
        """One live run's ns per frame, after checking that every frame made its two copies (and,
        `tagged`, that each was put back for the next run)."""
        before = self.sink_stats()
        with namespaces.entered(self.ns):
            duration = test_run_live(prog_fd, frame(), repeat, self.ingress).duration_ns
        after = self.sink_stats()
        copies, rewound = after.copies - before.copies, after.rewound - before.rewound
        if copies != len(PORTS) * repeat or (tagged and rewound != copies):
            raise RuntimeError(f"{repeat} frames made {copies} copies, {rewound} put back: not the case measured")
        return duration

    def close(self) -> None:
        netns.delete_namespace(self.ns)
        for obj in self.objects:
            obj.close()


def check_same_maps(head: Path, baseline: Path) -> None:
    """The benchmark writes the baseline's maps with this checkout's mirror: their key and value sizes
    must agree (dpp_frer_tx is written by its type: a map of groups by stream, a hash by ifindex, an
    array of slots)."""
    with BpfObject(head) as ours, BpfObject(baseline) as theirs:
        for name in WRITTEN_MAPS:
            if ours.map_shape(name)[1:] != theirs.map_shape(name)[1:]:
                raise SystemExit(f"--baseline: {name} differs in key or value size; this benchmark cannot fill it")


def subjects_of(bench: ReplicateBench, repeat: int) -> dict[str, Callable[[], int]]:
    programs = {"floor": (bench.drop.program_fd("xdp_drop"), None),
                "broadcast": (bench.live.program_fd("xdp_frer_broadcast"), False)}  # fmt: skip
    for name, talker in bench.talkers.items():
        programs[name] = (talker.program_fd("dpp_frer_talker"), True)

    def timed(prog: int, tagged: Optional[bool]) -> int:
        if tagged is None:  # the floor drops at the ingress: no copies to count
            with namespaces.entered(bench.ns):
                return test_run_live(prog, frame(), repeat, bench.ingress).duration_ns
        return bench.time(prog, repeat, tagged)

    return {name: (lambda p=prog, t=tagged: timed(p, t)) for name, (prog, tagged) in programs.items()}


def row_of(streams: int, medians: dict[str, float], talkers: Sequence[str]) -> dict[str, object]:
    kind = "hot" if streams == 1 else "cold"
    row: dict[str, object] = {
        "case": f"replicate to 2 ports, {streams} stream{'s' * (streams > 1)} ({kind}, live frames, broadcast carried out)",
        "live_floor_ns": medians["floor"],
        "broadcast_ns": medians["broadcast"],
    }
    for name in talkers:
        row[f"{name}_ns"] = medians[name]
        row[f"{name}_above_floor_ns"] = medians[name] - medians["floor"]
        row[f"{name}_above_broadcast_ns"] = medians[name] - medians["broadcast"]
    return row


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.frer.replicate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result JSON to add the figures to")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=200_000)
    parser.add_argument("--streams", type=int, nargs="+", default=[1, COLD_STREAMS])
    parser.add_argument("--baseline", metavar="REV", help="also time REV's talker, in the same runs")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    build = Path(binding.find_libdpp()).parent
    talkers = {"replicate": build / "dpp_frer.bpf.o"}
    baseline = prepare_baseline(args.baseline)
    if baseline is not None:
        talkers["baseline"] = baseline.dataplane / "build" / "dpp_frer.bpf.o"
        check_same_maps(talkers["replicate"], talkers["baseline"])
    rng = random.Random(args.seed)
    rows = []
    for streams in args.streams:
        bench = ReplicateBench(build, talkers, streams)
        try:
            medians = interleaved_medians(subjects_of(bench, args.repeat), args.runs, rng)
        finally:
            bench.close()
        row = row_of(streams, medians, list(talkers))
        if baseline is not None:
            row["baseline"] = baseline.describe()
        rows.append(row)
        shown = "  ".join(f"{name} {medians[name]:.0f} ({medians[name] - medians['floor']:+.0f})" for name in talkers)
        print(f"{row['case']}: floor {medians['floor']:.0f}  broadcast {medians['broadcast']:.0f} "
              f"({medians['broadcast'] - medians['floor']:+.0f})  {shown} ns", flush=True)
    if args.out.exists():
        result = json.loads(args.out.read_text())
        result["replicate"] = rows
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
