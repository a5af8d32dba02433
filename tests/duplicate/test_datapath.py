"""DUPLICATE in the kernel: the pipeline's verdict and its maps (BPF_PROG_TEST_RUN), and real
copies out of veth ports (the same program replaying frames in live mode, dpp_upf_replay).

One namespace holds four veth pairs: frames come in on in0; a0, b0 and c0 are the ports copies may
leave by, and their peers a1, b1, c1 run xdp_pass (a frame redirected into a veth is only received
when its peer runs XDP). Two intents duplicate to {a0, b0} and {b0, c0}: each group is a DEVMAP
of its own, so a packet is broadcast to its group's ports only and c0 never sees {a0, b0}'s (were
the groups one map, as before, it would: no egress program drops a copy any more).

A third intent duplicates GTP-U T-PDUs of one TEID to {a0, b0} with a0 decapsulating (MEC 011's
DUPLICATE_DECAPSULATED): a0's DEVMAP entry runs dpp_dup_decap, so a1 gets the UE packet behind the
outer Ethernet addresses (compared with scapy's), b1 the frame as it came; a T-PDU whose payload is
not IP leaves b0 as it came, and its a0 copy is counted (tunnel_copy_failed) and dropped. A devmap
egress program only runs on a real broadcast, not under BPF_PROG_TEST_RUN: hence the veth ports."""

from __future__ import annotations

import secrets
from typing import Iterator

import pytest

from netapp.dataplane.facade import Dataplane, host_interfaces
from netapp.dataplane.groups import DevmapGroups
from netapp.duplicate.abi import GROUP_DECAP
from netapp.duplicate.compiler import group_id
from netapp.intents.compiler import compile_document
from netapp.intents.models import parse_document
from netapp.testbed import netns
from netapp.testbed.traffic import Capture
from tests.utils import packets
from tests.utils.arrivals import decapsulated, received, wait_for
from tests.utils.kernel import build_artifact, require_kernel

PAIRS = {"in0": "in1", "a0": "a1", "b0": "b1", "c0": "c1"}
AB, BC = "10.0.0.1", "10.0.0.2"  # the destinations the two intents duplicate
FRAMES = 20


def frame(dst: str, sport: int = 40000) -> bytes:
    return bytes(packets.ether(packets.ue_udp("10.9.0.1", dst, sport, 5004)))


def intent(intent_id: str, dst: str, interfaces: list[str]) -> dict:
    return {"id": intent_id, "match": {"dst": f"{dst}/32"}, "action": {"type": "duplicate", "interfaces": interfaces}}


DOCUMENT = {"intents": [intent("ab", AB, ["a0", "b0"]), intent("bc", BC, ["c0", "b0"])]}


@pytest.fixture(scope="module")
def ns() -> Iterator[str]:
    require_kernel()
    name = f"dpp-dup-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    try:
        for port, peer in PAIRS.items():
            netns.run(["ip", "link", "add", port, "type", "veth", "peer", "name", peer], netns=name)
            for end in (port, peer):
                netns.run(["ip", "link", "set", end, "up"], netns=name)
        for peer in ("a1", "b1", "c1"):
            netns.attach_xdp_object(name, peer, str(build_artifact("xdp_pass.bpf.o")))
        with netns.entered(name):
            yield name
    finally:
        netns.delete_namespace(name)


@pytest.fixture(scope="module")
def loaded(ns: str) -> Iterator[Dataplane]:
    with Dataplane.open(trace=True) as dataplane:
        yield dataplane


def holding(loaded: Dataplane, document: dict) -> Dataplane:
    """The module's instance holding `document`'s intents (whatever the test before left)."""
    loaded.apply_compiled(compile_document(parse_document(document), host_interfaces()))
    return loaded


@pytest.fixture
def dp(loaded: Dataplane) -> Dataplane:
    return holding(loaded, DOCUMENT)


def test_a_duplicated_packet_is_broadcast_to_the_groups_ports_which_the_maps_hold(dp):
    index = host_interfaces()
    outcome = dp.test_run(frame(AB))
    assert (outcome.verdict, outcome.action, outcome.intent) == ("REDIRECT", "duplicate", "ab")
    ab, bc = group_id([index["a0"], index["b0"]]), group_id([index["b0"], index["c0"]])
    # No metadata in front of the frame: the copies need no mark, their group is their ports.
    assert outcome.data == frame(AB)
    assert groups(dp) == {ab: {index["a0"], index["b0"]}, bc: {index["b0"], index["c0"]}}
    unmatched = dp.test_run(frame("10.0.0.3"))
    assert (unmatched.verdict, unmatched.action) == ("PASS", "pass")


def test_a_group_no_rule_names_any_more_leaves_the_maps(dp):
    index = host_interfaces()
    only_ab = {"intents": [DOCUMENT["intents"][0]]}
    dp.apply_compiled(compile_document(parse_document(only_ab), index))
    assert groups(dp) == {group_id([index["a0"], index["b0"]]): {index["a0"], index["b0"]}}


def groups(dp: Dataplane) -> dict[int, set[int]]:
    """group id -> its interfaces, as dpp_dup_tx's inner maps hold them (no devmap program)."""
    held = DevmapGroups(dp.table("dpp_dup_tx")).ports()
    assert all(program == 0 for ports in held.values() for _, program in ports.values())
    return {group: {ifindex for ifindex, _ in ports.values()} for group, ports in held.items()}


