"""Reading a request's rules (netapp.upf.pfcp.rules): a Create IE repeated byte for byte gives the
same rule, read once; one that is refused is refused every time; one that differs from a rule read
before only in its UE address or tunnel is the rule it would be read whole, or the same refusal."""

import pytest

from netapp.upf.models import RuleError
from netapp.upf.pfcp import codec, rules
from netapp.upf.pfcp.ies import Cause, IEType, RuleType
from netapp.upf.pfcp.rules import KINDS, build, read_rules, rule_id
from tests.upf.smf import (
    Smf,
    create_far,
    create_pdr,
    create_qer,
    create_urr,
    establishment_ies,
    fseid,
    ie,
    node_id,
)


def _request(ies) -> codec.Message:
    return codec.decode(Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", ies, seid=0, seq=1))


def test_a_repeated_create_ie_gives_the_same_rule(fresh_caches):
    first, again = (read_rules(_request(establishment_ies(seid)).ies) for seid in (1, 2))
    assert again["fars"].creates[0] is first["fars"].creates[0]
    assert again["urrs"].creates == first["urrs"].creates
    assert [far.id for far in again["fars"].creates] == [1, 2]


def test_a_refused_create_ie_is_refused_each_time():
    far = create_far(7, core=True)
    far["Data"][1] = ie(44, {"Octet1": {}})  # no apply action at all
    for _ in range(2):
        with pytest.raises(RuleError) as refused:
            read_rules(_request([*establishment_ies(1), far]).ies)
        assert refused.value.cause == Cause.RULE_CREATION_MODIFICATION_FAILURE
        assert refused.value.rule == (RuleType.FAR, 7) and refused.value.ie_type == IEType.CREATE_FAR


def _whole(ies: codec.IE) -> dict[str, list]:
    """Every Create IE read whole, no rule made before consulted."""
    return {kind.table: [build(kind.model, {"id": rule_id(ie, kind)[1], **kind.fields(ie, rule_id(ie, kind), True)},
                               kind.create_ie, rule_id(ie, kind)) for ie in ies.all(kind.create_ie)] for kind in KINDS}


def _far(gnb: str, teid: int) -> dict:
    if ":" not in gnb:
        return create_far(2, core=False, gnb=gnb, teid=teid)
    far = create_far(2, core=False, gnb=None)
    far["Data"][2]["Data"].append(ie(84, {"GTPU_UDP_IPv6": 1, "TEID": teid, "IPv6Addr": gnb}))
    return far


def _session_ies(n: int, ue: str, gnb: str, teid: int) -> list:
    return [node_id(), fseid(n), create_pdr(1, 1, access=True, choose_id=1, flow=None, ue=ue),
            create_pdr(3, 2, access=False, ue=ue), create_far(1, core=True), _far(gnb, teid), create_qer(),
            create_urr()]


def test_a_rule_differing_in_its_ue_address_or_tunnel_is_read_as_whole(monkeypatch):
    sessions = [("10.60.0.1", "192.0.2.1", 0x200), ("10.60.0.2", "192.0.2.2", 0x201),
                ("10.60.0.2", "192.0.2.1", 0x201), ("10.60.0.3", "2001:db8::7", 7), ("10.60.0.4", "192.0.2.4", 9)]
    built = []
    monkeypatch.setattr(rules, "build", lambda model, *args: built.append(model) or build(model, *args))
    for n, (ue, gnb, teid) in enumerate(sessions):
        ies = _request(_session_ies(n, ue, gnb, teid)).ies
        built.clear()
        plans = read_rules(ies)
        assert {table: plan.creates for table, plan in plans.items()} == _whole(ies)
        assert plans["pdrs"].creates[1].pdi.ue_ip.ipv4 == ue
        assert plans["fars"].creates[1].forwarding.outer_header_creation.address == gnb
        if n == 4:  # the shapes are known: no rule was read whole
            assert built == []


def test_a_bad_ue_address_or_tunnel_of_a_known_rule_is_refused_as_before():
    read_rules(_request(_session_ies(1, "10.61.0.1", "192.0.2.1", 0x300)).ies)  # the shapes, known
    pdr = create_pdr(3, 2, access=False, ue="10.61.0.2")
    pdr["Data"][2]["Data"][-2] = ie(93, {"V4": 0, "SD": 1})  # no address at all
    far = create_far(2, core=False, gnb=None)
    far["Data"][2]["Data"].append(ie(84, {"UDP_IPv4": 0, "TEID": 5, "IPv4Addr": "192.0.2.9"}))  # no kind
    for bad, refused_rule in ((pdr, (RuleType.PDR, 3)), (far, (RuleType.FAR, 2))):
        ies = _session_ies(2, "10.61.0.2", "192.0.2.2", 0x301)
        ies[3 if bad is pdr else 5] = bad
        with pytest.raises(RuleError) as refused:
            read_rules(_request(ies).ies)
        with pytest.raises(RuleError) as whole:
            _whole(_request(ies).ies)
        assert refused.value.rule == refused_rule
        assert (refused.value.cause, str(refused.value), refused.value.ie_type) == (
            whole.value.cause, str(whole.value), whole.value.ie_type)
