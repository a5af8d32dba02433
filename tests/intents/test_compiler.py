"""The compiler: key fields and values per match, shapes and their order, collisions, limits, names."""

from __future__ import annotations

import ipaddress
import itertools
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netapp.forwarding.compiler import compile_alternatives
from netapp.intents import native
from netapp.intents.compiler import (
    KEY_FIELD_NAMES,
    MAX_SHAPES,
    RULE_ACTIONS,
    CompileError,
    FieldValues,
    RuleShape,
    compile_document,
    compile_intent,
    compile_intents,
)
from netapp.intents.models import parse_document, parse_intent
from tests.utils.intents import INTERFACES, native_intent, paper_message, site_document

net = ipaddress.ip_network


def intent(intent_id="i", match=None, action=None, **fields):
    return parse_intent(
        native_intent(intent_id, match=match if match is not None else {}, action=action, **fields)
    )


def compile_one(match, action=None, **fields):
    return compile_intent(intent("i", match, action, **fields), INTERFACES)


class TestKeyFields:
    @pytest.mark.parametrize(
        ("match", "values"),
        [
            ({}, {}),
            ({"interface": "eth1"}, {"interface": 3}),
            ({"vlan": 100}, {"vlan": 100}),
            ({"overlay": "gre"}, {"overlay": "gre"}),
            ({"overlay": "vxlan", "vni": 0x445}, {"overlay": "vxlan", "vni": 0x445, "has_vni": 1}),
            ({"overlay": "gre", "vni": 0}, {"overlay": "gre", "vni": 0, "has_vni": 1}),
            ({"teid": 7}, {"gtp": 1, "teid": 7}),
            ({"qfi": 9}, {"gtp": 1, "gtp_qfi": 1, "qfi": 9}),
            ({"teid": 7, "qfi": 9}, {"gtp": 1, "gtp_qfi": 1, "teid": 7, "qfi": 9}),
            ({"protocol": "tcp"}, {"protocol": 6}),
            ({"protocol": "icmpv6"}, {"protocol": 58}),
            ({"protocol": 47}, {"protocol": 47}),
            ({"dscp": 46}, {"dscp": 46}),
            ({"protocol": "udp", "dst_port": 5004}, {"protocol": 17, "fragment": 0, "dst_port": 5004}),
            ({"protocol": "sctp", "src_port": 9}, {"protocol": 132, "fragment": 0, "src_port": 9}),
            ({"src": "10.1.2.3/8"}, {"family": 4, "src": net("10.0.0.0/8")}),
            ({"dst": "2001:db8::1/64"}, {"family": 6, "dst": net("2001:db8::/64")}),
            ({"src": "0.0.0.0/0"}, {"family": 4}),
            ({"dst": "::/0", "protocol": "icmpv6"}, {"family": 6, "protocol": 58}),
            (
                {"src": "10.0.0.1", "dst": "10.0.0.0/24", "protocol": "tcp", "dst_port": 80, "dscp": 10},
                {
                    "family": 4,
                    "src": net("10.0.0.1/32"),
                    "dst": net("10.0.0.0/24"),
                    "protocol": 6,
                    "fragment": 0,
                    "dst_port": 80,
                    "dscp": 10,
                },
            ),
        ],
    )
    def test_given_a_match_then_the_rule_compares_these_fields_with_these_values(self, match, values):
        rule = compile_one(match)
        assert dict(rule.values) == values
        assert rule.shape.fields == frozenset(values)

    @pytest.mark.parametrize(
        ("match", "shape"),
        [
            ({}, RuleShape(frozenset())),
            ({"protocol": "tcp"}, RuleShape(frozenset({"protocol"}))),
            ({"src": "10.0.0.0/8"}, RuleShape(frozenset({"family", "src"}), 8, 0, 4)),
            ({"dst": "2001:db8::/48"}, RuleShape(frozenset({"family", "dst"}), 0, 48, 6)),
            ({"src": "::/0"}, RuleShape(frozenset({"family"}), 0, 0, 6)),
            (
                {"src": "1.2.3.4", "dst": "5.6.7.0/24"},
                RuleShape(frozenset({"family", "src", "dst"}), 32, 24, 4),
            ),
        ],
    )
    def test_given_a_match_then_its_shape_has_prefix_lengths_and_family(self, match, shape):
        assert compile_one(match).shape == shape

    def test_every_emitted_field_is_a_known_key_field(self):
        rule = compile_one(
            {
                "interface": "eth0",
                "vlan": 5,
                "overlay": "geneve",
                "vni": 1,
                "teid": 1,
                "qfi": 1,
                "src": "10.0.0.0/8",
                "dst": "10.0.0.0/8",
                "protocol": "tcp",
                "src_port": 1,
                "dst_port": 2,
                "dscp": 3,
                "tunnel_src": "192.0.2.1",
                "tunnel_dst": "192.0.2.2",
            }
        )
        assert set(rule.values) == set(KEY_FIELD_NAMES) - {"upf", "atsss"}, "every field but the functions' rules' own"

    def test_given_protocol_or_dscp_only_then_family_is_not_compared(self):
        assert "family" not in compile_one({"protocol": "udp", "dst_port": 53, "dscp": 46}).values

    def test_field_values_are_hashable_and_compare_like_dicts(self):
        a, b = FieldValues({"x": 1, "y": 2}), FieldValues({"y": 2, "x": 1})
        assert a == b and hash(a) == hash(b) and a == {"x": 1, "y": 2}
        assert len({a, b}) == 1


