"""Native intents and intent documents: what is accepted, how it is normalised, what is rejected."""

from __future__ import annotations

import ast
import importlib
import ipaddress
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netapp.intents.errors import IntentError
from netapp.intents.models import Intent, IntentDocument, parse_document, parse_intent
from tests.utils.intents import changed, native_intent, paper_message, site_document


def rejection(data) -> str:
    with pytest.raises(IntentError) as caught:
        parse_intent(data)
    return str(caught.value)


class TestAccepted:
    @pytest.mark.parametrize(
        "match",
        [
            {},
            {"interface": "eth0"},
            {"vlan": 1},
            {"vlan": 4094},
            {"overlay": "vxlan", "vni": 0},
            {"overlay": "geneve", "vni": 2**24 - 1},
            {"overlay": "gre", "vni": 2**32 - 1},
            {"overlay": "gre"},
            {"teid": 0x8894D0D4},
            {"teid": 1, "qfi": 63},
            {"qfi": 9},
            {"src": "10.0.0.0/8"},
            {"dst": "2001:db8::/32"},
            {"src": "10.0.0.0/8", "dst": "192.168.0.1"},
            {"protocol": "icmp"},
            {"protocol": "icmpv6", "dst": "::/0"},
            {"protocol": 47},
            {"protocol": "tcp", "src_port": 0, "dst_port": 65535},
            {"protocol": "sctp", "dst_port": 38412},
            {"protocol": 17, "dst_port": 2152},
            {"dscp": 46},
        ],
    )
    def test_given_a_valid_match_when_parsed_then_accepted(self, match):
        intent = parse_intent(native_intent(match=match))
        assert isinstance(intent, Intent)

    @pytest.mark.parametrize(
        "action",
        [
            {"type": "pass"},
            {"type": "drop"},
            {"type": "steer", "cpu": 0},
            {"type": "steer", "cpu": 127},
            {"type": "forward", "alternative": 63},
            {"type": "redirect", "interface": "eth1"},
        ],
    )
    def test_given_each_action_when_parsed_then_accepted(self, action):
        assert parse_intent(native_intent(action=action)).action.type == action["type"]

    def test_given_defaults_when_parsed_then_priority_100_and_priority_class(self):
        intent = parse_intent(native_intent())
        assert (intent.priority, intent.traffic_class, intent.alternative, intent.label) == (
            100,
            "priority",
            None,
            None,
        )

    @pytest.mark.parametrize(
        ("given", "stored"),
        [
            ("10.1.2.3/8", "10.0.0.0/8"),
            ("192.168.0.140", "192.168.0.140/32"),
            ("2001:db8::1/32", "2001:db8::/32"),
            (" 10.0.0.0/24 ", "10.0.0.0/24"),
        ],
    )
    def test_given_a_prefix_with_host_bits_when_parsed_then_normalised(self, given, stored):
        intent = parse_intent(native_intent(match={"src": given}))
        assert str(intent.match.src) == stored

    def test_given_protocol_in_capitals_when_parsed_then_lower_case(self):
        assert parse_intent(native_intent(match={"protocol": "UDP", "dst_port": 1})).match.protocol == "udp"

    @pytest.mark.parametrize(
        "intent",
        [
            native_intent(alternative=3),
            native_intent(action={"type": "forward", "alternative": 5}, alternative=5),
            native_intent(action={"type": "pass"}, traffic_class="best-effort", alternative=2),
        ],
    )
    def test_given_an_alternative_where_traffic_can_overflow_then_accepted(self, intent):
        assert parse_intent(intent).alternative == intent["alternative"]

    def test_given_an_intent_when_dumped_as_json_then_it_parses_back_equal(self):
        intent = parse_intent(native_intent(match={"src": "10.0.0.0/8", "protocol": "tcp", "dst_port": 80}))
        again = Intent.model_validate_json(intent.model_dump_json())
        assert again == intent


