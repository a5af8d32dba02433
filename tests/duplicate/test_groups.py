"""The `duplicate` action from the intent to the maps, without a kernel: its model's refusals, its
compiled rule (a group named by its interfaces), and the copy groups the rules' writer keeps in
the maps (FakeDpp: in-memory maps with libdpp's semantics), placed before the rules, shared, freed
with the last intent that names them, refused past DPP_MAX_DUP_GROUPS, settled after a restart.
tests/duplicate/test_datapath.py runs the same in the kernel."""

from __future__ import annotations

import errno

import pytest

from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.dataplane.groups import DevmapGroups
from netapp.dataplane.fake import FakeDpp
from netapp.duplicate import abi
from netapp.duplicate.compiler import group_id
from netapp.intents.compiler import compile_intents
from netapp.intents.errors import CompileError, IntentError
from netapp.intents.models import parse_intent

PORTS = {f"p{n}": 10 + n for n in range(12)}


def intent(intent_id: str, interfaces: list[str], dst: str = "10.0.0.1/32") -> dict:
    return {"id": intent_id, "match": {"dst": dst}, "action": {"type": "duplicate", "interfaces": interfaces}}


def ruleset(*intents: dict):
    return compile_intents([parse_intent(one) for one in intents], PORTS)


def groups(dp: Dataplane) -> dict[int, set[int]]:
    """group id -> its interfaces, as dpp_dup_tx's inner maps hold them."""
    held = DevmapGroups(dp.table("dpp_dup_tx")).ports()
    return {group: {ifindex for ifindex, _ in ports.values()} for group, ports in held.items()}


def ports(dp: Dataplane) -> set[int]:
    return set().union(*groups(dp).values())


@pytest.mark.parametrize(("interfaces", "field", "why"), [
    (["p1"], "action.duplicate.interfaces", "at least 2"),
    (["p1", "p2", "p1"], "action.duplicate.interfaces[2]", "already interfaces[0]"),
    ([f"p{n}" for n in range(abi.MAX_COPIES + 1)], "action.duplicate.interfaces", f"at most {abi.MAX_COPIES}"),
])
def test_a_duplicate_names_two_to_eight_interfaces_each_once(interfaces, field, why):
    with pytest.raises(IntentError) as refused:
        parse_intent(intent("x", interfaces))
    assert refused.value.field == field and why in refused.value.message


@pytest.mark.parametrize(("decapsulate", "field", "why"), [
    (["p3"], "action.duplicate.decapsulate[0]", "not one of interfaces (p1, p2)"),
    (["p1", "p1"], "action.duplicate.decapsulate[1]", "already decapsulate[0]"),
])
def test_only_a_copys_interface_decapsulates_and_once(decapsulate, field, why):
    body = intent("x", ["p1", "p2"])
    body["action"]["decapsulate"] = decapsulate
    with pytest.raises(IntentError) as refused:
        parse_intent(body)
    assert refused.value.field == field and why in refused.value.message


def test_a_decapsulating_copy_makes_another_group_flagged_and_its_port_runs_the_egress_program():
    decap = intent("d", ["p1", "p2"], dst="10.0.0.3/32")
    decap["action"]["decapsulate"] = ["p2"]
    plain, decapsulating = ruleset(intent("a", ["p1", "p2"]), decap).rules
    assert decapsulating.copies == ((11, False), (12, True))
    assert decapsulating.arg == group_id([11, 12], [12]) and decapsulating.arg & abi.GROUP_DECAP
    assert not plain.arg & abi.GROUP_DECAP and plain.arg != decapsulating.arg
    fake = FakeDpp()
    dp = Dataplane(fake)
    dp.apply(ruleset(decap))
    # the fake holds no program (fd 0): that the entry runs it is test_datapath.py's, in the kernel
    assert groups(dp) == {decapsulating.arg: {11, 12}} and ("program_fd", abi.DECAP_PROG) in fake.calls


def test_an_unknown_interface_is_named_by_its_position():
    with pytest.raises(CompileError, match=r"action.interfaces\[1\]: unknown interface 'nope'"):
        ruleset(intent("x", ["p1", "nope"]))


def test_the_rule_names_the_group_of_its_interfaces_whatever_their_order():
    first, second = ruleset(intent("a", ["p1", "p2"]), intent("b", ["p2", "p1"], dst="10.0.0.2/32")).rules
    assert first.action == second.action == "duplicate"
    assert first.arg == second.arg == group_id([11, 12]) and first.copies == second.copies == ((11, False), (12, False))
    assert ruleset(intent("c", ["p1", "p3"])).rules[0].arg != first.arg


def test_groups_are_written_before_their_rules_shared_and_freed_with_the_last_rule():
    fake = FakeDpp()
    dp = Dataplane(fake)
    dp.apply(ruleset(intent("a", ["p1", "p2"]), intent("b", ["p2", "p1"], dst="10.0.0.2/32")))
    assert groups(dp) == {group_id([11, 12]): {11, 12}} and ports(dp) == {11, 12}
    calls = [call[0] if call[0] != "table_inner_set" else call[1] for call in fake.calls]
    assert calls.index("dpp_dup_tx") < calls.index("rules_upsert")

    dp.apply(ruleset(intent("a", ["p1", "p2"])))  # the group stays: "a" still names it
    assert groups(dp) == {group_id([11, 12]): {11, 12}}
    dp.apply(ruleset(intent("a", ["p3", "p2"])))
    assert groups(dp) == {group_id([12, 13]): {12, 13}} and ports(dp) == {12, 13}
    dp.apply(ruleset())
    assert groups(dp) == {} and ports(dp) == set()


def test_a_group_past_the_limit_is_refused_and_nothing_is_written():
    dp = Dataplane(FakeDpp())
    sets = [[f"p{a}", f"p{b}"] for a in range(12) for b in range(a + 1, 12)]
    sets += [[f"p{a}", f"p{b}", f"p{c}"] for a in range(12) for b in range(a + 1, 12) for c in range(b + 1, 12)]
    wanted = [intent(f"i{n}", names, dst=f"10.{n // 250}.{n % 250}.1/32") for n, names in enumerate(sets)]
    dp.apply(ruleset(*wanted[: abi.MAX_GROUPS]))
    before = (groups(dp), dp.installed_count)
    with pytest.raises(DataplaneError) as refused:
        dp.apply(ruleset(*wanted[: abi.MAX_GROUPS + 1]))
    assert refused.value.errno == errno.ENOSPC and refused.value.rolled_back
    assert f"the data plane holds {abi.MAX_GROUPS} (DPP_MAX_DUP_GROUPS)" in str(refused.value)
    assert (groups(dp), dp.installed_count) == before


def test_a_restart_keeps_the_groups_in_use_and_removes_the_others():
    fake = FakeDpp()
    Dataplane(fake).apply(ruleset(intent("a", ["p1", "p2"]), intent("b", ["p3", "p4"], dst="10.0.0.2/32")))
    fake._reused = True
    restarted = Dataplane(fake)
    restarted.adopt_installed_rules()
    restarted.apply(ruleset(intent("a", ["p1", "p2"])))
    assert groups(restarted) == {group_id([11, 12]): {11, 12}} and ports(restarted) == {11, 12}