class TestActions:
    @pytest.mark.parametrize(
        ("fields", "expected"),
        [
            ({"action": {"type": "pass"}}, ("pass", None, None, False)),
            ({"action": {"type": "drop"}}, ("drop", None, None, False)),
            ({"action": {"type": "steer", "cpu": 3}}, ("steer", 3, None, False)),
            ({"action": {"type": "steer", "cpu": 3}, "alternative": 4}, ("steer", 3, 4, False)),
            ({"action": {"type": "forward", "alternative": 9}}, ("forward", 9, None, False)),
            (
                {"action": {"type": "forward", "alternative": 9}, "traffic_class": "best-effort"},
                ("forward", 9, 9, True),
            ),
            ({"action": {"type": "redirect", "interface": "ens5"}}, ("redirect", 7, None, False)),
            ({"action": {"type": "pass"}, "traffic_class": "best-effort"}, ("pass", None, None, True)),
            (
                {"action": {"type": "pass"}, "traffic_class": "best-effort", "alternative": 2},
                ("pass", None, 2, True),
            ),
        ],
    )
    def test_given_an_action_then_the_rule_carries_its_argument_and_overflow_group(self, fields, expected):
        rule = compile_one({"dscp": 1}, **fields)
        assert (rule.action, rule.arg, rule.overflow_group, rule.best_effort) == expected

    def test_every_action_an_intent_may_name_is_registered_once(self):
        models = get_args(get_args(native.Action)[0])  # Annotated[Union[PassAction, ...], Field]
        named = [get_args(model.model_fields["type"].annotation)[0] for model in models]
        assert sorted(named) == sorted(RULE_ACTIONS) and len(set(named)) == len(named)

    def test_priority_is_carried(self):
        assert compile_one({}, priority=7).priority == 7


