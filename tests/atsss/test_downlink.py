"""The downlink's frames, in the kernel (xdp_atsss under BPF_PROG_TEST_RUN): byte for byte what
RFC 4340 and the MP_SEQ layout say (tests/atsss/atsss.py builds them from the layouts), with the
checksum over the whole packet or, for a session that asks for it, over the header and options only
(CsCov 1), read without a complaint by Wireshark's DCCP dissector, numbered per path and per
connection."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, TCP, UDP, IPOption
from scapy.layers.inet6 import IPv6
from scapy.packet import Raw

from netapp.atsss.abi import Mode, SessionFlags
from tests.atsss.atsss import XDP_PASS, XDP_TX, PathSpec, decode, ethernet, expected_frame, ue_packet
from tests.atsss.tshark import dissect

UE4, UE6 = "10.45.0.2", "2001:db8:45::2"
CELLULAR4 = PathSpec("10.0.1.1", "10.0.1.2", sport=5001, dport=5002)
WIFI4 = PathSpec("192.168.7.1", "192.168.7.20", sport=6001, dport=6002, smac=bytes.fromhex("02000000aa02"),
                 dmac=bytes.fromhex("02000000bb02"))  # fmt: skip
CELLULAR6 = PathSpec("2001:db8:1::1", "2001:db8:1::2", sport=5003, dport=5004)
WIFI6 = PathSpec("2001:db8:7::1", "2001:db8:7::20", sport=6003, dport=6004)


@pytest.fixture
def sessions(atsss):
    added: list[str] = []

    def add(ue: str, mode: Mode, paths: list[tuple[int, PathSpec, int]], **kwargs) -> None:  # noqa: ANN003
        for slot, spec, seq in paths:
            atsss.add_path(slot, spec, dccp_seq=seq)
        atsss.add_session(ue, mode, [slot for slot, _, _ in paths], **kwargs)
        added.append(ue)

    yield add
    for ue in added:
        atsss.delete_session(ue)


# The sequence numbers a path starts from: near the 48-bit wrap, over 32 bits, and small.
STARTS = [(1 << 48) - 2, (1 << 40) + 5, 7]


@pytest.mark.parametrize("ue, cellular, wifi", [(UE4, CELLULAR4, WIFI4), (UE6, CELLULAR6, WIFI6),
                                                 (UE4, CELLULAR6, WIFI4), (UE6, CELLULAR4, WIFI6)],
                         ids=["v4 in v4", "v6 in v6", "v4 in v6 and v4", "v6 in v4 and v6"])  # fmt: skip
@pytest.mark.parametrize("payload_len", [0, 1, 3, 517, 1400])
def test_every_frame_is_byte_for_byte_the_layouts(atsss, sessions, ue, cellular, wifi, payload_len):
    sessions(ue, Mode.ROUND_ROBIN, [(1, cellular, STARTS[0]), (2, wifi, STARTS[1])], mp_seq=(1 << 48) - 3)
    expected_seq = {1: STARTS[0], 2: STARTS[1]}
    for n in range(6):
        inner = ue_packet(ue, (bytes(range(256)) * 6)[:payload_len])
        verdict, out = atsss.run(ethernet(inner))
        assert verdict == XDP_TX
        mp_seq = ((1 << 48) - 3 + n) % (1 << 48)
        slot, spec = (1, cellular) if mp_seq % 2 == 0 else (2, wifi)  # round-robin: the number's turn
        assert out == expected_frame(spec, expected_seq[slot] % (1 << 48), mp_seq, inner), f"packet {n}"
        expected_seq[slot] += 1


def test_every_ue_packet_length_summed_by_loads_is_byte_for_byte_the_layouts(atsss, sessions):
    """UE packets of 28 to 283 bytes, summed (their UDP checksum 0): below 256 by loads, each piece of
    128 to 4 bytes and a tail of 1 to 3 (nf/atsss/bytes_sum.h), from 256 by csum_packet."""
    sessions(UE4, Mode.ROUND_ROBIN, [(1, CELLULAR4, 7)])
    for n, payload_len in enumerate(range(256)):
        inner = ue_packet(UE4, (bytes(range(1, 256)) * 2)[:payload_len])
        verdict, out = atsss.run(ethernet(inner))
        assert (verdict, out) == (XDP_TX, expected_frame(CELLULAR4, 7 + n, n, inner)), f"UE packet of {len(inner)} bytes"


@pytest.mark.parametrize("cellular, wifi", [(CELLULAR4, WIFI6), (CELLULAR6, WIFI4)], ids=["v4, v6", "v6, v4"])
@pytest.mark.parametrize("payload_len", [0, 3, 1400])
def test_a_header_checksum_session_covers_the_header_and_options_only(atsss, sessions, cellular, wifi, payload_len):
    sessions(UE4, Mode.ROUND_ROBIN, [(1, cellular, STARTS[1]), (2, wifi, STARTS[2])], mp_seq=6,
             flags=SessionFlags.HEADER_CHECKSUM)  # fmt: skip
    inner = ue_packet(UE4, (bytes(range(256)) * 6)[:payload_len])
    frames = [atsss.run(ethernet(inner)) for _ in range(2)]
    assert [verdict for verdict, _ in frames] == [XDP_TX, XDP_TX]
    assert frames[0][1] == expected_frame(cellular, STARTS[1], 6, inner, cscov=1)
    assert frames[1][1] == expected_frame(wifi, STARTS[2], 7, inner, cscov=1)
    # the UE packet is not covered: a full-coverage checksum differs (unless the payload sums to 0)
    assert frames[0][1] != expected_frame(cellular, STARTS[1], 6, inner)


def test_link_padding_after_the_ue_packet_is_not_carried(atsss, sessions):
    sessions(UE4, Mode.ROUND_ROBIN, [(1, CELLULAR4, 0)])
    inner = ue_packet(UE4, b"x")  # 29 bytes: an Ethernet frame of 43, padded to 60 on the wire
    verdict, out = atsss.run(ethernet(inner, padding=17))
    assert verdict == XDP_TX
    assert out == expected_frame(CELLULAR4, 0, 0, inner)


def test_a_packet_to_no_session_passes_untouched(atsss, sessions):
    sessions(UE4, Mode.ROUND_ROBIN, [(1, CELLULAR4, 0)])
    frame = ethernet(ue_packet("10.45.0.3"))
    assert atsss.run(frame) == (XDP_PASS, frame)
    assert atsss.sent(1) == (0, 0)


def test_tshark_decodes_every_frame_with_no_expert_info_and_good_checksums(atsss, sessions):
    sessions(UE4, Mode.ROUND_ROBIN, [(1, CELLULAR4, STARTS[0]), (2, WIFI6, STARTS[2])])
    sessions(UE6, Mode.ROUND_ROBIN, [(3, CELLULAR6, STARTS[1]), (4, WIFI4, STARTS[2])])
    frames, sent = [], []
    for n in range(40):
        ue = UE4 if n % 2 else UE6
        verdict, out = atsss.run(ethernet(ue_packet(ue, bytes([n]) * (n * 37 % 1300))))
        assert verdict == XDP_TX
        frames.append(out)
        sent.append(decode(out))
    dissected = dissect(frames)
    assert len(dissected) == len(frames)
    for ours, theirs in zip(sent, dissected):
        assert theirs.expert == "", f"frame {theirs.number}: {theirs.expert}"
        assert theirs.checksum_status == "1", f"frame {theirs.number}: DCCP checksum {theirs.checksum_status}"
        assert theirs.ip_checksum_status in ("1", "") and (theirs.ip_checksum_status == "1") == (ours.family == 4)
        assert (theirs.type, theirs.x) == (2, "1")  # DCCP-Data, 48-bit sequence numbers
        assert (theirs.sport, theirs.dport, theirs.seq) == (ours.sport, ours.dport, ours.seq)
        assert theirs.cscov == 0


def test_tshark_verifies_the_header_checksum_of_cscov_1(atsss, sessions):
    sessions(UE4, Mode.ROUND_ROBIN, [(1, CELLULAR4, STARTS[0]), (2, WIFI6, STARTS[2])],
             flags=SessionFlags.HEADER_CHECKSUM)  # fmt: skip
    frames = [atsss.run(ethernet(ue_packet(UE4, bytes([n]) * (n * 97 % 1300))))[1] for n in range(8)]
    for theirs in dissect(frames):
        assert theirs.expert == "", f"frame {theirs.number}: {theirs.expert}"
        assert (theirs.cscov, theirs.checksum_status) == (1, "1"), f"frame {theirs.number}"


def test_each_path_numbers_its_own_packets_and_the_connection_numbers_all(atsss, sessions):
    sessions(UE4, Mode.ROUND_ROBIN, [(1, CELLULAR4, 100), (2, WIFI4, 5000)], mp_seq=10)
    by_path: dict[str, list[int]] = {}
    mp_seqs = []
    for _ in range(9):
        sent = decode(atsss.run(ethernet(ue_packet(UE4)))[1])
        by_path.setdefault(sent.dst, []).append(sent.seq)
        mp_seqs.append(sent.mp_seq)
    assert by_path == {CELLULAR4.peer: [100, 101, 102, 103, 104], WIFI4.peer: [5000, 5001, 5002, 5003]}
    assert mp_seqs == list(range(10, 19))
    assert atsss.path(1).dccp_seq == 105 and atsss.session(UE4).mp_seq == 19
    inner_len = len(ue_packet(UE4))
    assert atsss.sent(1) == (5, 5 * inner_len) and atsss.sent(2) == (4, 4 * inner_len)


# UE packets whose own checksum gives their sum (nf/atsss/inner_sum.h), built by scapy, which fills in
# the TCP and UDP checksums; and ones summed byte by byte because theirs says nothing of the packet.
def checksummed(ue: str, l4: str, payload: bytes) -> bytes:
    ip = IP(src="198.51.100.7", dst=ue, ttl=63) if ":" not in ue else IPv6(src="2001:db8:dd::7", dst=ue, hlim=63)
    segment = UDP(sport=443, dport=40000) if l4 == "udp" else TCP(sport=443, dport=40000, seq=7, flags="PA")
    return bytes(ip / segment / Raw(payload))


def first_fragment(ue: str, payload: bytes) -> bytes:
    """The first fragment of a datagram: its UDP checksum is the whole datagram's, not this part's."""
    return bytes(IP(src="198.51.100.7", dst=ue, ttl=63, flags="MF") / UDP(sport=443, dport=40000, chksum=0x1234)
                 / Raw(payload))  # fmt: skip


@pytest.mark.parametrize("ue, l4", [(UE4, "udp"), (UE4, "tcp"), (UE6, "udp"), (UE6, "tcp")])
def test_a_checksummed_ue_packet_is_covered_as_if_summed(atsss, sessions, ue, l4):
    sessions(ue, Mode.ROUND_ROBIN, [(1, CELLULAR4, STARTS[0]), (2, WIFI6, STARTS[1])], mp_seq=4)
    seq, frames = {1: STARTS[0], 2: STARTS[1]}, []
    for n, payload_len in enumerate([0, 1, 3, 517, 1400, 1401]):
        inner = checksummed(ue, l4, (bytes(range(251)) * 6)[:payload_len])
        verdict, out = atsss.run(ethernet(inner, padding=2))
        assert verdict == XDP_TX
        slot, spec = (1, CELLULAR4) if n % 2 == 0 else (2, WIFI6)
        assert out == expected_frame(spec, seq[slot] % (1 << 48), 4 + n, inner), f"{payload_len} bytes"
        seq[slot] += 1
        frames.append(out)
    for theirs in dissect(frames):
        assert (theirs.expert, theirs.checksum_status) == ("", "1"), f"frame {theirs.number}: {theirs.expert}"


@pytest.mark.parametrize("inner", [first_fragment(UE4, b"part of a datagram"),
                                   bytes(IP(src="198.51.100.7", dst=UE4, options=[IPOption(b"\x01\x01\x01\x01")])
                                         / UDP(sport=443, dport=40000) / Raw(b"options"))],
                         ids=["first fragment", "IPv4 options"])  # fmt: skip
def test_a_ue_packet_whose_checksum_cannot_give_its_sum_is_summed(atsss, sessions, inner):
    sessions(UE4, Mode.ROUND_ROBIN, [(1, CELLULAR4, 9)])
    verdict, out = atsss.run(ethernet(inner))
    assert verdict == XDP_TX
    assert out == expected_frame(CELLULAR4, 9, 0, inner)


@pytest.mark.parametrize("ue, l4", [(UE4, "udp"), (UE4, "tcp"), (UE6, "udp"), (UE6, "tcp")])
def test_a_ue_packet_corrupted_before_us_gets_a_dccp_checksum_wrong_by_as_much(atsss, sessions, ue, l4):
    """The cost of taking the sum from the UE packet's checksum (and the proof that it is taken so):
    a payload changed after its checksum was made leaves the DCCP checksum wrong too, and the UE's
    DCCP drops the packet, as its transport would."""
    sessions(ue, Mode.ROUND_ROBIN, [(1, CELLULAR4, 9)])
    good = checksummed(ue, l4, b"payload\x00\x00")
    corrupted = good[:-2] + b"\x00\x01"
    verdict, out = atsss.run(ethernet(corrupted))
    assert verdict == XDP_TX
    assert out != expected_frame(CELLULAR4, 9, 0, corrupted)
    assert out == expected_frame(CELLULAR4, 9, 0, good)[:-len(good)] + corrupted
