"""ATSSS as a stage of the NetApp's pipeline (dpp.bpf.o, as `netapp serve` loads it): a session
written by the control plane (netapp.atsss.service, into the pinned maps) changes what the
pipeline's entry does to a real frame (BPF_PROG_TEST_RUN on dpp_xdp): the downlink to its UE leaves
encapsulated on the path the scheduler picks, byte for byte the frame built here from RFC 4340's
layouts; the uplink from its path is decapsulated and the proxy's Ack is in the ring. A frame to
another UE, an uplink carrying another UE's packet, and every frame once the session is deleted
are left to the pipeline as before: untouched, and not run through the stage (its counter); the UE
filter holds the bits of the sessions' UEs alone, and a frame whose destination's bit is clear is
not looked up, even when a session has that address (as the control plane never leaves it). A
REDUNDANT session gets dpp_atsss_tx's entries from the control plane (its paths' interfaces, each
with its position's copy program) and its frames are broadcast to them (the copies themselves:
tests/atsss/test_redundant.py); a PRIORITY session's paths' priorities and congestion reach the
scheduler. The Ack sender (netapp.atsss.acks) sends the ring's Acks out of the interface the Data
came in on (a veth pair in a namespace of the test's), its counters of sent and refused Acks in a
poll's dpp_atsss_ack points and in /metrics."""

from __future__ import annotations

import ipaddress
import socket
from ctypes import c_uint32, c_uint64
from pathlib import Path as FilePath
from typing import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from netapp.atsss.abi import Access, UplinkReason, ue_filter_bit
from netapp.atsss.acks import AckRing, AckSender
from netapp.atsss.models import AtsssSessionPatch, AtsssSessionSpec
from netapp.atsss.service import Atsss
from netapp.atsss.telemetry import AckPoints
from netapp.atsss.table import AtsssMaps, address_words
from netapp.dataplane.abi import Prog
from netapp.dataplane.facade import Dataplane
from netapp.service.contract import Principal, Scope
from netapp.service.service import NetAppService
from netapp.service.store import Store
from netapp.telemetry.collector import Collector
from netapp.telemetry.poll import ATSSS_ACK, PointFilter
from netapp.telemetry.prometheus import scrape
from netapp.testbed.netns import entered, ifindex, run as ip
from tests.api.conftest import NoCounters
from tests.atsss.atsss import PathSpec, decode, path_body, ethernet, expected_frame, ue_packet
from tests.atsss.uplink import decapsulated, expected_ack, uplink_frame
from tests.utils.kernel import require_kernel, veth_namespace
from tests.utils.maps import pinned_instance, second_handle
from tests.utils.service import settings_for

ETH_P_ALL = 0x0003
XDP_PASS, XDP_TX = "PASS", "TX"  # the facade's names of the verdicts
ADMIN = Principal("operator", frozenset({Scope.ADMIN}))
UE, OTHER_UE = "10.60.0.7", "10.60.0.8"
CELL = PathSpec("192.0.2.1", "198.51.100.7", 5001, 5002, Access.THREE_GPP,
                bytes.fromhex("02000000aa01"), bytes.fromhex("02000000bb01"))
WIFI = PathSpec("2001:db8:1::1", "2001:db8:2::7", 5003, 5004, Access.NON_THREE_GPP,
                bytes.fromhex("02000000aa02"), bytes.fromhex("02000000bb02"))


def round_robin(ue: str = UE) -> AtsssSessionSpec:
    return AtsssSessionSpec.model_validate(
        {"name": "ue7", "ue": ue, "mode": "round_robin", "paths": [path_body(CELL), path_body(WIFI)]})


def redundant() -> AtsssSessionSpec:
    """round_robin()'s paths, out of acc0 and acc1, in redundant mode."""
    spec = round_robin().model_dump(mode="json")
    spec["mode"] = "redundant"
    for path, interface in zip(spec["paths"], ("acc0", "acc1")):
        path["interface"] = interface
    return AtsssSessionSpec.model_validate(spec)


@pytest.fixture(scope="module")
def node() -> Iterator[tuple[str, Dataplane]]:
    """The pipeline loaded and pinned once for these tests; each test leaves no session behind."""
    require_kernel()
    with pinned_instance("atsss-stage") as name:
        dp = Dataplane.open(instance=name)
        try:
            yield name, dp
        finally:
            dp.close()


