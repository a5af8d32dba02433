"""netapp.upf.compiler: which PDRs go in which table, what is folded into each entry, what is refused."""

from __future__ import annotations

import dataclasses

import pytest

from netapp.upf.abi import QFI_ANY, FarAction, Output, PdrFlag, Role
from netapp.upf.compiler import NO_URR, Port, Site, compile_session
from netapp.upf.models import DuplicatingParameters, Far, OuterHeaderCreation, Pdi, Pdr, Qer, RuleError, Urr, UrrSet
from netapp.upf.pfcp.ies import Cause, IEType, Interface, RuleType
from tests.upf.test_datapath import GNB, N3_IP, TEID, UE, UE6, session

SITE = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP, output=Output.TX)


def test_uplink_by_teid_and_downlink_by_instance_and_each_ue_address():
    entries = compile_session(session(), SITE, {1: 5})
    assert list(entries.uplink) == [(TEID, QFI_ANY)]
    assert sorted(key[:2] for key in entries.downlink) == [(1, 4), (1, 6)]
    up, down = entries.uplink[(TEID, QFI_ANY)], next(iter(entries.downlink.values()))
    assert (up.flags, up.far, up.urr, up.output) == (PdrFlag.DECAP, FarAction.FORWARD, 5, Output.TX)
    assert (down.flags, down.qfi, down.pdu_type, down.family) == (PdrFlag.ENCAP, 9, 0, 4)
    assert bytes(down.peer)[:4] == bytes(map(int, GNB.split(".")))


def test_pdrs_of_one_teid_that_differ_by_qfi_get_an_entry_each_behind_the_teids_own():
    base = session()
    by_qfi = base.pdrs[1].model_copy(update={"id": 3, "precedence": 10,
                                              "pdi": base.pdrs[1].pdi.model_copy(update={"qfis": (5,)})})
    entries = compile_session(base.model_copy(update={"pdrs": {**base.pdrs, 3: by_qfi}}), SITE, {})
    assert set(entries.uplink) == {(TEID, QFI_ANY), (TEID, 5)}
    assert entries.uplink[(TEID, QFI_ANY)].flags & PdrFlag.BY_QFI
    assert not entries.uplink[(TEID, QFI_ANY)].flags & PdrFlag.NO_MATCH  # PDR 1 catches the rest


def test_a_closed_gate_or_a_drop_far_drops():
    base = session()
    closed = base.model_copy(update={"qers": {1: Qer(id=1, qfi=9, gate_ul_open=False)}})
    assert compile_session(closed, SITE, {}).uplink[(TEID, QFI_ANY)].far == FarAction.DROP
    buff = base.model_copy(update={"fars": {**base.fars, 1: Far(id=1, apply_action=frozenset({"BUFF", "NOCP"}))}})
    assert compile_session(buff, SITE, {}).uplink[(TEID, QFI_ANY)].far == FarAction.BUFFER


@pytest.mark.parametrize(
    ("change", "rule", "cause"),
    [
        ("sdf", (RuleType.PDR, 2), Cause.RULE_CREATION_MODIFICATION_FAILURE),
        ("dupl", (RuleType.FAR, 1), Cause.RULE_CREATION_MODIFICATION_FAILURE),
        ("instance", (RuleType.PDR, 2), Cause.RULE_CREATION_MODIFICATION_FAILURE),
        ("source", (RuleType.PDR, 3), Cause.RULE_CREATION_MODIFICATION_FAILURE),
    ],
)
def test_what_the_data_path_cannot_do_is_refused_naming_the_rule(change, rule, cause):
    base = session(sdf=change == "sdf")
    if change == "dupl":
        base = base.model_copy(update={"fars": {**base.fars, 1: Far(id=1, apply_action=frozenset({"DROP", "DUPL"}), duplicating=(
            DuplicatingParameters(destination_interface=Interface.LI_FUNCTION),))}})
    if change == "instance":
        pdi = base.pdrs[2].pdi.model_copy(update={"network_instance": "ims"})
        base = base.model_copy(update={"pdrs": {**base.pdrs, 2: base.pdrs[2].model_copy(update={"pdi": pdi})}})
    if change == "source":
        odd = Pdr(id=3, precedence=1, pdi=Pdi(source_interface=Interface.CP_FUNCTION), far_id=1)
        base = base.model_copy(update={"pdrs": {**base.pdrs, 3: odd}})
    with pytest.raises(RuleError) as caught:
        compile_session(base, SITE, {})
    assert (caught.value.rule, caught.value.cause) == (rule, cause)


