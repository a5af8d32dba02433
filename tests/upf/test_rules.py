"""Reading a request's rules (netapp.upf.pfcp.rules): a Create IE repeated byte for byte gives the
same rule, read once; one that is refused is refused every time."""

import pytest

from netapp.upf.models import RuleError
from netapp.upf.pfcp import codec
from netapp.upf.pfcp.ies import Cause, IEType, RuleType
from netapp.upf.pfcp.rules import read_rules
from tests.upf.smf import Smf, create_far, establishment_ies, ie


def _request(ies) -> codec.Message:
    return codec.decode(Smf.build(Smf.__new__(Smf), "PFCPSessionEstablishmentReq", ies, seid=0, seq=1))


def test_a_repeated_create_ie_gives_the_same_rule():
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