class TestRejected:
    @pytest.mark.parametrize(
        ("change", "field"),
        [
            (lambda i: i.update(id=""), "id"),
            (lambda i: i.update(id="x" * 65), "id"),
            (lambda i: i.update(id="has space"), "id"),
            (lambda i: i.update(id="slash/no"), "id"),
            (lambda i: i.pop("id"), "id"),
            (lambda i: i.update(priority=65536), "priority"),
            (lambda i: i.update(priority=-1), "priority"),
            (lambda i: i.update(priority="5"), "priority"),
            (lambda i: i.update(traffic_class="gold"), "traffic_class"),
            (lambda i: i.update(surprise=1), "surprise"),
            (lambda i: i.pop("match"), "match"),
            (lambda i: i.pop("action"), "action"),
            (lambda i: i.update(alternative=64), "alternative"),
            (lambda i: i.update(match={"vlan": 0}), "match.vlan"),
            (lambda i: i.update(match={"vlan": 4095}), "match.vlan"),
            (lambda i: i.update(match={"vni": 5}), "match.vni"),
            (lambda i: i.update(match={"overlay": "vxlan", "vni": 2**24}), "match.vni"),
            (lambda i: i.update(match={"overlay": "geneve", "vni": 2**24}), "match.vni"),
            (lambda i: i.update(match={"overlay": "gre", "vni": 2**32}), "match.vni"),
            (lambda i: i.update(match={"overlay": "mpls"}), "match.overlay"),
            (lambda i: i.update(match={"teid": 2**32}), "match.teid"),
            (lambda i: i.update(match={"teid": -1}), "match.teid"),
            (lambda i: i.update(match={"qfi": 64}), "match.qfi"),
            (lambda i: i.update(match={"src": "10.0.0.300"}), "match.src"),
            (lambda i: i.update(match={"dst": 167772160}), "match.dst"),
            (lambda i: i.update(match={"src": "10.0.0.0/8", "dst": "2001:db8::/32"}), "match.dst"),
            (lambda i: i.update(match={"protocol": "ospf"}), "match.protocol"),
            (lambda i: i.update(match={"protocol": 256}), "match.protocol"),
            (lambda i: i.update(match={"protocol": "icmp", "src": "2001:db8::/32"}), "match.protocol"),
            (lambda i: i.update(match={"protocol": "icmpv6", "dst": "10.0.0.0/8"}), "match.protocol"),
            (lambda i: i.update(match={"dst_port": 80}), "match.dst_port"),
            (lambda i: i.update(match={"protocol": "icmp", "src_port": 80}), "match.src_port"),
            (lambda i: i.update(match={"protocol": "tcp", "dst_port": 65536}), "match.dst_port"),
            (lambda i: i.update(match={"dscp": 64}), "match.dscp"),
            (lambda i: i.update(match={"interface": "a" * 16}), "match.interface"),
            (lambda i: i.update(match={"interface": "eth0/1"}), "match.interface"),
            (lambda i: i.update(match={"interface": "eth0\x00"}), "match.interface"),
            (lambda i: i.update(match={"color": "red"}), "match.color"),
            (lambda i: i.update(action={}), "action.type"),
            (lambda i: i.update(action={"type": "teleport"}), "action.type"),
            (lambda i: i.update(action={"type": "steer"}), "action.cpu"),
            (lambda i: i.update(action={"type": "steer", "cpu": 128}), "action.cpu"),
            (lambda i: i.update(action={"type": "steer", "cpu": True}), "action.cpu"),
            (lambda i: i.update(action={"type": "forward", "alternative": 64}), "action.alternative"),
            (lambda i: i.update(action={"type": "redirect"}), "action.interface"),
            (lambda i: i.update(action={"type": "drop", "cpu": 1}), "action.cpu"),
            (lambda i: i.update(action={"type": "drop"}, alternative=1), "alternative"),
            (lambda i: i.update(action={"type": "forward", "alternative": 1}, alternative=2), "alternative"),
            (lambda i: i.update(label="x" * 257), "label"),
        ],
    )
    def test_given_a_bad_field_when_parsed_then_the_error_names_it(self, change, field):
        message = rejection(changed(native_intent(), change))
        assert message.startswith(f"{field}: "), message

    def test_given_several_problems_when_parsed_then_all_are_on_one_line(self):
        message = rejection(native_intent(intent_id="bad id", priority=-5))
        assert "\n" not in message
        assert "id: " in message and "priority: " in message


