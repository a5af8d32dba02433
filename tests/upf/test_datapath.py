"""The UPF's data path in the kernel (BPF_PROG_TEST_RUN): sessions compiled and applied through the
generic tables, scapy-built packets through the real program, every output frame compared byte for
byte with the frame scapy (its own GTP-U layers, scapy.contrib.gtp) builds for the expected result.
Each run is a single repetition: the program rewrites the buffer."""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import socket
from typing import Any, Iterator

import pytest
from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.layers.vxlan import VXLAN

from bench.libbpf import map_lookup
from netapp.dataplane.facade import Dataplane, interface_index
from netapp.dataplane.handle import possible_cpus
from netapp.testbed import netns
from netapp.upf.abi import QFI_ANY, DownlinkKey, FarAction, Output, PdrAction, PdrFlag, Role, UplinkKey, Usage
from netapp.upf.flows import parse_flow
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site, compile_session
from netapp.upf.models import (
    DuplicatingParameters,
    Far,
    ForwardingParameters,
    FSeid,
    FTeid,
    OuterHeaderCreation,
    Pdi,
    Pdr,
    Qer,
    Session,
    Urr,
)
from netapp.upf.pfcp.ies import Interface
from tests.utils.kernel import one_cpu, require_kernel  # noqa: F401 - one_cpu: a fixture
from tests.utils.packets.gtp import gtp_echo_request, gtp_end_marker, gtp_ext_raw, gtpu

N3_IP, N3_IP6, GNB, GNB6, N9_PEER = "10.3.0.1", "2001:db8:3::1", "10.3.0.9", "2001:db8:3::9", "10.9.0.2"
UE, UE6, SERVER = "10.45.0.7", "2001:db8:45::7", "192.0.2.10"
TEID, DL_TEID, N9_TEID = 0x1001, 0x2002, 0x3003
SDF = "permit out ip from any to assigned"
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}


def session(*, uplink_far: Far | None = None, sdf: bool = False, seid: int = 1) -> Session:
    """One UE: an uplink PDR on TEID (outer header removal, to the core) and downlink PDRs on its
    addresses (to the gNB, QFI 9 from the QER), one URR."""
    to_core = Far(id=1, apply_action=frozenset({"FORW"}),
                  forwarding=ForwardingParameters(destination_interface=Interface.CORE))
    to_gnb = Far(id=2, apply_action=frozenset({"FORW"}), forwarding=ForwardingParameters(
        destination_interface=Interface.ACCESS,
        outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv4", teid=DL_TEID, address=GNB)))
    pdrs = {
        1: Pdr(id=1, precedence=100, pdi=Pdi(source_interface=Interface.ACCESS,
                                               local_fteid=FTeid(teid=TEID, ipv4=N3_IP)),
               outer_header_removal=0, far_id=1, qer_ids=(1,), urr_ids=(1,)),
        2: Pdr(id=2, precedence=100, pdi=Pdi(source_interface=Interface.CORE,
                                               ue_ip={"ipv4": UE, "ipv6": UE6, "destination": True},
                                               sdf_filters=(parse_flow(SDF),) if sdf else ()),
               far_id=2, qer_ids=(1,), urr_ids=(1,)),
    }
    return Session(seid=seid, node_id="smf", remote=FSeid(seid=9, ipv4="10.0.0.1"), pdrs=pdrs,
                   fars={1: uplink_far or to_core, 2: to_gnb}, qers={1: Qer(id=1, qfi=9)},
                   urrs={1: Urr(id=1, measurement_method=frozenset({"VOLUM"}))})


N3_IF = N6_IF = OTHER_IF = 0  # the ifindexes of the module's namespace's interfaces (fixture `dp`)


@contextlib.contextmanager
def instance(**options: Any) -> Iterator[Dataplane]:
    """An instance (Dataplane.open's `options`) inside a namespace of its own, whose three veth ends
    are the N3, the N6 and an interface without a role (BPF_PROG_TEST_RUN wants a real ingress
    device): N3_IF, N6_IF, OTHER_IF."""
    global N3_IF, N6_IF, OTHER_IF
    require_kernel()
    name = f"dpp-upf-{secrets.token_hex(3)}"
    netns.add_namespace(name)
    try:
        for a, b in (("n3", "n3p"), ("n6", "n6p"), ("ot", "otp")):
            netns.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], netns=name)
        with netns.entered(name):
            N3_IF, N6_IF, OTHER_IF = (interface_index(ifname) for ifname in ("n3", "n6", "ot"))
            with Dataplane.open(trace=True, **options) as opened:
                yield opened
    finally:
        netns.delete_namespace(name)


