"""MEC 015 MTS sessions with flow filters in the pipeline (dpp.bpf.o, BPF_PROG_TEST_RUN on dpp_xdp):
their rules written through the service's rule machinery (netapp.service.function_rules, the
classifier's maps) by ATSSS's service, the flows a filter selects leave in the MTS session's mode
and the UE's other flows in the session's own, each frame compared byte for byte with the frame
built here from RFC 4340's layouts (tests/atsss/atsss.py). A near miss (a port off by one, another
protocol, another DSCP, another source) keeps the session's mode; a deleted MTS session gives its
flows back to it; a rule never acts on another UE's downlink, nor on another tenant's; a REDUNDANT
flow is broadcast to the session's ports while its other flows are not; a round-robin flow takes
its turns whatever another flow's frames come between; a restart (the NetApp service started again
over the maps: its start-up reconcile, netapp.atsss.flows.stored_rules) puts the rules back, where
one without ATSSS's loader leaves none; a filter as specific as another session's overlapping one
is refused naming it."""

from __future__ import annotations

import ipaddress
import struct
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from bench.packets import internet_checksum
from netapp.atsss import store as stored
from netapp.atsss.abi import Access, SessionFlags
from netapp.atsss.flows import session_rules, stored_rules
from netapp.atsss.index import SessionIndex
from netapp.atsss.models import AtsssSessionSpec, SteeringMode
from netapp.atsss.service import Atsss
from netapp.atsss.table import AtsssMaps, session_key
from netapp.core.config import Settings
from netapp.dataplane.facade import Dataplane
from netapp.service.contract import InvalidInput, Principal, Scope
from netapp.service.function_rules import FunctionRules
from netapp.service.service import NetAppService
from netapp.service.state import ServiceState
from netapp.service.store import Store, StoreError
from tests.atsss.atsss import PathSpec, decode, ethernet, expected_frame, path_body, ue_packet
from tests.utils.dataplane import Lent
from tests.utils.kernel import require_kernel, veth_namespace
from tests.utils.maps import pinned_instance
from tests.utils.service import grant_subnets, settings_for

XDP_TX = "TX"
ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
UE, OTHER_UE = "10.60.0.7", "10.70.0.8"  # tenant-a's, tenant-b's
SERVER = "203.0.113.10"
CELL = PathSpec("192.0.2.1", "198.51.100.7", 5001, 5002, Access.THREE_GPP,
                bytes.fromhex("02000000aa01"), bytes.fromhex("02000000bb01"))
WIFI = PathSpec("192.0.2.2", "203.0.113.7", 5003, 5004, Access.NON_THREE_GPP,
                bytes.fromhex("02000000aa02"), bytes.fromhex("02000000bb02"))
UDP, TCP = 17, 6
# The video flow: from SERVER's port 5000 over UDP with DSCP 34 (AF41).
VIDEO = {"dstIp": UE, "sourceIp": SERVER, "sourcePort": [5000], "protocol": UDP, "dscp": 34}


def flow_packet(ue: str = UE, src: str = SERVER, sport: int = 5000, dport: int = 40000, proto: int = UDP,
                dscp: int = 34, payload: bytes = b"downlink data") -> bytes:
    """An IPv4 packet to the UE of a flow: UDP, or TCP (a bare header), its DSCP in the TOS."""
    if proto == TCP:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x18, 65535, 0, 0) + payload
    else:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    head = struct.pack("!BBHHHBBH4s4s", 0x45, dscp << 2, 20 + len(l4), 1, 0, 63, proto, 0,
                       ipaddress.ip_address(src).packed, ipaddress.ip_address(ue).packed)
    return head[:10] + struct.pack("!H", internet_checksum(head)) + head[12:] + l4


def session(name: str = "ue7", ue: str = UE, mode: str = "round_robin", step: int = 0) -> AtsssSessionSpec:
    return AtsssSessionSpec.model_validate({
        "name": name, "ue": ue, "mode": mode,
        "paths": [path_body(CELL, peer_port=CELL.dport + 2 * step), path_body(WIFI, peer_port=WIFI.dport + 2 * step)]})


