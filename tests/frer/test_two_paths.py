"""FRER end to end on a veth testbed (netapp/testbed/frer_site.py): a talker's streams tagged and
replicated by node a over two disjoint paths, eliminated by node b, delivered to a listener. Three
streams (one identified by its destination MAC on a, the others by IP; all by IP behind the R-tag
on b; one whose copies get a VLAN tag on the second path) at 10,000 frames/s in all. With both paths up, and with one path cut for 5 s (link down, then
separately 100% loss) and restored, every frame arrives exactly once and in order per stream; with
one path 2 ms behind the other, no frame twice. The nodes' counters equal what was sent and what
arrived. Every test runs twice: the nodes running the FRER node's programs, and the NetApp's pipeline
with its FRER stage."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import pytest

from netapp.frer.abi import Algo
from netapp.frer.model import RecoveryConfig
from bench.frer.testbed import Capture, Node, StreamSpec, Talker, protected_site
from tests.utils.kernel import build_artifact, require_kernel

PPS = 10_000
STREAMS = [
    StreamSpec(handle=1, dport=5001, dmac="02:00:00:00:f3:99"),
    StreamSpec(handle=2, dport=5002, dscp=46),
    StreamSpec(handle=3, dport=5003, path2_vlan=30),
]
# A reset timeout far above any gap of a stream here: between the parts of a run (waits for the frames
# to come through, links set down and up) a loaded machine may leave a stream idle for seconds, and a
# reset would count as one (the tests assert none) and take the next number whatever it is.
RECOVERY = RecoveryConfig(algo=Algo.VECTOR, history_len=32, reset_ns=600 * 1_000_000_000)
CUT_S = 5


@pytest.fixture(params=["frer-node", "pipeline"])
def testbed(request):
    """The site's nodes running the FRER node's programs (dpp_frer.bpf.o), or the NetApp's pipeline
    with its FRER stage."""
    require_kernel()
    programs = build_artifact("dpp_frer.bpf.o") if request.param == "frer-node" else None
    with protected_site(programs, STREAMS, RECOVERY, cpu=min(os.sched_getaffinity(0))) as site:
        yield site


def check_delivery(talker: Talker, capture: Capture, a: Node, b: Node, in_order: bool = True) -> None:
    total = sum(talker.sent.values())
    assert capture.wait_for(total, timeout=30), f"{len(capture.frames)} of {total} frames arrived"
    counts = Counter(capture.frames)
    assert len(counts) == total and max(counts.values()) == 1, "every frame exactly once"
    for spec in STREAMS:
        numbers = [n for handle, n in capture.frames if handle == spec.handle]
        assert sorted(numbers) == list(range(talker.sent[spec.handle]))
        if in_order:
            assert numbers == sorted(numbers), f"stream {spec.handle} in order"
        assert a.stream(spec.handle).next_seq == talker.sent[spec.handle]
        recovery = b.recovery(spec.handle)
        assert recovery.passed == talker.sent[spec.handle]
        assert recovery.passed + recovery.discarded <= 2 * talker.sent[spec.handle]


def test_both_paths_up_every_frame_arrives_once_in_order(testbed):
    site, a, b, talker, capture = testbed
    talker.send(2 * PPS, PPS)
    check_delivery(talker, capture, a, b)
    for spec in STREAMS:
        recovery = b.recovery(spec.handle)
        assert recovery.discarded == talker.sent[spec.handle], "each frame's other copy eliminated"
        assert (recovery.lost, recovery.rogue, recovery.resets) == (0, 0, 0)


@pytest.mark.parametrize("cut", ["link-down", "loss"])
def test_a_path_cut_for_five_seconds_loses_no_frame(testbed, cut):
    site, a, b, talker, capture = testbed
    frames = (CUT_S + 2) * PPS
    drop = build_artifact("xdp_drop.bpf.o")

    def cut_and_restore(k: int) -> None:
        if k == PPS:
            if cut == "link-down":
                site.set_link("p1", up=False)
            else:
                site.drop_all("p1", drop)
        elif k == PPS + CUT_S * PPS:
            if cut == "link-down":
                site.set_link("p1", up=True)
            else:
                site.drop_all("p1", None)

    talker.send(frames, PPS, during=cut_and_restore)
    check_delivery(talker, capture, a, b)
    for spec in STREAMS:
        recovery = b.recovery(spec.handle)
        sent = talker.sent[spec.handle]
        assert recovery.discarded <= sent - CUT_S * PPS // len(STREAMS) * 9 // 10, "the cut path delivered nothing"


def test_one_path_two_ms_behind_delivers_no_frame_twice(testbed):
    site, a, b, talker, capture = testbed
    x1, y1 = site.paths()["p1"]
    ns = site.ns("p1")
    subprocess.run(["ip", "-n", ns, "link", "set", x1.ifname, "nomaster"], check=True)
    relay = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "bench.frer.relay", x1.ifname, y1.ifname, "2"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert relay.stdout.readline().strip() == "ready"
        talker.send(2 * PPS, PPS)
        check_delivery(talker, capture, a, b, in_order=False)
    finally:
        relay.kill()
        relay.wait()
