"""Our decoders and encoders of leaf IEs (netapp.upf.pfcp.leaves) against the library's (scapy) and
pycrate's readings of the same bytes: the same fields, or ours declines and the library decides."""

from __future__ import annotations

import random
import socket
import struct

import pytest
from pycrate_mobile import TS29244_PFCP as P

from netapp.upf.pfcp import codec
from netapp.upf.pfcp.ies import Cause, IEType, MsgType
from netapp.upf.pfcp.leaves import DECODERS, ENCODERS
from tests.upf.smf import Smf, establishment_ies, node_id, recovery

SEED = 20260518
BODIES_PER_TYPE = 3_000


def _library_fields(ie_type: int, body: bytes):
    """What the adapter makes of the body with the library alone: its fields, or the error's kind."""
    data = struct.pack("!BBHQ", 0x21, MsgType.SESSION_ESTABLISHMENT_REQUEST, 12 + 4 + len(body), 0)
    data += b"\x00\x00\x01\x00" + struct.pack("!HH", ie_type, len(body)) + body
    try:
        return codec.decode(data, leaves={}).ies.children[0].fields
    except codec.MalformedMessage as exc:
        return exc.kind


def _body(rng: random.Random) -> bytes:
    """Bytes of every length up to 40, the first octet (the flags, mostly) random."""
    return rng.randbytes(rng.choice((0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 13, 17, 21, 25, 29, 40)))


@pytest.mark.parametrize("ie_type", sorted(DECODERS), ids=lambda t: IEType(t).name)
def test_our_leaf_decoder_reads_what_the_library_reads_or_declines(ie_type):
    rng = random.Random(SEED + ie_type)
    read = 0
    for _ in range(BODIES_PER_TYPE):
        body = _body(rng)
        ours = DECODERS[ie_type](body)
        if ours is None:
            continue
        read += 1
        assert ours == _library_fields(ie_type, body), body.hex()
    assert read > BODIES_PER_TYPE // 20  # the comparison did happen, often


def _sdf_body(rng: random.Random) -> bytes:
    flags = rng.randrange(32)
    body = bytes((flags, rng.randrange(256)))
    if flags & 1:
        text = rng.randbytes(rng.randrange(0, 30))
        body += struct.pack("!H", max(0, len(text) + rng.choice((0, 0, 0, 1, -1)))) + text
    return body + rng.randbytes(rng.randrange(0, 14))


def test_sdf_filters_with_their_lengths_are_read_alike():
    rng = random.Random(SEED)
    for _ in range(BODIES_PER_TYPE):
        body = _sdf_body(rng)
        ours = DECODERS[IEType.SDF_FILTER](body)
        if ours is not None:
            assert ours == _library_fields(IEType.SDF_FILTER, body), body.hex()


def test_node_ids_as_labels_are_read_alike():
    for body in (b"\x02\x03smf\x04corp", b"\x02\x09smf", b"\x02", b"\x02\x00\x00", b"\x03abc"):
        assert DECODERS[IEType.NODE_ID](body) == _library_fields(IEType.NODE_ID, body)
    assert DECODERS[IEType.NETWORK_INSTANCE](b"\x08internet") == _library_fields(IEType.NETWORK_INSTANCE, b"\x08internet")


RESPONSE_IES = [
    codec.leaf(IEType.CAUSE, cause=Cause.REQUEST_ACCEPTED),
    codec.leaf(IEType.NODE_ID, id_type=0, ipv4="192.0.2.1"),
    codec.leaf(IEType.F_SEID, seid=0xFEDCBA9876543210, v4=1, ipv4="192.0.2.1"),
    codec.leaf(IEType.F_SEID, seid=7, v6=1, ipv6="2001:db8::1"),
    codec.leaf(IEType.F_TEID, v4=1, v6=1, teid=0x1234, ipv4="127.0.0.2", ipv6="2001:db8::2"),
    codec.leaf(IEType.F_TEID, v4=1, v6=0, teid=1, ipv4="127.0.0.2"),
    codec.leaf(IEType.PDR_ID, id=65535),
    codec.leaf(IEType.UE_IP_ADDRESS, sd=1, v4=1, ipv4="10.45.0.7"),  # a Created PDR's (CHV4)
    codec.leaf(IEType.UE_IP_ADDRESS, sd=0, v4=1, ipv4="10.45.255.254"),
    codec.leaf(IEType.RECOVERY_TIME_STAMP, timestamp=0xE0000000),
]


