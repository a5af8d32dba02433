"""FRER's service (netapp/frer/service.py) over a fake data plane (tests/frer/fake.py): streams stored
and written to the maps together, kept over a restart (the maps reconciled, the state of unchanged
streams kept), a stream the node cannot serve changing nothing, a refusal of the maps undone, the
gate open to the kinds of identification the node has."""

from __future__ import annotations

from ctypes import c_uint32
from typing import Any

import pytest

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.frer.abi import Algo, Gate, Recovery, Role
from netapp.frer.models import FrerStreamSpec
from netapp.intents.errors import IntentError
from netapp.service.contract import DataplaneUnavailable, NotFound, Principal, Scope
from tests.frer.fake import INTERFACES, FakeFrerNode

ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
MAC = "02:00:00:00:00:01"
IP = {"source": "10.1.0.1", "destination": "10.1.0.2", "protocol": "udp", "destination_port": 5000}


def talker(name: str = "t1", **overrides: Any) -> FrerStreamSpec:
    body = {"name": name, "identification": [{"null": {"destination_mac": MAC, "vlan": 100}}],
            "generation": {"ports": [{"interface": "pa1"}, {"interface": "pa2", "vlan": 7}]}}
    return FrerStreamSpec.model_validate({**body, **overrides})


def listener(name: str = "l1", **overrides: Any) -> FrerStreamSpec:
    body = {"name": name, "identification": [{"ip": IP}], "recovery": {"deliver_interface": "la0"}}
    return FrerStreamSpec.model_validate({**body, **overrides})


def put(node: FakeFrerNode, spec: FrerStreamSpec) -> int:
    status, _ = node.frer.put_stream(ADMIN, spec.name, spec)
    return status.handle


def recovery_slot(node: FakeFrerNode, handle: int) -> Recovery:
    [value] = node.frer_calls.recovery_read([handle])
    return value


def count(node: FakeFrerNode, handle: int, passed: int) -> None:
    """What the data path does to a recovery slot: its counters move, its parameters stay."""
    value = recovery_slot(node, handle)
    value.passed = passed
    Dataplane(node.dpp).table("dpp_frer_recovery").update([(c_uint32(handle), value)])


def test_streams_are_stored_and_written_to_the_maps(node):
    t1, l1 = put(node, talker()), put(node, listener())
    assert (t1, l1) == (1, 2), "the node gives the handles, the lowest free first"
    streams = node.entries("dpp_frer_streams")
    assert streams[t1].role == Role.GENERATE and streams[l1].role == Role.RECOVER
    assert streams[l1].deliver_ifindex == INTERFACES["la0"]
    assert [handle for _, handle in node.entries("dpp_frer_null")] == [t1]
    assert [handle for _, handle in node.entries("dpp_frer_ip")] == [l1]
    members = {(key.stream, key.ifindex): value.vlan for key, value in node.entries("dpp_frer_members")}
    assert members == {(t1, INTERFACES["pa1"]): 0, (t1, INTERFACES["pa2"]): 7}
    assert node.frer_calls.ports == [INTERFACES["pa1"], INTERFACES["pa2"]]
    assert recovery_slot(node, l1).algo == Algo.VECTOR and recovery_slot(node, l1).history_len == 2
    assert [stream.name for stream in node.frer.list_streams(ADMIN)] == ["l1", "t1"]


def test_streams_are_kept_over_a_restart_that_lost_the_maps(node):
    put(node, talker())
    put(node, listener())
    before = node.snapshot()
    node.restart(lost=True)
    assert node.snapshot() == before
    assert [stream.name for stream in node.frer.list_streams(ADMIN)] == ["l1", "t1"]


def test_a_restart_keeps_the_state_of_the_streams_and_takes_out_what_is_not_stored(node):
    handle = put(node, listener())
    count(node, handle, passed=7)
    stray = FrerStreamSpec.model_validate({"name": "x", "identification": [{"null": {"destination_mac": MAC}}],
                                           "generation": {"ports": [{"interface": "pb1"}]}})
    put(node, stray)
    node.store.execute("DELETE FROM frer_streams WHERE name = 'x'")  # in the maps, no longer stored
    node.restart()
    assert recovery_slot(node, handle).passed == 7, "the pinned slot's counters are kept"
    assert node.entries("dpp_frer_null") == [] and node.frer_calls.ports == []
    assert set(node.entries("dpp_frer_streams")) == {handle}


def test_a_replaced_stream_is_reset_only_when_its_recovery_parameters_change(node):
    handle = put(node, listener())
    count(node, handle, passed=7)
    more = listener(identification=[{"ip": IP}, {"ip": {**IP, "vlan": 7}}])
    assert put(node, more) == handle and recovery_slot(node, handle).passed == 7, "an identity added: kept"
    assert len(node.entries("dpp_frer_ip")) == 2
    longer = listener(recovery={"deliver_interface": "la0", "history_length": 8})
    put(node, longer)
    assert recovery_slot(node, handle).passed == 0 and recovery_slot(node, handle).history_len == 8
    assert len(node.entries("dpp_frer_ip")) == 1, "the identity taken out"