def test_each_port_of_the_group_gets_one_copy_of_every_frame_and_no_other_port_does(ns, dp):
    in0 = host_interfaces()["in0"]
    ab, bc = frame(AB), frame(BC, sport=40001)
    with Capture(ns, "a1", cpus=1) as a1, Capture(ns, "b1", cpus=1) as b1, Capture(ns, "c1", cpus=1) as c1:
        for _ in range(FRAMES):
            dp.upf_replay(ab, in0)
        dp.upf_replay(bc, in0)  # the marker: once c1 has it, any copy of `ab` c1 got is in too
        at_a, at_b = wait_for(a1, ab, FRAMES), wait_for(b1, ab, FRAMES)
        marker = wait_for(c1, bc, 1)
        assert (at_a, at_b, marker, received(c1, ab)) == (FRAMES, FRAMES, 1, 0)
        assert wait_for(b1, bc, 1) == 1 and received(a1, bc) == 0


# --- DUPLICATE_DECAPSULATED: one copy as it came, a0's without its GTP-U tunnel -------------------

DECAP_TEID = 0x5EED
DECAPSULATING = {"intents": [{"id": "decap", "match": {"teid": DECAP_TEID}, "action": {
    "type": "duplicate", "interfaces": ["a0", "b0"], "decapsulate": ["a0"]}}]}


def t_pdu(family: int, inner: bytes) -> bytes:
    """A GTP-U T-PDU of DECAP_TEID with a PDU Session Container carrying `inner`, over `family`."""
    return bytes(packets.outer_gtpu(packets.gtpu(DECAP_TEID, 9, ul=True, inner=inner), family=family))


def ours(capture: Capture, like: bytes) -> list[bytes]:
    """The frames `capture` got with the Ethernet addresses of `like` (not the stack's own chatter)."""
    return [rx.frame for rx in list(capture.frames) if rx.frame[:12] == like[:12]]


@pytest.fixture
def decap_dp(loaded: Dataplane) -> Dataplane:
    return holding(loaded, DECAPSULATING)


def test_a_decapsulating_port_runs_the_egress_program_and_the_group_id_says_so(decap_dp):
    index = host_interfaces()
    held = DevmapGroups(decap_dp.table("dpp_dup_tx")).ports()
    wanted = group_id([index["a0"], index["b0"]], [index["a0"]])
    assert wanted & GROUP_DECAP and set(held) == {wanted}
    programs = {ifindex: program for ifindex, program in held[wanted].values()}
    assert programs[index["b0"]] == 0 and programs[index["a0"]] != 0


def test_a_gtpu_copy_leaves_a0_decapsulated_and_b0_as_it_came(ns, decap_dp):
    in0 = host_interfaces()["in0"]
    inners = [bytes(packets.ue_udp("10.9.0.1", "10.0.0.9", 40000, 5004)),
              bytes(packets.ue_udp("2001:db8:9::1", "2001:db8::9", 40000, 5004))]
    frames = [t_pdu(4, inners[0]), t_pdu(6, inners[1])]
    with Capture(ns, "a1", cpus=1) as a1, Capture(ns, "b1", cpus=1) as b1:
        for one in frames:
            decap_dp.upf_replay(one, in0)
        for one, inner in zip(frames, inners):
            assert wait_for(a1, decapsulated(one, inner), 1) == 1
            assert wait_for(b1, one, 1) == 1
        assert len(ours(a1, frames[0])) == len(ours(b1, frames[0])) == 2


def test_a_gtpu_copy_that_cannot_be_decapsulated_is_counted_and_dropped_the_other_copy_leaves(ns, decap_dp):
    in0 = host_interfaces()["in0"]
    not_ip = t_pdu(4, b"\x00\x01")  # a T-PDU whose payload is not an IP packet: no UE packet to keep
    marker_inner = bytes(packets.ue_udp("10.9.0.1", "10.0.0.9", 40001, 5004))
    marker = t_pdu(4, marker_inner)
    before = decap_dp.reason_stats().get("tunnel_copy_failed", (0, 0))[0]
    with Capture(ns, "a1", cpus=1) as a1, Capture(ns, "b1", cpus=1) as b1:
        decap_dp.upf_replay(not_ip, in0)
        decap_dp.upf_replay(marker, in0)  # once a1 has it, any copy of `not_ip` a1 got is in too
        assert wait_for(b1, not_ip, 1) == 1
        assert wait_for(a1, decapsulated(marker, marker_inner), 1) == 1
        assert ours(a1, marker) == [decapsulated(marker, marker_inner)]  # nothing half rewritten either
    assert decap_dp.reason_stats()["tunnel_copy_failed"][0] == before + 1


def test_after_a_reload_the_decapsulating_port_runs_the_new_egress_program(decap_dp):
    index = host_interfaces()
    group = group_id([index["a0"], index["b0"]], [index["a0"]])
    old = {ifindex: program for ifindex, program in DevmapGroups(decap_dp.table("dpp_dup_tx")).ports()[group].values()}

    decap_dp.reload()
    decap_dp.copy_groups.requeue()

    ids = {p["name"]: p["id"] for p in decap_dp.status()["programs"]}
    now = {ifindex: program for ifindex, program in DevmapGroups(decap_dp.table("dpp_dup_tx")).ports()[group].values()}
    assert now == {index["a0"]: ids["dpp_dup_decap"], index["b0"]: 0} and old[index["a0"]] != ids["dpp_dup_decap"]
