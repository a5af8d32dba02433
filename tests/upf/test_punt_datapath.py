"""FAR BUFF and DUPL in the kernel (BPF_PROG_TEST_RUN): the frame a PDR punts is in the ring
dpp_upf_punt exactly as it was sent, read back through libdpp's reader (netapp.upf.punts); a
buffered frame is dropped, a duplicated one still forwarded byte for byte; a full ring is counted."""

from __future__ import annotations

import socket

import pytest
from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from netapp.upf.abi import PUNT_FRAME_MAX, PUNT_RING_SIZE, PuntKind
from netapp.upf.buffering import Buffering
from netapp.upf.models import DuplicatingParameters, Far, ForwardingParameters, OuterHeaderCreation
from netapp.upf.pfcp.ies import Interface
from tests.upf import test_datapath as base
from tests.upf.test_buffering import stands
from tests.upf.test_datapath import DL_TEID, GNB, MACS, N3_IP, SERVER, UE, UE6, applier, dp, session  # noqa: F401

COLLECTOR = "10.77.0.2"


def downlink_frame(size: int = 64) -> bytes:
    return bytes(Ether(**MACS) / IP(src=SERVER, dst=UE) / UDP(sport=5004, dport=40000) / (b"d" * size))


def downlink_frame_of(length: int) -> bytes:
    """A downlink frame of `length` bytes in all, its payload what the headers leave."""
    return downlink_frame(length - len(downlink_frame(0)))


def with_downlink_far(far: Far, seid: int = 7):
    plain = session(seid=seid)
    return plain.model_copy(update={"fars": {**plain.fars, 2: far}})


def buffering(nocp: bool = True) -> Far:
    return Far(id=2, apply_action=frozenset({"BUFF", "NOCP"} if nocp else {"BUFF"}))


