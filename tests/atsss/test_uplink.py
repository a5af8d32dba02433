"""The uplink in the kernel (xdp_atsss under BPF_PROG_TEST_RUN): MP-DCCP Data and DataAck from
either access of a session decapsulated byte for byte, counted per path; Acks and DataAcks moving
the path's state (greatest numbers received, last heard); the proxy's Acks read from the ring
exactly as the layouts say and as Wireshark reads them; every way a packet is not valid MP-DCCP of a
known path counted by its reason, passed or dropped as the node's setting says."""

from __future__ import annotations

import struct

import pytest

from bench.atsss.ring import AckRing
from bench.packets import internet_checksum
from netapp.atsss.abi import Mode, UplinkFlags, UplinkReason
from tests.atsss.atsss import XDP_DROP, XDP_PASS, XDP_TX, PathSpec, decode, ethernet, ue_packet
from tests.atsss.tshark import dissect
from tests.atsss.uplink import (ACK, DATA, DATAACK, OUR_MAC, UE_SIDE_MAC, checksummed, dccp_header, decapsulated,
                                expected_ack, ip_frame, mp_seq_option, uplink_frame)  # fmt: skip

UE4, UE6 = "10.45.0.2", "2001:db8:45::2"
CELLULAR4 = PathSpec("10.0.1.1", "10.0.1.2", sport=5001, dport=5002)
WIFI4 = PathSpec("192.168.7.1", "192.168.7.20", sport=6001, dport=6002)
CELLULAR6 = PathSpec("2001:db8:1::1", "2001:db8:1::2", sport=5003, dport=5004)
WIFI6 = PathSpec("2001:db8:7::1", "2001:db8:7::20", sport=6003, dport=6004)
SEQ48 = 1 << 48


@pytest.fixture
def ring(atsss):
    ring = AckRing(atsss.acks)
    ring.drain()
    yield ring
    ring.close()


@pytest.fixture
def session(atsss, ring):
    """A UE's session with its paths and their uplinks; the node's settings back to the default."""
    added: list[tuple[str, list[PathSpec]]] = []

    def add(ue: str, specs: list[PathSpec], seqs: list[int] | None = None) -> None:
        for slot, spec in enumerate(specs, start=1):
            atsss.add_path(slot, spec, dccp_seq=(seqs or [0] * len(specs))[slot - 1], ue=ue)
        atsss.add_session(ue, Mode.ROUND_ROBIN, list(range(1, len(specs) + 1)))
        added.append((ue, specs))

    atsss.set_config()
    yield add
    for ue, specs in added:
        atsss.delete_session(ue)
        for spec in specs:
            atsss.delete_uplink(spec)
    atsss.set_config()


def counted(atsss, before: dict) -> dict:
    """The uplink counters that moved since `before`, by how much."""
    after = atsss.uplink_counts()
    return {reason: after[reason] - before[reason] for reason in after if after[reason] != before[reason]}


@pytest.mark.parametrize("ue, cellular, wifi", [(UE4, CELLULAR4, WIFI4), (UE6, CELLULAR6, WIFI6),
                                                 (UE4, CELLULAR6, WIFI4), (UE6, CELLULAR4, WIFI6)],
                         ids=["v4 in v4", "v6 in v6", "v4 in v6 and v4", "v6 in v4 and v6"])  # fmt: skip
@pytest.mark.parametrize("payload_len", [0, 1, 3, 517, 1400])
def test_data_from_either_access_is_decapsulated_byte_for_byte(atsss, session, ue, cellular, wifi, payload_len):
    session(ue, [cellular, wifi])
    before = atsss.uplink_counts()
    for n in range(6):
        inner = ue_up(ue, bytes([n]) * payload_len)
        spec = cellular if n % 2 == 0 else wifi
        kind, ack = (DATA, None) if n < 4 else (DATAACK, n)
        verdict, out = atsss.run(uplink_frame(spec, inner, seq=100 + n, kind=kind, ack=ack))
        assert verdict == XDP_PASS
        assert out == decapsulated(inner), f"packet {n}"
    inner_len = len(out) - 14
    assert atsss.received(1) == (3, 3 * inner_len, 0) and atsss.received(2) == (3, 3 * inner_len, 0)
    assert counted(atsss, before) == {UplinkReason.DECAPSULATED: 6}