class TestInterfaces:
    def test_given_an_unknown_ingress_interface_then_match_interface_is_named_with_the_known_ones(self):
        with pytest.raises(CompileError) as caught:
            compile_intents([intent("x", {"interface": "eth9"})], INTERFACES)
        error = caught.value
        assert (error.field, error.intent_id) == ("match.interface", "x")
        assert "eth9" in str(error) and "(known: ens5, eth0, eth1, lo)" in str(error)

    def test_given_an_unknown_redirect_interface_then_action_interface_is_named(self):
        with pytest.raises(CompileError) as caught:
            compile_intents([intent("x", {}, {"type": "redirect", "interface": "wlan0"})], INTERFACES)
        assert caught.value.field == "action.interface"
        assert str(caught.value).startswith("intent 'x': action.interface: unknown interface 'wlan0'")

    def test_given_no_interfaces_at_all_then_known_says_none(self):
        with pytest.raises(CompileError, match="known: none"):
            compile_intents([intent("x", {"interface": "eth0"})], {})

    def test_given_an_alternative_member_interface_then_resolved(self):
        groups = parse_document(site_document([])).alternatives
        compiled = compile_alternatives(groups, INTERFACES)
        assert [member.ifindex for member in compiled[1].members] == [3, 0]
        assert compiled[1].egress_ifindexes == frozenset({3})

    def test_given_an_unknown_member_interface_then_its_path_is_named(self):
        document = site_document([])
        document["alternatives"][1]["members"][1]["interface"] = "eth7"
        with pytest.raises(CompileError) as caught:
            compile_alternatives(parse_document(document).alternatives, INTERFACES)
        assert caught.value.field == "alternatives[1].members[1].interface"


class TestShapes:
    def test_given_rules_of_one_shape_then_one_shape(self):
        ruleset = compile_intents(
            [intent(f"p{port}", {"protocol": "udp", "dst_port": port}) for port in range(100)], INTERFACES
        )
        assert len(ruleset.shapes) == 1 and len(ruleset.rules) == 100

    def test_given_the_same_lengths_in_two_families_then_two_shapes(self):
        ruleset = compile_intents(
            [intent("a", {"src": "10.0.0.0/16"}), intent("b", {"src": "2001:db8::/16"})], INTERFACES
        )
        assert {shape.family for shape in ruleset.shapes} == {4, 6}

    def test_shapes_are_ordered_by_max_priority_highest_first(self):
        ruleset = compile_intents(
            [
                intent("low", {"dscp": 1}, priority=10),
                intent("high", {"protocol": "tcp"}, priority=300),
                intent("mid", {"vlan": 3}, priority=200),
                intent("low2", {"dscp": 2}, priority=400),
            ],
            INTERFACES,
        )
        assert ruleset.max_priorities == (400, 300, 200)
        assert [sorted(shape.fields) for shape in ruleset.shapes] == [["dscp"], ["protocol"], ["vlan"]]

    def test_given_equal_max_priorities_then_more_specific_shapes_first(self):
        ruleset = compile_intents(
            [
                intent("any", {}),
                intent("one", {"protocol": "tcp"}),
                intent("short", {"dst": "10.0.0.0/8"}),
                intent("long", {"dst": "10.1.0.0/16"}),
            ],
            INTERFACES,
        )
        assert [shape.describe() for shape in ruleset.shapes] == [
            "{family, dst/16} (IPv4)",
            "{family, dst/8} (IPv4)",
            "{protocol}",
            "{catch-all}",
        ]

    def test_rules_follow_their_shape_order_then_priority(self):
        ruleset = compile_intents(
            [
                intent("b", {"dscp": 1}, priority=5),
                intent("a", {"vlan": 1}, priority=9),
                intent("c", {"dscp": 2}, priority=7),
            ],
            INTERFACES,
        )
        assert [rule.intent_id for rule in ruleset.rules] == ["a", "c", "b"]
        assert [ruleset.shape_index(rule.shape) for rule in ruleset.rules] == [0, 1, 1]

    def test_given_the_same_intents_in_any_order_then_the_same_ruleset(self):
        intents = [
            intent("a", {"dscp": 1}),
            intent("b", {"protocol": "tcp"}),
            intent("c", {"vlan": 2}),
            intent("d", {"dscp": 1}, {"type": "drop"}),
        ]
        results = {compile_intents(order, INTERFACES) for order in itertools.permutations(intents)}
        assert len(results) == 1

    def test_given_max_shapes_then_compiled(self):
        intents = [
            intent(f"len{length}", {"dst": f"10.0.0.0/{length}"}) for length in range(1, MAX_SHAPES + 1)
        ]
        assert len(compile_intents(intents, INTERFACES).shapes) == MAX_SHAPES

    def test_given_one_shape_too_many_then_match_is_blamed_with_the_shapes_listed(self):
        intents = [
            intent(f"len{length}", {"dst": f"10.0.0.0/{length}"}) for length in range(1, MAX_SHAPES + 2)
        ]
        with pytest.raises(CompileError) as caught:
            compile_intents(intents, INTERFACES)
        assert caught.value.field == "match"
        assert f"{MAX_SHAPES + 1} distinct rule shapes" in str(caught.value)
        assert "dst/17" in str(caught.value)

    def test_given_a_smaller_limit_then_it_applies(self):
        with pytest.raises(CompileError):
            compile_intents([intent("a", {"dscp": 1}), intent("b", {"vlan": 1})], INTERFACES, max_shapes=1)

    def test_given_no_intents_then_an_empty_ruleset(self):
        ruleset = compile_intents([], INTERFACES)
        assert (ruleset.rules, ruleset.shapes, ruleset.conflicts) == ((), (), ())


