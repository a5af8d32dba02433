"""Frames that arrive at a veth end (netapp.testbed.traffic.Capture), compared byte for byte with the
frames a test expects: how many copies of one arrived, waiting for them, and what a GTP-U frame is
once its tunnels are taken off (scapy's reading of it, for the decapsulating copies to be compared with)."""

from __future__ import annotations

import time
from typing import Callable

from scapy.layers.l2 import Ether

from netapp.testbed.traffic import Capture

ARRIVAL_TIMEOUT_S = 10.0


def received(capture: Capture, wanted: bytes) -> int:
    """How many frames equal to `wanted` the capture got so far."""
    return sum(1 for rx in list(capture.frames) if rx.frame == wanted)


def wait_for(capture: Capture, wanted: bytes, count: int, timeout: float = ARRIVAL_TIMEOUT_S) -> int:
    """How many `wanted` frames arrived, once `count` did (or the timeout passed)."""
    deadline = time.monotonic() + timeout
    while received(capture, wanted) < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return received(capture, wanted)


def counted_once(read: Callable[[], int], expected: int, timeout: float = ARRIVAL_TIMEOUT_S) -> int:
    """What `read` (a counter of frames sent) says once it reaches `expected`, or when the timeout
    passed: XDP counts a frame as the veth's NAPI gets to it, which on a loaded machine may be after
    the send returned."""
    deadline = time.monotonic() + timeout
    while (seen := read()) < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return seen


def decapsulated(frame: bytes, inner: bytes) -> bytes:
    """What scapy says `frame` is without its tunnel: its Ethernet addresses, then the UE packet `inner`
    (EtherType of its family)."""
    outer = Ether(frame)
    return bytes(Ether(dst=outer.dst, src=outer.src, type=0x86DD if inner[0] >> 4 == 6 else 0x0800)) + inner
