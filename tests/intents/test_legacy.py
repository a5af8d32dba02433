"""The paper's "Resources / Action / Params" message: conversion to a native intent and rejections."""

from __future__ import annotations

import ipaddress

import pytest

from netapp.intents.errors import IntentError
from netapp.intents.models import LegacyMessage, legacy_to_native, parse_intent
from tests.utils.intents import changed, paper_message


def rejection(message) -> IntentError:
    with pytest.raises(IntentError) as caught:
        legacy_to_native(message)
    return caught.value


class TestPaperMessage:
    def test_given_the_paper_message_then_every_field_is_converted(self):
        action_type, intent = legacy_to_native(paper_message())
        assert action_type == "INSERT"
        assert intent.id == "legacy-e918d704"
        assert intent.label == "E918D704"
        assert intent.priority == 100
        assert intent.traffic_class == "priority"
        match = intent.match
        assert (match.overlay, match.vni) == ("vxlan", 0x445)
        assert match.teid == 0x8894D0D4
        assert match.src == ipaddress.ip_network("192.168.0.140/32")
        assert match.dst is None
        assert (match.protocol, match.src_port, match.dst_port) == ("udp", None, 5004)
        assert match.interface == "eth0"
        assert (intent.action.type, intent.action.cpu) == ("steer", 1)
        assert intent.alternative is None

    def test_given_the_paper_message_as_model_then_same_result(self):
        assert legacy_to_native(LegacyMessage.model_validate(paper_message())) == legacy_to_native(
            paper_message()
        )

    def test_given_a_port_without_protocol_then_udp_is_assumed(self):
        intent = parse_intent(paper_message())
        assert intent.match.protocol == "udp"


class TestVariants:
    @pytest.mark.parametrize(
        ("resource", "expected"),
        [
            (
                {"encapsulationID1": "00000445", "encapsulationType1": "geneve"},
                {"overlay": "geneve", "vni": 0x445},
            ),
            (
                {"encapsulationID1": "FFFFFFFF", "encapsulationType1": "gre"},
                {"overlay": "gre", "vni": 0xFFFFFFFF},
            ),
            (
                {"encapsulationID1": "00ffffff", "encapsulationType1": "vxlan"},
                {"overlay": "vxlan", "vni": 0xFFFFFF},
            ),
            ({"encapsulationID1": "00000001", "encapsulationType1": "gtp"}, {"teid": 1}),
            ({"encapsulationID3": "00000007", "encapsulationType3": "gtp"}, {"teid": 7}),
            ({"dstIP": "10.0.0.0/8"}, {"dst": ipaddress.ip_network("10.0.0.0/8")}),
            ({"srcIP": "2001:db8::1"}, {"src": ipaddress.ip_network("2001:db8::1/128")}),
            ({"srcPort": "1234"}, {"src_port": 1234, "protocol": "udp"}),
            ({"dstPort": 80, "protocol": "tcp"}, {"dst_port": 80, "protocol": "tcp"}),
            ({"dstPort": "80", "protocol": "6"}, {"dst_port": 80, "protocol": 6}),
            ({"protocol": "ICMP"}, {"protocol": "icmp"}),
        ],
    )
    def test_given_one_resource_then_the_native_match_has_its_fields(self, resource, expected):
        message = changed(
            paper_message(), lambda m: m.update(Resources=[{"resourceId": "00000001", **resource}])
        )
        match = legacy_to_native(message)[1].match
        assert {name: getattr(match, name) for name in expected} == expected

    @pytest.mark.parametrize(
        ("action", "native", "alternative"),
        [
            ({"actionName": "DROP"}, {"type": "drop"}, None),
            ({"actionName": "PASS"}, {"type": "pass"}, None),
            ({"actionName": "FORWARD", "alt_group": "3"}, {"type": "forward", "alternative": 3}, None),
            ({"actionName": "PRIO_QUEUE", "rx_queue": "2", "alt_group": "5"}, {"type": "steer", "cpu": 2}, 5),
        ],
    )
    def test_given_each_action_name_then_the_native_action(self, action, native, alternative):
        def replace_action(message):
            message["Action"] = {"actionType": "INSERT", "flow_hash": "E918D704", **action}

        intent = legacy_to_native(changed(paper_message(), replace_action))[1]
        assert intent.action.model_dump() == native
        assert intent.alternative == alternative

    @pytest.mark.parametrize("action_type", ["INSERT", "UPDATE", "DELETE"])
    def test_given_each_action_type_then_it_is_returned(self, action_type):
        message = changed(paper_message(), lambda m: m["Action"].update(actionType=action_type))
        assert legacy_to_native(message)[0] == action_type

    def test_given_a_lower_case_flow_hash_then_the_id_is_the_same(self):
        message = changed(paper_message(), lambda m: m["Action"].update(flow_hash="e918d704"))
        intent = legacy_to_native(message)[1]
        assert (intent.id, intent.label) == ("legacy-e918d704", "e918d704")

    def test_given_no_params_then_no_interface(self):
        assert (
            legacy_to_native(changed(paper_message(), lambda m: m.pop("Params")))[1].match.interface is None
        )

    def test_given_a_delete_then_parse_intent_refuses_it(self):
        with pytest.raises(IntentError) as caught:
            parse_intent(changed(paper_message(), lambda m: m["Action"].update(actionType="DELETE")))
        assert caught.value.field == "Action.actionType"