class TestCollisions:
    def test_given_same_match_and_priority_but_other_actions_then_a_conflict_and_one_rule(self):
        ruleset = compile_intents(
            [intent("b", {"dscp": 1}, {"type": "drop"}), intent("a", {"dscp": 1}, {"type": "pass"})],
            INTERFACES,
        )
        assert [rule.intent_id for rule in ruleset.rules] == ["a"]
        (conflict,) = ruleset.conflicts
        assert (conflict.intent_a, conflict.intent_b, conflict.kind) == ("a", "b", "conflict")
        assert "different actions" in conflict.reason and "pass vs drop" in conflict.reason

    def test_given_redirects_to_other_interfaces_then_the_conflict_names_them(self):
        ruleset = compile_intents(
            [intent("a", {"dscp": 1}, {"type": "redirect", "interface": "eth1"}),
             intent("b", {"dscp": 1}, {"type": "redirect", "interface": "ens5"})],
            INTERFACES,
        )
        assert "(redirect to eth1 vs redirect to ens5)" in ruleset.conflicts[0].reason

    def test_given_identical_intents_then_a_duplicate(self):
        ruleset = compile_intents([intent("a", {"dscp": 1}), intent("b", {"dscp": 1})], INTERFACES)
        assert [(c.intent_a, c.intent_b, c.kind) for c in ruleset.conflicts] == [("a", "b", "duplicate")]
        assert len(ruleset.rules) == 1

    def test_given_same_match_and_a_lower_priority_then_it_is_shadowed(self):
        ruleset = compile_intents(
            [intent("a", {"dscp": 1}, priority=1), intent("z", {"dscp": 1}, {"type": "drop"}, priority=2)],
            INTERFACES,
        )
        assert [rule.intent_id for rule in ruleset.rules] == ["z"]
        assert [(c.intent_a, c.intent_b, c.kind) for c in ruleset.conflicts] == [("z", "a", "shadowed")]

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            ({"src": "10.1.2.3/8"}, {"src": "10.200.0.0/8"}),
            ({"protocol": "udp"}, {"protocol": 17}),
            ({"teid": 5, "qfi": 1}, {"qfi": 1, "teid": 5}),
        ],
    )
    def test_given_matches_equal_after_masking_then_they_collide(self, first, second):
        ruleset = compile_intents([intent("a", first), intent("b", second, {"type": "drop"})], INTERFACES)
        assert len(ruleset.rules) == 1 and len(ruleset.conflicts) == 1

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            ({"dscp": 1}, {"dscp": 2}),
            ({"src": "10.0.0.0/8"}, {"src": "10.0.0.0/16"}),
            ({"protocol": "udp"}, {"protocol": "udp", "dst_port": 53}),
            ({"teid": 5}, {"teid": 5, "qfi": 1}),
        ],
    )
    def test_given_different_matches_then_no_collision(self, first, second):
        ruleset = compile_intents([intent("a", first), intent("b", second, {"type": "drop"})], INTERFACES)
        assert len(ruleset.rules) == 2 and ruleset.conflicts == ()

    def test_given_a_three_way_collision_then_two_conflicts_against_the_winner(self):
        ruleset = compile_intents(
            [
                intent("c", {"vlan": 9}),
                intent("a", {"vlan": 9}, {"type": "drop"}),
                intent("b", {"vlan": 9}, priority=5),
            ],
            INTERFACES,
        )
        assert [(c.intent_a, c.intent_b, c.kind) for c in ruleset.conflicts] == [
            ("a", "b", "shadowed"),
            ("a", "c", "conflict"),
        ]

    def test_given_duplicate_ids_then_id_is_blamed(self):
        with pytest.raises(CompileError) as caught:
            compile_intents([intent("a", {"dscp": 1}), intent("a", {"dscp": 2})], INTERFACES)
        assert (caught.value.field, caught.value.intent_id) == ("id", "a")