def test_of_two_downlink_pdrs_for_one_ue_the_higher_precedence_wins():
    base = session()
    low = base.pdrs[2].model_copy(update={"id": 4, "precedence": 200, "far_id": 1})
    entries = compile_session(base.model_copy(update={"pdrs": {**base.pdrs, 4: low}}), SITE, {})
    assert all(value.flags & PdrFlag.ENCAP for value in entries.downlink.values())
    assert UE and UE6


PORTS = (Port(3, Role.N3), Port(4, Role.N3), Port(9, Role.N9), Port(6, Role.N6, "internet"), Port(7, Role.N6, "ims"))
REDIRECT = Site(net_instances={"internet": 1, "ims": 2}, default_instance="internet", n3_ipv4=N3_IP,
                output=Output.REDIRECT, ports=PORTS)


def _forwarding(base, far_id: int, **changes):
    far = base.fars[far_id]
    forwarding = far.forwarding.model_copy(update=changes)
    return base.model_copy(update={"fars": {**base.fars, far_id: far.model_copy(update={"forwarding": forwarding})}})


@pytest.mark.parametrize(
    ("changes", "egress"),
    [
        ({}, 6),  # to CORE, no instance named: the default instance's N6 port
        ({"network_instance": "ims"}, 7),  # the FAR's network instance picks the N6 port
        ({"outer_header_creation": OuterHeaderCreation(kind="gtpu-ipv4", teid=5, address=GNB)}, 9),  # N9
    ],
    ids=["core-default", "core-ims", "core-n9"],
)
def test_redirect_leaves_by_the_port_of_the_fars_destination(changes, egress):
    entries = compile_session(_forwarding(session(), 1, **changes), REDIRECT, {})
    assert entries.uplink[(TEID, QFI_ANY)].ifindex == egress
    assert {value.ifindex for value in entries.downlink.values()} == {3}  # to ACCESS: the first N3 port


@pytest.mark.parametrize(
    ("ports", "changes", "ie_type"),
    [
        ((Port(3, Role.N3),), {}, IEType.DESTINATION_INTERFACE),  # no N6 port at all
        (PORTS[:4], {"network_instance": "ims"}, IEType.NETWORK_INSTANCE),  # none of the FAR's instance
        (PORTS[:2] + PORTS[3:], {"outer_header_creation": OuterHeaderCreation(kind="gtpu-ipv4", teid=5,
                                                                             address=GNB)},
         IEType.DESTINATION_INTERFACE),  # N9 without an N9 port
    ],
    ids=["no-n6", "no-port-of-instance", "no-n9"],
)
def test_redirect_without_a_port_for_the_fars_destination_is_refused_naming_the_far(ports, changes, ie_type):
    site = dataclasses.replace(REDIRECT, ports=ports)
    with pytest.raises(RuleError) as caught:
        compile_session(_forwarding(session(), 1, **changes), site, {})
    assert (caught.value.cause, caught.value.rule, caught.value.ie_type) == (
        Cause.RULE_CREATION_MODIFICATION_FAILURE, (RuleType.FAR, 1), ie_type)


def test_other_outputs_need_no_port():
    assert compile_session(session(), SITE, {}).uplink[(TEID, QFI_ANY)].ifindex == 0


def test_a_pdr_with_several_urrs_counts_on_the_slot_of_its_set_and_one_with_one_on_the_urrs():
    base = session()
    two = base.model_copy(update={
        "urrs": {**base.urrs, 2: Urr(id=2, measurement_method=frozenset({"VOLUM"}))},
        "pdrs": {**base.pdrs, 2: base.pdrs[2].model_copy(update={"urr_ids": (2, 1, 2)})},
        "urr_sets": (UrrSet(slot=9, urr_ids=(1, 2), members=(1,)), UrrSet(slot=7, urr_ids=(1, 2), members=(1, 2))),
    })
    entries = compile_session(two, SITE, {1: 5, 2: 6})
    assert entries.uplink[(TEID, QFI_ANY)].urr == 5
    assert {value.urr for value in entries.downlink.values()} == {7}, "the set whose members are all its URRs"
    assert {value.urr for value in compile_session(two, SITE, {}).downlink.values()} == {7}
    without = two.model_copy(update={"urr_sets": ()})  # no data path that counts: no slot
    assert {value.urr for value in compile_session(without, SITE, {}).downlink.values()} == {NO_URR}
