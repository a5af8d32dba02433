"""Each MEC 015 MTS session's flows schedule with a state of their own (nf/atsss/flows.h,
netapp.atsss.flow_states), in the pipeline (dpp.bpf.o, BPF_PROG_TEST_RUN on dpp_xdp): two weighted
flows of one UE interleaved 1:1 each get the weights' split exactly, and so do a weighted flow and
the session's own weighted frames; two round-robin flows interleaved each alternate the paths; the
MP_SEQ numbers stay the UE's one sequence; an MTS session replaced, or deleted and created again,
starts afresh; a restart keeps each flow on the state it had; a tenant's flows move no other
tenant's state; the store gives the slots (and a version 15 store's sessions theirs); a slot freed
is given again only after a wait for the programs' runs, which a write makes only when no other
slot is free; a change the store fails to commit leaves the maps as the store holds them."""

from __future__ import annotations

import ipaddress
from ctypes import c_uint32
from datetime import datetime, timezone

import pytest

from netapp.atsss import abi
from netapp.atsss import store as stored
from netapp.atsss.flow_states import FlowStates, stored_rules_afresh
from netapp.atsss.flows import session_rules, stored_rules
from netapp.atsss.model import SessionModel
from netapp.atsss.models import AtsssSessionSpec, SteeringMode
from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps
from netapp.dataplane.facade import Dataplane
from netapp.service import store as store_module
from netapp.service.contract import DataplaneFull
from netapp.service.schema import MIGRATIONS
from netapp.service.service import NetAppService
from netapp.service.store import Store, StoreError
from tests.atsss.atsss import decode, path_body
from tests.atsss.test_flows import (  # noqa: F401 - atsss and node: the fixtures, this module's own instance
    ADMIN,
    CELL,
    OTHER_UE,
    UE,
    VIDEO,
    WIFI,
    atsss,
    flow_packet,
    node,
    out_path,
    restarted,
    send,
    steer_flows,
)
from tests.atsss.test_sessions import store_at_version
from tests.utils.dataplane import Lent
from tests.utils.service import settings_for

# The web flow: the same server's UDP from port 6000 (the video flow's shape, another key).
WEB = {**VIDEO, "sourcePort": [6000]}
FRAMES = 8  # a flow's frames: two rounds of weights 3:1


def weighted_session(mode: str, weights: tuple[int, int] = (3, 1), name: str = "ue7", ue: str = UE,
                     step: int = 0) -> AtsssSessionSpec:
    """The UE's session over CELL and WIFI, weighing them `weights`."""
    return AtsssSessionSpec.model_validate({
        "name": name, "ue": ue, "mode": mode,
        "paths": [path_body(CELL, weight=weights[0], peer_port=CELL.dport + 2 * step),
                  path_body(WIFI, weight=weights[1], peer_port=WIFI.dport + 2 * step)]})


@pytest.fixture
def waits(monkeypatch) -> list[int]:
    """Each wait for the programs' runs (AtsssMaps.wait_readers, still made) as it comes."""
    made: list[int] = []
    wait = AtsssMaps.wait_readers

    def counted(maps: AtsssMaps) -> None:
        made.append(len(made))
        wait(maps)

    monkeypatch.setattr(AtsssMaps, "wait_readers", counted)
    return made


def split(mode: abi.Mode, frames: int = FRAMES, weights: tuple[int, int] = (3, 1)) -> list:
    """The paths of a flow's `frames` frames as its scheduler alone picks them (netapp.atsss.model)."""
    model = SessionModel(mode, up=[True, True], weights=weights)
    return [(CELL, WIFI)[model.send()[0]] for _ in range(frames)]


def interleaved(dp: Dataplane, packets: list[bytes], frames: int = FRAMES) -> list[list[bytes]]:
    """`frames` frames of each packet, sent one of each in turn: each packet's frames out."""
    out: list[list[bytes]] = [[] for _ in packets]
    for _ in range(frames):
        for sent, packet in zip(out, packets):
            sent.append(send(dp, packet)[1])
    return out


def test_two_weighted_flows_interleaved_each_get_the_weights_split(node, atsss):
    """Weights 3:1: alone, a flow leaves CELL, CELL, WIFI, CELL... Sharing the running weights, the
    two flows interleaved 1:1 would take them in turn (video CELL, WIFI, CELL, WIFI; web CELL only);
    each with its own, each gets 3:1, while the MP_SEQ numbers are the UE's one sequence."""
    atsss.create_session(ADMIN, "ue7", weighted_session("active_standby"))
    steer_flows(atsss, "video", [VIDEO], SteeringMode.WEIGHTED)
    steer_flows(atsss, "web", [WEB], SteeringMode.WEIGHTED)

    video, web = interleaved(node, [flow_packet(), flow_packet(sport=6000)])

    assert [out_path(frame) for frame in video] == [out_path(frame) for frame in web] == split(abi.Mode.WEIGHTED)
    assert [decode(frame).mp_seq for pair in zip(video, web) for frame in pair] == list(range(2 * FRAMES))


