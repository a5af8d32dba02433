"""The index of sessions by UE address (netapp.atsss.index, nf/atsss/index.h) in the kernel: sessions
written by the control plane's SessionIndex into xdp_atsss.bpf.o's maps, UE packets run through
the program (BPF_PROG_TEST_RUN). A way serves only its own address, every word of it: another
address of the same bucket (a near miss) passes untouched, for IPv4 and for IPv6 (an address whose
words xor to the same hash, two words differing); a bucket's eighth IPv4 session goes to the hash
and each of the eight is served on its own path; a changed session given to the index again (the
table stores a change in place where the data plane's writer runs) moves to another way and slot
with its MP_SEQ number carried over, and the old way and slot are freed after a wait; a session in
the hash moves into a way of its bucket once one is free (a session of the bucket deleted, or found
free at load), served before and after, its MP_SEQ numbers going on past MP_SEQ_SKIP."""

from __future__ import annotations

import ipaddress
import itertools
from typing import Iterator

import pytest

from netapp.atsss.abi import INDEX4_WAYS, INDEX6_WAYS, Mode, Session, index_bucket
from netapp.atsss.index import MP_SEQ_SKIP, SessionIndex
from tests.atsss.atsss import (XDP_PASS, XDP_TX, AtsssProgram, PathSpec, addr_words, decode, ethernet, session_key,
                               ue_packet)  # fmt: skip
from tests.utils.interleave import calling_back
from tests.utils.object_tables import ObjectTables

POOL = ipaddress.ip_network("10.90.0.0/16")


def bucket(ue: str) -> int:
    return index_bucket(addr_words(ue))


def same_bucket(first: str, count: int) -> list[str]:
    """`first` and count - 1 other addresses of POOL in its bucket of the index."""
    start = int(POOL.network_address)
    others = (str(ipaddress.IPv4Address(start + n)) for n in range(1, POOL.num_addresses - 1))
    return [first, *itertools.islice((ue for ue in others if ue != first and bucket(ue) == bucket(first)), count - 1)]


def path_to(n: int) -> PathSpec:
    """A path of its own for the n-th UE: its peer says whose it is."""
    return PathSpec("192.0.2.1", f"198.51.100.{n + 1}", 5001, 5002 + n)


@pytest.fixture
def index(atsss: AtsssProgram) -> Iterator[SessionIndex]:
    index = SessionIndex(ObjectTables(atsss.obj).table)
    try:
        yield index
    finally:
        index.delete([key for key, _ in list(index.items())])


def put(atsss: AtsssProgram, index: SessionIndex, ues: list[str], mp_seq: int = 0) -> None:
    """Each UE's round-robin session on its own path (slot n + 1)."""
    for n, ue in enumerate(ues):
        atsss.add_path(n + 1, path_to(n))
    values = []
    for n, ue in enumerate(ues):
        value = Session(mode=Mode.ROUND_ROBIN, n_paths=1, mp_seq=mp_seq)
        value.path[0] = n + 1
        values.append((session_key(ue), value))
    index.write(values)


def served_by(atsss: AtsssProgram, ue: str) -> tuple[int, str]:
    """The verdict of a packet to `ue` and the outer destination it was sent to ("" when not sent)."""
    verdict, frame = atsss.run(ethernet(ue_packet(ue)))
    return verdict, decode(frame).dst if verdict == XDP_TX else ""


def test_a_way_serves_its_own_address_only_not_another_of_its_bucket(atsss, index):
    ue, near = same_bucket(str(POOL[5]), 2)
    put(atsss, index, [ue])
    assert index.slot(session_key(ue)), "the session is in the index, not the hash"
    assert served_by(atsss, ue) == (XDP_TX, path_to(0).peer)
    assert served_by(atsss, near) == (XDP_PASS, ""), "a near miss (same bucket, other address) has no session"


def test_an_ipv6_way_compares_every_word_of_the_address(atsss, index):
    ue, near = "2001:db8:0:1::5", "2001:db8:0:5::1"  # their words xor alike: one bucket
    assert bucket(ue) == bucket(near)
    put(atsss, index, [ue])
    assert index.slot(session_key(ue))
    assert served_by(atsss, ue) == (XDP_TX, path_to(0).peer)
    assert served_by(atsss, near) == (XDP_PASS, "")


def test_a_full_bucket_sends_the_next_session_to_the_hash_and_each_is_served_on_its_own_path(atsss, index):
    ues = same_bucket(str(POOL[9]), INDEX4_WAYS + 1)
    put(atsss, index, ues)
    indexed = [index.slot(session_key(ue)) is not None for ue in ues]
    assert indexed == [True] * INDEX4_WAYS + [False], "seven ways, the eighth in dpp_atsss_sessions"
    assert index.hash.get(session_key(ues[-1])) is not None
    assert [served_by(atsss, ue) for ue in ues] == [(XDP_TX, path_to(n).peer) for n in range(len(ues))]


def test_an_ipv6_bucket_holds_three_ways_then_the_hash(atsss, index):
    candidates = (f"2001:db8::{n:x}" for n in range(2, 1 << 16))
    ues = ["2001:db8::1", *itertools.islice((ue for ue in candidates if bucket(ue) == bucket("2001:db8::1")),
                                            INDEX6_WAYS)]
    put(atsss, index, ues)
    assert [index.slot(session_key(ue)) is not None for ue in ues] == [True] * INDEX6_WAYS + [False]
    assert [served_by(atsss, ue) for ue in ues] == [(XDP_TX, path_to(n).peer) for n in range(len(ues))]


