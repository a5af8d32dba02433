"""bench/pfcp_receive.py: its recvmmsg reader gives the datagrams waiting, in order, each with its
sender's address as the endpoint's socket would; a small run reads every request every way (a way
reading fewer, or other bytes, stops the run) and times the protocol's receiving of each."""

from __future__ import annotations

import socket

from bench.pfcp_receive import Mmsg, parse_args, run


def test_recvmmsg_reads_the_waiting_datagrams_with_their_senders():
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        receiver.bind(("127.0.0.1", 0))
        sender.bind(("127.0.0.1", 0))
        sent = [bytes([n]) * (100 + n) for n in range(5)]
        for data in sent:
            sender.sendto(data, receiver.getsockname())
        read = Mmsg(4).read(receiver.fileno()) + Mmsg(4).read(receiver.fileno())
        assert read == [(data, sender.getsockname()) for data in sent]
        assert Mmsg(4).read(receiver.fileno()) == []  # nothing waits: no wait either
    finally:
        receiver.close()
        sender.close()


def test_a_small_run_reads_every_request_every_way_and_times_the_protocol():
    result = run(parse_args(["--requests", "96", "--rounds", "1"]))
    assert set(result["read_cpu_us_per_datagram"]) == {"uvloop", "recvfrom", "recvmmsg", "uvloop_turn"}
    assert all(len(values) == 1 and values[0] > 0 for values in result["read_cpu_us_per_datagram"].values())
    assert len(result["protocol_cpu_us_per_request"]) == 1 and result["protocol_cpu_us_per_request"][0] > 0