def test_a_weighted_flow_and_the_sessions_own_weighted_frames_each_get_the_split(node, atsss):
    atsss.create_session(ADMIN, "ue7", weighted_session("weighted"))
    steer_flows(atsss, "video", [VIDEO], SteeringMode.WEIGHTED)

    video, other = interleaved(node, [flow_packet(), flow_packet(src="198.51.100.99", sport=7000)])

    assert [out_path(frame) for frame in video] == [out_path(frame) for frame in other] == split(abi.Mode.WEIGHTED)


def test_two_round_robin_flows_interleaved_each_alternate_the_paths(node, atsss):
    """Sharing the session's turns, the video flow would take every other turn: CELL only."""
    atsss.create_session(ADMIN, "ue7", weighted_session("active_standby"))
    steer_flows(atsss, "video", [VIDEO], SteeringMode.ROUND_ROBIN)
    steer_flows(atsss, "web", [WEB], SteeringMode.ROUND_ROBIN)

    video, web = interleaved(node, [flow_packet(), flow_packet(sport=6000)], frames=4)

    assert [out_path(frame) for frame in video] == [out_path(frame) for frame in web] == [CELL, WIFI, CELL, WIFI]
    assert [decode(frame).mp_seq for pair in zip(video, web) for frame in pair] == list(range(8))


@pytest.mark.parametrize("again", ["replaced", "deleted and created again"])
@pytest.mark.parametrize("mode", [SteeringMode.WEIGHTED, SteeringMode.ROUND_ROBIN])
def test_a_replaced_or_recreated_mts_session_starts_afresh(node, atsss, again, mode):
    """One frame moves the flow's state (weighted: CELL, the running weights -1 and 1; round-robin:
    CELL, one turn); the session written again, its next frames start from the first pick."""
    atsss.create_session(ADMIN, "ue7", weighted_session("active_standby"))
    steer_flows(atsss, "video", [VIDEO], mode)
    assert out_path(send(node, flow_packet())[1]) == CELL

    if again == "deleted and created again":
        assert atsss.unsteer("operator", "video")
    steer_flows(atsss, "video", [VIDEO], mode)

    assert [out_path(send(node, flow_packet())[1]) for _ in range(4)] == split(mode.c_mode, 4)


def test_a_restart_keeps_each_flow_on_its_state(node, atsss, store, node_ns, tmp_path):
    """Two frames of each flow before the NetApp service starts again over the maps (its reconcile
    writes the stored rules, each naming its stored slot), six after: each flow's eight frames are
    the weights' split, as if nothing had happened between."""
    atsss.create_session(ADMIN, "ue7", weighted_session("active_standby"))
    steer_flows(atsss, "video", [VIDEO], SteeringMode.WEIGHTED)
    steer_flows(atsss, "web", [WEB], SteeringMode.WEIGHTED)
    packets = [flow_packet(), flow_packet(sport=6000)]
    before = interleaved(node, packets, frames=2)

    service = restarted(store, node, tmp_path / "again", load_rules=True)
    try:
        again = Atsss.start(store, node.table, netns=node_ns, rules=service.function_rules("atsss"))
        after = interleaved(node, packets, frames=FRAMES - 2)

        for first, then in zip(before, after):
            assert [out_path(frame) for frame in first + then] == split(abi.Mode.WEIGHTED)
        slots = stored.state_slots(store)
        assert sorted(slots.values()) == [1, 2]
        assert {rule.arg >> abi.RULE_MODE_BITS for rule in stored_rules(store).values()} == set(slots.values())
        assert again.unsteer("operator", "video") and again.unsteer("operator", "web")
    finally:
        service.close()


def test_a_tenants_flows_move_only_their_own_state(node, atsss, store):
    """Two tenants' UEs, each with a weighted MTS session of its own: the slots differ, and tenant-a's
    frames move tenant-a's running weights alone."""
    atsss.create_session(ADMIN, "tenant-a/ue7", weighted_session("active_standby"))
    atsss.create_session(ADMIN, "tenant-b/ue8", weighted_session("active_standby", name="ue8", ue=OTHER_UE, step=1))
    steer_flows(atsss, "video", [VIDEO], SteeringMode.WEIGHTED, tenant="tenant-a")
    steer_flows(atsss, "theirs", [{**VIDEO, "dstIp": OTHER_UE}], SteeringMode.WEIGHTED, tenant="tenant-b",
                ue=OTHER_UE)
    slots = stored.state_slots(store)
    mine, theirs = slots[("tenant-a", "video")], slots[("tenant-b", "theirs")]

    send(node, flow_packet())

    maps = AtsssMaps(node.table)
    assert mine != theirs
    assert list(maps.flow_state(mine).current[:2]) == [-1, 1]
    assert list(maps.flow_state(theirs).current[:2]) == [0, 0]


