"""The loopback ports the demo's and the tests' own servers are given (netapp.telemetry.loopback):
none a client socket can be handed by the kernel, none handed out twice by one process, and a
slice of their own for each pytest-xdist worker."""

from __future__ import annotations

import os
import socket

import pytest

from netapp.telemetry import loopback
from netapp.telemetry.loopback import LOOPBACK, PORTS_ENV, free_loopback_port, loopback_ports


def _ephemeral() -> range:
    first, last = (int(part) for part in open(loopback.EPHEMERAL_RANGE).read().split())
    return range(first, last + 1)


def test_without_a_setting_the_ports_are_below_the_kernel_s_ephemeral_range(monkeypatch):
    monkeypatch.delenv(PORTS_ENV, raising=False)
    ports = loopback_ports()
    assert ports.start == loopback.FIRST_LOOPBACK_PORT and ports.stop == _ephemeral().start
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        assert free_loopback_port(kind) not in _ephemeral()


def test_one_process_does_not_hand_a_port_out_twice_while_it_is_unbound(monkeypatch):
    monkeypatch.delenv(PORTS_ENV, raising=False)
    picked = [free_loopback_port() for _ in range(50)]
    assert len(set(picked)) == len(picked)


def test_a_port_taken_is_passed_over(monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((LOOPBACK, 0))
        port = taken.getsockname()[1]
        monkeypatch.setenv(PORTS_ENV, f"{port}-{port + 1}")
        assert {free_loopback_port() for _ in range(4)} == {port + 1}


def test_a_range_all_taken_says_which_and_where_it_was_set(monkeypatch):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind((LOOPBACK, 0))
        port = taken.getsockname()[1]
        monkeypatch.setenv(PORTS_ENV, f"{port}-{port}")
        with pytest.raises(OSError, match=f"no free port on {LOOPBACK} from {port} to {port} .{PORTS_ENV}"):
            free_loopback_port(socket.SOCK_DGRAM)


@pytest.mark.parametrize("configured", ["20000", "20010-20000", "0-10", "x-y", "60000-70000"])
def test_a_bad_setting_is_refused_with_what_is_allowed(monkeypatch, configured):
    monkeypatch.setenv(PORTS_ENV, configured)
    with pytest.raises(ValueError, match=f"{PORTS_ENV}=.*FIRST-LAST, 1 <= FIRST <= LAST <= 65535"):
        loopback_ports()


def test_each_xdist_worker_has_a_slice_of_its_own():
    """Under pytest-xdist (as `make test` runs), this worker's slice is set, inside the range, and
    the slices of the workers do not meet."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker:
        pytest.skip("not under pytest-xdist: no worker slices")
    own = loopback_ports()
    size = len(own)
    assert size >= 1000 and own.start >= loopback.FIRST_LOOPBACK_PORT and own.stop <= _ephemeral().start
    index = int(worker.removeprefix("gw"))
    assert own.start == loopback.FIRST_LOOPBACK_PORT + index * size, "slices in the workers' order"
    assert loopback.FIRST_LOOPBACK_PORT + int(count) * size <= _ephemeral().start