@pytest.fixture
def atsss(node, tmp_path: FilePath) -> Iterator[Atsss]:
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    try:
        service = Atsss.start(store, node[1].table)
        yield service
        for session in service.list_sessions(ADMIN):
            service.delete_session(ADMIN, f"{session.tenant}/{session.name}")
    finally:
        store.close()


def staged(dp: Dataplane) -> int:
    """Frames the entry handed to ATSSS's stage (dpp_prog_stats' slot, summed over the CPUs)."""
    cpus = dp.table("dpp_prog_stats").get(c_uint32(Prog.ATSSS))
    return sum(cpu.packets for cpu in cpus)


def gate(dp: Dataplane) -> int:
    return int(dp.table("dpp_atsss_gate").get(c_uint32(0)))


def ue_bits(dp: Dataplane) -> set[int]:
    """The bits set in the UE filter (dpp_atsss_ues)."""
    return {word * 64 + i for word, bits in dp.table("dpp_atsss_ues").items() for i in range(64) if bits >> i & 1}


def bit_of(ue: str) -> int:
    return ue_filter_bit(address_words(ipaddress.ip_address(ue)))


def run(dp: Dataplane, frame: bytes) -> tuple[str, bytes]:
    outcome = dp.test_run(frame)
    return outcome.verdict, outcome.data


def test_a_session_put_through_the_service_steers_the_pipelines_downlink(node, atsss):
    _, dp = node
    inner = ue_packet(UE)
    assert (gate(dp), run(dp, ethernet(inner))) == (0, (XDP_PASS, ethernet(inner))), "no session: the pipeline's"

    atsss.create_session(ADMIN, "ue7", round_robin())
    before = staged(dp)
    first, second = run(dp, ethernet(inner)), run(dp, ethernet(inner, padding=6))

    assert (gate(dp), ue_bits(dp)) == (1, {bit_of(UE)})
    assert first == (XDP_TX, expected_frame(CELL, 0, 0, inner))
    assert second == (XDP_TX, expected_frame(WIFI, 0, 1, inner)), "round-robin: the next path, the next MP_SEQ"
    assert staged(dp) - before == 2


def test_a_sessions_checksum_coverage_reaches_its_frames_and_can_change(node, atsss):
    _, dp = node
    inner = ue_packet(UE, b"covered or not")
    spec = round_robin().model_dump(mode="json")
    atsss.create_session(ADMIN, "ue7", AtsssSessionSpec.model_validate({**spec, "checksum_coverage": "header"}))
    assert run(dp, ethernet(inner)) == (XDP_TX, expected_frame(CELL, 0, 0, inner, cscov=1))

    atsss.put_session(ADMIN, "ue7", AtsssSessionSpec.model_validate(spec))  # full coverage, the default
    assert run(dp, ethernet(inner)) == (XDP_TX, expected_frame(WIFI, 0, 1, inner)), "MP_SEQ goes on"


def test_a_frame_to_another_ue_is_left_to_the_pipeline(node, atsss):
    _, dp = node
    atsss.create_session(ADMIN, "ue7", round_robin())
    frame = ethernet(ue_packet(OTHER_UE))
    before = staged(dp)

    assert run(dp, frame) == (XDP_PASS, frame)
    assert staged(dp) == before, "not even handed to the stage"


def test_the_uplink_of_a_sessions_path_is_decapsulated_and_acknowledged(node, atsss):
    instance, dp = node
    [cell, _] = atsss.create_session(ADMIN, "ue7", round_robin()).slots
    handle = second_handle(instance)
    ring = AckRing(handle.map_fd("dpp_atsss_acks"))
    try:
        ring.drain()
        inner = ue_packet("198.51.100.80", b"uplink data", src=UE)
        assert run(dp, uplink_frame(CELL, inner, seq=7)) == (XDP_PASS, decapsulated(inner))
        [(_, ack)] = ring.drain()
        assert ack == expected_ack(CELL, seq=0, ack=7), "our first number on the path, acknowledging 7"

        # A packet of another UE inside this UE's path: not this session's to deliver.
        stranger = uplink_frame(CELL, ue_packet("198.51.100.80", b"spoofed", src=OTHER_UE), seq=8)
        counts = dp.table("dpp_atsss_uplink_stats")
        bad_before = sum(counts.get(c_uint32(UplinkReason.BAD_INNER)))
        assert run(dp, stranger) == (XDP_PASS, stranger)
        assert sum(counts.get(c_uint32(UplinkReason.BAD_INNER))) == bad_before + 1
        assert ring.drain() == []
        assert sum(cpu.rx_packets for cpu in dp.table("dpp_atsss_path_stats").get(c_uint32(cell))) == 1
    finally:
        ring.close()
        handle.close()


