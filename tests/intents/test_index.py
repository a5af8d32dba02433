"""The incremental rule index against the compiler: after any sequence of adds and removes it holds
what compile_intents compiles from the intents that remain, and its deltas, applied to a model of
the map, leave exactly those rules there."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netapp.intents.compiler import CompiledRule, CompileError, compile_intents
from netapp.intents.index import IndexChange, RuleDelta, RuleIndex
from netapp.intents.models import Intent
from tests.utils.intents import INTERFACES

# Few matches, so that intents collide often; several shapes, so that the shape limit is reached.
MATCHES: list[dict[str, Any]] = [
    {"dscp": 1},
    {"dscp": 2},
    {"protocol": "udp", "dst_port": 1000},
    {"protocol": "udp", "dst_port": 2000},
    {"dst": "10.0.0.0/8"},
    {"dst": "10.1.0.0/16"},
    {"teid": 5},
    {"vlan": 7},
    {},
    {"src": "2001:db8::/32"},
]
ACTIONS: list[dict[str, Any]] = [{"type": "pass"}, {"type": "drop"}, {"type": "steer", "cpu": 1}]
IDS = [f"i{n}" for n in range(8)]
MAX_SHAPES = 4


def make_intent(intent_id: str, match: int, priority: int, action: int) -> Intent:
    return Intent.model_validate(
        {"id": intent_id, "match": MATCHES[match], "action": ACTIONS[action], "priority": priority}
    )


intent_specs = st.tuples(
    st.sampled_from(IDS),
    st.integers(0, len(MATCHES) - 1),
    st.integers(0, 3),
    st.integers(0, len(ACTIONS) - 1),
)

MapModel = dict[Any, CompiledRule]


def apply_to_model(model: MapModel, delta: RuleDelta) -> None:
    """What Dataplane.apply_changes does to dpp_rules: upserts by key, removed keys nobody takes."""
    taken = {rule.match_key for rule in delta.upserts}
    for rule in delta.removes:
        if rule.match_key not in taken:
            assert model.pop(rule.match_key) == rule
    for rule in delta.upserts:
        model[rule.match_key] = rule


def compile_or_none(intents: dict[str, Intent]) -> Optional[Any]:
    try:
        return compile_intents(intents.values(), INTERFACES, MAX_SHAPES)
    except CompileError:
        return None


def add_new(change: IndexChange, specs: list[Any], taken: dict[str, Intent]) -> dict[str, Intent]:
    """Add the intents of `specs` whose ids are neither taken nor repeated, except those the index
    refuses (one shape too many); returns those added."""
    added: dict[str, Intent] = {}
    for intent_id, match, priority, action in specs:
        if intent_id in taken or intent_id in added:
            continue
        intent = make_intent(intent_id, match, priority, action)
        try:
            change.add(change.index.compile(intent))
        except CompileError:
            continue
        added[intent_id] = intent
    return added


def assert_same(index: RuleIndex, intents: dict[str, Intent], model: MapModel) -> None:
    expected = compile_intents(intents.values(), INTERFACES, MAX_SHAPES)
    actual = index.ruleset()
    assert actual.rules == expected.rules
    assert actual.shapes == expected.shapes
    assert actual.max_priorities == expected.max_priorities
    assert actual.conflicts == expected.conflicts
    assert model == {rule.match_key: rule for rule in expected.rules}


@settings(max_examples=300, deadline=None)
@given(st.lists(intent_specs, max_size=40))
def test_given_any_adds_and_removes_then_the_index_is_what_compile_intents_makes(specs):
    index = RuleIndex(INTERFACES, MAX_SHAPES)
    intents: dict[str, Intent] = {}
    model: MapModel = {}
    for intent_id, match, priority, action in specs:
        change = index.track()
        if intent_id in intents:
            change.remove(intent_id)
            del intents[intent_id]
        else:
            intent = make_intent(intent_id, match, priority, action)
            fits = compile_or_none({**intents, intent_id: intent}) is not None
            try:
                change.add(index.compile(intent))
            except CompileError:
                assert not fits, "the index refused what compile_intents accepts"
                assert change.delta().empty
                continue
            assert fits, "the index accepted what compile_intents refuses"
            intents[intent_id] = intent
        apply_to_model(model, change.delta())
        assert_same(index, intents, model)


@settings(max_examples=150, deadline=None)
@given(st.lists(intent_specs, max_size=12), st.lists(intent_specs, min_size=1, max_size=6))
def test_given_a_change_of_several_steps_then_its_inverse_and_roll_back_restore_the_start(first, then):
    index = RuleIndex(INTERFACES, MAX_SHAPES)
    intents: dict[str, Intent] = {}
    model: MapModel = {}
    setup = index.track()
    intents.update(add_new(setup, first, intents))
    apply_to_model(model, setup.delta())
    before_model = dict(model)

    change = index.track()
    current = dict(intents)
    for intent_id, match, priority, action in then:
        if intent_id in current:  # a replace: remove, then add the new version
            change.remove(intent_id)
            del current[intent_id]
        intent = make_intent(intent_id, match, priority, action)
        try:
            change.add(index.compile(intent))
        except CompileError:
            continue
        current[intent_id] = intent
    apply_to_model(model, change.delta())
    assert_same(index, current, model)

    apply_to_model(model, change.inverse())
    change.roll_back()
    assert model == before_model
    assert_same(index, intents, model)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(intent_specs, min_size=1, max_size=3), st.booleans()), max_size=8))
def test_given_parts_of_a_change_rolled_back_to_their_mark_then_its_delta_is_the_kept_parts(parts):
    """The service's group transaction: each caller's part either stays or is undone alone."""
    index = RuleIndex(INTERFACES, MAX_SHAPES)
    kept: dict[str, Intent] = {}
    model: MapModel = {}
    change = index.track()
    for specs, keep in parts:
        mark = change.mark()
        mine = add_new(change, specs, kept)
        assert [rule.intent_id for rule in change.added(mark)] == list(mine)
        if keep:
            kept.update(mine)
        else:
            change.roll_back(mark)
    apply_to_model(model, change.delta())
    assert_same(index, kept, model)


def test_given_one_shape_too_many_then_the_add_is_refused_naming_the_intent_and_nothing_changes():
    index = RuleIndex(INTERFACES, max_shapes=1)
    index.add(index.compile(make_intent("a", 0, 1, 0)))
    before = index.ruleset()

    with pytest.raises(CompileError) as refused:
        index.add(index.compile(make_intent("b", 7, 1, 0)))

    assert refused.value.field == "match" and refused.value.intent_id == "b"
    assert index.ruleset() == before and "b" not in index


def test_given_a_duplicate_id_then_id_is_blamed():
    index = RuleIndex(INTERFACES)
    index.add(index.compile(make_intent("a", 0, 1, 0)))
    with pytest.raises(CompileError) as refused:
        index.add(index.compile(make_intent("a", 1, 1, 0)))
    assert refused.value.field == "id"


def test_a_rule_id_namespaces_the_rule_but_errors_name_the_intent():
    index = RuleIndex(INTERFACES)
    rule = index.compile(make_intent("a", 0, 1, 0), rule_id="tenant-1/a")
    assert rule.intent_id == "tenant-1/a"
    unknown = Intent.model_validate({"id": "x", "match": {"interface": "eth9"}, "action": {"type": "pass"}})
    with pytest.raises(CompileError) as refused:
        index.compile(unknown, rule_id="tenant-1/x")
    assert refused.value.intent_id == "x" and refused.value.field == "match.interface"


def test_given_a_collision_then_both_sides_report_it():
    index = RuleIndex(INTERFACES)
    index.add(index.compile(make_intent("a", 0, 2, 0)))
    index.add(index.compile(make_intent("b", 0, 1, 1)))

    assert index.is_installed("a") and not index.is_installed("b")
    assert [(c.intent_a, c.intent_b, c.kind) for c in index.collisions("b")] == [("a", "b", "shadowed")]
    assert index.collisions("a") == index.collisions("b")


def udp_rule(index: RuleIndex, intent_id: str, port: int, priority: int) -> CompiledRule:
    intent = {"id": intent_id, "priority": priority, "match": {"protocol": "udp", "dst_port": port}}
    return index.compile(Intent.model_validate({**intent, "action": {"type": "pass"}}))


def test_a_shapes_max_priority_follows_its_rules_as_they_come_and_go():
    """The max of the last priorities to leave is found again, also when one of them comes back."""
    index = RuleIndex(INTERFACES)
    for intent_id, port, priority in (("a", 1, 5), ("b", 2, 9), ("c", 3, 9), ("d", 4, 1)):
        index.add(udp_rule(index, intent_id, port, priority))
    maxima = []

    for step in ("b", "c", "a", udp_rule(index, "c", 3, 9)):
        if isinstance(step, str):
            index.remove(step)
        else:
            index.add(step)
        maxima.append(index.shape_order()[1])

    assert maxima == [(9,), (5,), (1,), (9,)]
