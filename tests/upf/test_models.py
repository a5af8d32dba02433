"""The session models' own checks, and the checks of a session's rules against each other."""

import pytest
from pydantic import ValidationError

from netapp.upf.models import Far, FTeid, Pdi, Pdr, RuleError, Session, Urr, check_session
from netapp.upf.pfcp.ies import Cause, IEType, Interface, RuleType

REMOTE = {"seid": 1, "ipv4": "10.0.0.1"}


@pytest.mark.parametrize(
    "fields, says",
    [
        ({"teid": 5}, "needs an IPv4 or IPv6 address"),
        ({"ipv4": "192.0.2.1"}, "needs a TEID"),
        ({"teid": 5, "ipv4": "2001:db8::1"}, "not an IPv4 address"),
        ({"teid": 5, "ipv4": "192.0.2.1", "choose_id": 3}, "a CHOOSE ID needs CHOOSE"),
    ],
)
def test_an_f_teid_is_given_whole_or_chosen(fields, says):
    with pytest.raises(ValidationError) as refused:
        FTeid(**fields)
    assert says in str(refused.value)
    assert FTeid(choose=True, choose_id=3).teid is None


@pytest.mark.parametrize(
    "actions, says",
    [
        ({"FORW", "DROP"}, "exactly one of DROP, FORW, BUFF"),
        ({"DROP", "NOCP"}, "NOCP only with BUFF"),
        ({"FORW"}, "FORW needs forwarding parameters"),
    ],
)
def test_a_far_apply_action_is_one_that_can_be_done(actions, says):
    with pytest.raises(ValidationError) as refused:
        Far(id=1, apply_action=frozenset(actions))
    assert says in str(refused.value)


def _session(**rules) -> Session:
    pdi = Pdi(source_interface=Interface.CORE)
    pdrs = {1: Pdr(id=1, precedence=1, pdi=pdi, far_id=1, urr_ids=(1,))}
    return Session(seid=1, node_id="smf", remote=REMOTE, pdrs=pdrs, **rules)


def test_a_pdr_naming_a_missing_urr_fails_with_its_id():
    with pytest.raises(RuleError) as refused:
        check_session(_session(fars={1: Far(id=1, apply_action=frozenset({"DROP"}))}))
    error = refused.value
    assert (error.cause, error.rule, error.ie_type) == (
        Cause.RULE_CREATION_MODIFICATION_FAILURE, (RuleType.PDR, 1), IEType.URR_ID)


def test_a_reporting_trigger_without_its_ie_is_conditional_ie_missing():
    urr = Urr(id=1, measurement_method=frozenset({"VOLUM"}), reporting_triggers=frozenset({"periodic_reporting"}))
    with pytest.raises(RuleError) as refused:
        check_session(_session(fars={1: Far(id=1, apply_action=frozenset({"DROP"}))}, urrs={1: urr}))
    assert (refused.value.cause, refused.value.ie_type, refused.value.rule) == (
        Cause.CONDITIONAL_IE_MISSING, IEType.MEASUREMENT_PERIOD, (RuleType.URR, 1))


def test_a_session_survives_json():
    session = _session(fars={1: Far(id=1, apply_action=frozenset({"DROP"}))},
                       urrs={1: Urr(id=1, measurement_method=frozenset({"VOLUM"}))})
    assert Session.model_validate_json(session.model_dump_json()) == session