def test_a_changed_session_is_served_from_another_slot_until_a_wait_then_from_its_own_its_number_counted_on(
        atsss, index, monkeypatch):
    ue = str(POOL[20])
    key = session_key(ue)
    put(atsss, index, [ue], mp_seq=500)
    first = index.slot(key)
    assert served_by(atsss, ue)[0] == XDP_TX
    value = index.get(key)
    assert value is not None and value.mp_seq == 501, "the packet took number 500 from the indexed session"
    value.flags = 1  # a change of the session (CsCov 1), written whole (the table's way without a writer)
    at_the_wait = []
    monkeypatch.setattr(index, "wait", calling_back(index.wait, lambda: at_the_wait.append(
        (index.slot(key), served_by(atsss, ue)[0]))))
    index.write([(key, value)])
    monkeypatch.undo()
    assert at_the_wait[0][0] not in (None, first), "written whole into another slot, never over the one read"
    assert at_the_wait[0][1] == XDP_TX, "and served from it (MP_SEQ 501 + MP_SEQ_SKIP)"
    assert index.slot(key) == first, "back in its own slot, paired with its path, once no run reads it"
    assert served_by(atsss, ue)[0] == XDP_TX
    assert index.get(key).mp_seq == 503 + 2 * MP_SEQ_SKIP, "each write beyond the number read"  # type: ignore[union-attr]
    for _ in range(INDEX4_WAYS * 2):  # more changes than the bucket has ways: the retired ones are freed
        index.write([(key, index.get(key))])  # type: ignore[list-item]
        assert index.slot(key) == first, "kept in the index, its retired ways freed by a wait"
    assert served_by(atsss, ue)[0] == XDP_TX


def test_a_way_freed_takes_in_the_hash_s_session_of_its_bucket_which_is_served_before_and_after(atsss, index):
    ues = same_bucket(str(POOL[30]), INDEX4_WAYS + 1)
    put(atsss, index, ues)
    moved, peer = session_key(ues[-1]), path_to(INDEX4_WAYS).peer
    assert index.slot(moved) is None, "the eighth session starts in the hash"
    assert [served_by(atsss, ues[-1]) for _ in range(3)] == [(XDP_TX, peer)] * 3  # MP_SEQ 0, 1, 2 from the hash
    index.delete([session_key(ues[0])])
    assert index.slot(moved) is not None, "moved into the way the deleted session left"
    assert index.hash.get(moved) is None, "and gone from the hash"
    verdict, frame = atsss.run(ethernet(ue_packet(ues[-1])))
    assert (verdict, decode(frame).dst) == (XDP_TX, peer)
    assert decode(frame).mp_seq == 3 + MP_SEQ_SKIP, "its numbers go on past the skip, none given again"
    assert served_by(atsss, ues[0]) == (XDP_PASS, "")
    assert [served_by(atsss, ue) for ue in ues[1:-1]] == [(XDP_TX, path_to(n).peer) for n in range(1, INDEX4_WAYS)]


def test_at_load_a_session_in_the_hash_beside_a_free_way_moves_into_it(atsss, index):
    """An earlier run left a way free beside a session in the hash (a delete before sessions were
    moved in: its way's bit cleared alone); the index read again from the maps moves it in."""
    ues = same_bucket(str(POOL[40]), INDEX4_WAYS + 1)
    put(atsss, index, ues)
    atsss.delete_session(ues[0])
    assert served_by(atsss, ues[-1]) == (XDP_TX, path_to(INDEX4_WAYS).peer)
    index.load()
    assert index.slot(session_key(ues[-1])) is not None and index.hash.get(session_key(ues[-1])) is None
    verdict, frame = atsss.run(ethernet(ue_packet(ues[-1])))
    assert (verdict, decode(frame).dst, decode(frame).mp_seq) == (XDP_TX, path_to(INDEX4_WAYS).peer, 1 + MP_SEQ_SKIP)


def test_a_second_index_that_only_reads_moves_nothing_and_its_first_write_makes_the_moves(atsss, index):
    """Moving a session is a write (its way, then its hash entry deleted): a second SessionIndex over
    the same maps that only reads (a test's, a tool's) leaves the hash's session where the first's
    shadow has it; the second's first write makes the move its read of the maps found due."""
    ues = same_bucket(str(POOL[50]), INDEX4_WAYS + 1)
    put(atsss, index, ues)
    atsss.delete_session(ues[0])
    moved = session_key(ues[-1])
    reader = SessionIndex(ObjectTables(atsss.obj).table)

    assert reader.get(moved) is not None and [bytes(key) for key, _ in reader.items()][-1:] == [bytes(moved)]
    assert reader.slot(moved) is None and index.hash.get(moved) is not None, "still in the hash"
    reader.write([])
    assert reader.slot(moved) is not None and index.hash.get(moved) is None, "moved by the write"
    verdict, frame = atsss.run(ethernet(ue_packet(ues[-1])))
    assert (verdict, decode(frame).dst, decode(frame).mp_seq) == (XDP_TX, path_to(INDEX4_WAYS).peer, MP_SEQ_SKIP)
