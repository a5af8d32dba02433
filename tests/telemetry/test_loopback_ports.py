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


def test_without_a_setting_no_port_is_of_the_kernel_s_ephemeral_range(monkeypatch):
    monkeypatch.delenv(PORTS_ENV, raising=False)
    ports = loopback_ports()
    assert ports.start >= loopback.FIRST_LOOPBACK_PORT and not set(ports) & set(_ephemeral())
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        assert free_loopback_port(kind) not in _ephemeral()


@pytest.mark.parametrize("ephemeral, expected", [
    ("32768\t60999\n", range(10000, 32768)),  # Linux's default: below it
    ("1024 30000", range(30001, 65536)),  # nothing below 10000 is taken: above it
    ("20000 64000", range(10000, 20000)),  # the wider side
    ("1024 65535", range(10000, 65536)),  # no side left: every port from 10000, the race open
])
def test_the_ports_are_the_wider_side_of_the_ephemeral_range(monkeypatch, tmp_path, ephemeral, expected):
    monkeypatch.delenv(PORTS_ENV, raising=False)
    (tmp_path / "range").write_text(ephemeral)
    monkeypatch.setattr(loopback, "EPHEMERAL_RANGE", str(tmp_path / "range"))
    assert loopback_ports() == expected


def test_one_process_does_not_hand_a_port_out_twice_while_it_is_unbound(monkeypatch):
    monkeypatch.delenv(PORTS_ENV, raising=False)
    picked = [free_loopback_port() for _ in range(50)]
    assert len(set(picked)) == len(picked)


def _two_free_in_a_row() -> int:
    """A port of this process's range free with the next one (neither a client socket's: the range
    is none of the ephemeral ones)."""
    for _ in range(100):
        port = free_loopback_port()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((LOOPBACK, port + 1))
            except OSError:
                continue
        return port
    raise AssertionError("no two free ports in a row")


def test_a_port_taken_is_passed_over(monkeypatch):
    port = _two_free_in_a_row()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((LOOPBACK, port))
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


def test_each_xdist_worker_has_a_slice_of_its_own(monkeypatch):
    """Under pytest-xdist (as `make test` runs), this worker's slice is set, inside the range, and
    the slices of the workers do not meet."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count:
        pytest.skip("not under pytest-xdist: no worker slices")
    own = loopback_ports()
    monkeypatch.delenv(PORTS_ENV)
    whole, size = loopback_ports(), len(own)
    assert size == len(whole) // int(count) >= 1000
    index = int(worker.removeprefix("gw")) % int(count)
    assert own.start == whole.start + index * size, "slices in the workers' order"
    assert whole.start + int(count) * size <= whole.stop, "the last one inside the range too"
