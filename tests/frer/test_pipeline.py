"""FRER in the NetApp's pipeline (dpp.bpf.c, nf/frer/stage.h), in the kernel (BPF_PROG_TEST_RUN): on a
node with streams the entry hands every frame to the FRER stage first; a recovered stream's first
copy comes back to the pipeline without its R-tag and is classified like any frame, its duplicate is
eliminated and counted; a generated stream's frame is tagged and replicated, or, while its group of
ports is not held, counted and given the node's default verdict untagged; an R-tag cut short is
an encode error of its port; frames of no stream go through the pipeline as on a node without FRER,
and a node without streams never runs the stage."""

from __future__ import annotations

import secrets
import struct

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.dataplane.abi import Prog
from netapp.dataplane.facade import Dataplane, host_interfaces, interface_index
from netapp.dataplane.groups import DevmapGroups
from netapp.frer.abi import RTAG_ETHERTYPE, Gate
from netapp.frer.compiler import compile_streams
from netapp.frer.dataplane import FrerDataplane
from netapp.frer.models import FrerStream
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.testbed import netns
from tests.utils.kernel import require_kernel

TALKER, LISTENER = "10.20.0.1", "10.20.0.2"
RECOVERED, GENERATED, OTHER = 5001, 5002, 5003  # UDP destination ports of the streams and of other traffic
CLASSIFIED = {"id": "protected", "match": {"protocol": "udp", "dst_port": RECOVERED}, "action": {"type": "pass"}}


@pytest.fixture(scope="module")
def ns():
    require_kernel()
    name = f"dpp-frer-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    try:
        netns.run(["ip", "link", "add", "p0", "type", "veth", "peer", "name", "p1"], netns=name)
        netns.run(["ip", "link", "add", "q0", "type", "veth", "peer", "name", "q1"], netns=name)
        with netns.entered(name):
            yield name
    finally:
        netns.delete_namespace(name)


def ip_identity(dport: int) -> dict:
    return {"ip": {"source": TALKER, "destination": LISTENER, "protocol": "udp", "source_port": 4000,
                   "destination_port": dport}}


# The recovered stream never resets by time: on a loaded machine more than the default second may
# pass between a frame and its duplicate, and the duplicate would then pass.
STREAMS = [
    FrerStream.model_validate({"handle": 1, "identification": [ip_identity(RECOVERED)],
                               "recovery": {"pop": True, "reset_timeout_ms": 0}}),
    FrerStream.model_validate({"handle": 2, "identification": [ip_identity(GENERATED)],
                               "generation": {"ports": [{"interface": "p0"}, {"interface": "q0"}]}}),
]


def install(dp: Dataplane, streams: list[FrerStream]) -> FrerDataplane:
    frer = FrerDataplane(dp)
    frer.install(compile_streams(streams, lambda name: interface_index(name)))
    return frer


@pytest.fixture
def node(ns):
    dp = Dataplane.open(trace=True)
    try:
        dp.apply_compiled(compile_document(parse_document({"intents": [CLASSIFIED]}), host_interfaces()))
        yield dp
    finally:
        dp.close()


def udp(dport: int) -> bytes:
    return bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src=TALKER, dst=LISTENER)
                 / UDP(sport=4000, dport=dport) / (b"x" * 32))


def tagged(frame: bytes, seq: int) -> bytes:
    """The frame with an R-tag carrying `seq` behind its addresses."""
    return frame[:12] + struct.pack("!HHH", RTAG_ETHERTYPE, 0, seq) + frame[12:]


def reasons(dp: Dataplane) -> dict[str, int]:
    return {name: packets for name, (packets, _) in dp.reason_stats().items()}


def stage_runs(dp: Dataplane) -> int:
    return sum(counter.packets for counter in dp.table("dpp_prog_stats").get(int(Prog.FRER)))


def test_a_node_without_streams_never_runs_the_stage(node):
    outcome = node.test_run(tagged(udp(RECOVERED), 7))
    assert (outcome.verdict, outcome.reason) == ("PASS", "not_ip")  # an R-tag is not IP to the parser
    assert stage_runs(node) == 0


def test_the_first_copy_is_classified_without_its_tag_and_the_duplicate_is_eliminated(node):
    frer = install(node, STREAMS)
    first = node.test_run(tagged(udp(RECOVERED), 7))
    assert (first.verdict, first.intent) == ("PASS", "protected")  # back in the pipeline, classified
    assert first.data == udp(RECOVERED)  # popped
    duplicate = node.test_run(tagged(udp(RECOVERED), 7))
    assert duplicate.verdict == "DROP"
    assert reasons(node)["frer_eliminated"] == 1
    recovery = frer.recovery_read([1])[0]
    assert (recovery.passed, recovery.discarded) == (1, 1)
    assert stage_runs(node) == 2


def test_a_generated_stream_is_tagged_and_replicated_in_order(node):
    install(node, STREAMS)
    for seq in range(3):
        outcome = node.test_run(udp(GENERATED))
        assert outcome.verdict == "REDIRECT"
        meta, out = outcome.data[:4], outcome.data[4:]  # a test run's output starts at the metadata
        assert struct.unpack("<I", meta)[0] == 2  # the stream's handle, for the ports' egress program
        assert out == tagged(udp(GENERATED), seq)
    streams = node.table("dpp_frer_streams").get(2)
    assert streams.next_seq == 3


