"""The PFCP endpoint under bad input: each datagram answered, or dropped and counted; never a crash,
never a half-made session."""

from __future__ import annotations

import random
import struct

from pycrate_mobile import TS29244_PFCP as P

from netapp.upf.models import check_session
from netapp.upf.pfcp import codec
from netapp.upf.pfcp.ies import Cause, MsgType
from netapp.upf.sessions import Upf
from tests.upf.smf import Smf, cause, establishment_ies, recovery

SEED = 20260517
RANDOM_DATAGRAMS = 10_000
MUTATED_DATAGRAMS = 2_000
WINDOW = 50  # datagrams in flight before a heartbeat fences them: no socket buffer overflows
# What the endpoint counts a datagram as, one of these each.
OUTCOMES = ("accepted", "refused_", "retransmission", "malformed_", "unexpected_message", "report_response")


def _random_datagram(rng: random.Random) -> bytes:
    """Bytes, the half of them with a PFCP-looking first octet and a message type we know."""
    data = bytearray(rng.randbytes(rng.randrange(0, 120)))
    if len(data) >= 2 and rng.random() < 0.5:
        data[0] = rng.choice((0x20, 0x21, 0x40))
        data[1] = rng.choice([int(t) for t in MsgType] + [0, 3, 99, 255])
    return bytes(data)


def _mutated(rng: random.Random, valid: list[bytes]) -> bytes:
    data = bytearray(rng.choice(valid))
    seq_at = 12 if data[0] & 0x01 else 4
    data[seq_at : seq_at + 3] = rng.randrange(1, 0xF00000).to_bytes(3, "big")  # not a retransmission
    for _ in range(rng.randrange(1, 4)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    if rng.random() < 0.3:
        del data[rng.randrange(len(data)) :]  # truncated
    elif rng.random() < 0.2:
        struct.pack_into("!H", data, 2, rng.randrange(65536))  # a message length that lies
    return bytes(data)


def _fence(smf, seq: int) -> None:
    """A heartbeat after a window: every datagram before it has been handled once it is answered."""
    smf.send(smf.build("PFCPHeartbeatReq", [recovery(1000)], seq=seq))
    while True:
        data = smf.receive_raw()
        if data[1] == MsgType.HEARTBEAT_RESPONSE and int.from_bytes(data[4:7], "big") == seq:
            return


def _datagrams(smf) -> list[bytes]:
    """The random and mutated datagrams, the same every run."""
    valid = [
        smf.build("PFCPSessionEstablishmentReq", establishment_ies(0x42), seid=0, seq=7),
        smf.build("PFCPSessionModificationReq", [], seid=1, seq=8),
        smf.build("PFCPAssociationSetupReq", [], seq=9),
        smf.build("PFCPHeartbeatReq", [recovery(1000)], seq=10),
    ]
    rng = random.Random(SEED)
    datagrams = [_random_datagram(rng) for _ in range(RANDOM_DATAGRAMS)]
    datagrams += [_mutated(rng, valid) for _ in range(MUTATED_DATAGRAMS)]
    rng.shuffle(datagrams)
    return datagrams


def _outcome(decode, data: bytes):
    try:
        return decode(data)
    except codec.MalformedMessage as exc:
        return exc.kind


def test_random_and_mutated_datagrams_decode_alike_with_our_readers_the_library_and_pycrate():
    """Our leaf readers change nothing: each datagram gives the same message, or the same refusal,
    as the library alone; where pycrate reads it too, faithfully (its encoding of what it read is the
    datagram, its IEs' lengths add up to the message's), the same header and IEs at the top."""
    both_read = 0
    for data in _datagrams(Smf.__new__(Smf)):
        ours = _outcome(codec.decode, data)
        assert ours == _outcome(lambda data: codec.decode(data, leaves={}), data), data.hex()
        if isinstance(ours, str):
            continue
        try:
            theirs, error = P.parse_PFCP(data)
        except Exception:  # noqa: BLE001 - pycrate's own failures on some mutated IEs: a refusal
            continue
        if error or theirs is None or theirs.to_bytes() != data:
            continue
        if sum(4 + ie["Len"].get_val() for ie in theirs[1]) != int.from_bytes(data[2:4], "big") - (12 if data[0] & 1 else 4):
            continue  # pycrate read a group's children past the group (a mutated inner length)
        both_read += 1
        header = theirs["Hdr"]
        assert (ours.type, ours.seq) == (header["Type"].get_val(), header["SeqNum"].get_val())
        assert [ie.type for ie in ours.ies.children] == [ie["Type"].get_val() for ie in theirs[1]]
    assert both_read > 100


def test_random_and_mutated_datagrams_are_answered_or_counted(endpoint, associated):
    smf = associated
    datagrams = _datagrams(smf)
    before = endpoint.server.counters["received"]
    fences = 0
    for start in range(0, len(datagrams), WINDOW):
        for data in datagrams[start : start + WINDOW]:
            smf.send(data)
        fences += 1
        _fence(smf, 0xF00000 + fences)
    counters = endpoint.server.counters
    assert counters["received"] - before == len(datagrams) + fences
    assert counters.get("internal_error", 0) == 0
    outcomes = sum(count for name, count in counters.items() if name.startswith(OUTCOMES))
    assert outcomes == counters["received"], counters
    assert counters["malformed_too_short"] and counters["malformed_bad_length"] and counters["malformed_unknown_type"]
    # Still serving, and the tables are what the store holds, every session whole.
    assert smf.ask("PFCPHeartbeatReq", [recovery(1000)])["Hdr"]["Type"].get_val() == MsgType.HEARTBEAT_RESPONSE
    for session in endpoint.upf.sessions.values():
        check_session(session)
    reloaded = Upf(endpoint.store)
    assert reloaded.sessions == endpoint.upf.sessions
    assert reloaded.associations == endpoint.upf.associations


def test_a_wrong_version_gets_version_not_supported(endpoint, smf):
    request = bytearray(smf.build("PFCPHeartbeatReq", [recovery(1)], seq=5))
    request[0] = (2 << 5) | (request[0] & 0x1F)
    smf.send(bytes(request))
    response = smf.receive_raw()
    assert response[1] == MsgType.VERSION_NOT_SUPPORTED_RESPONSE and int.from_bytes(response[4:7], "big") == 5


def test_an_ie_longer_than_its_message_is_invalid_length(endpoint, associated):
    request = bytearray(associated.build("PFCPSessionEstablishmentReq", establishment_ies(0x42), seid=0, seq=6))
    struct.pack_into("!H", request, 16 + 2, 0xFFF0)  # the first IE's length
    associated.send(bytes(request))
    response = associated.receive()
    assert cause(response) == Cause.INVALID_LENGTH
    assert endpoint.upf.sessions == {}
    assert endpoint.server.counters["malformed_bad_length"] == 1


def test_an_unknown_message_type_and_a_runt_are_dropped_and_counted(endpoint, smf):
    smf.send(bytes([0x20, 200, 0, 4, 0, 0, 1, 0]))
    smf.send(b"\x20\x01")
    _fence(smf, 77)
    assert endpoint.server.counters["malformed_unknown_type"] == 1
    assert endpoint.server.counters["malformed_too_short"] == 1
