"""How bench.pfcp's SMF offers its requests to the endpoint, and what it makes of the responses.

Two ways, both over one UDP socket:

- closed loop (`drive`): `inflight` requests outstanding, a new one sent as each response arrives.
  The rate is the endpoint's capacity at that window; the latency is mostly the queue the window
  makes (Little's law: about inflight / rate).
- open loop (`drive_at_rate`): request i is due at i / rate seconds after the start, sent then
  whatever has come back. The latency of a request counts from the time it was due, not from when
  its sendto happened, so a sender that falls behind (the endpoint's pauses, this process's own)
  shows in the figures rather than hiding in the gaps between sends (coordinated omission). What
  issue 17 asks, "p99 at 10,000 establishments/s", is this loop's figure at --rate 10000.

Every response must be the Session Establishment Response of a request sent, with Cause Request
accepted; anything else stops the run, and so does no response within TIMEOUT_S in the closed loop.
The open loop counts the requests no response came for within TIMEOUT_S of the last send as lost
(UDP: dropped where they queued; an SMF would send them again after its T1).
"""

from __future__ import annotations

import select
import socket
import statistics
import struct
import time
from typing import Any, Sequence

from netapp.upf.pfcp.ies import Cause, IEType, MsgType

SESSION_HEADER = 16  # a session message's header: flags, type, length, SEID, sequence number, spare
TIMEOUT_S = 10.0  # the longest wait for a response before the run is stopped
LATE_BY_S = 0.000_5  # an open loop's sends are counted late beyond this after their due time


def cause_of(response: bytes) -> int:
    """The Cause of a session response (our responses put it among the first IEs)."""
    offset = SESSION_HEADER
    while offset + 4 <= len(response):
        ie_type, length = struct.unpack_from("!HH", response, offset)
        if ie_type == IEType.CAUSE:
            return response[offset + 4]
        offset += 4 + length
    raise ValueError("a response without Cause")


def sequence_of(data: bytes) -> int:
    return int.from_bytes(data[12:15], "big")


def accepted(data: bytes, outstanding: dict[int, int]) -> int:
    """The sequence number of an accepted establishment's response; raises on anything else."""
    seq = sequence_of(data)
    if data[1] != MsgType.SESSION_ESTABLISHMENT_RESPONSE or seq not in outstanding:
        raise RuntimeError(f"unexpected response: type {data[1]}, sequence number {seq}")
    if (cause := cause_of(data)) != Cause.REQUEST_ACCEPTED:
        raise RuntimeError(f"establishment {seq} refused with cause {cause}")
    return seq


def drive(
    sock: socket.socket, address: tuple[str, int], batch: list[bytes], inflight: int
) -> tuple[float, list[float]]:
    """Send every request, `inflight` outstanding; (elapsed seconds, latencies in ms)."""
    sent_at: dict[int, int] = {}
    latencies: list[float] = []
    pending = iter(batch)
    started = time.perf_counter()

    def send_next() -> None:
        data = next(pending, None)
        if data is not None:
            sent_at[sequence_of(data)] = time.perf_counter_ns()
            sock.sendto(data, address)

    for _ in range(min(inflight, len(batch))):
        send_next()
    while len(latencies) < len(batch):
        data, _ = sock.recvfrom(65535)
        now = time.perf_counter_ns()
        latencies.append((now - sent_at.pop(accepted(data, sent_at))) / 1e6)
        send_next()
    return time.perf_counter() - started, latencies


def drive_at_rate(
    sock: socket.socket, address: tuple[str, int], batch: list[bytes], rate: float
) -> tuple[float, list[float], dict[str, Any]]:
    """Send request i at i / rate seconds from the start, whatever has come back; (elapsed seconds
    from the first due time to the last response, latencies in ms from each request's due time,
    how the sending kept to its schedule)."""
    timeout = sock.gettimeout()
    sock.setblocking(False)  # a socket with a timeout waits for it even with MSG_DONTWAIT
    try:
        return _drive_at_rate(sock, address, batch, rate)
    finally:
        sock.settimeout(timeout)


def _drive_at_rate(
    sock: socket.socket, address: tuple[str, int], batch: list[bytes], rate: float
) -> tuple[float, list[float], dict[str, Any]]:
    interval_ns = 1e9 / rate
    due_at: dict[int, int] = {}
    latencies: list[float] = []
    most_outstanding, late, next_index = 0, 0, 0
    started = time.perf_counter_ns()
    last_heard = started
    while len(latencies) < len(batch):
        now = time.perf_counter_ns()
        while next_index < len(batch) and started + next_index * interval_ns <= now:
            data = batch[next_index]
            due = started + int(next_index * interval_ns)
            due_at[sequence_of(data)] = due
            sock.sendto(data, address)
            late += time.perf_counter_ns() - due > LATE_BY_S * 1e9
            next_index += 1
        most_outstanding = max(most_outstanding, len(due_at))
        wait_s = 0.0 if next_index == len(batch) else max(0.0, (started + next_index * interval_ns - now) / 1e9)
        if not select.select([sock], [], [], TIMEOUT_S if next_index == len(batch) else wait_s)[0]:
            if next_index == len(batch):
                break  # every request sent, none answered for TIMEOUT_S: those outstanding are lost
            continue
        last_heard = time.perf_counter_ns()
        for data in receive_waiting(sock):
            latencies.append((last_heard - due_at.pop(accepted(data, due_at))) / 1e6)
    elapsed = (last_heard - started) / 1e9
    return elapsed, latencies, {"offered_per_s": rate, "most_outstanding": most_outstanding,
                                "sent_late": late, "late_beyond_ms": LATE_BY_S * 1e3,
                                # never answered: dropped where they queued (the endpoint's socket, when it
                                # falls further behind than its buffer holds), as an SMF would see before T1
                                "lost": len(due_at)}


def receive_waiting(sock: socket.socket) -> list[bytes]:
    """Every datagram the (non-blocking) socket holds now."""
    received = []
    while True:
        try:
            received.append(sock.recv(65535))
        except BlockingIOError:
            return received


def summary(samples_ms: Sequence[float]) -> dict[str, Any]:
    ordered = sorted(samples_ms)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {
        "count": len(ordered),
        "median_ms": round(statistics.median(ordered), 3),
        "p90_ms": round(at(0.90), 3),
        "p99_ms": round(at(0.99), 3),
        "max_ms": round(ordered[-1], 3),
    }
