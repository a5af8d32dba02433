"""The fast testbed's listener (xdp_frer_check of xdp_frer_traffic.bpf.o, BPF_PROG_TEST_RUN): what it
counts of a stream whose numbers come out of order, twice and out of its window, so that
test_two_paths_fast.py's sums hold for every order the frames may come in: each frame is counted
once as in order, ahead, late, a duplicate or beyond, and the numbers the frames ahead jumped over are
the late ones when none is lost."""

from __future__ import annotations

import struct
from ctypes import c_uint32
from typing import Iterator

import pytest

from bench.frer.fast import WINDOW, TrafficCheck, check_mirrors
from bench.frer.testbed import PAYLOAD
from bench.libbpf import BpfObject, map_lookup
from bench.libbpf import test_run as run_once
from tests.utils.kernel import build_artifact, require_kernel

HANDLE = 3
XDP_PASS, XDP_DROP = 2, 1


def frame(number: int, handle: int = HANDLE) -> bytes:
    """An untagged IPv4/UDP frame with the talker's payload (sent at time 0)."""
    payload = PAYLOAD.pack(handle, number, 0)
    udp = struct.pack("!HHHH", 4000, 5000, 8 + len(payload), 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp) + len(payload), 0, 0, 64, 17, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))  # fmt: skip
    return bytes(6) + bytes(6) + struct.pack("!H", 0x0800) + ip + udp + payload


@pytest.fixture
def listener() -> Iterator[BpfObject]:
    require_kernel()
    obj = BpfObject(build_artifact("xdp_frer_traffic.bpf.o"))
    try:
        check_mirrors(obj)
        yield obj
    finally:
        obj.close()


def receive(obj: BpfObject, numbers: list[int]) -> TrafficCheck:
    for number in numbers:
        assert run_once(obj.program_fd("xdp_frer_check"), frame(number), 1).retval == XDP_DROP
    check = TrafficCheck()
    map_lookup(obj.map_fd("traffic_checks"), c_uint32(HANDLE), check)
    return check


def counted(check: TrafficCheck) -> dict[str, int]:
    return {name: getattr(check, name) for name, _ in TrafficCheck._fields_}


def test_in_order_frames_are_counted_in_order(listener):
    check = receive(listener, [0, 1, 2])
    assert counted(check) == dict(received=3, next=3, in_order=3, duplicates=0, late=0, skipped=0, beyond=0, ahead=0)


def test_a_frame_overtaken_is_late_and_the_one_overtaking_it_ahead(listener):
    # 3 jumps over 2 (CI saw it at the highest rate: a frame passed on the other CPU left first).
    check = receive(listener, [0, 1, 3, 2, 4])
    assert counted(check) == dict(received=5, next=5, in_order=3, duplicates=0, late=1, skipped=1, beyond=0, ahead=1)
    assert check.in_order + check.ahead + check.late == check.received


def test_one_frame_ahead_may_jump_over_several_that_come_late(listener):
    check = receive(listener, [0, 4, 1, 2, 3, 5])
    assert counted(check) == dict(received=6, next=6, in_order=2, duplicates=0, late=3, skipped=3, beyond=0, ahead=1)
    assert check.late == check.skipped and check.in_order + check.ahead + check.late == check.received


def test_a_number_lost_is_skipped_and_never_late(listener):
    check = receive(listener, [0, 2, 3])
    assert (check.skipped, check.late, check.ahead, check.in_order) == (1, 0, 1, 2)


def test_duplicates_and_numbers_beyond_the_window_are_counted_apart(listener):
    check = receive(listener, [0, 1, 0, WINDOW, 2])
    assert counted(check) == dict(received=5, next=3, in_order=3, duplicates=1, late=0, skipped=0, beyond=1, ahead=0)


def test_a_frame_of_no_stream_is_passed(listener):
    other = frame(0, handle=100)
    assert run_once(listener.program_fd("xdp_frer_check"), other, 1).retval == XDP_PASS
