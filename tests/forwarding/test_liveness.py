"""The GTP-U echo end point and prober (netapp.forwarding.liveness) over real loopback sockets: one
monitor probes another, which answers; the answering one closes and the prober finds it down in
about interval x detect_multiplier; it comes back and is up on its first answer."""

from __future__ import annotations

import socket
import threading
import time
from typing import Callable, Iterator

import pytest

from netapp.forwarding.liveness import (
    DOWN,
    ECHO_REQUEST,
    ECHO_RESPONSE,
    INIT,
    UNPROBED,
    UP,
    LivenessMonitor,
    echo_request,
    echo_response,
    parse_echo,
)

# A probe every 200 ms, down after three unanswered: the prober, the peer and the test share one
# process, and a thread held 150 ms (50 ms probes) on a loaded machine could make a node flap.
INTERVAL_S = 0.2
MULTIPLIER = 3
WAIT_S = 10.0  # a loaded machine: generous, and only ever waited out on failure
# How late past interval x multiplier a detection may come: the prober's thread on a loaded 2-core
# machine can wait seconds for a CPU. Still far below WAIT_S, which a node never found down takes.
DETECTION_SLACK_S = 5.0


def wait_until(condition: Callable[[], bool], timeout: float = WAIT_S) -> float:
    """Seconds until `condition` held; fails after `timeout`."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "condition not met in time"
        time.sleep(0.005)
    return time.monotonic() - started


class Recorder:
    """on_change: the groups it was called with, and what the prober showed at that moment."""

    def __init__(self) -> None:
        self.calls: list[frozenset[int]] = []
        self.monitor: LivenessMonitor | None = None
        self.shown_during_call: list[str] = []

    def __call__(self, groups: frozenset[int]) -> None:
        assert self.monitor is not None
        self.calls.append(groups)
        self.shown_during_call.append(self.monitor.view(0, 1)[0].state)


def monitor(on_change: Callable[[frozenset[int]], None], port: int = 0) -> LivenessMonitor:
    made = LivenessMonitor(INTERVAL_S, MULTIPLIER, on_change, port=port)
    made.open("127.0.0.1", None)
    made.start()
    return made


@pytest.fixture
def peer() -> Iterator[LivenessMonitor]:
    made = monitor(lambda groups: None)
    yield made
    made.close()


@pytest.fixture
def prober() -> Iterator[tuple[LivenessMonitor, Recorder]]:
    recorder = Recorder()
    made = monitor(recorder)
    recorder.monitor = made
    yield made, recorder
    made.close()


def test_echo_messages_follow_ts_29_281():
    request = echo_request(0x1234)
    # Version 1, PT 1, S 1; type 1; length 4 (sequence, N-PDU number, next extension); TEID 0.
    assert request == bytes.fromhex("3201 0004 00000000 1234 00 00")
    response = echo_response(0x1234)
    # Type 2, length 6: the same optional fields and the Recovery IE (type 14, restart counter 0).
    assert response == bytes.fromhex("3202 0006 00000000 1234 00 00 0e00")
    assert parse_echo(request) == (ECHO_REQUEST, 0x1234)
    assert parse_echo(response) == (ECHO_RESPONSE, 0x1234)


@pytest.mark.parametrize(
    "datagram",
    [
        b"",
        echo_request(1)[:10],  # truncated
        bytes([0x30]) + echo_request(1)[1:],  # no sequence number
        bytes([0x52]) + echo_request(1)[1:],  # GTP version 2
        bytes([0x32, 0xFF]) + echo_request(1)[2:],  # a T-PDU
        echo_request(1)[:2] + b"\x00\x40" + echo_request(1)[4:],  # longer than the datagram
    ],
)
def test_anything_but_an_echo_is_ignored(datagram):
    assert parse_echo(datagram) is None


def test_the_end_point_answers_an_echo_request_from_anyone(peer):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
        client.settimeout(WAIT_S)
        client.sendto(echo_request(77), ("127.0.0.1", peer.port))
        answer, source = client.recvfrom(2048)
    assert answer == echo_response(77)
    assert source == ("127.0.0.1", peer.port)  # from the GTP-U port, to the request's source port


def test_a_node_that_answers_is_up_after_its_first_answer_and_down_when_it_stops(peer, prober):
    monitor_, recorder = prober
    port = peer.port
    monitor_.watch({0: [("127.0.0.1", port)], 1: [None, ("127.0.0.1", port)]})
    assert 0 in monitor_.active(1)  # an unprobed member is always forwarded to
    wait_until(lambda: monitor_.view(0, 1)[0].state == UP)
    assert monitor_.active(0) == [0] and monitor_.active(1) == [0, 1]
    assert recorder.calls[-1] == {0, 1}  # both groups that have the node
    assert recorder.shown_during_call[-1] == INIT  # the maps were written before the state showed

    peer.close()
    died = time.monotonic()
    detection = wait_until(lambda: monitor_.view(0, 1)[0].state == DOWN)
    assert monitor_.active(0) == [] and monitor_.active(1) == [0]
    detect_s = INTERVAL_S * MULTIPLIER
    view = monitor_.view(0, 1)[0]
    # Down only once the last answer is interval x multiplier old, and not long after that.
    assert view.since is not None and view.last_answer is not None
    # (wall times: the kernel may slew the wall clock by up to 500 ppm against the monotonic one)
    assert (view.since - view.last_answer).total_seconds() >= detect_s * (1 - 500e-6)
    assert detection < detect_s + DETECTION_SLACK_S
    assert time.monotonic() - died >= detection
    assert (view.alive, view.changes) == (False, 2) and view.since is not None

    back = monitor(lambda groups: None, port=port)
    try:
        wait_until(lambda: monitor_.view(0, 1)[0].state == UP)
        assert monitor_.active(0) == [0]
        assert monitor_.view(0, 1)[0].changes == 3
    finally:
        back.close()


def test_a_node_that_never_answers_goes_from_init_to_down(prober):
    monitor_, recorder = prober
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))  # takes the requests, answers none
        monitor_.watch({3: [("127.0.0.1", silent.getsockname()[1])]})
        assert monitor_.view(3, 1)[0].state == INIT and monitor_.active(3) == []  # until it answers
        wait_until(lambda: monitor_.view(3, 1)[0].state == DOWN)
        assert silent.recv(2048)[:2] == b"\x32\x01"  # it was probed
    assert monitor_.active(3) == []


def test_members_beyond_the_watched_ones_and_unwatched_groups_show_unprobed(prober):
    monitor_, _ = prober
    assert [view.state for view in monitor_.view(5, 2)] == [UNPROBED, UNPROBED]
    assert all(view.alive for view in monitor_.view(5, 2))


def test_a_refused_map_write_is_tried_again_and_the_state_shows_only_once_applied(peer):
    refusals = []
    applied = threading.Event()

    def refuse_twice(groups: frozenset[int]) -> None:
        if len(refusals) < 2:
            refusals.append(groups)
            raise RuntimeError("the data plane refused")
        applied.set()

    made = monitor(refuse_twice)
    try:
        made.watch({0: [("127.0.0.1", peer.port)]})
        wait_until(lambda: len(refusals) == 2)
        assert not applied.is_set() and made.view(0, 1)[0].state == INIT  # not shown: not in the maps
        wait_until(lambda: made.view(0, 1)[0].state == UP)
        assert applied.is_set()
    finally:
        made.close()


# --- in the service: the group's active set in the maps, and the API's view --------------------------


def member(mac: str, ip4: str, probe: bool) -> dict:
    return {"mac": mac, "ip4": ip4, "probe": probe}


def test_the_service_forwards_only_to_alive_members_and_says_so(tmp_path, peer):
    from netapp.forwarding.models import AlternativeGroup
    from tests.utils.fakes import RecordingDpp
    from tests.utils.service import ADMIN, fake_service

    fake = RecordingDpp(max_rules=64)
    liveness = {"interval_ms": int(INTERVAL_S * 1000), "detect_multiplier": MULTIPLIER}
    service = fake_service(tmp_path, fake, peer_echo_port=peer.port, liveness=liveness)
    try:
        group = AlternativeGroup.model_validate(
            {
                "id": 2,
                "members": [
                    member("02:00:00:00:00:01", "127.0.0.1", True),  # the peer: answers
                    member("02:00:00:00:00:02", "192.0.2.1", False),  # not probed: always in
                ],
            }
        )
        service.put_alternative(ADMIN, group)

        def members_in_map() -> list[str]:
            value = fake.entries("dpp_alt_groups").get(2)
            return [] if value is None else [bytes(value.members[i].dmac).hex(":") for i in range(value.count)]

        status = service.get_alternative(ADMIN, 2)
        assert [m.state for m in status.members] in (["init", "unprobed"], ["up", "unprobed"])
        wait_until(lambda: service.get_alternative(ADMIN, 2).members[0].state == "up")
        assert members_in_map() == ["02:00:00:00:00:01", "02:00:00:00:00:02"]
        status = service.get_alternative(ADMIN, 2)
        assert status.active == 2 and status.members[0].alive and status.members[0].last_answer is not None

        peer.close()
        wait_until(lambda: service.get_alternative(ADMIN, 2).members[0].state == "down")
        assert members_in_map() == ["02:00:00:00:00:02"]  # written before the state showed
        assert service.get_alternative(ADMIN, 2).active == 1
    finally:
        service.close()
