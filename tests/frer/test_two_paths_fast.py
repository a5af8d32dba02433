"""FRER end to end on the veth testbed at the highest rate the machine carries: the talker is an XDP
program run in live-frame mode (bench/frer/fast.py: unpaced, the three streams of
test_two_paths.py in turn) and the listener an XDP program that checks each stream's numbers, so
neither is a Python socket. The nodes run the FRER node's programs (dpp_frer.bpf.o). The run has
three parts: both paths up; path 1 cut (its link towards b down); path 1 restored. Every frame of
every stream arrives exactly once, none lost; node a numbered what the talker sent, node b passed
each frame once and discarded exactly the copies path 1 carried (none while cut).

Not asserted here: that they arrive in order. Unpaced, node b's two paths are polled on whichever
CPU each path's frames came in on, and a frame passed on one CPU waits in that CPU's redirect
queue until its poll ends, so a later number passed on the other CPU can leave first (a CI run saw 6
of 300,000 frames late). 802.1CB's recovery eliminates duplicates; it does not reorder. The paced
tests (test_two_paths.py) check the order."""

from __future__ import annotations

import pytest

from bench.frer.fast import FastTraffic, wait_until
from bench.frer.testbed import protected_nodes
from tests.frer.test_two_paths import RECOVERY, STREAMS
from tests.utils.kernel import build_artifact, require_kernel

FRAMES = 300_000  # a part of the run, the streams together
SETTLE_S = 20  # the longest a part's frames may take to come through on a loaded machine


@pytest.fixture
def fast_testbed():
    require_kernel()
    with protected_nodes(build_artifact("dpp_frer.bpf.o"), STREAMS, RECOVERY) as (site, a, b):
        traffic = FastTraffic(build_artifact("xdp_frer_traffic.bpf.o"), site, STREAMS)
        try:
            yield site, a, b, traffic
        finally:
            traffic.close()


def send_part(traffic: FastTraffic, b, both_paths: bool, cut: dict[int, int]) -> dict[int, int]:  # noqa: ANN001
    """FRAMES frames unpaced, waited for until every one reached the listener and, `both_paths`,
    until node b had both copies of each frame but those of the `cut` part (handle -> frames) that
    path 1 did not carry (so that the next part starts with nothing in flight); the frames each stream
    got in this part."""
    before = traffic.sent()
    traffic.send(FRAMES)
    sent = traffic.sent()

    def through() -> bool:
        checks = traffic.checks()
        if any(checks[handle].received < count for handle, count in sent.items()):
            return False
        if not both_paths:
            return True
        recovered = {handle: b.recovery(handle) for handle in sent}
        return all(recovered[handle].passed + recovered[handle].discarded >= 2 * count - cut.get(handle, 0)
                   for handle, count in sent.items())  # fmt: skip

    assert wait_until(through, SETTLE_S), f"not through: sent {sent}, listener saw {traffic.checks()}"
    return {handle: sent[handle] - before[handle] for handle in sent}


def test_at_the_highest_rate_every_frame_arrives_once_across_a_cut(fast_testbed):
    site, a, b, traffic = fast_testbed
    send_part(traffic, b, both_paths=True, cut={})
    site.set_link("p1", up=False)
    cut = send_part(traffic, b, both_paths=False, cut={})
    site.set_link("p1", up=True)
    assert wait_until(lambda: site.forwards("p1"), SETTLE_S), "path 1 back"
    send_part(traffic, b, both_paths=True, cut=cut)

    sent, checks = traffic.sent(), traffic.checks()
    assert sum(sent.values()) == 3 * FRAMES
    for handle, count in sent.items():
        check = checks[handle]
        assert (check.received, check.next) == (count, count), f"stream {handle}: each once"
        assert (check.duplicates, check.beyond) == (0, 0), f"stream {handle}"
        # Every number jumped over came later (none lost); every frame came in order, ahead or late.
        assert check.late == check.skipped, f"stream {handle}: {check}"
        assert check.in_order + check.ahead + check.late == count, f"stream {handle}: {check}"
        assert a.stream(handle).next_seq == count, "node a numbered every frame the talker sent"
        recovery = b.recovery(handle)
        assert recovery.passed == count, "node b passed each frame once"
        assert recovery.discarded == count - cut[handle], "path 1's copies, none while it was cut, discarded"
        assert (recovery.out_of_order, recovery.lost, recovery.rogue, recovery.resets) == (0, 0, 0, 0)
