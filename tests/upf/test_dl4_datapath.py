"""The downlink of the UE IPv4 addresses the SMF gives: in the ways of dpp_upf_dl4 (netapp.upf.ways),
a full bucket's overflow in dpp_upf_downlink; through the real program (BPF_PROG_TEST_RUN), each
output frame compared byte for byte with the one scapy builds."""

from __future__ import annotations

import itertools
import sys
from ipaddress import IPv4Address

import pytest
from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.upf.abi import DL4_WAYS, DownlinkKey, Output, PdrAction, PdrFlag, Role
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site
from netapp.upf.models import Session, UeIpAddress
from netapp.upf.ways import bucket_of, table_bits
from tests.upf import test_datapath as base
from tests.upf.test_datapath import DL_TEID, GNB, MACS, N3_IP, N3_IP6, SERVER, instance, session

INTERNET, IMS = 1, 2  # the network instances of N6_IF and of OTHER_IF (a second N6 interface here)


@pytest.fixture(scope="module")
def dp():
    with instance() as opened:
        yield opened


def make_applier(dp) -> BpfApplier:
    site = Site(net_instances={"internet": INTERNET, "ims": IMS}, default_instance="internet", n3_ipv4=N3_IP,
                n3_ipv6=N3_IP6, output=Output.PASS)
    roles = {base.N3_IF: (Role.N3, 0), base.N6_IF: (Role.N6, INTERNET), base.OTHER_IF: (Role.N6, IMS)}
    return BpfApplier(dp.table, site, iface_entries(roles, N3_IP, N3_IP6))


@pytest.fixture
def upf(dp):
    """An applier over empty tables, emptied again after the test."""
    applier = make_applier(dp)
    applier.reconcile([])
    yield applier
    applier.reconcile([])


def ue_session(seid: int, address: str, instance: str = "internet") -> Session:
    """A session whose downlink PDR is to `address` (IPv4 only) in `instance`, to the gNB with TEID
    DL_TEID + seid; its uplink TEID apart from every other's."""
    template = session(seid=seid)
    pdr = template.pdrs[2]
    pdi = pdr.pdi.model_copy(update={"ue_ip": UeIpAddress(ipv4=address, destination=True),
                                     "network_instance": instance})
    far = template.fars[2]
    tunnel = far.forwarding.outer_header_creation.model_copy(update={"teid": DL_TEID + seid})
    up = template.pdrs[1]
    uplink = up.model_copy(update={"pdi": up.pdi.model_copy(update={
        "local_fteid": up.pdi.local_fteid.model_copy(update={"teid": 0x1000 + seid})})})
    return template.model_copy(update={
        "pdrs": {1: uplink, 2: pdr.model_copy(update={"pdi": pdi})},
        "fars": {**template.fars, 2: far.model_copy(update={"forwarding": far.forwarding.model_copy(
            update={"outer_header_creation": tunnel})})}})


def downlink_frame(address: str) -> bytes:
    return bytes(Ether(**MACS) / IP(src=SERVER, dst=address) / UDP(sport=5004, dport=40000) / (b"d" * 64))


def encapsulated(sent: bytes, teid: int) -> bytes:
    return bytes(Ether(**MACS) / IP(src=N3_IP, dst=GNB, id=0, ttl=64) / UDP(sport=2152, dport=2152, chksum=0)
                 / GTP_U_Header(teid=teid, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=0, QFI=9)
                 / Ether(sent)[IP])


def assert_encapsulated(dp, address: str, teid: int, ifindex: int = 0) -> None:
    sent = downlink_frame(address)
    out = dp.test_run(sent, ifindex or base.N6_IF)
    assert (out.verdict, out.action, out.reason) == ("PASS", "upf", None), address
    assert out.data == encapsulated(sent, teid), address


def assert_not_taken(dp, address: str, ifindex: int = 0) -> None:
    """No session has the address: the packet goes on as without the UPF, untouched."""
    sent = downlink_frame(address)
    out = dp.test_run(sent, ifindex or base.N6_IF)
    assert out.action != "upf" and out.data == sent, address


def same_bucket(dp, count: int, instance: int = INTERNET, start: str = "10.99.0.1") -> list[str]:
    """`count` addresses whose bucket of dpp_upf_dl4 is one (that of `start`) in `instance`."""
    bits = table_bits(dp.table("dpp_upf_dl4").max_entries)
    first = int(IPv4Address(start))
    wanted = bucket_of(instance, first, bits)
    found = (address for address in itertools.count(first) if bucket_of(instance, address, bits) == wanted)
    return [str(IPv4Address(address)) for address in itertools.islice(found, count)]


def ways(dp) -> dict[int, str]:
    """The published ways of dpp_upf_dl4: slot -> address."""
    return {slot: str(IPv4Address(way.ue_addr.to_bytes(4, sys.byteorder)))
            for slot, way in dp.table("dpp_upf_dl4").items() if way.flags & PdrFlag.ENTRY}


def hashed_ipv4(dp) -> dict[tuple[int, str], PdrAction]:
    return {(key.net_instance, str(IPv4Address(bytes(key.addr)[:4]))): value
            for key, value in dp.table("dpp_upf_downlink").items() if key.family == 4}


def overflowed(dp) -> int:
    return dp.table("dpp_upf_downlink_state").get(0).ue4


def test_an_address_the_smf_gives_is_in_a_way_and_encapsulated_byte_for_byte(dp, upf):
    upf.apply(None, ue_session(1, "10.99.0.7"))
    assert list(ways(dp).values()) == ["10.99.0.7"] and hashed_ipv4(dp) == {} and not overflowed(dp)
    assert_encapsulated(dp, "10.99.0.7", DL_TEID + 1)
    assert_not_taken(dp, "10.99.0.8")