@pytest.fixture(scope="module")
def node() -> Iterator[Dataplane]:
    require_kernel()
    with pinned_instance("atsss-flows") as name:
        dp = Dataplane.open(instance=name)
        try:
            yield dp
        finally:
            dp.close()


def rule_machinery(dp: Dataplane) -> ServiceState:
    """The service's rule machinery over the instance (its index, slots, shapes and lock)."""
    return ServiceState(Settings(auth_disabled=True), dp, None, lambda: datetime.now(timezone.utc))


@pytest.fixture
def atsss(node, store, node_ns) -> Iterator[Atsss]:
    """ATSSS's service over the instance, in the namespace of the node's addresses (a tenant's path's
    local must be one), the tenants granted their UEs' pools."""
    grant_subnets(store, {"tenant-a": (UE, ()), "tenant-b": (OTHER_UE, ())})
    state = rule_machinery(node)
    service = Atsss.start(store, node.table, netns=node_ns, rules=FunctionRules(state, "atsss"))
    yield service
    for tenant, mts_id, _, _ in stored.load_mts(store):
        service.unsteer(tenant, mts_id)
    for found in service.list_sessions(ADMIN):
        service.delete_session(ADMIN, f"{found.tenant}/{found.name}")
    with state.lock:  # whatever a failed test left in the classifier
        change = state.rule_change()
        for rule_id in list(state.index.rule_ids()):
            change.remove(rule_id)
        change.apply_to_maps()


def steer_flows(atsss: Atsss, mts_id: str, filters: list[dict[str, Any]], mode: SteeringMode,
                tenant: str = "operator", ue: str = UE) -> None:
    body = {"flowFilter": filters, "mtsMode": 0}
    atsss.steer(tenant, mts_id, ue, mode, body, field="flowFilter[0].dstIp", mode_field="mtsMode",
                flows=session_rules(mts_id, ue, filters, mode))


def out_path(frame: bytes) -> Optional[PathSpec]:
    """The path an encapsulated frame leaves on, by its outer destination."""
    peer = decode(frame).dst
    return next((spec for spec in (CELL, WIFI) if spec.peer == peer), None)


def send(dp: Dataplane, packet: bytes) -> tuple[str, bytes]:
    outcome = dp.test_run(ethernet(packet))
    return outcome.verdict, outcome.data


def session_flags(dp: Dataplane, ue: str = UE) -> int:
    value = SessionIndex(dp.table).get(session_key(ipaddress.ip_address(ue)))
    assert value is not None
    return value.flags


def test_a_filtered_flow_runs_its_mts_mode_and_the_others_the_sessions(node, atsss):
    """Round-robin would send the four frames CELL, WIFI, CELL, WIFI (main's behaviour): the video
    flow's two go out on CELL, active-standby's first path up, and the others take their turns."""
    atsss.create_session(ADMIN, "ue7", session())
    steer_flows(atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY)
    assert session_flags(node) & SessionFlags.FLOW_RULES
    video, other = flow_packet(), flow_packet(src="198.51.100.99", sport=7000)

    sent = [send(node, video), send(node, video), send(node, other), send(node, other)]

    assert sent == [(XDP_TX, expected_frame(CELL, 0, 0, video)), (XDP_TX, expected_frame(CELL, 1, 1, video)),
                    (XDP_TX, expected_frame(CELL, 2, 2, other)), (XDP_TX, expected_frame(WIFI, 0, 3, other))]