class TestDocuments:
    def test_given_the_paper_message_then_one_steer_rule_on_eth0(self):
        compiled = compile_document(parse_document(paper_message()), INTERFACES)
        (rule,) = compiled.ruleset.rules
        assert dict(rule.values) == {
            "interface": 2,
            "overlay": "vxlan",
            "vni": 0x445,
            "has_vni": 1,
            "gtp": 1,
            "teid": 0x8894D0D4,
            "family": 4,
            "src": net("192.168.0.140/32"),
            "protocol": 17,
            "fragment": 0,
            "dst_port": 5004,
        }
        assert (rule.intent_id, rule.action, rule.arg, rule.priority) == ("legacy-e918d704", "steer", 1, 100)

    def test_given_a_site_then_alternatives_cpus_defaults_and_redirect_ports(self):
        document = site_document([native_intent("r", action={"type": "redirect", "interface": "ens5"})])
        compiled = compile_document(parse_document(document), INTERFACES)
        assert [group.group_id for group in compiled.alternatives] == [0, 1]
        assert [spec.cpu for spec in compiled.cpus] == [1, 0]
        assert (compiled.default_verdict, compiled.default_alternative) == ("pass", 0)
        assert compiled.redirect_ifindexes == frozenset({7})


_matches = st.fixed_dictionaries(
    {},
    optional={
        "vlan": st.integers(1, 4094),
        "teid": st.integers(0, 2**32 - 1),
        "qfi": st.integers(0, 63),
        "dscp": st.integers(0, 63),
        "dst": st.builds(lambda a, n: f"{a}/{n}", st.ip_addresses(v=4), st.integers(0, 32)),
        "protocol": st.sampled_from(["tcp", "udp", "icmp"]),
    },
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_matches, max_size=12))
def test_given_any_intents_then_the_ruleset_is_consistent(matches):
    intents = [intent(f"i{index}", match, priority=index % 3) for index, match in enumerate(matches)]
    ruleset = compile_intents(intents, INTERFACES)
    installed = {rule.intent_id for rule in ruleset.rules}
    left_out = {conflict.intent_b for conflict in ruleset.conflicts}
    assert installed | left_out == {i.id for i in intents} and not installed & left_out
    assert len({rule.match_key for rule in ruleset.rules}) == len(ruleset.rules)
    assert list(ruleset.max_priorities) == sorted(ruleset.max_priorities, reverse=True)
    for shape, top in zip(ruleset.shapes, ruleset.max_priorities, strict=True):
        assert top == max(rule.priority for rule in ruleset.rules if rule.shape == shape)
    for rule in ruleset.rules:
        assert ("fragment" in rule.values) == ("src_port" in rule.values or "dst_port" in rule.values)
        assert ("gtp" in rule.values) == ("teid" in rule.values or "qfi" in rule.values)
        assert ("family" in rule.values) == (rule.shape.family != 0)
