"""The FRER testbed driven at the highest rate the machine carries: a talker and a listener in XDP
(dataplane/bpf/xdp_frer_traffic.bpf.c), so that neither a Python socket's send nor its capture is
the bound.

The talker is BPF_PROG_TEST_RUN in live-frame mode (BPF_F_TEST_XDP_LIVE_FRAMES) as if the frames
came in on the talker's port: its program makes frame k a frame of stream k mod the streams, with the
stream's handle and next number in the payload (bench.frer.testbed.PAYLOAD), and transmits it into
the testbed (XDP_TX), unpaced. The listener is an XDP program on the listener's port that checks,
per stream, that the numbers arrive exactly once (a bit per number) and in order, records each
frame's latency (both ends read CLOCK_MONOTONIC) in 1 µs buckets, and drops the frame."""

from __future__ import annotations

import socket
import time
from ctypes import Structure, c_uint8, c_uint16, c_uint32, c_uint64, sizeof
from pathlib import Path
from typing import Callable

from bench.frer.testbed import StreamSpec, udp_frame
from bench.libbpf import BpfObject, map_lookup, map_update, test_run_live
from bench.throughput.sink import attach_native
from netapp.testbed import netns
from netapp.testbed.frer_site import FrerSite

HEAD_LEN = 42  # Ethernet, IPv4, UDP: what the talker writes in front of each frame's payload
MAX_STREAMS = 16  # TRAFFIC_MAX_STREAMS: stream handles below it
WINDOW = 1 << 22  # TRAFFIC_WINDOW: the numbers of a stream the listener checks
LATENCY_BUCKETS = 8192  # TRAFFIC_LATENCY_BUCKETS, 1 µs each
FRAME_LEN = 128
# Frames a run hands to the kernel at once. The kernel carries a batch's XDP_TX at its end, and the
# testbed's hops run as the batch's softirq work: a batch must fit the veth rings (256 frames) with
# what is still in them; at 256, frames are lost at the talker's port, at 64 the NetApp's pipeline
# loses some on the way.
BATCH = 16


class TrafficStream(Structure):
    """struct traffic_stream of xdp_frer_traffic.bpf.c."""

    _fields_ = [("head", c_uint8 * HEAD_LEN), ("reserved", c_uint16), ("handle", c_uint32)]


class TrafficConfig(Structure):
    """struct traffic_config of xdp_frer_traffic.bpf.c."""

    _fields_ = [("streams", c_uint32), ("reserved", c_uint32), ("position", c_uint64)]


class TrafficCheck(Structure):
    """struct traffic_check of xdp_frer_traffic.bpf.c: what the listener saw of one stream."""

    _fields_ = [("received", c_uint64), ("next", c_uint64), ("in_order", c_uint64), ("duplicates", c_uint64),
                ("late", c_uint64), ("skipped", c_uint64), ("beyond", c_uint64), ("ahead", c_uint64)]  # fmt: skip

    def __repr__(self) -> str:
        return "TrafficCheck(" + ", ".join(f"{name}={getattr(self, name)}" for name, _ in self._fields_) + ")"


# Each map the mirrors write or read, with its value's mirror: checked against the object on load.
MIRRORS = {"traffic_config": TrafficConfig, "traffic_streams": TrafficStream, "traffic_checks": TrafficCheck,
           "traffic_sent": c_uint64, "traffic_latency": c_uint64}  # fmt: skip


def check_mirrors(obj: BpfObject) -> None:
    """The program's value sizes are the mirrors': a layout changed on one side only is an error."""
    for name, mirror in MIRRORS.items():
        size = obj.map_shape(name)[2]
        if size != sizeof(mirror):
            raise RuntimeError(f"{obj.path.name}: {name}'s value is {size} bytes, its mirror {sizeof(mirror)}")


class FastTraffic:
    """xdp_frer_traffic.bpf.o on a FrerSite: the talker sending `specs`' streams from t0 and the
    listener checking them on l0."""

    def __init__(self, obj_path: Path, site: FrerSite, specs: list[StreamSpec]):
        for spec in specs:
            if not 0 < spec.handle < MAX_STREAMS:
                raise ValueError(f"stream handle {spec.handle}: the fast talker sends handles 1..{MAX_STREAMS - 1}")
        self.site, self.handles = site, [spec.handle for spec in specs]
        self.obj = BpfObject(obj_path)
        try:
            check_mirrors(self.obj)
            self._configure(specs)
            with netns.entered(site.ns("listener")):
                attach_native(socket.if_nametoindex(site.l0.ifname), self.obj.program_fd("xdp_frer_check"))
            self.ingress = site.ifindex(site.t0)
        except BaseException:
            self.obj.close()
            raise

    def _configure(self, specs: list[StreamSpec]) -> None:
        map_update(self.obj.map_fd("traffic_config"), c_uint32(0), TrafficConfig(streams=len(specs)))
        for slot, spec in enumerate(specs):
            stream = TrafficStream(handle=spec.handle)
            stream.head[:] = udp_frame(self.site, spec, 0, FRAME_LEN)[:HEAD_LEN]
            map_update(self.obj.map_fd("traffic_streams"), c_uint32(slot), stream)

    def send(self, frames: int, batch: int = BATCH) -> float:
        """`frames` frames, the streams in turn, as fast as the talker's program runs; the seconds the
        run took."""
        start = time.monotonic()
        with netns.entered(self.site.ns("talker")):
            test_run_live(self.obj.program_fd("xdp_frer_send"), bytes(FRAME_LEN), frames, self.ingress, batch)
        return time.monotonic() - start

    def sent(self) -> dict[int, int]:
        """Stream handle -> the frames the talker sent of it (the number its next frame gets)."""
        return {handle: self._read("traffic_sent", handle, c_uint64()).value for handle in self.handles}

    def checks(self) -> dict[int, TrafficCheck]:
        """Stream handle -> what the listener saw of it."""
        return {handle: self._read("traffic_checks", handle, TrafficCheck()) for handle in self.handles}

    def latency_us(self) -> list[int]:
        """Frames by latency, 1 µs a bucket (the last: that many µs or more)."""
        return [self._read("traffic_latency", bucket, c_uint64()).value for bucket in range(LATENCY_BUCKETS)]

    def _read(self, name: str, key: int, value):  # noqa: ANN001, ANN202
        map_lookup(self.obj.map_fd(name), c_uint32(key), value)
        return value

    def close(self) -> None:
        self.obj.close()


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Polls `condition` (a read of map counters) until it holds or the timeout passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)  # polling counters the data path writes, with a deadline
    return True