def test_a_round_robin_flow_takes_its_turns_between_another_flows_frames(node, atsss):
    """The session active-standby (CELL), the video flow round-robin, their frames interleaved 1:1:
    turns counted by MP_SEQ number would give the video flow every other number, all on CELL; its
    own turns alternate its paths, while its MP_SEQ numbers still come from the session's one
    counter (0, 2, 4, 6: the other flow's frames took 1, 3, 5, 7)."""
    atsss.create_session(ADMIN, "ue7", session(mode="active_standby"))
    steer_flows(atsss, "video", [VIDEO], SteeringMode.ROUND_ROBIN)
    video, other = flow_packet(), flow_packet(src="198.51.100.99", sport=7000)

    sent = [(send(node, video)[1], send(node, other)[1]) for _ in range(4)]

    assert [out_path(frame) for frame, _ in sent] == [CELL, WIFI, CELL, WIFI]
    assert [decode(frame).mp_seq for frame, _ in sent] == [0, 2, 4, 6]
    assert [(out_path(frame), decode(frame).mp_seq) for _, frame in sent] == [(CELL, n) for n in (1, 3, 5, 7)]


def test_an_ipv6_ues_flow_is_selected_by_a_prefix_of_its_source(node, atsss):
    """An IPv6 UE (its rule's key: the /128 of the UE, the source prefix, UDP, the port): its
    server's UDP from port 443 runs active-standby, once the MTS session is there."""
    ue6 = "2001:db8:60::7"
    atsss.create_session(ADMIN, "ue6", session("ue6", ue6))
    packet = ue_packet(ue6)  # UDP from 2001:db8:dd::7 port 443
    before = [out_path(send(node, packet)[1]) for _ in range(2)]

    steer_flows(atsss, "video6", [{"dstIp": ue6, "sourceIp": "2001:db8:dd::/48", "protocol": UDP,
                                   "sourcePort": [443]}], SteeringMode.ACTIVE_STANDBY, ue=ue6)

    assert (before, [out_path(send(node, packet)[1]) for _ in range(2)]) == ([CELL, WIFI], [CELL, CELL])


@pytest.mark.parametrize("near_miss", [
    {"sport": 5001}, {"sport": 4999}, {"proto": TCP}, {"dscp": 0}, {"dscp": 35}, {"src": "203.0.113.11"},
])  # fmt: skip
def test_a_near_miss_keeps_the_sessions_mode(node, atsss, near_miss):
    """Active-standby would send both frames on CELL; round-robin takes CELL, then WIFI."""
    atsss.create_session(ADMIN, "ue7", session())
    steer_flows(atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY)
    packet = flow_packet(**near_miss)

    paths = [out_path(send(node, packet)[1]) for _ in range(2)]

    assert paths == [CELL, WIFI]


def test_the_most_specific_filter_wins_and_each_flow_keeps_its_sessions_mode(node, atsss):
    """Two MTS sessions of one UE: the server's UDP (a prefix and the protocol: 24 + 8 bits) in
    smallest delay (WIFI: its RTT is the smaller), its port 5000 (the same and a port: 48 bits) in
    active-standby (CELL); the server's other ports run the first, anything else round-robin."""
    spec = session().model_dump(mode="json")
    spec["paths"][0]["rtt_us"], spec["paths"][1]["rtt_us"] = 30000, 5000
    atsss.create_session(ADMIN, "ue7", AtsssSessionSpec.model_validate(spec))
    steer_flows(atsss, "server", [{"dstIp": UE, "sourceIp": "203.0.113.0/24", "protocol": UDP}],
                SteeringMode.SMALLEST_DELAY)
    steer_flows(atsss, "video", [{"dstIp": UE, "sourceIp": "203.0.113.0/24", "protocol": UDP,
                                  "sourcePort": [5000]}], SteeringMode.ACTIVE_STANDBY)

    video = [out_path(send(node, flow_packet(sport=5000))[1]) for _ in range(2)]
    server = [out_path(send(node, flow_packet(sport=5001))[1]) for _ in range(2)]

    assert (video, server) == ([CELL, CELL], [WIFI, WIFI])