def test_a_deleted_session_leaves_the_pipeline_as_it_was(node, atsss):
    _, dp = node
    atsss.create_session(ADMIN, "ue7", round_robin())
    frame = ethernet(ue_packet(UE))
    assert decode(run(dp, frame)[1]).dst == CELL.peer

    atsss.delete_session(ADMIN, "ue7")
    before = staged(dp)
    uplink = uplink_frame(CELL, ue_packet("198.51.100.80", b"late", src=UE), seq=9)

    assert (gate(dp), ue_bits(dp)) == (0, set())
    assert run(dp, frame) == (XDP_PASS, frame)
    assert run(dp, uplink) == (XDP_PASS, uplink)
    assert staged(dp) == before
    assert list(dp.table("dpp_atsss_uplink").items()) == [], "its paths' uplink entries went with it"


@pytest.mark.parametrize("ue", [UE, "2001:db8:60::7"])
def test_a_frame_whose_ue_bit_is_clear_is_not_looked_up(node, atsss, ue):
    _, dp = node
    atsss.create_session(ADMIN, "ue7", round_robin(ue))
    frame, word = ethernet(ue_packet(ue)), bit_of(ue) // 64
    filter_ = dp.table("dpp_atsss_ues")
    bits = filter_.get(c_uint32(word))
    assert ue_bits(dp) == {bit_of(ue)}

    filter_.update([(c_uint32(word), c_uint64(bits & ~(1 << bit_of(ue) % 64)))])  # as if it had no session
    before = staged(dp)
    assert run(dp, frame) == (XDP_PASS, frame)
    assert staged(dp) == before, "its session is there, but its bit is not: not looked up"

    filter_.update([(c_uint32(word), c_uint64(bits))])
    assert run(dp, frame)[0] == XDP_TX
    assert staged(dp) == before + 1


def test_a_redundant_session_gets_its_copies_ports_and_its_frames_are_broadcast(node, tmp_path):
    instance, dp = node
    with veth_namespace("atsss-tx", "acc0", "acc1") as netns:
        indexes = {name: ifindex(netns, name) for name in ("acc0", "acc1")}
        store = Store.open(tmp_path / "redundant.db", synchronous="NORMAL")
        atsss = Atsss(store, AtsssMaps(dp.table), netns=netns, program_fd=dp.program_fd)
        try:
            atsss.create_session(ADMIN, "ue7", redundant())
            ids = {p["name"]: p["id"] for p in dp.status()["programs"]}

            assert AtsssMaps(dp.table).groups_ports() == {0: {0: (indexes["acc0"], ids["dpp_atsss_copy_0"]),
                                                              1: (indexes["acc1"], ids["dpp_atsss_copy_1"])}}
            assert run(dp, ethernet(ue_packet(UE)))[0] == "REDIRECT", "broadcast to its group in dpp_atsss_tx"

            atsss.delete_session(ADMIN, "ue7")
            assert AtsssMaps(dp.table).groups_ports() == {}
        finally:
            store.close()


def test_a_priority_session_takes_its_highest_priority_path_until_it_is_reported_congested(node, atsss):
    _, dp = node
    spec = round_robin().model_dump(mode="json")
    spec["mode"] = "priority"
    spec["paths"][0]["priority"], spec["paths"][1]["priority"] = 5, 1
    atsss.create_session(ADMIN, "ue7", AtsssSessionSpec.model_validate(spec))
    frame = ethernet(ue_packet(UE))

    assert [decode(run(dp, frame)[1]).dst for _ in range(2)] == [WIFI.peer] * 2

    atsss.patch_session(ADMIN, "ue7", AtsssSessionPatch.model_validate({"paths": [{"index": 1, "congested": True}]}))
    assert decode(run(dp, frame)[1]).dst == CELL.peer


def received_dccp(sock: socket.socket) -> bytes:
    """The first DCCP-over-IPv4 frame the socket gets (the link's own traffic, e.g. IPv6 router
    solicitations, skipped); socket.timeout when none comes."""
    while True:
        frame = sock.recv(2048)
        if frame[12:14] == b"\x08\x00" and frame[23] == 33:
            return frame