@pytest.mark.parametrize(
    ("spec", "field", "says"),
    [
        (talker("t2", identification=[{"null": {"destination_mac": MAC, "vlan": 200}}],
                generation={"ports": [{"interface": "nosuch0"}]}),
         "generation.ports[0].interface", "no interface 'nosuch0'"),
        (listener("l2", identification=[{"ip": {**IP, "destination_port": 5001}}],
                  recovery={"deliver_interface": "nosuch0"}), "recovery.deliver_interface", "no interface"),
        (talker("t2"), "identification[0]", "the same frames as stream 't1' (identification[0])"),
    ],
)
def test_a_stream_the_node_cannot_serve_changes_nothing(node, spec, field, says):
    put(node, talker())
    put(node, listener())
    maps, stored = node.snapshot(), node.frer.list_streams(ADMIN)
    with pytest.raises(IntentError) as refused:
        put(node, spec)
    assert [(path, says in message) for path, message in refused.value.problems] == [(field, True)]
    assert node.snapshot() == maps and node.frer.list_streams(ADMIN) == stored


def test_a_refusal_of_the_maps_is_undone_and_nothing_stored(node, monkeypatch):
    put(node, talker())
    maps, stored = node.snapshot(), node.frer.list_streams(ADMIN)
    set_groups = node.frer_calls.groups_set
    calls = []

    def refuse_once(groups: dict) -> None:
        calls.append(groups)
        if len(calls) == 1:
            raise DataplaneError(28, "dpp_table_inner_set", "no space")
        set_groups(groups)

    monkeypatch.setattr(node.frer_calls, "groups_set", refuse_once)
    with pytest.raises(DataplaneUnavailable):
        put(node, talker("t2", identification=[{"null": {"destination_mac": MAC, "vlan": 200}}],
                         generation={"ports": [{"interface": "pb1"}]}))
    assert len(calls) == 2, "the groups set, then set back"
    assert node.snapshot() == maps and node.frer.list_streams(ADMIN) == stored


def test_a_deleted_stream_leaves_no_entry_and_its_handle_is_given_again(node):
    first = put(node, talker())
    put(node, listener())
    node.frer.delete_stream(ADMIN, "t1")
    assert set(node.entries("dpp_frer_streams")) == {2} and node.entries("dpp_frer_members") == []
    assert node.entries("dpp_frer_null") == [] and node.frer_calls.ports == []
    with pytest.raises(NotFound):
        node.frer.delete_stream(ADMIN, "t1")
    assert put(node, talker("t3")) == first


def test_a_stored_stream_the_node_cannot_serve_stays_stored_out_of_the_maps(node, monkeypatch):
    put(node, talker())
    handle = put(node, listener())
    monkeypatch.delitem(INTERFACES, "pa2")  # the interface is gone
    node.restart(lost=True)
    assert set(node.entries("dpp_frer_streams")) == {handle}
    assert "no interface 'pa2'" in node.frer.unserved["operator/t1"]
    assert [stream.name for stream in node.frer.list_streams(ADMIN)] == ["l1", "t1"]
    put(node, listener("l2", identification=[{"ip": {**IP, "destination_port": 5001}}]))  # others still change
    assert len(node.entries("dpp_frer_streams")) == 2



def test_the_gate_opens_to_the_kinds_of_identification_the_node_has(node):
    assert node.frer_calls.kinds == Gate(0), "a node without streams: the stage never runs"
    put(node, talker())
    assert node.frer_calls.kinds == Gate.NULL
    put(node, listener())
    assert node.frer_calls.kinds == Gate.NULL | Gate.IP
    node.frer.delete_stream(ADMIN, "t1")
    assert node.frer_calls.kinds == Gate.IP
    node.frer.delete_stream(ADMIN, "l1")
    assert node.frer_calls.kinds == Gate(0)
    put(node, talker(identification=[{"null": {"destination_mac": MAC}}]))  # no VLAN: a second lookup, of any
    assert node.frer_calls.kinds == Gate.NULL | Gate.NULL_ANY


def test_streams_of_the_same_ports_share_a_group_and_a_group_goes_with_its_last_stream(node):
    def other(name: str, vlan: int, ports: list[dict]) -> FrerStreamSpec:
        return talker(name, identification=[{"null": {"destination_mac": MAC, "vlan": vlan}}],
                      generation={"ports": ports})

    same = [{"interface": "pa1"}, {"interface": "pa2", "vlan": 7}]
    t1, t2 = put(node, talker()), put(node, other("t2", 200, same))
    t3 = put(node, other("t3", 300, [{"interface": "pb1"}]))
    streams = node.entries("dpp_frer_streams")
    assert streams[t1].tx_group == streams[t2].tx_group != streams[t3].tx_group
    assert node.frer_calls.groups == {
        streams[t1].tx_group: {INTERFACES["pa1"]: False, INTERFACES["pa2"]: True},  # a VLAN id: the egress program
        streams[t3].tx_group: {INTERFACES["pb1"]: False},
    }
    node.frer.delete_stream(ADMIN, "t1")
    assert set(node.frer_calls.groups) == {streams[t2].tx_group, streams[t3].tx_group}, "t2 still names it"
    node.frer.delete_stream(ADMIN, "t2")
    assert set(node.frer_calls.groups) == {streams[t3].tx_group}
    node.restart()
    assert node.entries("dpp_frer_streams")[t3].tx_group == streams[t3].tx_group, "a restart keeps the group"
    assert set(node.frer_calls.groups) == {streams[t3].tx_group}
