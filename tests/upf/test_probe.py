"""The client-side PFCP Heartbeat (netapp.upf.pfcp.probe), against the real endpoint and against
a port where nothing answers."""

from __future__ import annotations

import socket

import pytest

from netapp.upf.pfcp.probe import NoAnswer, heartbeat


def test_the_endpoint_answers_with_its_recovery_time_stamp(endpoint):
    host, port = endpoint.server.address
    assert heartbeat(host, port) == endpoint.upf.recovery_time_stamp
    assert endpoint.server.counters["accepted"] == 1


def test_a_port_where_nothing_answers_is_no_answer():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:  # bound, never read: no ICMP, no answer
        silent.bind(("127.0.0.1", 0))
        with pytest.raises(NoAnswer, match="no heartbeat response"):
            heartbeat(*silent.getsockname(), timeout_s=0.2)