class TestDocuments:
    def test_given_one_intent_then_a_document_of_one(self):
        document = parse_document(native_intent())
        assert [intent.id for intent in document.intents] == ["video-prio"]
        assert (document.default_verdict, document.alternatives, document.cpus) == ("pass", [], [])

    def test_given_a_list_then_a_document_of_all(self):
        document = parse_document([native_intent("a"), native_intent("b", match={"dscp": 46})])
        assert [intent.id for intent in document.intents] == ["a", "b"]

    def test_given_a_full_site_then_alternatives_and_cpus_are_kept(self):
        document = parse_document(site_document([native_intent()]))
        assert [group.id for group in document.alternatives] == [0, 1]
        assert document.alternatives[1].members[0].ip6 == ipaddress.IPv6Address("2001:db8::a")
        assert [(cpu.cpu, cpu.capacity_pps, cpu.overloaded) for cpu in document.cpus] == [
            (1, 1000000, False),
            (0, 0, True),
        ]
        assert document.default_alternative == 0

    def test_given_legacy_and_native_mixed_then_both_become_native(self):
        document = parse_document([native_intent("a"), paper_message()])
        assert [intent.id for intent in document.intents] == ["a", "legacy-e918d704"]

    def test_given_legacy_insert_update_delete_then_applied_in_order(self):
        insert = paper_message()
        update = changed(insert, lambda m: m["Action"].update(actionType="UPDATE", rx_queue="0"))
        other = changed(insert, lambda m: m["Action"].update(flow_hash="0000000A"))
        delete = changed(other, lambda m: m["Action"].update(actionType="DELETE"))
        document = parse_document({"intents": [insert, other, update, delete]})
        assert [(intent.id, intent.action.cpu) for intent in document.intents] == [("legacy-e918d704", 0)]

    def test_given_an_empty_object_then_an_empty_document(self):
        assert parse_document({}) == IntentDocument()

    def test_given_mac_in_capitals_then_stored_lower_case(self):
        document = parse_document({"alternatives": [{"id": 3, "members": [{"mac": "02:AB:CD:00:00:01"}]}]})
        assert document.alternatives[0].members[0].mac == "02:ab:cd:00:00:01"

    @pytest.mark.parametrize(
        ("document", "field"),
        [
            ([native_intent("a"), native_intent("a")], "intents[1].id"),
            ([paper_message(), paper_message()], "intents[1].Action.flow_hash"),
            (
                [changed(paper_message(), lambda m: m["Action"].update(actionType="UPDATE"))],
                "intents[0].Action.actionType",
            ),
            (
                [changed(paper_message(), lambda m: m["Action"].update(actionType="DELETE"))],
                "intents[0].Action.actionType",
            ),
            ([native_intent(), changed(paper_message(), lambda m: m.pop("Action"))], "intents[1].Action"),
            ([native_intent(match={"vlan": 0})], "intents[0].match.vlan"),
            (site_document([]) | {"default_verdict": "tx"}, "default_verdict"),
            (site_document([]) | {"default_alternative": 64}, "default_alternative"),
            (site_document([]) | {"surprise": True}, "surprise"),
            ({"alternatives": [{"id": 0, "members": []}]}, "alternatives[0].members"),
            (
                {"alternatives": [{"id": 0, "members": [{"mac": "02:00:00:00:00:01"}] * 9}]},
                "alternatives[0].members",
            ),
            (
                {"alternatives": [{"id": 0, "members": [{"mac": "02:00:00:00:01"}]}]},
                "alternatives[0].members[0].mac",
            ),
            (
                {"alternatives": [{"id": 0, "members": [{"mac": "02:00:00:00:00:01", "ip4": "::1"}]}]},
                "alternatives[0].members[0].ip4",
            ),
            (
                {"alternatives": [{"id": 0, "members": [{"mac": "02:00:00:00:00:01", "ip": "10.0.0.1"}]}]},
                "alternatives[0].members[0].ip",
            ),
            (
                {"alternatives": [{"id": 4, "members": [{"mac": "02:00:00:00:00:01"}]}] * 2},
                "alternatives[1].id",
            ),
            ({"cpus": [{"cpu": 1}, {"cpu": 1}]}, "cpus[1].cpu"),
            ({"cpus": [{"cpu": 128}]}, "cpus[0].cpu"),
            ({"cpus": [{"cpu": 1, "capacity_pps": -1}]}, "cpus[0].capacity_pps"),
        ],
    )
    def test_given_a_bad_document_then_the_error_names_the_field(self, document, field):
        with pytest.raises(IntentError) as caught:
            parse_document(document)
        assert caught.value.field == field, str(caught.value)

    def test_given_a_lone_legacy_message_then_errors_are_relative_to_it(self):
        with pytest.raises(IntentError) as caught:
            parse_document(changed(paper_message(), lambda m: m["Action"].update(rx_queue="200")))
        assert caught.value.field == "Action.rx_queue"


@settings(deadline=None)  # hypothesis's 200 ms an example is wall-clock time: a loaded machine's pause fails it
@given(
    address=st.ip_addresses(),
    length=st.integers(min_value=0, max_value=128),
)
def test_given_any_address_and_length_then_the_stored_prefix_is_the_normalised_network(address, length):
    length = min(length, address.max_prefixlen)
    intent = parse_intent(native_intent(match={"dst": f"{address}/{length}"}))
    assert intent.match.dst == ipaddress.ip_network(f"{address}/{length}", strict=False)
    assert intent.match.dst.network_address == intent.match.dst[0]



@pytest.mark.parametrize("module", ["fields", "native", "legacy"])
def test_every_public_name_of_the_model_modules_is_importable_from_models(module):
    """The intent models are split by what they describe; `from netapp.intents.models import X` still
    finds each of them (the network functions' own models are in their packages)."""
    models = importlib.import_module("netapp.intents.models")
    source = importlib.import_module(f"netapp.intents.{module}")
    defined = set()
    for node in ast.parse(Path(source.__file__).read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(target.id for target in node.targets if isinstance(target, ast.Name))
    public = {name for name in defined if not name.startswith("_")}
    assert public, f"no public name found in netapp.intents.{module}"
    missing = sorted(name for name in public if getattr(models, name, None) is not getattr(source, name))
    assert not missing, f"netapp.intents.models does not re-export {missing} of netapp.intents.{module}"
