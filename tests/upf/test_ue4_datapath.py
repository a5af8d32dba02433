"""The downlink of the UE addresses of a pool the UPF assigns from (upf.ue_pools): looked up by slot in
dpp_upf_ue4, the others the SMF gives in dpp_upf_dl4 (tests/upf/test_dl4_datapath.py); through the real program (BPF_PROG_TEST_RUN), each
output frame compared byte for byte with the one scapy builds."""

from __future__ import annotations

import sys
from ipaddress import IPv4Address
from typing import Optional

import pytest
from scapy.contrib.gtp import GTP_U_Header, GTPPDUSessionContainer
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.upf.abi import Output, PdrFlag, Role
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site
from netapp.upf.models import Session, UeIpAddress
from netapp.upf.pools import Pools
from tests.upf import test_datapath as base
from tests.upf.test_datapath import DL_TEID, GNB, MACS, N3_IP, N3_IP6, SERVER, UE, instance, session

POOL = "10.45.0.0/24"  # UE (10.45.0.7) is in it, at slot 7
OUTSIDE = "10.99.0.7"  # a UE address the SMF gave, outside every pool


@pytest.fixture(scope="module")
def dp():
    with instance() as opened:
        yield opened


def pooled_applier(dp, pools: Optional[dict[str, str]] = None) -> BpfApplier:
    """An applier as `netapp serve` makes it with upf.ue_pools `pools` (default: POOL for internet)."""
    instances = {"internet": 1, "ims": 2}
    site = Site(net_instances=instances, default_instance="internet", n3_ipv4=N3_IP, n3_ipv6=N3_IP6,
                output=Output.PASS)
    ue4 = Pools(pools or {"internet": POOL}).layout(instances, dp.table("dpp_upf_ue4").max_entries)
    roles = {base.N3_IF: (Role.N3, 0), base.N6_IF: (Role.N6, 1)}
    return BpfApplier(dp.table, site, iface_entries(roles, N3_IP, N3_IP6, ue4))


def with_ue(template: Session, address: str, seid: int) -> Session:
    pdr = template.pdrs[2]
    ue = UeIpAddress(ipv4=address, destination=True)
    return template.model_copy(update={"seid": seid, "pdrs": {
        **template.pdrs, 2: pdr.model_copy(update={"pdi": pdr.pdi.model_copy(update={"ue_ip": ue})})}})


def downlink_frame(address: str) -> bytes:
    return bytes(Ether(**MACS) / IP(src=SERVER, dst=address) / UDP(sport=5004, dport=40000) / (b"d" * 64))


def encapsulated(sent: bytes) -> bytes:
    return bytes(Ether(**MACS) / IP(src=N3_IP, dst=GNB, id=0, ttl=64) / UDP(sport=2152, dport=2152, chksum=0)
                 / GTP_U_Header(teid=DL_TEID, E=1, next_ex=0x85) / GTPPDUSessionContainer(type=0, QFI=9)
                 / Ether(sent)[IP])


@pytest.fixture
def two_sessions(dp):
    """Session 1: UE in the pool; session 2 (uplink TEID apart): a UE address outside it."""
    upf = pooled_applier(dp)
    first = with_ue(session(), UE, 1)
    second = with_ue(session(), OUTSIDE, 2)
    second = second.model_copy(update={"pdrs": {2: second.pdrs[2]}, "fars": {2: second.fars[2]}})
    upf.apply(None, first)
    upf.apply(None, second)
    try:
        yield upf, first, second
    finally:
        upf.apply(first, None)
        upf.apply(second, None)


def _ways_ipv4(dp) -> set[str]:
    """The addresses of dpp_upf_dl4's published ways (those the SMF gave)."""
    return {str(IPv4Address(way.ue_addr.to_bytes(4, sys.byteorder))) for _, way in dp.table("dpp_upf_dl4").items()
            if way.flags & PdrFlag.ENTRY}


def test_a_pool_address_is_in_its_slot_and_an_other_in_a_way(dp, two_sessions):
    slot = dp.table("dpp_upf_ue4").lookup([7])[0]
    assert slot is not None and slot.flags & PdrFlag.ENTRY and slot.teid == DL_TEID
    assert _ways_ipv4(dp) == {OUTSIDE}, "the pool's address is in dpp_upf_ue4 only"
    assert not [key for key, _ in dp.table("dpp_upf_downlink").items() if key.family == 4]


@pytest.mark.parametrize("address", [UE, OUTSIDE], ids=["pool-array", "given-ways"])
def test_downlink_is_encapsulated_byte_for_byte_from_the_array_and_the_hash(dp, two_sessions, address):
    sent = downlink_frame(address)
    out = dp.test_run(sent, base.N6_IF)
    assert (out.verdict, out.action) == ("PASS", "upf")
    assert out.data == encapsulated(sent)


@pytest.mark.parametrize("address", ["10.45.0.8", "10.45.0.255", "10.45.0.0"])
def test_an_address_of_the_pool_no_session_holds_is_not_encapsulated(dp, two_sessions, address):
    """An empty slot is no one's: the packet goes on as without the UPF, untouched."""
    sent = downlink_frame(address)
    out = dp.test_run(sent, base.N6_IF)
    assert out.action != "upf" and out.data == sent


def test_a_deleted_session_empties_its_slot(dp):
    upf = pooled_applier(dp)
    first = with_ue(session(), UE, 1)
    upf.apply(None, first)
    upf.apply(first, None)
    assert not dp.table("dpp_upf_ue4").lookup([7])[0].flags & PdrFlag.ENTRY
    sent = downlink_frame(UE)
    out = dp.test_run(sent, base.N6_IF)
    assert out.action != "upf" and out.data == sent


def test_reconcile_fills_the_slots_of_the_sessions_and_empties_the_others(dp):
    upf = pooled_applier(dp)
    stray = with_ue(session(), "10.45.0.9", 3)
    upf.apply(None, stray)  # left behind, as by a session deleted while the service was down
    first = with_ue(session(), UE, 1)
    try:
        assert upf.reconcile([first]) == {}
        slots = dp.table("dpp_upf_ue4").lookup([7, 9])
        assert slots[0].flags & PdrFlag.ENTRY and not slots[1].flags & PdrFlag.ENTRY
        sent = downlink_frame(UE)
        assert dp.test_run(sent, base.N6_IF).data == encapsulated(sent)
    finally:
        upf.reconcile([])


def test_pools_laid_out_anew_take_effect_once_the_reconcile_has_moved_the_slots(dp):
    """A restart with another upf.ue_pools (a pool added whose name comes first: internet's slots
    move by 4): until the reconcile has moved the entries, the interface has no pools -- its
    addresses miss -- and no address is found in the slot of another's entry."""
    first = with_ue(session(), UE, 1)  # slot 7
    pooled_applier(dp).apply(None, first)
    restarted = pooled_applier(dp, {"aaa": "10.50.0.0/30", "internet": POOL})  # internet's 10.45.0.3: slot 7
    try:
        for address in ("10.45.0.3", UE):
            sent = downlink_frame(address)
            out = dp.test_run(sent, base.N6_IF)
            assert out.action != "upf" and out.data == sent, f"{address} before the reconcile"
        assert restarted.reconcile([first]) == {}
        assert dp.test_run(downlink_frame(UE), base.N6_IF).data == encapsulated(downlink_frame(UE))
        assert dp.test_run(downlink_frame("10.45.0.3"), base.N6_IF).action != "upf"
    finally:
        restarted.reconcile([])