def test_the_store_gives_the_lowest_free_slot_to_stateful_modes_only_and_refuses_past_the_last(store, monkeypatch):
    """Without a data plane the slots are only stored: round-robin and weighted take one, the others
    none; past the last, a new one is refused naming the mode, and one written again takes its own
    again."""
    service = Atsss(store)
    service.create_session(ADMIN, "ue7", weighted_session("active_standby"))
    monkeypatch.setattr(stored, "MAX_FLOW_STATES", 3)  # slots 1 and 2
    body = {"flowFilter": [VIDEO], "mtsMode": 2}

    def steer(mts_id: str, filters: list, mode: SteeringMode) -> None:
        service.steer("operator", mts_id, UE, mode, {**body, "flowFilter": filters}, field="flowFilter[0].dstIp",
                      mode_field="mtsMode", flows=session_rules(mts_id, UE, filters, mode))

    steer("video", [VIDEO], SteeringMode.WEIGHTED)
    steer("web", [WEB], SteeringMode.ACTIVE_STANDBY)
    steer("tcp", [{**VIDEO, "protocol": 6}], SteeringMode.ROUND_ROBIN)
    assert stored.state_slots(store) == {("operator", "video"): 1, ("operator", "tcp"): 2}
    with pytest.raises(DataplaneFull) as full:
        steer("web", [WEB], SteeringMode.ROUND_ROBIN)
    assert full.value.field == "mtsMode"
    steer("video", [VIDEO], SteeringMode.ROUND_ROBIN)  # none free: its own again
    assert stored.state_slots(store) == {("operator", "video"): 1, ("operator", "tcp"): 2}


def test_a_version_15_stores_weighted_and_round_robin_flow_sessions_get_slots(tmp_path):
    """Migration 15 (netapp.atsss.schema.ATSSS_MTS_STATES): the MTS sessions with flow filters in a
    stateful mode get slots 1, 2... by tenant and id; the others, and whole-downlink ones, none."""
    raw = store_at_version(tmp_path / "netapp.db", 15)
    for tenant, mts_id, filtered, mode in (("t-b", "rr", 1, "round_robin"), ("t-a", "w", 1, "weighted"),
                                           ("t-a", "as", 1, "active_standby"), ("t-a", "whole", 0, "weighted")):
        raw.execute("INSERT INTO atsss_mts_sessions VALUES (?, ?, ?, ?, ?, '2026-01-01', '2026-01-01')",
                    (tenant, mts_id, str(ipaddress.ip_address("10.60.0.5") + len(mts_id)), filtered,
                     f'{{"mode": "{mode}"}}'))
    raw.commit()
    raw.close()
    store = Store.open(tmp_path / "netapp.db")
    try:
        assert 15 in MIGRATIONS
        assert stored.state_slots(store) == {("t-a", "w"): 1, ("t-b", "rr"): 2}
    finally:
        store.close()


def test_an_mts_session_written_again_waits_for_the_programs_runs_only_when_freed_slots_alone_are_free(
        node, atsss, store, waits, monkeypatch):
    """A wait holds the service's locks for a grace period: written again (a PUT), then deleted and
    created again, the session takes a slot freed before no wait, and waits for none. With slots 1
    to 3 only, 1 and 2 freed since and 3 held, the next write waits once and takes 1; the one after
    takes 2, freed before that wait, without another."""
    atsss.create_session(ADMIN, "ue7", weighted_session("active_standby"))

    def written() -> int:
        steer_flows(atsss, "video", [VIDEO], SteeringMode.WEIGHTED)
        return stored.state_slot(store, "operator", "video")

    assert written() == 1
    assert written() == 2
    assert atsss.unsteer("operator", "video")
    assert written() == 3
    assert waits == []

    monkeypatch.setattr(stored, "MAX_FLOW_STATES", 4)
    assert written() == 1
    assert len(waits) == 1
    assert written() == 2
    assert len(waits) == 1
    assert [out_path(send(node, flow_packet())[1]) for _ in range(4)] == split(abi.Mode.WEIGHTED, 4)


def test_a_slot_is_freed_by_the_flow_states_alone_which_retire_it(store):
    """Deleting an MTS session from the store keeps its slot: FlowStates.free frees it and retires
    it, so that the next session takes another while one is free."""
    states = FlowStates(store, None)
    with store.transaction():
        assert states.give("operator", "video", SteeringMode.WEIGHTED, "mtsMode") == 1
        stored.remove_mts(store, "operator", "video")
        assert stored.state_slots(store) == {("operator", "video"): 1}
        assert states.free("operator", "video") == 1
        assert states.give("operator", "web", SteeringMode.ROUND_ROBIN, "mtsMode") == 2


