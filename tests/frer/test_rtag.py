"""The R-tag in the kernel: found behind the addresses or a VLAN tag, popped from a passed frame
when the function says so (the rest of the frame as it was), left on when not; a frame cut inside
its tags is not read."""

from __future__ import annotations

import struct

import pytest

from netapp.frer.abi import Decision
from netapp.frer.model import RecoveryConfig
from tests.frer.frer import MACS, TEST_ETHERTYPE, TEST_HEADER, XDP_ABORTED, XDP_PASS, frame
from bench.libbpf import test_run as run_once

STREAM = 11
T0 = 10**12
PAYLOAD = bytes(range(40))


@pytest.mark.parametrize("tags", [(), ((0x8100, 42),), ((0x88A8, 7), (0x8100, 42))], ids=["untagged", "vlan", "qinq"])
def test_a_passed_frame_leaves_without_its_r_tag(frer, tags):
    """The addresses and every VLAN tag (12, 16 or 20 bytes, each moved as words) end up right
    before the EtherType the R-tag carried."""
    frer.configure(STREAM, RecoveryConfig(), pop=True)
    head = MACS + b"".join(struct.pack("!HH", tpid, vid) for tpid, vid in tags)
    verdict, decision, out = frer.run(head + frame(STREAM, 7, T0, payload=PAYLOAD)[len(MACS):])
    assert (verdict, decision) == (XDP_PASS, Decision.TAKE_ANY)
    assert out.startswith(head + TEST_ETHERTYPE.to_bytes(2, "big") + STREAM.to_bytes(4, "big"))
    assert out.endswith(PAYLOAD)
    assert len(out) == len(head) + len(frame(STREAM, None, T0, payload=PAYLOAD)) - len(MACS)


def test_without_pop_the_frame_leaves_as_it_came(frer):
    frer.configure(STREAM, RecoveryConfig())
    sent = frame(STREAM, 7, T0, payload=PAYLOAD)
    verdict, decision, out = frer.run(sent)
    assert verdict == XDP_PASS
    header_at = len(sent) - len(PAYLOAD) - TEST_HEADER.size
    assert out[:header_at] == sent[:header_at] and out.endswith(PAYLOAD)


@pytest.mark.parametrize("cut", [15, 17, 19, 23])
def test_a_frame_cut_inside_its_tags_is_not_read(frer, cut):
    frer.configure(STREAM, RecoveryConfig())
    assert run_once(frer.prog, frame(STREAM, 7, T0, vlan=5)[:cut], 1).retval == XDP_ABORTED
    assert frer.state(STREAM).passed == 0