def test_a_deleted_mts_session_gives_its_flows_back_to_the_sessions_mode(node, atsss):
    atsss.create_session(ADMIN, "ue7", session())
    steer_flows(atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY)
    assert [out_path(send(node, flow_packet())[1]) for _ in range(2)] == [CELL, CELL]

    assert atsss.unsteer("operator", "video")

    assert not session_flags(node) & SessionFlags.FLOW_RULES, "no rules left: no lookup"
    assert [out_path(send(node, flow_packet())[1]) for _ in range(2)] == [CELL, WIFI]


def test_a_replaced_filter_selects_the_new_flow_only(node, atsss):
    atsss.create_session(ADMIN, "ue7", session())
    steer_flows(atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY)
    steer_flows(atsss, "video", [{**VIDEO, "sourcePort": [6000]}], SteeringMode.ACTIVE_STANDBY)

    old = [out_path(send(node, flow_packet(sport=5000))[1]) for _ in range(2)]
    new = [out_path(send(node, flow_packet(sport=6000))[1]) for _ in range(2)]

    assert (old, new) == ([CELL, WIFI], [CELL, CELL])


def test_a_rule_never_acts_on_another_ues_downlink(node, atsss):
    """Tenant-b's UE, its session round-robin too: the same flow to it, byte for byte but its
    address, runs round-robin while tenant-a's UE's runs active-standby."""
    atsss.create_session(ADMIN, "tenant-a/ue7", session())
    atsss.create_session(ADMIN, "tenant-b/ue8", session("ue8", OTHER_UE, step=1))
    steer_flows(atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY, tenant="tenant-a")

    mine = [out_path(send(node, flow_packet())[1]) for _ in range(2)]
    theirs = [out_path(send(node, flow_packet(ue=OTHER_UE))[1]) for _ in range(2)]

    assert (mine, theirs) == ([CELL, CELL], [CELL, WIFI])
    assert not session_flags(node, OTHER_UE) & SessionFlags.FLOW_RULES


def test_a_tenant_cannot_steer_flows_of_another_tenants_ue(node, atsss):
    atsss.create_session(ADMIN, "tenant-a/ue7", session())

    with pytest.raises(InvalidInput) as refused:
        steer_flows(atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY, tenant="tenant-b")

    assert refused.value.field == "flowFilter[0].dstIp"
    assert [out_path(send(node, flow_packet())[1]) for _ in range(2)] == [CELL, WIFI]


def test_a_filter_as_specific_as_another_sessions_overlapping_one_is_refused_naming_it(node, atsss):
    atsss.create_session(ADMIN, "ue7", session())
    steer_flows(atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY)

    with pytest.raises(InvalidInput) as duplicate:
        steer_flows(atsss, "again", [VIDEO], SteeringMode.SMALLEST_DELAY)
    with pytest.raises(InvalidInput) as alike:  # 32 + 16 + 8 + 6 bits as well, and one packet can match both
        steer_flows(atsss, "alike", [{"dstIp": UE, "sourceIp": SERVER, "dstPort": [40000], "protocol": UDP,
                                      "dscp": 34}], SteeringMode.SMALLEST_DELAY)

    assert duplicate.value.field == alike.value.field == "flowFilter[0]"
    assert "selects the same flows as flowFilter[0] of MTS session 'video'" in str(duplicate.value)
    assert "'video'" in str(alike.value)
    assert [out_path(send(node, flow_packet())[1]) for _ in range(2)] == [CELL, CELL], "video's rule stays"


