"""netapp.upf.pfcp.committing: a COMMIT run on a thread of its own while the endpoint's thread reads
the datagrams waiting in its socket, over a real UDP socket on loopback (no root needed). The COMMIT
here is a function of the test's that ends only once the datagrams waiting have been received: on
the endpoint's thread it would wait for them in vain (a bounded wait, then a failure)."""

from __future__ import annotations

import collections
import socket
import threading

import pytest

from netapp.upf.pfcp.committing import MAX_READ, ReadWhileCommitting

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


def _held_until(all_in, ran_on):
    """A COMMIT that ends once the datagrams waiting have been received (`all_in`): received on the
    endpoint's thread while it runs on its own (noted in `ran_on`); on the endpoint's thread it
    would wait for them in vain."""

    def commit():
        ran_on.append(threading.get_ident())
        if not all_in.wait(WAIT_S):
            raise TimeoutError("the datagrams waiting were not received during the COMMIT")

    return commit


def test_the_datagrams_waiting_when_a_commit_starts_are_received_while_it_runs_each_once(sockets):
    receiver, sender = sockets
    received: list = []
    all_in = threading.Event()
    reader, counters = _reader(receiver, received, all_in=all_in, expected=4)
    sent = [b"waiting %d" % index for index in range(4)]
    for data in sent:
        sender.sendto(data, receiver.getsockname())
    ran_on: list = []
    try:
        reader(_held_until(all_in, ran_on))
    finally:
        reader.close()
    assert [data for data, _ in received] == sent
    assert counters["received_while_committing"] == 4
    assert ran_on and ran_on[0] != threading.get_ident()


def test_at_most_max_read_are_received_during_one_commit_the_others_stay_in_the_socket(sockets):
    receiver, sender = sockets
    received: list = []
    all_in = threading.Event()
    reader, _ = _reader(receiver, received, all_in=all_in, expected=MAX_READ)
    for index in range(MAX_READ + 3):
        sender.sendto(b"%d" % index, receiver.getsockname())
    try:
        reader(_held_until(all_in, []))
        left = [receiver.recvfrom(100)[0] for _ in range(3)]
    finally:
        reader.close()
    assert len(received) == MAX_READ and left == [b"%d" % index for index in range(MAX_READ, MAX_READ + 3)]


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

