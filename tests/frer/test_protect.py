"""The intent action option `protect` (netapp.frer.protect): what it accepts, what it refuses naming the
field, and the protected stream an intent's match becomes (the IP stream identity FRER compares)."""

from __future__ import annotations

import pytest

from netapp.frer.protect import stream_definition
from netapp.intents.errors import IntentError
from netapp.intents.models import Intent, parse_intent

PORTS = [{"interface": "p0"}, {"interface": "q0", "vlan": 7}]
FLOW = {"src": "10.0.0.1", "dst": "10.0.1.0/24", "protocol": "udp", "dst_port": 5000, "dscp": 46}


def intent(match: dict = FLOW, action_type: str = "pass", **protect) -> dict:
    action = {"type": action_type, **({"cpu": 1} if action_type == "steer" else {})}
    return {"id": "video", "match": match, "action": {**action, "protect": protect}}


def refused(body: dict) -> tuple[str, str]:
    with pytest.raises(IntentError) as caught:
        parse_intent(body)
    return caught.value.field, caught.value.message


def test_replicate_becomes_a_generated_stream_of_the_matched_flow():
    parsed = parse_intent(intent(role="replicate", ports=PORTS))
    stream = stream_definition(parsed.match, parsed.action.protect)
    [identity] = stream.identification
    assert identity.ip is not None and identity.null is None
    assert (str(identity.ip.source), str(identity.ip.destination)) == ("10.0.0.1/32", "10.0.1.0/24")
    assert (identity.ip.protocol, identity.ip.destination_port, identity.ip.dscp) == ("udp", 5000, 46)
    assert identity.ip.source_port is None and identity.ip.vlan is None
    assert [(p.interface, p.vlan) for p in stream.generation.ports] == [("p0", None), ("q0", 7)]
    assert stream.recovery is None


def test_eliminate_becomes_a_recovered_stream_with_its_parameters_and_the_rest_defaulted():
    parsed = parse_intent(intent({"dst": "fd00::1", "vlan": 100}, "steer", role="eliminate", algorithm="match",
                                 reset_timeout_ms=50))
    stream = stream_definition(parsed.match, parsed.action.protect)
    assert stream.identification[0].ip.vlan == 100
    recovery = stream.recovery
    assert (recovery.algorithm, recovery.reset_timeout_ms, recovery.history_length, recovery.pop) == ("match", 50, 2, True)
    assert stream.generation is None


def test_an_intent_with_protect_reads_back_as_written():
    parsed = parse_intent(intent(role="replicate", ports=PORTS))
    dumped = parsed.model_dump(mode="json")
    assert dumped["action"]["protect"] == {"role": "replicate", "ports": [
        {"interface": "p0", "vlan": None}, {"interface": "q0", "vlan": 7}]}  # fmt: skip
    assert Intent.model_validate(dumped) == parsed
    assert "protect" not in parse_intent({"id": "a", "match": {}, "action": {"type": "pass"}}).model_dump()["action"]


@pytest.mark.parametrize(("protect", "field", "words"), [
    ({"role": "replicate"}, "action.protect.ports", "needs the member ports"),
    ({"role": "replicate", "ports": [{"interface": "p0"}] * 2}, "action.protect.ports", "at most once"),
    ({"role": "replicate", "ports": PORTS, "algorithm": "match"}, "action.protect.algorithm", "of eliminate"),
    ({"role": "eliminate", "ports": PORTS}, "action.protect.ports", "takes no ports"),
    ({"role": "eliminate", "history_length": 64}, "action.protect.history_length", "32"),
    ({"role": "mirror"}, "action.protect.role", "replicate"),
    ({"role": "eliminate", "pop": False}, "action.protect.pop", "unknown field"),
])  # fmt: skip
def test_a_bad_protect_is_refused_naming_its_field(protect, field, words):
    got_field, message = refused(intent(**protect))
    assert got_field == field and words in message


def test_replicate_is_refused_on_an_action_that_would_never_see_the_frames():
    field, message = refused(intent(action_type="steer", role="replicate", ports=PORTS))
    assert field == "action.protect.role" and "use pass" in message


@pytest.mark.parametrize(("match", "field", "words"), [
    ({**FLOW, "interface": "eth0"}, "match.interface", "every ingress interface"),
    ({"overlay": "vxlan", "vni": 5, "dst": "10.0.0.1"}, "match.overlay", "inside an overlay"),
    ({"teid": 7, "dst": "10.0.0.1"}, "match.teid", "inside GTP-U"),
    ({"qfi": 9, "dst": "10.0.0.1"}, "match.qfi", "inside GTP-U"),
    ({"protocol": "udp", "dst_port": 5000}, "match.dst", "fixes the IP family"),
])  # fmt: skip
def test_a_match_frer_cannot_identify_is_refused_naming_the_field_and_why(match, field, words):
    parsed = parse_intent(intent(match, role="eliminate"))
    with pytest.raises(IntentError) as caught:
        stream_definition(parsed.match, parsed.action.protect)
    assert caught.value.field == field and words in caught.value.message