@pytest.fixture(scope="module")
def dp():
    with instance() as opened:
        yield opened


def applier(dp: Dataplane, output: Output = Output.PASS) -> BpfApplier:
    roles = {N3_IF: (Role.N3, 0), N6_IF: (Role.N6, 1)}
    site = Site(net_instances={"internet": 1, "ims": 2}, default_instance="internet", n3_ipv4=N3_IP,
                n3_ipv6=N3_IP6, output=output)
    return BpfApplier(dp.table, site, iface_entries(roles, N3_IP, N3_IP6))


@pytest.fixture
def installed(dp):
    upf = applier(dp)
    upf.apply(None, session())
    yield upf
    upf.apply(session(), None)


def ue_packet(family: int = 4):
    ue = IP(src=UE, dst=SERVER) if family == 4 else IPv6(src=UE6, dst="2001:db8:99::1")
    return ue / UDP(sport=40000, dport=5004) / (b"u" * 64)


def uplink_frame(teid: int = TEID, family: int = 4, exts: int = 1, dst: str = N3_IP) -> bytes:
    """N3 GTP-U with a PDU Session Container and exts - 1 further extension headers."""
    chain = [gtp_ext_raw(0x81, b"\x00\x01")] * max(exts - 1, 0)
    message = gtpu(teid, 9 if exts else None, ul=True, exts=chain, inner=ue_packet(family))
    return bytes(Ether(**MACS) / IP(src=GNB, dst=dst) / UDP(sport=2152, dport=2152) / message)


def decapsulated(family: int = 4) -> bytes:
    return bytes(Ether(**MACS) / ue_packet(family))


@pytest.mark.parametrize("exts", [0, 1, 3])
@pytest.mark.parametrize("family", [4, 6])
def test_uplink_is_decapsulated_whatever_the_extension_chain(dp, installed, family, exts):
    out = dp.test_run(uplink_frame(family=family, exts=exts), N3_IF)
    assert (out.verdict, out.action, out.reason) == ("PASS", "upf", None)
    assert out.data == decapsulated(family)


def in_vxlan(inner: bytes, dst: str = "10.1.0.2") -> bytes:
    """The frame inside VXLAN, its outer IPv4 header to dst."""
    return bytes(Ether(**MACS) / IP(src="10.1.0.1", dst=dst) / UDP(sport=1234, dport=4789) / VXLAN(vni=0x445)
                 / Ether(inner))


def test_uplink_inside_vxlan_is_decapsulated_to_the_ue_packet(dp, installed):
    out = dp.test_run(in_vxlan(uplink_frame()), N3_IF)
    assert out.action == "upf"
    assert out.data == decapsulated()


@pytest.mark.parametrize(
    ("frame", "ifname", "reason"),
    [
        (lambda: uplink_frame(teid=TEID + 1), "n3", "upf_teid_miss"),  # wrong TEID, our address
        (lambda: uplink_frame(teid=0x7FFFFFFF), "n3", "upf_teid_miss"),  # past dpp_upf_teids
        (lambda: uplink_frame(dst="10.3.0.2"), "n3", None),  # another address: transit GTP-U
        (lambda: uplink_frame(teid=TEID + 1, dst="10.3.0.2"), "n3", None),  # no TEID of ours, not to us
        # the tunnel is VXLAN's inner IPv4 header (the N3 fast path's second layout), not the outer one
        (lambda: in_vxlan(uplink_frame(dst="10.3.0.2"), dst=N3_IP), "n3", None),
        (lambda: uplink_frame(), "ot", None),  # an interface without a role
        (lambda: uplink_frame(), "n6", None),  # GTP-U on N6 is not decapsulated
        (lambda: uplink_frame(teid=TEID + 1), "n6", None),  # nor is a TEID no PDR has a miss there
    ],
    ids=["wrong-teid", "teid-past-array", "wrong-address", "wrong-teid-and-address", "vxlan-to-us-tunnel-not",
         "no-role", "n6-role", "n6-wrong-teid"],
)
def test_near_misses_are_left_to_the_pipeline(dp, installed, frame, ifname, reason):
    sent = frame()
    out = dp.test_run(sent, interface_index(ifname))
    assert out.action != "upf" and out.reason == reason
    assert out.data == sent
    if reason is None:
        assert out.key["teid"] in (0, Ether(sent)[GTP_U_Header].teid)  # classified on the tunnel, as before


