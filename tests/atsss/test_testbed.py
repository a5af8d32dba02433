"""ATSSS end to end on a veth testbed (netapp/testbed/atsss_site.py, tests/atsss/testbed.py): a
transfer from the data network to the UE through the NetApp's pipeline, its sessions written by
the ATSSS service, arrives at the UE's MP-DCCP receiver complete and in order with each scheduler,
each path carrying what the scheduler says (the node's counters and the receiver's count agree).

The 3GPP path (p1) is the slow one: its downlink is carried DELAY_MS late by a relay and limited
to RATE by a token bucket (this kernel has no netem); round-robin's packets therefore arrive out of
MP_SEQ order and the receiver puts them back. Active-standby's active path is cut (every frame dropped)
mid-transfer and reported down: the rest goes on the standby. Redundant with 30% random loss on the fast path
(an XDP program drawing at random) delivers everything, the slow path's copies filling the holes.

Each transfer is TRANSFER bytes (20 MB and a little more: 14,288 datagrams of 1,400 bytes), the
issue's size; about 1.5 s each, the file some 12 s on an idle machine, 16-19 s beside two busy
loops on its two cores (the 2.8 MB it moved before took 6 s). The benchmark times the same
transfers (python -m bench.atsss.testbed)."""

from __future__ import annotations

from typing import Iterator

import pytest

from netapp.testbed.atsss_site import AtsssSite
from tests.atsss.testbed import Loss, Node, Receiver, Transfer, relay, send, session
from tests.utils.kernel import build_artifact, require_kernel

DELAY_MS = 5
RATE = "200mbit"
CHUNK = 1400
DATAGRAMS = 14_288  # a multiple of 4 (weighted 3:1 splits it exactly) of CHUNK bytes: 20 MB and a little more
TRANSFER = DATAGRAMS * CHUNK
WINDOW = 64  # datagrams in flight at most: far below any queue's room on the way


@pytest.fixture(scope="module")
def testbed(tmp_path_factory) -> Iterator[tuple[AtsssSite, Node]]:
    require_kernel()
    site = AtsssSite().build()
    try:
        site.limit_rate("p1", RATE)
        with relay(site, "p1", DELAY_MS):
            node = Node(site, tmp_path_factory.mktemp("atsss-testbed"))
            try:
                yield site, node
            finally:
                node.close()
    finally:
        site.destroy()


@pytest.fixture
def node(testbed) -> Iterator[Node]:
    _, node = testbed
    try:
        yield node
    finally:
        node.delete_sessions()


@pytest.fixture(scope="module")
def transfer() -> Transfer:
    return Transfer.random(TRANSFER, CHUNK)


# mode, the paths' fields, the share of the datagrams each path carries
SCHEDULERS = {
    "round_robin": ({}, {}, (DATAGRAMS // 2, DATAGRAMS // 2)),
    "weighted": ({"weight": 3}, {"weight": 1}, (DATAGRAMS * 3 // 4, DATAGRAMS // 4)),
    "active_standby": ({}, {}, (DATAGRAMS, 0)),
    "smallest_delay": ({"rtt_us": DELAY_MS * 1000 + 200}, {"rtt_us": 200}, (0, DATAGRAMS)),
    "priority": ({"priority": 1}, {"priority": 5}, (DATAGRAMS, 0)),
    "redundant": ({}, {}, (DATAGRAMS, DATAGRAMS)),
}


@pytest.mark.parametrize("mode", SCHEDULERS)
def test_each_scheduler_delivers_the_transfer_complete_and_in_order(testbed, node, transfer, mode):
    site, _ = testbed
    p1, p2, split = SCHEDULERS[mode]
    receiver = Receiver(site, transfer.part)
    try:
        slots = node.create(session(site, mode, p1, p2))
        copies_on = ("p1", "p2") if mode == "redundant" else ()  # the slow path's copies paced too
        result = send(site, transfer, receiver, WINDOW, copies_on=copies_on)
        receiver.wait_for_arrivals(dict(zip(("p1", "p2"), split)))  # redundant's later copies too
    finally:
        receiver.close()
    assert result.delivered == DATAGRAMS
    assert (node.sent(slots[0]), node.sent(slots[1])) == split, "what the node sent on each path"
    assert (result.per_path["p1"], result.per_path["p2"]) == split, "what came to the UE on each path"
    assert result.duplicates == (DATAGRAMS if mode == "redundant" else 0)
    if mode in ("round_robin", "weighted"):
        assert result.out_of_order > 0, "the slow path's packets came late: the receiver reordered"


def test_active_standby_with_its_active_path_cut_mid_transfer_completes_on_the_standby(testbed, node, transfer):
    """The cut comes once what was sent has arrived: MP-DCCP does not retransmit, what is in flight on
    a path when it is cut is lost (the inner transport's to recover), so a complete transfer here
    shows the failover alone."""
    site, _ = testbed
    half = DATAGRAMS // 2
    receiver = Receiver(site, transfer.part)

    def cut(k: int) -> None:
        if k == half:
            receiver.wait_for(half)
            site.cut("p1", str(build_artifact("xdp_drop.bpf.o")))
            node.patch({"paths": [{"index": 0, "up": False}]})

    try:
        slots = node.create(session(site, "active_standby"))
        result = send(site, transfer, receiver, WINDOW, during=cut)
    finally:
        receiver.close()
        site.cut("p1", None)
    assert result.delivered == DATAGRAMS
    assert (node.sent(slots[0]), node.sent(slots[1])) == (half, DATAGRAMS - half)
    assert (result.per_path["p1"], result.per_path["p2"]) == (half, DATAGRAMS - half)


def test_redundant_delivers_everything_with_thirty_percent_loss_on_a_path(testbed, node, transfer):
    site, _ = testbed
    loss = Loss(site, "p2", 0.3)
    receiver = Receiver(site, transfer.part)
    try:
        node.create(session(site, "redundant"))
        result = send(site, transfer, receiver, WINDOW, copies_on=("p1",))  # p1 carries every copy
        receiver.wait_for_arrivals({"p1": DATAGRAMS})
        passed, dropped = loss.counts()
        receiver.wait_for_arrivals({"p2": passed})
    finally:
        receiver.close()
        loss.close()
    assert result.delivered == DATAGRAMS
    assert passed + dropped == DATAGRAMS, "every copy on p2 met the loss"
    assert 0.25 < dropped / DATAGRAMS < 0.35, f"{dropped} of {DATAGRAMS} dropped"  # 30% give or take 5 sigma
    assert (result.per_path["p1"], result.per_path["p2"]) == (DATAGRAMS, passed)