@pytest.mark.parametrize("default", ["pass", "drop"])
def test_a_generated_stream_without_its_group_gets_the_default_verdict_untagged_and_unnumbered(ns, default):
    dp = Dataplane.open(default_verdict=default)
    try:
        frer = install(dp, STREAMS)
        group = dp.table("dpp_frer_streams").get(2).tx_group
        ports = frer.groups()[group]
        frer.groups_clear([group])
        for _ in range(2):
            outcome = dp.test_run(udp(GENERATED))
            assert (outcome.verdict, outcome.data) == (default.upper(), udp(GENERATED))
        assert reasons(dp)["frer_no_group"] == 2
        assert dp.table("dpp_frer_streams").get(2).next_seq == 0, "no number taken"
        frer.groups_set({group: ports})  # held again: numbered from where the stream stood
        outcome = dp.test_run(udp(GENERATED))
        assert (outcome.verdict, outcome.data[4:]) == ("REDIRECT", tagged(udp(GENERATED), 0))
    finally:
        dp.close()


def test_frames_of_no_stream_go_through_the_pipeline_as_without_frer(node):
    install(node, STREAMS)
    other = node.test_run(udp(OTHER))
    assert (other.verdict, other.intent, other.data) == ("PASS", None, udp(OTHER))
    classified = node.test_run(udp(RECOVERED))  # the recovered stream's flow untagged: tagless, discarded
    assert classified.verdict == "DROP"
    unknown = node.test_run(tagged(udp(OTHER), 1))  # tagged, but no stream recovers it here
    assert unknown.verdict == "PASS"
    assert reasons(node)["frer_no_stream"] == 1
    assert stage_runs(node) == 3


def test_an_r_tag_cut_short_is_an_encode_error_of_its_port(node):
    install(node, STREAMS)
    p1 = interface_index("p1")
    outcome = node.test_run(udp(RECOVERED)[:12] + struct.pack("!HH", RTAG_ETHERTYPE, 0), ingress_ifindex=p1)
    assert outcome.verdict == "DROP"
    assert reasons(node)["frer_bad_rtag"] == 1
    errors = node.table("dpp_frer_port_stats").get(p1)
    assert sum(cpu.encode_errors for cpu in errors) == 1


def test_the_gate_closed_hands_nothing_to_the_stage(node):
    frer = install(node, STREAMS)
    frer.gate_set(Gate(0))
    outcome = node.test_run(tagged(udp(RECOVERED), 7))
    assert outcome.reason == "not_ip"
    assert stage_runs(node) == 0


def egress_id(dp: Dataplane) -> int:
    return next(p["id"] for p in dp.status()["programs"] if p["name"] == "dpp_frer_egress")


def test_a_stream_replicates_to_its_own_group_and_after_a_reload_its_vlan_port_runs_the_new_egress(node):
    vlan_q0 = FrerStream.model_validate({"handle": 2, "identification": [ip_identity(GENERATED)], "generation": {
        "ports": [{"interface": "p0"}, {"interface": "q0", "vlan": 7}]}})
    frer = install(node, [STREAMS[0], vlan_q0])
    p0, q0 = interface_index("p0"), interface_index("q0")
    group = node.table("dpp_frer_streams").get(2).tx_group
    # read back, a DEVMAP entry names its program by id; a port without a VLAN id runs none
    held = DevmapGroups(node.table("dpp_frer_tx")).ports({group: [p0, q0]})
    assert held == {group: {p0: (p0, 0), q0: (q0, egress_id(node))}}
    node.reload()
    frer.requeue()
    assert frer.ports() == [p0, q0]
    held = DevmapGroups(node.table("dpp_frer_tx")).ports({group: [p0, q0]})
    assert held == {group: {p0: (p0, 0), q0: (q0, egress_id(node))}}


def test_an_ip_identity_leaves_out_what_it_does_not_give_and_the_most_specific_wins(node):
    def generated(handle: int, **ip: object) -> FrerStream:
        return FrerStream.model_validate({"handle": handle, "identification": [{"ip": ip}],
                                          "generation": {"ports": [{"interface": "p0"}]}})

    install(node, [generated(3, destination="10.20.0.0/24", protocol="udp"),
                   generated(4, source=TALKER, destination="10.20.0.9", protocol="udp", destination_port=6000)])

    def stream_of(dst: str, dport: int) -> object:
        frame = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src=TALKER, dst=dst) / UDP(
            sport=4321, dport=dport)
        outcome = node.test_run(bytes(frame))
        return struct.unpack("<I", outcome.data[:4])[0] if outcome.verdict == "REDIRECT" else outcome.verdict

    assert stream_of("10.20.0.5", 7777) == 3  # any source, any port, in the /24
    assert stream_of("10.20.0.9", 6000) == 4  # the exact identity before the /24
    assert stream_of("10.20.0.9", 6001) == 3
    assert stream_of("10.21.0.1", 7777) == "PASS"  # outside both: the pipeline's