def test_downlink_is_encapsulated_with_the_qers_qfi_in_a_pdu_session_container(dp, installed):
    sent = Ether(**MACS) / IP(src=SERVER, dst=UE) / UDP(sport=5004, dport=40000) / (b"d" * 64)
    out = dp.test_run(bytes(sent), N6_IF)
    expected = (Ether(**MACS) / IP(src=N3_IP, dst=GNB, id=0, ttl=64) / UDP(sport=2152, dport=2152, chksum=0)
                / GTP_U_Header(teid=DL_TEID, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=0, QFI=9)
                / sent[IP])
    assert (out.verdict, out.action) == ("PASS", "upf")
    assert out.data == bytes(expected)


def test_the_downlink_hashs_key_is_made_in_this_cpus_room_not_on_the_stack(dp, installed, one_cpu):
    """An IPv6 UE's downlink entry is looked up in dpp_upf_downlink by a key made in this CPU's room
    (dpp_upf_dl_key_room): off the stacks of the entry and of dpp_upf_sdf, where the longest chains
    of calls start (tests/dataplane/test_stack_depth.py)."""
    sent = Ether(**MACS) / IPv6(src="2001:db8:99::1", dst=UE6) / UDP(sport=5004, dport=40000) / (b"d" * 64)
    out = dp.test_run(bytes(sent), N6_IF)
    assert (out.verdict, out.action, Ether(out.data)[GTP_U_Header].teid) == ("PASS", "upf", DL_TEID)
    room = (DownlinkKey * possible_cpus())()
    assert map_lookup(dp.map_fd("dpp_upf_dl_key_room"), ctypes.c_uint32(0), room)
    key = room[min(os.sched_getaffinity(0))]
    assert (key.net_instance, key.family, bytes(key.addr)) == (1, 6, socket.inet_pton(socket.AF_INET6, UE6))


def test_a_modification_moves_the_downlink_to_the_new_gnb(dp):
    """A handover: the downlink entry is replaced in place (old and new session share its key)."""
    upf = applier(dp)
    before = session()
    far = before.fars[2]
    tunnel = far.forwarding.outer_header_creation.model_copy(update={"teid": DL_TEID + 1, "address": "10.3.0.10"})
    moved = before.model_copy(update={"fars": {**before.fars, 2: far.model_copy(update={
        "forwarding": far.forwarding.model_copy(update={"outer_header_creation": tunnel})})}})
    upf.apply(None, before)
    try:
        upf.apply(before, moved)
        sent = Ether(**MACS) / IP(src=SERVER, dst=UE) / UDP(sport=5004, dport=40000) / (b"d" * 64)
        out = Ether(dp.test_run(bytes(sent), N6_IF).data)
        assert (out[IP].dst, out[GTP_U_Header].teid) == ("10.3.0.10", DL_TEID + 1)
    finally:
        upf.apply(moved, None)


