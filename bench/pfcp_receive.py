"""What receiving a Session Establishment Request costs the PFCP endpoint's thread, apart from
handling it: reading it from the socket, three ways, and the protocol's look at it before the group's
transaction (netapp.upf.pfcp.server `PfcpProtocol.datagram_received`: the header, the
retransmission cache, the template's match and the request's values).

    python -m bench.pfcp_receive --out bench/results/pfcp_receive.json

The socket: groups of `--group` requests (bench.pfcp's, each its own session) are sent over loopback
to a socket of this process, then read by the thread, whose CPU is timed over the reading only (the
sending is not): `uvloop` as the endpoint reads them (uvloop's datagram endpoint, a callback a
datagram; the loop started and stopped a group, which the endpoint's loop, running on, does not pay:
`uvloop_turn`, the same with nothing to read, spread over a group's datagrams, is that part), `recvfrom` one call a
datagram until EAGAIN in one callback, `recvmmsg` one call a group (the C library's, through ctypes,
each datagram then made bytes and its address a tuple, as the protocol takes them). The ways
alternate group by group, `--rounds` times over. The protocol: an endpoint of no data path over a
fresh store (NORMAL: its COMMITs are not timed) that has made a template of the requests' shape is fed
the requests group by group; the thread's CPU over `datagram_received` alone, each group's
transaction untimed. Methodology and results: bench/README.md ("bench/pfcp.py", receiving).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import ctypes.util
import datetime
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

DEFAULT_OUT = Path("bench/results/pfcp_receive.json")
BUFFER = 2048  # bytes a datagram at most (the bench's request is some 500)
MSG_DONTWAIT = 0x40
PEER = ("127.0.0.1", 8805)


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pfcp_receive", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="result document (JSON)")
    parser.add_argument("--requests", type=int, default=6400, help="requests read a way a round")
    parser.add_argument("--group", type=int, default=32,
                        help="requests waiting together (the endpoint's at 32 in flight)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every way, alternating")
    return parser.parse_args(argv)


# --- the socket -----------------------------------------------------------------------------------


class Counting(asyncio.DatagramProtocol):
    """uvloop's way: a callback a datagram, the loop stopped once `wanted` are in."""

    def __init__(self) -> None:
        self.received: list[tuple[bytes, Any]] = []
        self.wanted = 0
        self.loop: Optional[asyncio.AbstractEventLoop] = None

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.received.append((data, (addr[0], addr[1])))
        if len(self.received) >= self.wanted:
            self.loop.stop()  # type: ignore[union-attr]


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(_Iovec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", _Msghdr), ("len", ctypes.c_uint)]


class Mmsg:
    """recvmmsg(2) of up to `count` datagrams into buffers made once."""

    def __init__(self, count: int):
        self._libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self._count = count
        self._data = ctypes.create_string_buffer(count * BUFFER)
        self._names = ctypes.create_string_buffer(count * 16)  # struct sockaddr_in
        self._iovecs = (_Iovec * count)()
        self._messages = (_Mmsghdr * count)()
        for index in range(count):
            self._iovecs[index].base = ctypes.addressof(self._data) + index * BUFFER
            self._iovecs[index].len = BUFFER
            header = self._messages[index].hdr
            header.name, header.iov, header.iovlen = ctypes.addressof(self._names) + 16 * index, ctypes.pointer(
                self._iovecs[index]), 1
        self._view = memoryview(self._data).cast("B")

    def read(self, fd: int) -> list[tuple[bytes, Any]]:
        for message in self._messages:
            message.hdr.namelen = 16
        got = self._libc.recvmmsg(fd, self._messages, self._count, MSG_DONTWAIT, None)
        if got < 0:
            return []
        names, view, out = self._names.raw, self._view, []
        for index in range(got):
            name = names[16 * index : 16 * index + 8]
            start = index * BUFFER
            out.append((bytes(view[start : start + self._messages[index].len]),
                        (socket.inet_ntoa(name[4:8]), int.from_bytes(name[2:4], "big"))))
        return out


def read_ways(datagrams: list[bytes], group: int, rounds: int) -> dict[str, list[float]]:
    """The thread's CPU a datagram, each way, each round (us)."""
    import uvloop

    loop = uvloop.new_event_loop()
    protocol = Counting()
    protocol.loop = loop
    transport, _ = loop.run_until_complete(loop.create_datagram_endpoint(lambda: protocol, local_addr=("127.0.0.1", 0)))
    to_uv = transport.get_extra_info("sockname")[:2]
    plain = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    plain.bind(("127.0.0.1", 0))
    plain.setblocking(False)
    plain.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    mmsg = Mmsg(max(64, group))

    def by_uvloop(count: int) -> list[tuple[bytes, Any]]:
        protocol.received, protocol.wanted = [], count
        loop.run_forever()
        return protocol.received

    def turn(_: int) -> list[tuple[bytes, Any]]:
        loop.call_soon(loop.stop)
        loop.run_forever()
        return []

    def by_recvfrom(_: int) -> list[tuple[bytes, Any]]:
        out = []
        while True:
            try:
                out.append(plain.recvfrom(BUFFER))
            except BlockingIOError:
                return out

    def by_recvmmsg(_: int) -> list[tuple[bytes, Any]]:
        return mmsg.read(plain.fileno())

    ways: dict[str, tuple[Callable[[int], list], Any]] = {
        "uvloop": (by_uvloop, to_uv), "recvfrom": (by_recvfrom, plain.getsockname()),
        "recvmmsg": (by_recvmmsg, plain.getsockname())}
    results: dict[str, list[float]] = {name: [] for name in (*ways, "uvloop_turn")}
    try:
        for _ in range(rounds):
            cpu = dict.fromkeys(results, 0.0)
            for start in range(0, len(datagrams), group):
                chunk = datagrams[start : start + group]
                for name, (read, address) in ways.items():
                    for data in chunk:
                        sender.sendto(data, address)
                    began = time.thread_time()
                    got = read(len(chunk))
                    cpu[name] += time.thread_time() - began
                    if [data for data, _ in got] != chunk:
                        raise RuntimeError(f"{name} read {len(got)} of {len(chunk)} datagrams, or others")
                began = time.thread_time()
                turn(0)  # a turn of the loop with nothing to read: what `uvloop` pays a group besides
                cpu["uvloop_turn"] += time.thread_time() - began
            for name in results:
                results[name].append(round(cpu[name] / len(datagrams) * 1e6, 2))
    finally:
        transport.close()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
        plain.close()
        sender.close()
    return results


# --- the protocol ---------------------------------------------------------------------------------


def protocol_receive(datagrams: list[bytes], group: int, rounds: int) -> list[float]:
    """The thread's CPU in `datagram_received` a request (us), each round over fresh sessions."""
    from bench.pfcp import N3, requests
    from bench.pfcp_process import NoLoop, Responses
    from netapp.service.store import Store
    from netapp.upf.pfcp.server import PfcpServer
    from netapp.upf.sessions import Upf
    from tests.upf.smf import Smf, node_id, recovery

    results = []
    with tempfile.TemporaryDirectory(prefix="bench-pfcp-receive-") as directory:
        store = Store.open(Path(directory) / "netapp.db", synchronous="NORMAL")
        try:
            server = PfcpServer(Upf(store, None, n3_ipv4=N3), "127.0.0.1", 0)
            protocol = server.protocol
            protocol.transport, protocol._loop = Responses(), NoLoop()  # type: ignore[assignment]
            protocol.open_requests()
            setup = Smf.build(Smf.__new__(Smf), "PFCPAssociationSetupReq", [node_id(), recovery(1000)], seq=1)
            first = 2 + len(datagrams) * rounds
            feed = [setup, *requests(4, first, sdf=False)]  # the template made, off the timed sessions
            for data in feed:
                protocol.datagram_received(data, PEER)
            protocol._drain(whole=True)
            for round_ in range(rounds):
                cpu = 0.0
                timed = datagrams if round_ == 0 else requests(len(datagrams), 2 + round_ * len(datagrams), sdf=False)
                for start in range(0, len(timed), group):
                    began = time.thread_time()
                    for data in timed[start : start + group]:
                        protocol.datagram_received(data, PEER)
                    cpu += time.thread_time() - began
                    protocol._drain(whole=True)
                results.append(round(cpu / len(timed) * 1e6, 2))
            if protocol.counters["accepted_from_template"] != len(datagrams) * rounds:
                raise RuntimeError(f"{protocol.counters['accepted_from_template']} requests made from the template, "
                                   f"not {len(datagrams) * rounds}")
        finally:
            store.close()
    return results


def run(args: argparse.Namespace) -> dict[str, Any]:
    from bench.pfcp import requests

    datagrams = requests(args.requests, 2, sdf=False)
    load_before = os.getloadavg()[0]
    ways = read_ways(datagrams, args.group, args.rounds)
    received = protocol_receive(datagrams, args.group, args.rounds)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "requests": args.requests, "group": args.group, "rounds": args.rounds, "bytes": len(datagrams[0]),
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "read_cpu_us_per_datagram": ways,
        "protocol_cpu_us_per_request": received,
        "medians": {**{name: statistics.median(values) for name, values in ways.items()},
                    "protocol": statistics.median(received)},
    }


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{result['requests']} requests of {result['bytes']} bytes a round, read {result['group']} at a time "
             f"(load {result['load_average'][0]} -> {result['load_average'][1]}); thread CPU, us a request",
             "| piece | rounds | median |", "|---|---|---|"]
    named = {name: f"read by {name}" for name in result["read_cpu_us_per_datagram"]}
    named["uvloop_turn"] = "of which uvloop's loop started and stopped a group"
    pieces = {**{named[name]: values for name, values in result["read_cpu_us_per_datagram"].items()},
              "the protocol's `datagram_received`": result["protocol_cpu_us_per_request"]}
    for name, values in pieces.items():
        lines.append(f"| {name} | {', '.join(f'{value:.2f}' for value in values)} | {statistics.median(values):.2f} |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(format_table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
