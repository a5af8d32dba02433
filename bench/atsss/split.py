"""Weighted round-robin's split over many packets: a WEIGHTED session's UE packets run through the
downlink (xdp_atsss, BPF_PROG_TEST_RUN through the harness's head-restoring walk) and each path's
packet counter (dpp_atsss_path_stats, summed over the CPUs) read against the share its weight asks.
Smooth weighted round-robin is exact over each round of sum(weights) packets, so what a path got
may differ from its share by less than one round's worth; a larger gap is a scheduler fault."""

from __future__ import annotations

from ctypes import c_uint32
from typing import Callable

from bench.libbpf import map_lookup, map_update
from netapp.atsss.abi import Mode, Path as PathValue

CHUNK = 200_000  # repetitions per BPF_PROG_TEST_RUN call
WEIGHTS = ([3, 1], [7, 3], [1, 1], [100, 1], [65535, 1])


def zero(paths_fd: int, slots: range) -> None:
    """The paths' counters of what they sent zeroed, the rest of each entry kept."""
    for slot in slots:
        value = PathValue()
        map_lookup(paths_fd, c_uint32(slot), value)
        value.packets = value.bytes = 0
        map_update(paths_fd, c_uint32(slot), value)


def sent(paths_fd: int, slot: int) -> int:
    value = PathValue()
    map_lookup(paths_fd, c_uint32(slot), value)
    return value.packets


def split_row(run: Callable[[int], None], configure: Callable[[Mode, list[int]], None], paths_fd: int,
              sessions: int, weights: list[int], packets: int) -> dict:
    """`packets` UE packets over `sessions` sessions of these weights (each session's first path in
    odd slots, its second in even ones): the paths' counts against their shares."""
    configure(Mode.WEIGHTED, weights)
    zero(paths_fd, range(1, 2 * sessions + 1))
    left = packets
    while left:
        run(min(CHUNK, left))
        left -= min(CHUNK, left)
    counts = [sum(sent(paths_fd, 2 * i + 1 + position) for i in range(sessions)) for position in range(2)]
    if sum(counts) != packets:
        raise RuntimeError(f"{sum(counts)} packets counted of {packets} sent: the case is not what it says")
    expected = [packets * weight / sum(weights) for weight in weights]
    error = max(abs(count - want) for count, want in zip(counts, expected))
    result = {"weights": weights, "sessions": sessions, "packets": packets, "counts": counts,
              "expected": expected, "max_error_packets": error, "max_error_ratio": error / packets,
              "round": sum(weights)}  # fmt: skip
    print(f"weights {':'.join(map(str, weights)):<10} {sessions:>6} sessions  {packets} packets  counts {counts}  "
          f"expected {[round(value, 1) for value in expected]}  off by {error:.1f} packets ({error / packets:.2e})",
          flush=True)
    return result