def test_every_data_length_summed_by_loads_is_checked(atsss, session):
    """DCCP packets of 52 to 307 bytes: below 256 summed by loads (nf/atsss/bytes_sum.h), each piece
    and tail; right, decapsulated; a payload byte changed, refused as a bad checksum."""
    session(UE4, [CELLULAR4])
    before = atsss.uplink_counts()
    for n, payload_len in enumerate(range(256)):
        inner = ue_up(UE4, (bytes(range(1, 256)) * 2)[:payload_len])
        frame = uplink_frame(CELLULAR4, inner, seq=100 + n)
        assert atsss.run(frame) == (XDP_PASS, decapsulated(inner)), f"UE packet of {len(inner)} bytes"
        assert atsss.run(frame[:-1] + bytes([frame[-1] ^ 0x80]))[0] == XDP_PASS  # passed, not decapsulated
    assert counted(atsss, before) == {UplinkReason.DECAPSULATED: 256, UplinkReason.BAD_CHECKSUM: 256}


def ue_up(ue: str, payload: bytes = b"uplink data") -> bytes:
    """A UDP datagram from the UE to the data network."""
    return ue_packet("198.51.100.7" if ":" not in ue else "2001:db8:dd::7", payload, src=ue)


def test_link_padding_and_vlan_tags_are_handled(atsss, session):
    session(UE4, [CELLULAR4])
    inner = ue_up(UE4, b"x")
    verdict, out = atsss.run(uplink_frame(CELLULAR4, inner, seq=1, padding=7))
    assert (verdict, out) == (XDP_PASS, decapsulated(inner))
    tagged = uplink_frame(CELLULAR4, inner, seq=2)
    tagged = tagged[:12] + struct.pack("!HH", 0x8100, 30) + tagged[12:]
    verdict, out = atsss.run(tagged)
    assert verdict == XDP_PASS
    assert out == OUR_MAC + UE_SIDE_MAC + struct.pack("!HHH", 0x8100, 30, 0x0800) + inner


def test_outer_ipv4_options_go_with_the_outer_header(atsss, session):
    session(UE4, [CELLULAR4])
    inner = ue_up(UE4)
    frame = uplink_frame(CELLULAR4, inner, seq=1)
    ip = bytearray(frame[14:34] + bytes([1, 1, 1, 0]))  # three NOPs and End of Options
    ip[0], ip[2:4], ip[10:12] = 0x46, struct.pack("!H", len(frame) - 14 + 4), b"\0\0"
    ip[10:12] = struct.pack("!H", internet_checksum(bytes(ip)))
    verdict, out = atsss.run(frame[:14] + bytes(ip) + frame[34:])
    assert (verdict, out) == (XDP_PASS, decapsulated(inner))


def test_acks_and_data_acks_move_the_paths_state_forward_only(atsss, session):
    session(UE4, [CELLULAR4, WIFI4])
    before = atsss.uplink_counts()
    assert atsss.path_rx(1).last_heard_ns == 0
    steps = [(DATA, SEQ48 - 2, None), (ACK, SEQ48 - 1, 40), (DATAACK, 3, 42), (ACK, 1, 41), (DATA, 2, None)]
    heard = []
    for kind, seq, ack in steps:
        payload = b"" if kind == ACK else ue_up(UE4)
        verdict, out = atsss.run(uplink_frame(CELLULAR4, payload, seq=seq, kind=kind, ack=ack))
        assert verdict == (XDP_DROP if kind == ACK else XDP_PASS)
        heard.append(atsss.path_rx(1).last_heard_ns)
    rx = atsss.path_rx(1)
    assert rx.gsr == 3, "the greatest, across the 48-bit wrap; an older number does not move it back"
    assert rx.gar == 42
    assert heard == sorted(heard) and heard[0] > 0
    assert atsss.path_rx(2).last_heard_ns == 0, "the other path heard nothing"
    assert atsss.received(1)[::2] == (3, 2)
    assert counted(atsss, before) == {UplinkReason.DECAPSULATED: 3, UplinkReason.ACK: 2}