def _resource(index, **fields):
    return lambda m: m["Resources"][index].update(fields)


def _drop(index, name):
    return lambda m: m["Resources"][index].pop(name)


def _action(**fields):
    return lambda m: m["Action"].update(fields)


class TestRejections:
    @pytest.mark.parametrize(
        ("change", "field", "words"),
        [
            (_resource(0, encapsulationID1="01000000"), "Resources[0].encapsulationID1", "2^24-1"),
            (
                _resource(0, encapsulationType1="geneve", encapsulationID1="FF000000"),
                "Resources[0].encapsulationID1",
                "2^24-1",
            ),
            (_resource(0, encapsulationID1="0000044G"), "Resources[0].encapsulationID1", "hexadecimal"),
            (_resource(0, encapsulationID1="445"), "Resources[0].encapsulationID1", "8 hexadecimal"),
            (_resource(0, encapsulationID1="0x000445"), "Resources[0].encapsulationID1", "hexadecimal"),
            (_resource(0, encapsulationID1=1093), "Resources[0].encapsulationID1", "hexadecimal"),
            (_resource(0, encapsulationType1="mpls"), "Resources[0].encapsulationType1", "vxlan"),
            (_resource(0, encapsulationType1="VXLAN"), "Resources[0].encapsulationType1", "vxlan"),
            (_drop(0, "encapsulationType1"), "Resources[0].encapsulationType1", "go together"),
            (_drop(1, "encapsulationID2"), "Resources[1].encapsulationID2", "go together"),
            (_resource(0, encapsulationID5="00000001"), "Resources[0].encapsulationID5", "unknown field"),
            (
                _resource(1, encapsulationType2="gre"),
                "Resources[1].encapsulationType2",
                "overlay is already given",
            ),
            (_resource(1, encapsulationType2="vxlan"), "Resources[1].encapsulationID2", "2^24-1"),
            (
                _resource(1, encapsulationType2="gtp", encapsulationID3="00000001", encapsulationType3="gtp"),
                "Resources[1].encapsulationType3",
                "teid",
            ),
            (_resource(2, dstPort="65536"), "Resources[2].dstPort", "65535"),
            (_resource(2, dstPort="50a4"), "Resources[2].dstPort", "decimal"),
            (_resource(2, dstPort="-1"), "Resources[2].dstPort", "decimal"),
            (_resource(2, srcPort="99999"), "Resources[2].srcPort", "65535"),
            (_resource(2, protocol="icmp"), "Resources[2].dstPort", "tcp, udp or sctp"),
            (_resource(2, protocol="ospf"), "Resources[2].protocol", "tcp"),
            (_resource(2, srcIP="192.168.0.300"), "Resources[2].srcIP", "not an IPv4 or IPv6"),
            (_resource(2, dstIP="2001:db8::1"), "Resources[2].dstIP", "IPv6"),
            (_resource(1, srcIP="10.0.0.1"), "Resources[2].srcIP", "already given by Resources[1].srcIP"),
            (_resource(1, dstPort="80"), "Resources[2].dstPort", "already given"),
            (_resource(0, resourceId="F8A4C94"), "Resources[0].resourceId", "hexadecimal"),
            (_drop(0, "resourceId"), "Resources[0].resourceId", "missing"),
            (
                lambda m: m["Resources"].append({"resourceId": "00000001"}),
                "Resources[3].resourceId",
                "no match criterion",
            ),
            (_resource(0, color="red"), "Resources[0].color", "unknown field"),
            (_action(actionType="UPSERT"), "Action.actionType", "INSERT"),
            (_action(actionName="PRIO"), "Action.actionName", "PRIO_QUEUE"),
            (_action(flow_hash="E918D70"), "Action.flow_hash", "hexadecimal"),
            (_action(flow_hash="Z918D704"), "Action.flow_hash", "hexadecimal"),
            (lambda m: m["Action"].pop("flow_hash"), "Action.flow_hash", "missing"),
            (lambda m: m["Action"].pop("rx_queue"), "Action.rx_queue", "PRIO_QUEUE needs"),
            (_action(rx_queue="128"), "Action.rx_queue", "127"),
            (_action(rx_queue="one"), "Action.rx_queue", "decimal"),
            (_action(actionName="DROP"), "Action.rx_queue", "no meaning"),
            (_action(actionName="FORWARD"), "Action.alt_group", "FORWARD needs"),
            (_action(actionName="FORWARD", rx_queue=None, alt_group="64"), "Action.alt_group", "63"),
            (
                lambda m: m["Action"].update(actionName="PASS", alt_group="1") or m["Action"].pop("rx_queue"),
                "Action.alt_group",
                "no meaning",
            ),
            (_action(priority="5"), "Action.priority", "unknown field"),
            (lambda m: m["Params"][0].update(paramName="vlan"), "Params[0].paramName", "interfaceName"),
            (lambda m: m["Params"][0].update(paramValue="a" * 16), "Params[0].paramValue", "15"),
            (lambda m: m["Params"].append(dict(m["Params"][0])), "Params[1].paramName", "already given"),
            (lambda m: m.pop("Resources"), "Resources", "missing"),
            (lambda m: m.update(Extra=[]), "Extra", "unknown field"),
        ],
    )
    def test_given_a_bad_value_then_the_error_names_the_legacy_field(self, change, field, words):
        error = rejection(changed(paper_message(), change))
        assert error.field == field, str(error)
        assert words in str(error), str(error)