def test_a_put_whose_commit_fails_leaves_the_flow_on_its_stored_slot_and_its_new_one_retired(
        node, atsss, store, waits, monkeypatch):
    """The store refuses the commit of a PUT that gave the video session slot 2 and wrote rules
    naming it: the maps are put back as the store holds them (the rules naming slot 1, whose running
    weights the next frame moves), and slot 2, which a run may have read, is given again only after
    a wait (web, with slots 1 and 2 only)."""
    atsss.create_session(ADMIN, "ue7", weighted_session("active_standby"))
    steer_flows(atsss, "video", [VIDEO], SteeringMode.WEIGHTED)

    def refuse_commit(transaction: store_module.Transaction) -> None:
        raise StoreError("commit: disk I/O error")

    with monkeypatch.context() as failing, pytest.raises(StoreError):
        failing.setattr(store_module.Transaction, "commit", refuse_commit)
        steer_flows(atsss, "video", [VIDEO], SteeringMode.ROUND_ROBIN)

    assert stored.state_slots(store) == {("operator", "video"): 1}
    assert {rule.arg >> abi.RULE_MODE_BITS for rule in atsss.rules.rules.values()} == {1}
    assert out_path(send(node, flow_packet())[1]) == CELL
    assert list(AtsssMaps(node.table).flow_state(1).current[:2]) == [-1, 1]
    monkeypatch.setattr(stored, "MAX_FLOW_STATES", 3)
    steer_flows(atsss, "web", [WEB], SteeringMode.WEIGHTED)
    assert stored.state_slot(store, "operator", "web") == 2
    assert len(waits) == 1


def test_a_start_zeroes_the_flow_states_no_rule_of_the_maps_names_before_its_rules_name_them(
        node, atsss, store, node_ns, tmp_path):
    """The service's start-up loader (stored_rules_afresh, as netapp serve loads it): the video
    session's slot 1, which the maps' rules name, keeps its running weights over the restart; slot 2,
    held by a web session stored as migration 15 leaves one (a slot its rules never named in the
    maps), and slot 3, held by none, both left with running weights, are zeroed before the
    reconcile's rules name them: the web flow's frames are the weights' split from the first."""
    atsss.create_session(ADMIN, "ue7", weighted_session("active_standby"))
    steer_flows(atsss, "video", [VIDEO], SteeringMode.WEIGHTED)
    send(node, flow_packet())
    left = abi.FlowState()
    left.current[:2] = [7, -7]
    node.table("dpp_atsss_flow_state").update([(c_uint32(2), left), (c_uint32(3), left)])
    with store.transaction():
        stored.save_mts(store, "operator", "web", UE, {"flowFilter": [WEB], "mode": "weighted"},
                        datetime.now(timezone.utc), filtered=True)
        stored.hold_state_slot(store, 2, "operator", "web")

    service = NetAppService(settings_for(tmp_path / "again"), dataplane=Lent(node), store=Lent(store))
    service.load_function_rules("atsss", lambda opened: stored_rules_afresh(opened, service.dataplane))
    service.start()
    try:
        again = Atsss.start(store, node.table, netns=node_ns, rules=service.function_rules("atsss"))
        maps = AtsssMaps(node.table)
        assert list(maps.flow_state(1).current[:2]) == [-1, 1]
        assert list(maps.flow_state(3).current[:2]) == [0, 0]
        assert [out_path(send(node, flow_packet(sport=6000))[1]) for _ in range(4)] == split(abi.Mode.WEIGHTED, 4)
        assert again.unsteer("operator", "video") and again.unsteer("operator", "web")
    finally:
        service.close()


def test_a_version_15_store_with_more_stateful_flow_sessions_than_slots_gives_them_the_slots_there_are(tmp_path):
    """Migration 15 gives slots 1..MAX_FLOW_STATES - 1, the last of the map; the one session past it
    gets none (its rules keep the ATSSS session's state, as before the migration)."""
    raw = store_at_version(tmp_path / "netapp.db", 15)
    raw.executemany("INSERT INTO atsss_mts_sessions VALUES ('t', ?, '10.60.0.5', 1, '{\"mode\": \"weighted\"}', "
                    "'2026-01-01', '2026-01-01')", [(f"s{number:05}",) for number in range(abi.MAX_FLOW_STATES)])
    raw.commit()
    raw.close()
    store = Store.open(tmp_path / "netapp.db")
    try:
        slots = stored.state_slots(store)
        assert sorted(slots.values()) == list(range(1, abi.MAX_FLOW_STATES))
        assert ("t", f"s{abi.MAX_FLOW_STATES - 1:05}") not in slots
    finally:
        store.close()
