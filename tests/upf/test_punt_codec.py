"""DUPL and NOCP over PFCP, checked with the codec we do not use (pycrate): Duplicating Parameters
pycrate builds read into the FAR model, and the Downlink Data Report our endpoint sends as pycrate
reads it."""

from __future__ import annotations

from pycrate_mobile import TS29244_PFCP as P

from netapp.upf.models import DuplicatingParameters, OuterHeaderCreation
from netapp.upf.pfcp import codec
from netapp.upf.pfcp.ies import IEType, Interface, MsgType
from netapp.upf.pfcp.rules import read_rules
from tests.upf.smf import Smf, create_far, create_pdr, fseid, ie, node_id


def duplicating_far(far_id: int) -> dict:
    far = create_far(far_id, core=False)
    far["Data"][1] = ie(44, {"Octet1": {"FORW": 1, "DUPL": 1}})
    far["Data"].append(ie(5, [ie(42, {"Val": 4}), ie(84, {"GTPU_UDP_IPv4": 1, "TEID": 0x77, "IPv4Addr": "10.77.0.2"}),
                              ie(30, {"ToSTrafficClass": b"\xb8\xfc"}), ie(41, {"Len": 3, "ID": b"li1"})]))
    return far


def test_duplicating_parameters_pycrate_builds_are_the_fars():
    ies = [node_id(), fseid(0x55), create_pdr(1, 1, access=False, flow=None, qer=None, urr=None), duplicating_far(1)]
    data = Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", ies, seid=0, seq=3)
    [far] = read_rules(codec.decode(data).ies)["fars"].creates
    assert far.apply_action == {"FORW", "DUPL"}
    assert far.duplicating == (DuplicatingParameters(
        destination_interface=Interface.LI_FUNCTION, transport_level_marking=0xB8, forwarding_policy="li1",
        outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv4", teid=0x77, address="10.77.0.2")),)


def test_a_downlink_data_report_as_pycrate_reads_it():
    message = codec.message(
        MsgType.SESSION_REPORT_REQUEST, 12, 0x99,
        codec.leaf(IEType.REPORT_TYPE, dldr=1),
        codec.group(IEType.DOWNLINK_DATA_REPORT, codec.leaf(IEType.PDR_ID, id=2)),
    )
    decoded, error = P.parse_PFCP(codec.encode(message))
    assert error == 0
    values = {item["Type"].get_val(): item["Data"] for item in decoded[1]}
    assert values[39]["DLDR"].get_val() == 1 and values[39]["USAR"].get_val() == 0
    [pdr_id] = [child["Data"]["Val"].get_val() for child in values[83] if child["Type"].get_val() == 56]
    assert pdr_id == 2