def assert_ack_telemetry(sender: AckSender, expected: dict[tuple[str, str], int]) -> None:
    """The sender's counters as a collector polls them (InfluxDB's points) and /metrics shows them."""
    collector = Collector(NoCounters(), node="edge-1")
    collector.add_source(AckPoints(sender.counters, "edge-1"))
    points = [p for p in collector.poll_once().points() if p.measurement == ATSSS_ACK]
    assert {(p.tags["outcome"], p.tags.get("errno", "")): p.fields["records"] for p in points} == expected
    samples = {(s.labels["outcome"], s.labels["errno"]): s.value for family in text_string_to_metric_families(
        scrape(collector, None).decode()) for s in family.samples if s.name == "dpp_atsss_ack_records_total"}
    assert samples == expected
    assert not list(collector.poll_once().points(PointFilter(tenant="carol"))), "node-wide: admins only"


def test_the_ack_sender_sends_the_rings_acks_out_of_the_interface_the_data_came_in_on(node, atsss):
    instance, dp = node
    atsss.create_session(ADMIN, "ue7", round_robin())
    handle = second_handle(instance)
    with veth_namespace("atsss-ack", "acc0", "acc1") as netns:
        sender = AckSender(AckRing(handle.map_fd("dpp_atsss_acks")), netns=netns)
        sender.drain()  # what earlier tests left
        with entered(netns):
            listener = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            listener.bind(("acc1", 0))
            listener.settimeout(5)
            acc0 = socket.if_nametoindex("acc0")
            data = uplink_frame(CELL, ue_packet("198.51.100.80", b"uplink data", src=UE), seq=41)
            assert dp.test_run(data, acc0).verdict == XDP_PASS
        try:
            assert sender.drain() == 1
            assert received_dccp(listener) == expected_ack(CELL, seq=0, ack=41), "out of acc0, to acc1"
            assert (sender.counters.sent, sender.counters.failed) == (1, {})

            ip(["ip", "-n", netns, "link", "set", "acc0", "down"])
            with entered(netns):
                dp.test_run(uplink_frame(CELL, ue_packet("198.51.100.80", b"more", src=UE), seq=42), acc0)
            assert sender.drain() == 1
            assert (sender.counters.sent, sender.counters.failed) == (1, {"ENETDOWN": 1}), "lost, and counted"
            assert_ack_telemetry(sender, {("sent", ""): 1, ("unreadable", ""): 0, ("refused", "ENETDOWN"): 1})
        finally:
            listener.close()
            sender.stop()
            handle.close()


def indexes_not_in_this_namespace(count: int) -> tuple[int, ...]:
    """`count` ifindexes no interface of the caller's namespace has."""
    def absent(index: int) -> bool:
        try:
            socket.if_indextoname(index)
        except OSError:
            return True
        return False

    return tuple(index for index in range(4000, 5000) if absent(index))[:count]


def test_after_a_reload_the_redundant_ports_run_the_new_copy_programs(tmp_path):
    """The service's reload (as `netapp serve` composes it) requeues ATSSS's groups of ports, through
    ATSSS, in the node's namespace: the same interfaces, the new programs. The ports' ifindexes are
    none of the test's own namespace: a requeue there would be refused (ENODEV), not pass unseen."""
    require_kernel()
    acc0, acc1 = indexes_not_in_this_namespace(2)
    with pinned_instance("atsss-reload") as instance, \
            veth_namespace("atsss-rl", "acc0", "acc1", indexes=(acc0, acc1)) as netns:
        service = NetAppService(settings_for(tmp_path, instance=instance, netns=netns))
        service.start()
        try:
            dp = service.dataplane
            atsss = Atsss.start(service.store, dp.table, netns, program_fd=dp.program_fd,
                                rules=service.function_rules("atsss"))
            service.serve_function("atsss", atsss)
            atsss.create_session(ADMIN, "ue7", redundant())
            maps = AtsssMaps(dp.table)
            old = maps.groups_ports()[0]

            service.reload_dataplane(ADMIN)

            ids = {p["name"]: p["id"] for p in dp.status()["programs"]}
            ports = [ifindex(netns, name) for name in ("acc0", "acc1")]
            assert ports == [acc0, acc1]
            assert maps.groups_ports() == {0: {position: (ports[position], ids[f"dpp_atsss_copy_{position}"])
                                               for position in old}}
            assert {bpf_prog for _, bpf_prog in old.values()}.isdisjoint(ids.values()), "the old programs are gone"
            assert service.health().checks["atsss"] == "ok"
        finally:
            service.close()