@pytest.mark.parametrize("ie", RESPONSE_IES, ids=lambda ie: IEType(ie.type).name)
def test_our_encoders_write_what_the_library_writes(ie):
    assert ENCODERS[ie.type](ie.fields) is not None
    ours = codec.encode(codec.message(MsgType.SESSION_ESTABLISHMENT_RESPONSE, 1, 2, ie))
    library = codec.encode(codec.message(MsgType.SESSION_ESTABLISHMENT_RESPONSE, 1, 2, ie), leaves={})
    assert ours == library
    P.PFCPIEs.VERIF_MAND = False  # one IE alone, not a whole response
    try:
        decoded, error = P.parse_PFCP(ours)
    finally:
        P.PFCPIEs.VERIF_MAND = True
    assert error == 0 and decoded[1][0]["Type"].get_val() == ie.type


def test_fields_our_encoders_do_not_take_go_to_the_library():
    ie = codec.leaf(IEType.NODE_ID, id_type=2, id=b"smf.example")
    assert ENCODERS[IEType.NODE_ID](ie.fields) is None
    message = codec.message(MsgType.HEARTBEAT_RESPONSE, 1, None, ie)
    assert codec.encode(message) == codec.encode(message, leaves={})


def test_a_request_pycrate_built_decodes_alike_with_or_without_our_readers():
    smf = Smf.__new__(Smf)
    for data in (
        smf.build("PFCPSessionEstablishmentReq", establishment_ies(0x55), seid=0, seq=9),
        smf.build("PFCPAssociationSetupReq", [node_id("10.9.8.7"), recovery(5)], seq=3),
    ):
        assert codec.decode(data) == codec.decode(data, leaves={})


def _text(address) -> str:
    return socket.inet_ntoa(address.get_val())


def test_our_readings_are_pycrates():
    """The values the rules read, ours against pycrate's decoding of the same request."""
    data = Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", establishment_ies(0x55), seid=0, seq=9)
    ours = codec.decode(data)
    theirs, error = P.parse_PFCP(data)
    assert error == 0
    fseid = ours.ies.one(IEType.F_SEID)
    their_fseid = next(ie for ie in theirs[1] if ie["Type"].get_val() == IEType.F_SEID)["Data"]
    assert (fseid["seid"], fseid["ipv4"]) == (their_fseid["SEID"].get_val(), _text(their_fseid["IPv4Addr"]))
    pdr = ours.ies.all(IEType.CREATE_PDR)[3]
    their_pdr = [ie for ie in theirs[1] if ie["Type"].get_val() == IEType.CREATE_PDR][3]["Data"]
    their = {ie["Type"].get_val(): ie["Data"] for ie in their_pdr}
    assert pdr.one(IEType.PDR_ID)["id"] == their[IEType.PDR_ID]["Val"].get_val()
    assert pdr.one(IEType.PRECEDENCE)["precedence"] == their[IEType.PRECEDENCE]["Val"].get_val()
    assert pdr.one(IEType.FAR_ID)["id"] == their[IEType.FAR_ID]["Val"].get_val()
    their_pdi = {ie["Type"].get_val(): ie["Data"] for ie in their[IEType.PDI]}
    pdi = pdr.one(IEType.PDI)
    assert pdi.one(IEType.SOURCE_INTERFACE)["interface"] == their_pdi[IEType.SOURCE_INTERFACE]["If"].get_val()
    assert pdi.one(IEType.UE_IP_ADDRESS)["ipv4"] == _text(their_pdi[IEType.UE_IP_ADDRESS]["IPv4Addr"])
    assert pdi.one(IEType.SDF_FILTER)["flow_description"] == their_pdi[IEType.SDF_FILTER]["FlowDesc"]["Val"].get_val()