def test_the_proxy_acks_data_in_the_ring_as_the_layouts_and_tshark_say(atsss, session, ring):
    session(UE4, [CELLULAR4, WIFI6], seqs=[77, SEQ48 - 1])
    for n, (spec, seq) in enumerate([(CELLULAR4, 500), (WIFI6, 9), (CELLULAR4, 499), (WIFI6, 10)]):
        assert atsss.run(uplink_frame(spec, ue_up(UE4, bytes(n)), seq=seq))[0] == XDP_PASS
    records = ring.drain()
    expected = [expected_ack(CELLULAR4, 77, 500), expected_ack(WIFI6, SEQ48 - 1, 9),
                expected_ack(CELLULAR4, 78, 500), expected_ack(WIFI6, 0, 10)]  # fmt: skip
    assert [frame for _, frame in records] == expected
    assert {ifindex for ifindex, _ in records} == {1}  # the test run's ingress: loopback
    assert atsss.path(1).dccp_seq == 79 and atsss.path(2).dccp_seq == SEQ48 + 1
    for theirs in dissect([frame for _, frame in records]):
        assert theirs.expert == "", f"frame {theirs.number}: {theirs.expert}"
        assert theirs.checksum_status == "1" and (theirs.type, theirs.x) == (ACK, "1")


def test_the_ack_ratio_acks_every_nth_data_packet_of_a_path(atsss, session, ring):
    session(UE4, [CELLULAR4, WIFI4])
    atsss.set_config(ack_ratio=3)
    for seq in range(1, 10):
        atsss.run(uplink_frame(CELLULAR4, ue_up(UE4), seq=seq))
        atsss.run(uplink_frame(WIFI4, ue_up(UE4), seq=seq))
    atsss.run(uplink_frame(CELLULAR4, b"", seq=10, kind=ACK, ack=1))  # an Ack is not acknowledged
    frames = [frame for _, frame in ring.drain()]
    # the 3rd, 6th and 9th of each path, each with the path's next number, acknowledging that Data
    assert frames == [expected_ack(spec, k, 3 * (k + 1)) for k in range(3) for spec in (CELLULAR4, WIFI4)]


def test_an_ack_the_ring_cannot_take_is_counted_and_the_ue_packet_still_goes_on(atsss, session, ring):
    session(UE4, [CELLULAR4])
    before = atsss.uplink_counts()
    inner = ue_up(UE4)
    sent = 0
    while counted(atsss, before).get(UplinkReason.ACK_LOST, 0) < 3:
        assert sent < 10_000, "the ring never filled"
        assert atsss.run(uplink_frame(CELLULAR4, inner, seq=sent)) == (XDP_PASS, decapsulated(inner))
        sent += 1
    taken = len(ring.drain())
    assert taken + 3 == sent
    assert counted(atsss, before) == {UplinkReason.DECAPSULATED: sent, UplinkReason.ACK_LOST: 3}
    assert atsss.path(1).dccp_seq == taken, "a lost Ack took no sequence number"


def bad(spec: PathSpec, dccp: bytes) -> bytes:
    """A frame from the path's peer around a DCCP packet, its checksum made right."""
    return ip_frame(spec.peer, spec.local, checksummed(spec.peer, spec.local, dccp), UE_SIDE_MAC, OUR_MAC)


def cut(frame: bytes, keep: int) -> bytes:
    """The IPv4 frame with its DCCP packet cut to `keep` bytes (the IP length says so)."""
    frame = frame[: 14 + 20 + keep]
    ip = bytearray(frame[14:34])
    ip[2:4], ip[10:12] = struct.pack("!H", 20 + keep), b"\0\0"
    ip[10:12] = struct.pack("!H", internet_checksum(bytes(ip)))
    return frame[:14] + bytes(ip) + frame[34:]