def test_a_redundant_flow_is_broadcast_to_the_sessions_ports_and_the_others_are_not(node, tmp_path):
    """The session round-robin, its paths out of acc0 and acc1: the video flow REDUNDANT gives the
    session its group of ports (as a redundant session has) and its frames are broadcast to them;
    the UE's other flows leave on their path."""
    with veth_namespace("atsss-ftx", "acc0", "acc1") as netns:
        store = Store.open(tmp_path / "redundant.db", synchronous="NORMAL")
        state = rule_machinery(node)
        atsss = Atsss(store, AtsssMaps(node.table), netns=netns, program_fd=node.program_fd,
                      rules=FunctionRules(state, "atsss"))
        try:
            spec = session().model_dump(mode="json")
            for path, interface in zip(spec["paths"], ("acc0", "acc1")):
                path["interface"] = interface
            atsss.create_session(ADMIN, "ue7", AtsssSessionSpec.model_validate(spec))
            assert AtsssMaps(node.table).groups_ports() == {}, "round-robin: no copies, no group"
            steer_flows(atsss, "video", [VIDEO], SteeringMode.REDUNDANT)

            assert set(AtsssMaps(node.table).groups_ports()[0]) == {0, 1}
            assert send(node, flow_packet())[0] == "REDIRECT", "broadcast to its group in dpp_atsss_tx"
            assert send(node, flow_packet(sport=7000))[0] == XDP_TX

            atsss.unsteer("operator", "video")
            atsss.delete_session(ADMIN, "ue7")
            assert AtsssMaps(node.table).groups_ports() == {}
        finally:
            store.close()


def restarted(store: Store, node: Dataplane, state_dir: Path, load_rules: bool) -> NetAppService:
    """The NetApp service started again over the node's maps and the store, as `netapp serve` starts
    it (netapp.cli.serve): ATSSS's stored flow rules loaded for its first reconcile, or not."""
    service = NetAppService(settings_for(state_dir), dataplane=Lent(node), store=Lent(store))  # both left open
    if load_rules:
        service.load_function_rules("atsss", stored_rules)
    service.start()
    return service


def test_a_restart_puts_the_rules_back(node, atsss, store, node_ns, tmp_path):
    """The service's start-up reconcile makes the classifier hold what the store compiles to: started
    without ATSSS's loader it takes the video flow's rule out (the flow back in round-robin), so the
    rule found after a start with it was put back by its reconcile (NetAppService.load_function_rules),
    not left in the pinned maps."""
    atsss.create_session(ADMIN, "ue7", session())
    steer_flows(atsss, "video", [VIDEO], SteeringMode.ACTIVE_STANDBY)
    assert sorted(stored_rules(store)) == ["atsss#video#0#0"]

    without = restarted(store, node, tmp_path / "without", load_rules=False)
    Atsss.start(store, node.table, netns=node_ns, rules=without.function_rules("atsss"))
    emptied = [out_path(send(node, flow_packet())[1]) for _ in range(2)]
    without.close()
    service = restarted(store, node, tmp_path / "with", load_rules=True)
    try:
        again = Atsss.start(store, node.table, netns=node_ns, rules=service.function_rules("atsss"))

        assert emptied == [CELL, WIFI], "a start without the loader leaves no rule: round-robin"
        assert [out_path(send(node, flow_packet())[1]) for _ in range(2)] == [CELL, CELL]
        assert again.unsteer("operator", "video")
        assert [out_path(send(node, flow_packet())[1]) for _ in range(2)] == [CELL, WIFI]
    finally:
        service.close()


def test_the_store_holds_one_mts_session_without_filters_a_ue_and_any_number_with(store):
    """Migration 15 (netapp.atsss.schema.ATSSS_MTS_FLOWS): a UE is unique among the MTS sessions
    that take its whole downlink only."""
    when = datetime.now(timezone.utc)
    with store.transaction():
        for mts_id in ("video", "web"):
            stored.save_mts(store, "tenant-a", mts_id, UE, {"mode": "redundant"}, when, filtered=True)
        stored.save_mts(store, "tenant-a", "rest", UE, {"mode": "weighted"}, when)
    with pytest.raises(StoreError, match="UNIQUE"), store.transaction():
        stored.save_mts(store, "tenant-a", "another", UE, {"mode": "weighted"}, when)

    assert [mts_id for _, mts_id, _ in stored.mts_flows_of_ue(store, UE)] == ["video", "web"]
    assert stored.mts_of_ue(store, UE) == ("tenant-a", "rest")