def duplicating() -> Far:
    copies = DuplicatingParameters(destination_interface=Interface.LI_FUNCTION, outer_header_creation=(
        OuterHeaderCreation(kind="gtpu-ipv4", teid=0x77, address=COLLECTOR)))
    return Far(id=2, apply_action=frozenset({"FORW", "DUPL"}), duplicating=(copies,), forwarding=ForwardingParameters(
        destination_interface=Interface.ACCESS,
        outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv4", teid=DL_TEID, address=GNB)))


@pytest.fixture
def reader(dp):
    punts = dp.upf_punts()
    drain(punts)
    yield punts
    drain(punts)
    punts.close()


def drain(punts) -> list:
    got, batch = [], punts.poll(0)
    while batch:
        got += batch
        batch = punts.poll(0)
    return got


@pytest.fixture
def installed_with(dp):
    """Installs the session whose downlink FAR is the one given; called again, changes it to the new one."""
    upf, installed = applier(dp), []

    def install(far: Far):
        value = with_downlink_far(far)
        upf.apply(installed[0] if installed else None, value)
        installed[:] = [value]
        return value

    yield install
    for value in installed:
        upf.apply(value, None)


def encapsulated(sent: bytes) -> bytes:
    """The downlink frame as the FAR of `duplicating` forwards it: in GTP-U to the gNB."""
    return bytes(Ether(**MACS) / IP(src=N3_IP, dst=GNB, id=0, ttl=64) / UDP(sport=2152, dport=2152, chksum=0)
                 / GTP_U_Header(teid=DL_TEID, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=0, QFI=9)
                 / Ether(sent)[IP])


def test_a_buffering_far_puts_the_frame_as_it_came_in_the_ring_and_drops_it(dp, reader, installed_with):
    installed_with(buffering())
    sent = downlink_frame()
    out = dp.test_run(sent, base.N6_IF)
    assert (out.verdict, out.action, out.reason) == ("DROP", "upf", "upf_buffered")
    [record] = drain(reader)
    assert (record.seid, record.pdr_id, record.kind, record.ifindex) == (7, 2, PuntKind.BUFFER, base.N6_IF)
    assert record.frame == sent
    assert (record.family, record.ue_packet) == (4, bytes(Ether(sent)[IP]))


def test_a_duplicating_far_puts_a_copy_in_the_ring_and_still_forwards(dp, reader, installed_with):
    installed_with(duplicating())
    sent = downlink_frame()
    out = dp.test_run(sent, base.N6_IF)
    assert (out.verdict, out.action, out.reason) == ("PASS", "upf", None)
    assert out.data == encapsulated(sent)
    [record] = drain(reader)
    assert (record.seid, record.pdr_id, record.kind, record.frame) == (7, 2, PuntKind.DUPLICATE, sent)


def test_a_forwarding_far_punts_nothing(dp, reader, installed_with):
    installed_with(duplicating().model_copy(update={"apply_action": frozenset({"FORW"}), "duplicating": ()}))
    assert dp.test_run(downlink_frame(), base.N6_IF).verdict == "PASS"
    assert drain(reader) == []


def test_a_frame_longer_than_the_rings_frames_is_dropped_and_counted(dp, reader, installed_with):
    installed_with(buffering())
    out = dp.test_run(downlink_frame(PUNT_FRAME_MAX), base.N6_IF)
    assert (out.verdict, out.reason) == ("DROP", "upf_punt_too_long")
    assert drain(reader) == []


def test_a_frame_as_long_as_the_rings_frames_is_punted_whole(dp, reader, installed_with):
    installed_with(buffering())
    sent = downlink_frame_of(PUNT_FRAME_MAX)
    assert dp.test_run(sent, base.N6_IF).reason == "upf_buffered"
    [record] = drain(reader)
    assert len(record.frame) == PUNT_FRAME_MAX and record.frame == sent


def punted_too_long(dp) -> int:
    """Packets counted upf_punt_too_long so far."""
    return dp.reason_stats()["upf_punt_too_long"][0]


def test_a_frame_one_byte_longer_than_the_rings_frames_is_counted_too_long(dp, reader, installed_with):
    installed_with(buffering())
    before = punted_too_long(dp)
    out = dp.test_run(downlink_frame_of(PUNT_FRAME_MAX + 1), base.N6_IF)
    assert (out.verdict, out.reason) == ("DROP", "upf_punt_too_long")
    assert punted_too_long(dp) == before + 1
    assert drain(reader) == []


def test_a_full_ring_drops_buffered_frames_counted_and_copies_are_lost_but_packets_forwarded(
        dp, reader, installed_with):
    installed_with(buffering())
    capacity = PUNT_RING_SIZE // (PUNT_FRAME_MAX + 24 + 8)  # records and their ring headers
    reasons = [dp.test_run(downlink_frame(), base.N6_IF).reason for _ in range(capacity + 2)]
    assert reasons[:capacity] == ["upf_buffered"] * capacity
    assert reasons[-1] == "upf_punt_full"
    installed_with(duplicating())  # the ring still full
    sent = downlink_frame()
    out = dp.test_run(sent, base.N6_IF)
    assert (out.verdict, out.action, out.reason) == ("PASS", "upf", "upf_punt_full")
    assert out.data == encapsulated(sent), "forwarded without its copy"
    assert len(drain(reader)) == reasons.count("upf_buffered")


def test_a_packet_a_far_buffers_and_duplicates_is_copied_once_as_it_arrives(dp):  # noqa: F811
    """Through the real program and ring: the buffered packet is copied as it arrives; its replay,
    once the FAR forwards (and still duplicates), punts a copy again, which is not sent."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as collector:
        collector.bind(("127.0.0.1", 0))
        collector.settimeout(10)
        copies = DuplicatingParameters(destination_interface=Interface.LI_FUNCTION, outer_header_creation=(
            OuterHeaderCreation(kind="udp-ipv4", address="127.0.0.1", port=collector.getsockname()[1])))
        forwarding = duplicating().model_copy(update={"duplicating": (copies,)})
        buffered = forwarding.model_copy(update={"apply_action": frozenset({"BUFF", "DUPL"}), "forwarding": None})
        upf = applier(dp)
        punts = Buffering(upf, dp).start()
        try:
            punts.apply(None, with_downlink_far(buffered))
            sent = downlink_frame()
            assert dp.test_run(sent, base.N6_IF).reason == "upf_buffered"
            assert collector.recv(4096) == bytes(Ether(sent)[IP])
            punts.apply(with_downlink_far(buffered), with_downlink_far(forwarding))
            stands(punts)
            assert punts.counters["replayed"] == 1
            collector.setblocking(False)
            with pytest.raises(BlockingIOError):
                collector.recv(4096)  # the replay's copy: the program punted it, user space sent none
        finally:
            punts.close()  # joins the ring's reader, which counts a copy after sending it
            upf.apply(with_downlink_far(forwarding), None)
    assert punts.counters["duplicated"] == 1  # the arrival's copy alone: the replay's was not sent


@pytest.mark.parametrize("family", [4, 6])
def test_a_copy_is_the_ue_packet_without_the_frames_ethernet_padding(dp, reader, installed_with, family):  # noqa: F811
    installed_with(duplicating())
    ue = IP(src=SERVER, dst=UE) if family == 4 else IPv6(src="2001:db8:99::1", dst=UE6)
    frame = bytes(Ether(**MACS) / ue / UDP(sport=5004, dport=40000) / b"d")
    sent = frame + bytes(max(60 - len(frame), 0) + 8)  # padded, as a NIC hands a short frame over
    assert dp.test_run(sent, base.N6_IF).action == "upf"
    [record] = drain(reader)
    assert record.frame == sent
    assert record.ue_packet == frame[14:]
