"""The PFCP numbers and the codec adapter, against pycrate's tables and encoder."""

import re

from pycrate_mobile import TS29244_PFCP as P

from netapp.upf.pfcp import codec
from netapp.upf.pfcp.ies import Cause, IEType, MsgType
from tests.upf.smf import Smf, establishment_ies

# Where pycrate names an IE by the message it sits in.
RENAMED = {
    IEType.USAGE_REPORT_MODIFICATION: "Usage Report (Session Mod Resp)",
    IEType.USAGE_REPORT_DELETION: "Usage Report (Session Deletion Resp)",
    IEType.USAGE_REPORT_REPORT: "Usage Report (Session Report Req)",
    IEType.ASSOCIATION_RELEASE_REQUEST: "Association Release Req",
}


def _plain(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def test_our_ie_and_message_numbers_are_pycrates():
    for ie_type in IEType:
        theirs = P.PFCPIEType_dict[ie_type.value]
        assert theirs == RENAMED.get(ie_type) or _plain(theirs) == _plain(ie_type.name), (ie_type, theirs)
    for msg_type in MsgType:
        assert _plain(P.PFCPMsgType_dict[msg_type.value]) == _plain("PFCP " + msg_type.name)


def test_our_cause_numbers_are_pycrates():
    for cause in Cause:
        assert cause.value in P.Cause_dict, cause


def test_a_request_pycrate_built_decodes_to_its_ies():
    data = Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", establishment_ies(0x55), seid=0, seq=9)
    message = codec.decode(data)
    assert (message.type, message.seq, message.seid) == (MsgType.SESSION_ESTABLISHMENT_REQUEST, 9, 0)
    assert len(message.ies.all(IEType.CREATE_PDR)) == 4
    pdi = message.ies.all(IEType.CREATE_PDR)[0].one(IEType.PDI)
    fteid = pdi.one(IEType.F_TEID)
    assert (fteid["ch"], fteid["chid"], fteid["choose_id"]) == (1, 1, 1)
    assert pdi.one(IEType.SDF_FILTER)["flow_description"] == b"permit out ip from any to assigned"


def test_what_we_encode_pycrate_decodes_the_same():
    message = codec.message(
        MsgType.SESSION_ESTABLISHMENT_RESPONSE,
        77,
        0x1234,
        codec.leaf(IEType.NODE_ID, id_type=0, ipv4="192.0.2.1"),
        codec.leaf(IEType.CAUSE, cause=Cause.RULE_CREATION_MODIFICATION_FAILURE),
        codec.leaf(IEType.OFFENDING_IE, type=IEType.FAR_ID),
        codec.leaf(IEType.FAILED_RULE_ID, type=0, pdr_id=3),
    )
    decoded, error = P.parse_PFCP(codec.encode(message))
    assert error == 0
    assert decoded["Hdr"]["SeqNum"].get_val() == 77 and decoded["Hdr"]["SEID"].get_val() == 0x1234
    values = {ie["Type"].get_val(): ie["Data"] for ie in decoded[1]}
    assert values[19].get_val() == 73
    assert values[40].get_val() == 108
    assert values[114]["RuleIDVal"].get_val() == 3


def test_an_ie_repeated_byte_for_byte_is_decoded_once_and_shared(fresh_caches):
    smf = Smf.__new__(Smf)
    first = codec.decode(Smf.build(smf, "PFCPSessionEstablishmentReq", establishment_ies(0x55), seid=0, seq=9))
    again = codec.decode(Smf.build(smf, "PFCPSessionEstablishmentReq", establishment_ies(0x56), seid=0, seq=10))
    assert again.ies.all(IEType.CREATE_FAR)[0] is first.ies.all(IEType.CREATE_FAR)[0]
    assert again.ies.one(IEType.F_SEID) is not first.ies.one(IEType.F_SEID)  # its SEID differs
    assert again.ies.one(IEType.F_SEID)["seid"] == 0x56
    library = codec.decode(Smf.build(smf, "PFCPSessionEstablishmentReq", establishment_ies(0x56), seid=0, seq=10),
                           leaves={})
    assert again == library  # what is shared reads as the library reads the bytes


def test_recent_forgets_the_oldest_first():
    recent: codec.Recent[int, str] = codec.Recent(size=2)
    recent.put(1, "a")
    recent.put(2, "b")
    recent.put(3, "c")
    assert (recent.get(1), recent.get(2), recent.get(3), len(recent)) == (None, "b", "c", 2)