def test_downlink_over_ipv6_outer_carries_a_computed_udp_checksum(dp):
    upf = applier(dp)
    six = session()
    far = six.fars[2].model_copy(update={"forwarding": ForwardingParameters(
        destination_interface=Interface.ACCESS,
        outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv6", teid=DL_TEID, address=GNB6))})
    six = six.model_copy(update={"fars": {**six.fars, 2: far}})
    upf.apply(None, six)
    try:
        sent = Ether(**MACS) / IPv6(src="2001:db8:99::1", dst=UE6) / UDP(sport=5004, dport=40000) / (b"d" * 301)
        out = dp.test_run(bytes(sent), N6_IF)
        expected = (Ether(**MACS) / IPv6(src=N3_IP6, dst=GNB6, hlim=64) / UDP(sport=2152, dport=2152)
                    / GTP_U_Header(teid=DL_TEID, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=0, QFI=9)
                    / sent[IPv6])
        assert out.data == bytes(expected)
    finally:
        upf.apply(six, None)


def test_another_network_instance_does_not_reach_the_ue(dp):
    upf = applier(dp)
    ims = session()
    pdr = ims.pdrs[2].model_copy(update={"pdi": ims.pdrs[2].pdi.model_copy(update={"network_instance": "ims"})})
    ims = ims.model_copy(update={"pdrs": {**ims.pdrs, 2: pdr}})
    upf.apply(None, ims)
    try:
        sent = bytes(Ether(**MACS) / IP(src=SERVER, dst=UE) / UDP(sport=5004, dport=40000) / (b"d" * 64))
        out = dp.test_run(sent, N6_IF)  # N6_IF is in "internet"
        assert out.action != "upf" and out.data == sent
    finally:
        upf.apply(ims, None)


def test_n9_re_encapsulation_gets_the_peers_teid_and_an_uplink_container(dp):
    upf = applier(dp, Output.TX)
    n9 = Far(id=1, apply_action=frozenset({"FORW"}), forwarding=ForwardingParameters(
        destination_interface=Interface.CORE,
        outer_header_creation=OuterHeaderCreation(kind="gtpu-ipv4", teid=N9_TEID, address=N9_PEER)))
    upf.apply(None, session(uplink_far=n9))
    try:
        out = dp.test_run(uplink_frame(), N3_IF)
        swapped = {"src": MACS["dst"], "dst": MACS["src"]}
        expected = (Ether(**swapped) / IP(src=N3_IP, dst=N9_PEER, id=0, ttl=64) / UDP(sport=2152, dport=2152, chksum=0)
                    / GTP_U_Header(teid=N9_TEID, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=1, QFI=9)
                    / ue_packet())
        assert (out.verdict, out.action) == ("TX", "upf")
        assert out.data == bytes(expected)
    finally:
        upf.apply(session(uplink_far=n9), None)


def test_echo_request_to_us_is_answered_with_the_recovery_ie(dp, installed):
    request = Ether(**MACS) / IP(src=GNB, dst=N3_IP) / UDP(sport=2152, dport=2152) / gtp_echo_request(seq=0x1234)
    out = dp.test_run(bytes(request), N3_IF)
    reply = (Ether(src=MACS["dst"], dst=MACS["src"]) / IP(src=N3_IP, dst=GNB, id=1)
             / UDP(sport=2152, dport=2152, chksum=0)
             / GTP_U_Header(gtp_type=2, S=1, seq=0x1234, teid=0) / b"\x0e\x00")
    assert (out.verdict, out.reason) == ("TX", "upf_echo")
    assert out.data == bytes(reply)


def test_end_marker_is_counted_and_passed(dp, installed):
    sent = bytes(Ether(**MACS) / IP(src=GNB, dst=N3_IP) / UDP(sport=2152, dport=2152) / gtp_end_marker(TEID))
    out = dp.test_run(sent, N3_IF)
    assert (out.verdict, out.reason, out.data) == ("PASS", "upf_end_marker", sent)


def test_no_route_passes_the_decapsulated_packet_to_the_kernel(dp):
    upf = applier(dp, Output.FIB)
    upf.apply(None, session())
    try:
        out = dp.test_run(uplink_frame(), N3_IF)  # ifindex 7 has no route in the test's namespace
        assert (out.verdict, out.reason) == ("PASS", "upf_no_route") or out.reason == "upf_no_neigh"
        assert out.data == decapsulated()
    finally:
        upf.apply(session(), None)


FAR_TEID = 0x10000001  # past dpp_upf_teids: its entry is dpp_upf_uplink's


@pytest.mark.parametrize("family", [4, 6])
def test_a_teid_past_the_array_is_decapsulated_from_the_hash_map(dp, family):
    upf = applier(dp)
    uplink = session().pdrs[1]
    pdi = uplink.pdi.model_copy(update={"local_fteid": FTeid(teid=FAR_TEID, ipv4=N3_IP)})
    far = session().model_copy(update={"pdrs": {1: uplink.model_copy(update={"pdi": pdi})}})
    upf.apply(None, far)
    try:
        assert dp.table("dpp_upf_uplink").get(UplinkKey(teid=FAR_TEID, qfi=QFI_ANY)) is not None
        out = dp.test_run(uplink_frame(teid=FAR_TEID, family=family), N3_IF)
        assert (out.verdict, out.action, out.data) == ("PASS", "upf", decapsulated(family))
        assert dp.test_run(uplink_frame(teid=FAR_TEID + 1), N3_IF).reason == "upf_teid_miss"
    finally:
        upf.apply(far, None)
    assert dp.test_run(uplink_frame(teid=FAR_TEID), N3_IF).reason == "upf_teid_miss"


def test_deletion_makes_the_teid_miss_again(dp):
    upf = applier(dp)
    upf.apply(None, session())
    upf.apply(session(), None)
    out = dp.test_run(uplink_frame(), N3_IF)
    assert out.reason == "upf_teid_miss"
    assert dp.table("dpp_upf_uplink").get(UplinkKey(teid=TEID, qfi=QFI_ANY)) is None
    assert not dp.table("dpp_upf_teids").get(TEID).flags


def _without_sdf(rule: dict) -> dict:
    """A Create PDR of tests/upf/smf.py without its SDF filter (an applier without the service's rules
    refuses those: tests/upf/test_sdf_datapath.py has them)."""
    pdr_ies = [dict(item, Data=[sub for sub in item["Data"] if sub["Type"] != 23]) if item["Type"] == 2 else item
               for item in rule["Data"]]
    return dict(rule, Data=pdr_ies)


def test_a_session_established_over_pfcp_acts_on_packets_until_deleted(dp, tmp_path):
    from netapp.service.store import Store
    from netapp.upf.pfcp.server import PfcpServer
    from netapp.upf.sessions import Upf
    from tests.upf.smf import Smf, cause, create_far, create_pdr, create_qer, create_urr, fseid, node_id, recovery

    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    server = PfcpServer(Upf(store, applier(dp), n3_ipv4=N3_IP), "127.0.0.1", 0)
    server.start()
    smf = Smf(server.address)
    try:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == 1
        ies = [node_id(), fseid(0x51),
               _without_sdf(create_pdr(1, 1, access=True, choose_id=1)),
               _without_sdf(create_pdr(3, 2, access=False, ue=UE)),
               create_far(1, core=True), create_far(2, core=False, gnb=GNB, teid=DL_TEID), create_qer(), create_urr()]
        assert cause(smf.ask("PFCPSessionEstablishmentReq", ies, seid=0)) == 1
        (session_,) = server.upf.sessions.values()  # type: ignore[attr-defined]
        teid = session_.pdrs[1].pdi.local_fteid.teid

        assert dp.test_run(uplink_frame(teid=teid), N3_IF).data == decapsulated()
        down = Ether(**MACS) / IP(src=SERVER, dst=UE) / UDP(sport=5004, dport=40000) / (b"d" * 64)
        out = dp.test_run(bytes(down), N6_IF)
        assert out.action == "upf" and GTP_U_Header(out.data[42:]).teid == DL_TEID

        assert cause(smf.ask("PFCPSessionDeletionReq", [], seid=session_.seid)) == 1
        assert dp.test_run(uplink_frame(teid=teid), N3_IF).reason == "upf_teid_miss"
        assert dp.test_run(bytes(down), N6_IF).action != "upf"
    finally:
        smf.close()
        server.close()
        store.close()


def test_a_urr_slot_counts_from_zero_and_its_final_counts_outlive_the_session(dp):
    upf = applier(dp)
    usage = dp.table("dpp_upf_usage")
    slot = 77
    usage.update({slot: Usage(ul_packets=5, ul_bytes=500)})  # left by an earlier user of the slot
    counted = session().model_copy(update={"urr_slots": {1: slot}})
    upf.apply(None, counted)
    try:
        assert bytes(upf.usage([slot])[slot]) == bytes(Usage()), "a slot given starts from zero"
        dp.test_run(uplink_frame(), N3_IF)
        dp.test_run(bytes(Ether(**MACS) / IP(src=SERVER, dst=UE) / UDP(sport=5004, dport=40000) / (b"d" * 64)), N6_IF)
        counts = upf.usage([slot])[slot]
        assert (counts.ul_packets, counts.ul_bytes, counts.dl_packets, counts.dl_bytes) == (
            1, len(ue_packet()), 1, 20 + 8 + 64)
    finally:
        upf.apply(counted, None)
    final = upf.final_usage(counted.seid)
    assert {urr_id: (c.ul_packets, c.dl_packets) for urr_id, c in final.items()} == {1: (1, 1)}
    assert bytes(upf.usage([slot])[slot]) == bytes(Usage()), "a slot freed is zeroed"
    assert upf.final_usage(counted.seid) == {}, "given once"


def test_a_deletion_undone_gives_the_slot_back_its_counts(dp):
    upf = applier(dp)
    counted = session().model_copy(update={"urr_slots": {1: 78}})
    upf.apply(None, counted)
    dp.test_run(uplink_frame(), N3_IF)
    upf.apply(counted, None)
    upf.apply(None, counted)  # as SessionChange undoes a deletion whose commit failed
    try:
        assert upf.usage([78])[78].ul_packets == 1 and upf.final_usage(counted.seid) == {}
    finally:
        upf.apply(counted, None)


def _table_bytes(dp, name: str) -> dict[bytes, bytes]:
    return {bytes(key): bytes(value) for key, value in dp.table(name).items()}


def _published_ways(dp: Dataplane) -> int:
    return sum(1 for _, way in dp.table("dpp_upf_dl4").items() if way.flags & PdrFlag.ENTRY)


def test_reconcile_leaves_the_maps_holding_exactly_the_stored_sessions(dp):
    upf = applier(dp)
    kept, gone = session(), session(seid=2)
    gone = gone.model_copy(update={"pdrs": {1: gone.pdrs[1].model_copy(update={"pdi": gone.pdrs[1].pdi.model_copy(
        update={"local_fteid": FTeid(teid=TEID + 7, ipv4=N3_IP)})})}})
    upf.apply(None, gone)  # deleted while the service was down
    uplink, downlink = dp.table("dpp_upf_uplink"), dp.table("dpp_upf_downlink")
    half = PdrAction(far=FarAction.DROP)  # a write cut short: the kept session's key, a wrong value
    uplink.update([(UplinkKey(teid=TEID, qfi=QFI_ANY), half), (UplinkKey(teid=0xBAD, qfi=5), half)])
    downlink.update([(DownlinkKey(net_instance=2, family=4, addr=(0x0A0B0C0D, 0, 0, 0)), half)])
    try:
        refused = upf.reconcile([kept, session(seid=3, uplink_far=Far(
            id=1, apply_action=frozenset({"DUPL", "FORW"}), forwarding=ForwardingParameters(
                destination_interface=Interface.CORE), duplicating=(
                    DuplicatingParameters(destination_interface=Interface.LI_FUNCTION),)))])
        assert set(refused) == {3}, "a session that no longer compiles is left out, named"
        ((teid, _), wanted), = compile_session(kept, upf.site, {}).uplink.items()
        wanted.flags |= PdrFlag.ENTRY  # a TEID below dpp_upf_teids' size: in its slot there
        assert _table_bytes(dp, "dpp_upf_uplink") == {}, "the TEID's entry in the hash map went too"
        assert bytes(dp.table("dpp_upf_teids").get(teid)) == bytes(wanted)
        assert not dp.table("dpp_upf_teids").get(TEID + 7).flags, "the deleted session's slot is empty"
        assert len(_table_bytes(dp, "dpp_upf_downlink")) == 1, "the UE's IPv6 address; its IPv4 one in a way"
        assert _published_ways(dp) == 1
        assert dp.test_run(uplink_frame(), N3_IF).data == decapsulated()
        assert dp.test_run(uplink_frame(teid=TEID + 7), N3_IF).reason == "upf_teid_miss"
    finally:
        upf.reconcile([])
    assert _table_bytes(dp, "dpp_upf_uplink") == _table_bytes(dp, "dpp_upf_downlink") == {}
    assert not dp.table("dpp_upf_teids").get(TEID).flags and _published_ways(dp) == 0
