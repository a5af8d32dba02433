"""The Dataplane facade over FakeDpp (no kernel): the order of adapter writes, stat slots, rollback,
taking over a reused instance, idempotence, conflict reporting, and incremental changes."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netapp.dataplane.binding import DataplaneError, rule_key, shape_to_c, struct_bytes
from netapp.dataplane.facade import ApplyReport, Dataplane
from netapp.intents.compiler import CompiledRuleset, compile_document
from netapp.intents.index import RuleDelta, RuleIndex
from netapp.intents.models import Intent, parse_document
from tests.utils.fakes import RecordingDpp, key_shape
from tests.utils.intents import INTERFACES, native_intent, site_document
from tests.utils.service import few_policers_fake

SLOTS = 64  # small maps keep state snapshots cheap


def udp(intent_id: str, port: int, **fields: Any) -> dict[str, Any]:
    """Steer UDP to `port` to CPU 1 (shape {protocol, dst_port}), with the given parts replaced."""
    return native_intent(intent_id, match={"protocol": "udp", "dst_port": port}, **fields)


A = udp("a", 1000)
A_DROP = udp("a", 1000, action={"type": "drop"})
B = udp("b", 2000)
B_DROP = udp("b", 2000, action={"type": "drop"})
B_PORT = udp("b", 2001)
B_PREFIX = native_intent("b", match={"protocol": "udp", "dst_port": 2000, "src": "10.0.0.0/8"})
C_TCP = native_intent("c", match={"protocol": "tcp"}, action={"type": "drop"})
D = udp("d", 4000)
E = udp("e", 5000)


def ruleset(*intents: dict[str, Any]) -> CompiledRuleset:
    return compile_document(parse_document({"intents": list(intents)}), INTERFACES).ruleset


def key_of(rules: CompiledRuleset, intent_id: str) -> bytes:
    rule = rules.rule_for(intent_id)
    assert rule is not None, intent_id
    return struct_bytes(rule_key(rule))


def keys(rules: CompiledRuleset) -> set[bytes]:
    return {struct_bytes(rule_key(rule)) for rule in rules.rules}


def shapes(rules: CompiledRuleset) -> list[bytes]:
    return [struct_bytes(shape_to_c(s, top)) for s, top in zip(rules.shapes, rules.max_priorities)]


def shape_ids(rules: CompiledRuleset) -> set[int]:
    return {key_shape(key) for key in keys(rules)}


@pytest.fixture
def fake() -> RecordingDpp:
    """Few policer slots: every full apply reconciles the policers, reading each slot of the fake's
    map in Python (seconds a test with the built-in 65,536)."""
    return few_policers_fake(SLOTS)


@pytest.fixture
def dp(fake: RecordingDpp) -> Dataplane:
    return Dataplane(fake, max_rules=SLOTS)


def forget_history(fake: RecordingDpp) -> None:
    """Start the call log and the write records afresh (after a test's set-up)."""
    fake.calls.clear()
    fake.publishes.clear()
    fake.deletes.clear()


def assert_holds_exactly(fake: RecordingDpp, rules: CompiledRuleset) -> None:
    assert set(fake.rules) == keys(rules)
    assert [struct_bytes(shape) for shape in fake.active_shapes()] == shapes(rules)


# --- apply order ------------------------------------------------------------------------------

CLEAR, UPSERT, PUBLISH, DELETE = "stats_rules_clear", "rules_upsert", "shapes_publish", "rules_delete"
ORDER_CASES = [
    # (description, before, after, the writes of the second apply)
    ("first rules", [], [A, B], [CLEAR, UPSERT, PUBLISH]),
    ("an intent in a new shape", [A], [A, C_TCP], [CLEAR, UPSERT, PUBLISH]),
    ("an intent leaves a shape that stays", [A, B], [A], [DELETE, PUBLISH]),
    ("the last intent of a shape leaves", [A, C_TCP], [A], [PUBLISH, DELETE, PUBLISH]),
    ("an action changes, the key stays", [A, B], [A, B_DROP], [UPSERT, PUBLISH]),
    ("a port changes", [A, B], [A, B_PORT], [UPSERT, PUBLISH, DELETE, PUBLISH]),
    ("an intent moves to a new shape", [A, B], [A, B_PREFIX], [UPSERT, PUBLISH, DELETE, PUBLISH]),
    ("a new intent replaces a removed one", [A, B], [A, D], [CLEAR, UPSERT, PUBLISH, DELETE, PUBLISH]),
    ("nothing changes", [A, B], [A, B], []),
]


@pytest.mark.parametrize(
    "before, after, expected_writes",
    [case[1:] for case in ORDER_CASES],
    ids=[case[0] for case in ORDER_CASES],
)
def test_apply_writes_in_a_safe_order(fake, dp, before, after, expected_writes):
    if before:
        dp.apply(ruleset(*before))
    forget_history(fake)
    target = ruleset(*after)

    dp.apply(target)

    assert fake.write_names() == expected_writes
    # Rules are upserted before the shape publish that references them: when a set is published,
    # every rule of the target in each of its shapes is already in the map.
    for published in fake.publishes:
        for key in keys(target):
            if key_shape(key) in published.shape_ids:
                assert key in published.rule_keys
    # Rules are deleted only once the active shape set no longer has their shape (unless the
    # shape stays for other rules, where deleting one key is atomic).
    for deleted in fake.deletes:
        for key in deleted.keys:
            if key_shape(key) not in shape_ids(target):
                assert key_shape(key) not in deleted.active_shape_ids
    # Deletes are followed by a publish, so flows cached from deleted rules are classified again.
    if "rules_delete" in expected_writes:
        assert fake.writes()[-1] == ("shapes_publish", shapes(target))
    assert_holds_exactly(fake, target)


def test_first_apply_clears_the_new_slots_then_upserts_then_publishes_the_shapes(fake, dp):
    rules = ruleset(A, B)

    report = dp.apply(rules)

    assert fake.writes() == [
        ("stats_rules_clear", 0, 2),
        ("rules_upsert", [key_of(rules, "a"), key_of(rules, "b")]),
        ("shapes_publish", shapes(rules)),
    ]
    assert report == ApplyReport(upserted=2, deleted=0, shapes=1, published=True)


def test_given_a_site_document_when_applied_then_ports_groups_cpus_and_defaults_precede_the_rules(fake, dp):
    steer = native_intent("video", alternative=1)
    forward = native_intent("bulk", match={"protocol": "tcp"}, action={"type": "forward", "alternative": 0})
    redirect = native_intent(
        "out", match={"protocol": "icmp"}, action={"type": "redirect", "interface": "ens5"}
    )
    document = parse_document(site_document([steer, forward, redirect]))

    dp.apply_document(document, INTERFACES)

    names = fake.write_names()
    first_rule_write = min(names.index(name) for name in ("stats_rules_clear", "rules_upsert"))
    site_writes = {"table_update", "cpu_enable", "cpu_set_overloaded", "config_set"}
    assert site_writes <= set(names[:first_rule_write])
    assert not site_writes & set(names[first_rule_write:])
    assert set(fake.entries("dpp_ports")) == {INTERFACES["eth1"], INTERFACES["ens5"]}
    assert set(fake.entries("dpp_alt_groups")) == {0, 1}


# --- stat slots -------------------------------------------------------------------------------


def test_an_intent_keeps_its_slot_across_applies_while_others_come_and_go(dp):
    dp.apply(ruleset(A, B, C_TCP))
    assert dp.installed_intents == {"a": 0, "b": 1, "c": 2}

    dp.apply(ruleset(B, C_TCP))
    assert dp.installed_intents == {"b": 1, "c": 2}

    dp.apply(ruleset(D, B_PORT, C_TCP))  # b's match changes: a new key, the same slot
    assert dp.installed_intents == {"b": 1, "c": 2, "d": 0}
    assert dp.intent_of_slot(1) == "b"
    assert dp.intent_of_slot(0) == "d"


def test_given_a_freed_slot_with_counts_when_reused_then_its_counters_are_zeroed_first(fake, dp):
    dp.apply(ruleset(A, B, C_TCP))
    fake.count(0, 3, 100)
    fake.count(1, 5, 100)
    dp.apply(ruleset(A, C_TCP))
    forget_history(fake)

    new = ruleset(A, C_TCP, D)
    dp.apply(new)

    assert dp.installed_intents["d"] == 1
    assert fake.writes()[:2] == [("stats_rules_clear", 1, 1), ("rules_upsert", [key_of(new, "d")])]
    assert dp.rule_stats() == {"a": (3, 300), "c": (0, 0), "d": (0, 0)}


def test_a_slot_given_back_in_an_apply_is_not_handed_out_in_the_same_apply(fake, dp):
    """The removed rule still counts into its slot until it is deleted, after the publish."""
    dp.apply(ruleset(A, B))
    fake.count(1, 5, 100)

    dp.apply(ruleset(A, D))
    assert dp.installed_intents == {"a": 0, "d": 2}

    dp.apply(ruleset(A, D, E))
    assert dp.installed_intents == {"a": 0, "d": 2, "e": 1}
    assert dp.rule_stats()["e"] == (0, 0)


def test_given_more_intents_than_slots_when_applied_then_enospc_and_nothing_is_written():
    fake = few_policers_fake(SLOTS)
    dp = Dataplane(fake, max_rules=2)

    with pytest.raises(DataplaneError) as failure:
        dp.apply(ruleset(A, B, D))

    assert failure.value.errno == errno.ENOSPC
    assert fake.writes() == []
    assert dp.installed_intents == {}
    dp.apply(ruleset(A, B))
    assert dp.installed_intents == {"a": 0, "b": 1}


def test_given_cpus_steered_to_when_read_then_the_set_and_every_cpu_with_traffic_are_listed(fake, dp):
    dp.enable_cpu(0)
    dp.enable_cpu(1)
    fake.steer(1, 4, 100)
    fake.steer(3, 2, 50)  # steered to before it left the set

    assert dp.cpu_stats() == {0: (0, 0), 1: (4, 400), 3: (2, 100)}


# --- rollback ---------------------------------------------------------------------------------

OLD = (A, B)
# a changes its action (same key), c brings a new shape, d a new key in a's shape: three upserts.
NEW = (A_DROP, B, C_TCP, D)


def reference_apply() -> tuple[ApplyReport, dict[str, int]]:
    """What applying NEW over OLD does on a data plane that never fails: the report and the slots."""
    dp = Dataplane(few_policers_fake(SLOTS), max_rules=SLOTS)
    dp.apply(ruleset(*OLD))
    report = dp.apply(ruleset(*NEW))
    return report, dp.installed_intents


def fail_upsert_after(k: int):
    def arm(fake: RecordingDpp) -> None:
        fake.fail_upsert_after = k

    return arm


def fail_publish(fake: RecordingDpp) -> None:
    fake.fail_publish_after = 0


FAILURES = {
    "upsert fails after 0 rules": fail_upsert_after(0),
    "upsert fails after 1 rule": fail_upsert_after(1),
    "upsert fails after 2 rules": fail_upsert_after(2),
    "upsert fails after 3 rules": fail_upsert_after(3),
    "publish fails": fail_publish,
}


@pytest.mark.parametrize("arm", FAILURES.values(), ids=FAILURES.keys())
def test_given_an_adapter_failure_midway_when_applying_then_the_old_state_is_restored(fake, dp, arm):
    old = ruleset(*OLD)
    dp.apply(old)
    fake.count(0, 3, 100)
    before = fake.state()
    slots_before = dp.installed_intents
    stats_before = dp.rule_stats()
    reference_report, reference_slots = reference_apply()
    assert reference_report.upserted == 3  # the premise of the table
    arm(fake)

    with pytest.raises(DataplaneError):
        dp.apply(ruleset(*NEW))

    after = fake.state()
    assert after.rules == before.rules
    assert after.shapes == before.shapes
    assert dp.installed_intents == slots_before
    assert dp.rule_stats() == stats_before
    # The shadow still matches the maps: re-applying the old ruleset writes nothing ...
    forget_history(fake)
    assert dp.apply(ruleset(*OLD)).published is False
    assert fake.writes() == []
    # ... and the slots taken by the failed apply were given back.
    dp.apply(ruleset(*NEW))
    assert dp.installed_intents == reference_slots
    assert_holds_exactly(fake, ruleset(*NEW))


def test_given_the_publish_after_the_deletes_fails_when_the_apply_is_retried_then_it_converges(fake, dp):
    """By then the new rules are live and the removed ones gone; a retry must not trip over that."""
    dp.apply(ruleset(A, B))
    fake.fail_publish_after = 1  # the publish before the deletes goes through, the one after fails
    new = ruleset(A, D)
    with pytest.raises(DataplaneError):
        dp.apply(new)
    assert set(fake.rules) == keys(new)

    try:
        dp.apply(new)
    except DataplaneError as exc:
        pytest.fail(f"retrying the apply failed: {exc}")

    assert_holds_exactly(fake, new)
    assert dp.installed_intents == {"a": 0, "d": 2}  # as without the failure; d's live rule counts in 2


# --- taking over a reused instance --------------------------------------------------------------


def restarted(fake: RecordingDpp) -> Dataplane:
    """A new control plane on the same (pinned) maps, as Dataplane.open does on a reused instance."""
    fake.calls.clear()
    dp = Dataplane(fake, max_rules=SLOTS)
    dp.adopt_installed_rules()
    return dp


def test_given_a_restart_with_the_same_intents_then_slots_and_counters_stay_and_nothing_is_written(fake, dp):
    dp.apply(ruleset(A, B, C_TCP))
    fake.count(0, 7, 100)
    fake.count(2, 2, 60)

    again = restarted(fake)
    assert again.installed_intents == {}  # owners are unknown until the next apply
    report = again.apply(ruleset(A, B, C_TCP))

    assert fake.writes() == []
    assert report == ApplyReport(upserted=0, deleted=0, shapes=2, published=False)
    assert again.installed_intents == {"a": 0, "b": 1, "c": 2}
    assert again.rule_stats() == {"a": (7, 700), "b": (0, 0), "c": (2, 120)}


def test_given_a_restart_with_changed_intents_then_unchanged_keys_keep_slots_and_stale_rules_go(fake, dp):
    old = ruleset(A, B, C_TCP)
    dp.apply(old)
    for slot in (0, 1, 2):
        fake.count(slot, slot + 1, 100)

    again = restarted(fake)
    new = ruleset(A, B_PORT, D)  # a unchanged; b's key changed; c removed; d new
    report = again.apply(new)

    assert report.deleted == 2
    deleted = {key for call in fake.writes() if call[0] == "rules_delete" for key in call[1]}
    assert deleted == {key_of(old, "b"), key_of(old, "c")}
    assert_holds_exactly(fake, new)
    slots = again.installed_intents
    assert slots["a"] == 0
    assert not {slots["b"], slots["d"]} & {0, 1, 2}  # 1 and 2 still counted for stale rules
    assert again.rule_stats() == {"a": (1, 100), "b": (0, 0), "d": (0, 0)}

    # The stale rules' slots are free now, lowest first, and cleared before reuse.
    forget_history(fake)
    again.apply(ruleset(A, B_PORT, D, E))
    assert again.installed_intents["e"] == 1
    assert fake.writes()[0] == ("stats_rules_clear", 1, 1)
    assert again.rule_stats()["e"] == (0, 0)


def test_given_a_restart_with_sparse_slots_when_new_intents_come_then_they_fill_the_gaps(fake, dp):
    dp.apply(ruleset(A, B, C_TCP, D))
    assert dp.installed_intents == {"a": 0, "b": 1, "d": 2, "c": 3}
    dp.apply(ruleset(A, C_TCP))  # 1 and 2 free, 3 the highest in use
    again = restarted(fake)

    again.apply(ruleset(A, C_TCP, B, E))

    assert again.installed_intents == {"a": 0, "c": 3, "b": 1, "e": 2}


# --- idempotence ------------------------------------------------------------------------------


def test_given_an_applied_ruleset_when_it_is_applied_again_then_the_adapter_sees_no_write(fake, dp):
    dp.apply(ruleset(A, B_PREFIX, C_TCP))
    forget_history(fake)

    same_object = dp.apply(ruleset(A, B_PREFIX, C_TCP))
    recompiled = dp.apply(ruleset(C_TCP, B_PREFIX, A))  # another order, compiled afresh

    assert fake.writes() == []
    assert same_object == recompiled == ApplyReport(upserted=0, deleted=0, shapes=3, published=False)


# --- conflicts --------------------------------------------------------------------------------

CONFLICTS = [
    # (description, the losing intent against A, kind)
    ("same match and priority, other action", udp("z", 1000, action={"type": "drop"}), "conflict"),
    ("same match, priority and action", udp("z", 1000), "duplicate"),
    ("same match, lower priority", udp("z", 1000, action={"type": "drop"}, priority=10), "shadowed"),
]


@pytest.mark.parametrize("loser, kind", [c[1:] for c in CONFLICTS], ids=[c[0] for c in CONFLICTS])
def test_given_colliding_intents_then_the_report_names_the_conflict_and_only_the_winner_is_installed(
    fake, dp, loser, kind
):
    rules = ruleset(A, loser, B)

    report = dp.apply(rules)

    assert [(c.intent_a, c.intent_b, c.kind) for c in report.conflicts] == [("a", "z", kind)]
    assert report.conflicts == rules.conflicts
    assert report.upserted == 2
    assert set(dp.installed_intents) == {"a", "b"}
    _, installed = fake.rules[key_of(rules, "a")]
    assert dp.intent_of_slot(installed.slot) == "a"


# --- incremental changes (apply_changes) --------------------------------------------------------


def indexed(*intents: dict[str, Any]) -> RuleIndex:
    index = RuleIndex(INTERFACES)
    for intent in intents:
        index.add(index.compile(Intent.model_validate(intent)))
    return index


def change_of(index: RuleIndex, add: tuple[dict[str, Any], ...] = (), remove: tuple[str, ...] = ()):
    """A tracked change: the removals, then the additions (a replace is both)."""
    change = index.track()
    for intent_id in remove:
        change.remove(intent_id)
    for intent in add:
        change.add(index.compile(Intent.model_validate(intent)))
    return change


def without_slots(fake: RecordingDpp) -> dict[bytes, bytes]:
    """Rules by key with the slot zeroed: what two control planes may assign differently."""
    values = {}
    for key, (_, rule) in fake.rules.items():
        copy = type(rule).from_buffer_copy(rule)
        copy.slot = 0
        values[key] = struct_bytes(copy)
    return values


DELTA_ORDER_CASES = [
    # (description, installed, added, removed, the writes)
    ("an intent in a new shape", [A], [C_TCP], [], [CLEAR, UPSERT, PUBLISH]),
    ("an intent in a shape in use", [A], [B], [], [CLEAR, UPSERT, PUBLISH]),
    ("an intent leaves a shape that stays", [A, B], [], ["b"], [DELETE, PUBLISH]),
    ("the last intent of a shape leaves", [A, C_TCP], [], ["c"], [PUBLISH, DELETE, PUBLISH]),
    ("an action changes, the key stays", [A, B], [B_DROP], ["b"], [UPSERT, PUBLISH]),
    ("a port changes", [A, B], [B_PORT], ["b"], [UPSERT, PUBLISH, DELETE, PUBLISH]),
    ("the same intent again", [A, B], [B], ["b"], []),
]


@pytest.mark.parametrize(
    "installed, added, removed, expected_writes",
    [case[1:] for case in DELTA_ORDER_CASES],
    ids=[case[0] for case in DELTA_ORDER_CASES],
)
def test_apply_changes_writes_in_apply_s_safe_order(fake, dp, installed, added, removed, expected_writes):
    index = indexed(*installed)
    dp.apply(index.ruleset())
    forget_history(fake)

    dp.apply_changes(change_of(index, tuple(added), tuple(removed)).delta())

    assert fake.write_names() == expected_writes
    target = index.ruleset()
    for published in fake.publishes:
        for key in keys(target):
            if key_shape(key) in published.shape_ids:
                assert key in published.rule_keys
    for deleted in fake.deletes:
        for key in deleted.keys:
            if key_shape(key) not in shape_ids(target):
                assert key_shape(key) not in deleted.active_shape_ids
    assert_holds_exactly(fake, target)
    assert set(dp.installed_intents) == {rule.intent_id for rule in target.rules}


def test_given_many_installed_rules_then_a_change_writes_only_its_own_key(fake, dp):
    index = indexed(*[udp(f"i{n}", 1000 + n) for n in range(50)])
    dp.apply(index.ruleset())
    forget_history(fake)

    dp.apply_changes(change_of(index, add=(D,)).delta())

    assert [call for call in fake.writes() if call[0] == UPSERT] == [(UPSERT, [key_of(index.ruleset(), "d")])]


_ports = st.integers(1000, 1003)
_changes = st.lists(
    st.tuples(st.sampled_from("abcdef"), _ports, st.sampled_from(["udp", "tcp"]), st.integers(0, 2)),
    max_size=30,
)


@settings(max_examples=100, deadline=None)
@given(_changes)
def test_given_any_changes_then_apply_changes_leaves_what_a_full_apply_would(steps):
    fake = few_policers_fake(SLOTS)
    dp = Dataplane(fake, max_rules=SLOTS)
    index = RuleIndex(INTERFACES)
    for intent_id, port, protocol, priority in steps:
        intent = native_intent(intent_id, match={"protocol": protocol, "dst_port": port}, priority=priority)
        change = change_of(index, add=(intent,), remove=(intent_id,) if intent_id in index else ())
        dp.apply_changes(change.delta())

    reference = few_policers_fake(SLOTS)
    Dataplane(reference, max_rules=SLOTS).apply(index.ruleset())
    assert without_slots(fake) == without_slots(reference)
    assert fake.active_shapes_bytes() == reference.active_shapes_bytes()
    installed = {rule.intent_id for rule in index.ruleset().rules}
    assert set(dp.installed_intents) == installed
    assert {dp.intent_of_slot(rule.slot) for _, rule in fake.rules.values()} == installed


@pytest.mark.parametrize("arm", FAILURES.values(), ids=FAILURES.keys())
def test_given_an_adapter_failure_midway_when_applying_changes_then_the_old_state_is_restored(fake, dp, arm):
    index = indexed(*OLD)
    dp.apply(index.ruleset())
    fake.count(0, 3, 100)
    before, slots_before = fake.state(), dp.installed_intents
    change = change_of(index, add=(A_DROP, C_TCP, D), remove=("a",))
    arm(fake)

    with pytest.raises(DataplaneError) as failure:
        dp.apply_changes(change.delta())

    assert failure.value.rolled_back is True
    assert fake.state() == before
    assert dp.installed_intents == slots_before
    assert dp.rule_stats()["a"] == (3, 300)
    dp.apply_changes(change.delta())  # the shadow still matches the maps: the same change now goes through
    assert_holds_exactly(fake, index.ruleset())


def test_given_the_publish_after_the_deletes_fails_then_not_rolled_back_and_an_undo_restores_slots(fake, dp):
    index = indexed(A, B)
    dp.apply(index.ruleset())
    fake.count(1, 5, 100)
    before, slots_before = fake.state(), dp.installed_intents
    change = change_of(index, add=(D,), remove=("b",))
    slots = dp.slots_of(rule.intent_id for rule in change.delta().removes)
    fake.fail_publish_after = 1

    with pytest.raises(DataplaneError) as failure:
        dp.apply_changes(change.delta())
    assert failure.value.rolled_back is False
    assert set(fake.rules) == keys(index.ruleset())  # the new state is live

    dp.apply_changes(change.inverse(), restore_slots=slots)
    assert fake.state().rules == before.rules
    assert dp.installed_intents == slots_before
    assert dp.rule_stats()["b"] == (5, 500)  # its slot, and so its counters, came back


def test_a_delta_that_takes_over_a_key_whose_owner_stays_is_refused_before_any_write(fake, dp):
    dp.apply(indexed(A).ruleset())
    forget_history(fake)
    intruder = indexed(udp("z", 1000, action={"type": "drop"})).ruleset().rules[0]

    with pytest.raises(ValueError, match="'a'"):
        dp.apply_changes(RuleDelta(upserts=(intruder,), shapes=(intruder.shape,), max_priorities=(100,)))

    assert fake.writes() == []
