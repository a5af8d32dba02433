"""netapp.upf.pfcp.committing: a COMMIT run on a thread of its own while the endpoint's thread reads
the datagrams waiting in its socket, over a real UDP socket on loopback (no root needed). The COMMIT
here is a function of the test's that ends only once the datagrams sent while it runs have been
received: on the endpoint's thread it would wait for them in vain (a bounded wait, then a failure)."""

from __future__ import annotations

import collections
import os
import resource
import socket
import threading

import pytest

from netapp.upf.pfcp.committing import ReadWhileCommitting

WAIT_S = 10.0  # for what another thread does: far more than it takes, even on a loaded machine


@pytest.fixture
def sockets():
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.setblocking(False)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        yield receiver, sender
    finally:
        sender.close()


def _reader(receiver, received, waiting=lambda: True, all_in=None, expected=0):
    """A reader on this thread; each datagram received appended to `received` (`all_in` set once
    there are `expected`)."""
    counters = collections.Counter()

    def receive(data, addr):
        received.append((data, addr[0]))
        if all_in is not None and len(received) == expected:
            all_in.set()

    return ReadWhileCommitting(receiver, receive, threading.get_ident(), waiting, counters), counters


def _sending(sender, receiver, datagrams, all_in, ran_on):
    """A COMMIT that sends `datagrams` to `receiver` and ends once all have been received (`all_in`):
    received on the endpoint's thread while it runs on its own (noted in `ran_on`)."""

    def commit():
        ran_on.append(threading.get_ident())
        for data in datagrams:
            sender.sendto(data, receiver.getsockname())
        if not all_in.wait(WAIT_S):
            raise TimeoutError("the datagrams sent during the COMMIT were not received during it")

    return commit


def test_the_datagrams_that_come_while_a_commit_runs_are_received_meanwhile_each_once(sockets):
    receiver, sender = sockets
    received: list = []
    all_in = threading.Event()
    reader, counters = _reader(receiver, received, all_in=all_in, expected=4)
    sender.sendto(b"before", receiver.getsockname())  # waiting when the COMMIT starts
    ran_on: list = []
    try:
        reader(_sending(sender, receiver, [b"during %d" % index for index in range(3)], all_in, ran_on))
    finally:
        reader.close()
    assert [data for data, _ in received] == [b"before", b"during 0", b"during 1", b"during 2"]
    assert counters["received_while_committing"] == 4
    assert ran_on and ran_on[0] != threading.get_ident()


def test_a_socket_past_fd_1024_is_waited_on_too(sockets):
    """A service holds hundreds of fds (its maps'): select() refuses one past 1,023."""
    receiver, sender = sockets
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"the fd limit ({hard}) does not reach past 1,024")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    high = socket.socket(fileno=os.dup2(receiver.fileno(), 1500))
    received: list = []
    all_in = threading.Event()
    reader, _ = _reader(high, received, all_in=all_in, expected=1)
    try:  # nothing waits when the COMMIT starts: the reader waits on the socket for the datagram
        reader(_sending(sender, receiver, [b"late"], all_in, []))
    finally:
        reader.close()
        receiver.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [data for data, _ in received] == [b"late"]


def test_a_commit_that_fails_raises_its_error_on_the_endpoints_thread(sockets):
    receiver, sender = sockets
    reader, _ = _reader(receiver, [])

    def commit():
        raise RuntimeError("disk I/O error")

    try:
        with pytest.raises(RuntimeError, match="disk I/O error"):
            reader(commit)
        reader(lambda: None)  # and the next one runs as ever
    finally:
        reader.close()


def test_with_nothing_waiting_or_on_another_thread_the_commit_runs_on_the_callers_thread(sockets):
    receiver, _ = sockets
    idle, _ = _reader(receiver, [], waiting=lambda: False)
    ran_on = []
    try:
        idle(lambda: ran_on.append(threading.get_ident()))
        other = threading.Thread(target=idle, args=(lambda: ran_on.append(threading.get_ident()),))
        other.start()
        other.join(WAIT_S)
    finally:
        idle.close()
    assert ran_on == [threading.get_ident(), other.ident]