def test_addresses_of_one_bucket_take_its_ways_in_order(dp, upf):
    addresses = same_bucket(dp, DL4_WAYS)
    for seid, address in enumerate(addresses, start=1):
        upf.apply(None, ue_session(seid, address))
    held = ways(dp)
    assert list(held.values()) == addresses and max(held) - min(held) == DL4_WAYS - 1, "one bucket, way by way"
    for seid, address in enumerate(addresses, start=1):
        assert_encapsulated(dp, address, DL_TEID + seid)
    assert hashed_ipv4(dp) == {} and not overflowed(dp)


def test_a_full_bucket_overflows_to_the_hash_still_encapsulated(dp, upf):
    *inside, outside, stranger = same_bucket(dp, DL4_WAYS + 2)
    for seid, address in enumerate(inside, start=1):
        upf.apply(None, ue_session(seid, address))
    upf.apply(None, ue_session(9, outside))
    assert outside not in ways(dp).values() and list(hashed_ipv4(dp)) == [(INTERNET, outside)]
    assert overflowed(dp), "the hash is marked as holding IPv4 entries"
    assert_encapsulated(dp, outside, DL_TEID + 9)
    for seid, address in enumerate(inside, start=1):
        assert_encapsulated(dp, address, DL_TEID + seid)
    assert_not_taken(dp, stranger)  # its bucket's four ways and the hash: no session


def test_a_deleted_address_leaves_its_way_which_is_reused_after_the_wait(dp, upf):
    *inside, newcomer = same_bucket(dp, DL4_WAYS + 1)
    sessions = [ue_session(seid, address) for seid, address in enumerate(inside, start=1)]
    for each in sessions:
        upf.apply(None, each)
    freed = next(slot for slot, address in ways(dp).items() if address == inside[1])
    upf.apply(sessions[1], None)
    assert_not_taken(dp, inside[1])
    retired = dp.table("dpp_upf_dl4").get(freed)
    assert not retired.flags & PdrFlag.ENTRY and retired.teid == DL_TEID + 2, "retired: only its ENTRY bit cleared"
    upf.apply(None, ue_session(7, newcomer))  # the bucket's one free way is retired: waited for, reused
    assert ways(dp)[freed] == newcomer and hashed_ipv4(dp) == {}
    assert_encapsulated(dp, newcomer, DL_TEID + 7)
    assert_not_taken(dp, inside[1])


def test_a_changed_action_moves_to_another_way_then_the_old_one_is_retired(dp, upf):
    address = "10.99.0.7"
    before = ue_session(1, address)
    upf.apply(None, before)
    (old,) = ways(dp)
    after = ue_session(1, address).model_copy(update={"fars": {**before.fars, 2: before.fars[2].model_copy(
        update={"forwarding": before.fars[2].forwarding.model_copy(update={"outer_header_creation": (
            before.fars[2].forwarding.outer_header_creation.model_copy(update={"teid": DL_TEID + 50}))})})}})
    upf.apply(before, after)
    (new,) = ways(dp)
    assert new != old and dp.table("dpp_upf_dl4").get(old).teid == DL_TEID + 1, "the old way kept, retired"
    assert_encapsulated(dp, address, DL_TEID + 50)


def test_the_same_address_in_two_network_instances_is_kept_apart(dp, upf):
    address = "10.99.0.7"
    upf.apply(None, ue_session(1, address, "internet"))
    upf.apply(None, ue_session(2, address, "ims"))
    assert len(ways(dp)) == 2 and hashed_ipv4(dp) == {}
    assert_encapsulated(dp, address, DL_TEID + 1, base.N6_IF)
    assert_encapsulated(dp, address, DL_TEID + 2, base.OTHER_IF)
    upf.apply(ue_session(1, address, "internet"), None)
    assert_not_taken(dp, address, base.N6_IF)
    assert_encapsulated(dp, address, DL_TEID + 2, base.OTHER_IF)


def test_an_address_of_no_session_is_not_taken(dp, upf):
    upf.apply(None, ue_session(1, "10.99.0.7"))
    for address in ("10.99.0.6", "10.99.0.17", "192.0.2.1"):
        assert_not_taken(dp, address)
    assert_not_taken(dp, "10.99.0.7", base.OTHER_IF)  # another instance's interface


def test_a_restart_reconciles_the_ways_stale_ones_retired_and_the_hash_moved_in(dp, upf):
    *inside, outside = same_bucket(dp, DL4_WAYS + 1)
    sessions = [ue_session(seid, address) for seid, address in enumerate([*inside, outside], start=1)]
    for each in sessions:
        upf.apply(None, each)
    assert list(hashed_ipv4(dp)) == [(INTERNET, outside)]
    kept_slot = {address: slot for slot, address in ways(dp).items()}[inside[0]]
    dp.table("dpp_upf_downlink").update([(DownlinkKey(net_instance=IMS, family=4, addr=(0x0A0B0C0D, 0, 0, 0)),
                                          PdrAction())])  # a stray of a write cut short
    restarted = make_applier(dp)  # sessions 2 and 3 were deleted while the service was down
    kept = [sessions[0], sessions[3], sessions[4]]
    assert restarted.reconcile(kept) == {}
    held = {address: slot for slot, address in ways(dp).items()}
    assert set(held) == {inside[0], inside[3], outside}, "the deleted sessions' ways retired, the hash's moved in"
    assert held[inside[0]] == kept_slot, "an entry kept stays in its way"
    assert hashed_ipv4(dp) == {} and not overflowed(dp), "the hash holds no IPv4 entry: unmarked"
    for seid, address in ((1, inside[0]), (4, inside[3]), (5, outside)):
        assert_encapsulated(dp, address, DL_TEID + seid)
    for address in inside[1:3]:
        assert_not_taken(dp, address)