S, D = CELLULAR4.dport, CELLULAR4.sport  # the UE's port, ours
INNER = ue_up(UE4)
INVALID = {
    "header cut short": (UplinkReason.TRUNC_HEADER, cut(uplink_frame(CELLULAR4, INNER, 1), 11)),
    "ack subheader cut short": (UplinkReason.TRUNC_HEADER,
                                cut(uplink_frame(CELLULAR4, b"", 1, kind=ACK, ack=1, options=b""), 20)),
    "X=0": (UplinkReason.BAD_HEADER, bad(CELLULAR4, dccp_header(S, D, DATA, 1, x=0) + INNER)),
    "a Request": (UplinkReason.BAD_HEADER, bad(CELLULAR4, dccp_header(S, D, 0, 1, ack=None) + INNER)),
    "doff below the header": (UplinkReason.BAD_HEADER, bad(CELLULAR4, dccp_header(S, D, DATA, 1, doff=3) + INNER)),
    "doff past the packet": (UplinkReason.TRUNC_OPTIONS, bad(CELLULAR4, dccp_header(S, D, DATA, 1, doff=15))),
    "an option past doff": (UplinkReason.TRUNC_OPTIONS,
                            bad(CELLULAR4, dccp_header(S, D, DATA, 1, options=bytes([0, 0, 0]) + b"\x2e\x09\x04\0") + INNER)),
    "an option length of 1": (UplinkReason.BAD_OPTIONS,
                              bad(CELLULAR4, dccp_header(S, D, DATA, 1, options=bytes([40, 1, 0, 0])) + INNER)),
    "MP_SEQ of 8 bytes": (UplinkReason.BAD_OPTIONS,
                          bad(CELLULAR4, dccp_header(S, D, DATA, 1, options=bytes([46, 8, 4]) + bytes(5)) + INNER)),
    "too many options": (UplinkReason.BAD_OPTIONS,
                         bad(CELLULAR4, dccp_header(S, D, DATA, 1, options=mp_seq_option(1) + bytes(35)) + INNER)),
    "a payload byte changed": (UplinkReason.BAD_CHECKSUM, uplink_frame(CELLULAR4, INNER, 1)[:-1] + b"\xff"),
    "CsCov past the packet": (UplinkReason.BAD_CHECKSUM,
                              bad(CELLULAR4, dccp_header(S, D, DATA, 1, options=mp_seq_option(1), cscov=15) + INNER)),
    "unknown ports": (UplinkReason.UNKNOWN_PATH, bad(CELLULAR4, dccp_header(S + 1, D, DATA, 1) + INNER)),
    "unknown peer": (UplinkReason.UNKNOWN_PATH, uplink_frame(PathSpec("10.0.1.1", "10.0.1.9", 5001, 5002), INNER, 1)),
    "not from the UE": (UplinkReason.BAD_INNER, uplink_frame(CELLULAR4, ue_up("10.45.0.3"), 1)),
    "no IP packet": (UplinkReason.BAD_INNER, uplink_frame(CELLULAR4, b"\x00" * 40, 1)),
    "Data with nothing": (UplinkReason.BAD_INNER, uplink_frame(CELLULAR4, b"", 1)),
}


@pytest.mark.parametrize("drop", [False, True], ids=["default: pass", "drop"])
@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_what_is_not_valid_mp_dccp_is_counted_by_reason_and_passed_or_dropped(atsss, session, ring, case, drop):
    session(UE4, [CELLULAR4])
    if drop:
        atsss.set_config(flags=UplinkFlags.DROP_INVALID)
    reason, frame = INVALID[case]
    before = atsss.uplink_counts()
    verdict, out = atsss.run(frame)
    assert verdict == (XDP_DROP if drop else XDP_PASS)
    assert out == frame, "left untouched"
    assert counted(atsss, before) == {reason: 1}
    assert atsss.path_rx(1).last_heard_ns == 0 and atsss.received(1) == (0, 0, 0) and ring.drain() == []


def test_every_reason_has_a_case():
    assert {reason for reason, _ in INVALID.values()} == set(UplinkReason) - {
        UplinkReason.DECAPSULATED, UplinkReason.ACK, UplinkReason.ACK_LOST}  # fmt: skip


def test_a_dccp_packet_to_a_ue_of_a_session_is_a_downlink_packet(atsss, session):
    session(UE4, [CELLULAR4])
    to_ue = ip_frame("198.51.100.7", UE4, dccp_header(1, 2, DATA, 5) + b"the UE's own DCCP", UE_SIDE_MAC, OUR_MAC)
    before = atsss.uplink_counts()
    verdict, out = atsss.run(to_ue)
    assert verdict == XDP_TX and decode(out).inner == to_ue[14:]
    assert counted(atsss, before) == {}
    assert atsss.run(ethernet(ue_packet(UE4)))[0] == XDP_TX
