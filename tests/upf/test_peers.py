"""The operator's allow-lists (netapp.upf.peers): pfcp.peers screens who may use N4, over real UDP on
loopback with an SMF speaking pycrate; upf.peer_networks refuses a FAR whose tunnel goes elsewhere,
all or nothing, and keeps End Markers from going there."""

from __future__ import annotations

import ipaddress
import logging
from typing import Iterator

import pytest

from netapp.service.store import Store
from netapp.upf.endmarker import EndMarkers
from netapp.upf.models import (
    DuplicatingParameters, Far, ForwardingParameters, FSeid, OuterHeaderCreation, RuleError, Session,
)
from netapp.upf.peers import Destinations, PeerGate, SmfPeer, SmfPeers
from netapp.upf.pfcp.ies import Cause, IEType, Interface, RuleType
from netapp.upf.pfcp.server import PfcpServer, UsageReport
from netapp.upf.sessions import Upf
from tests.upf.conftest import N3, Endpoint, RecordingApplier
from tests.upf.smf import Smf, cause, create_far, establishment_ies, find, ie, node_id, recovery, value
from tests.upf.test_endmarker import session

GNBS = "192.0.2.0/28"  # where the tests' gNBs are (create_far's default 192.0.2.10)
OUTSIDE = "198.51.100.7"
ADMITTED = SmfPeers([SmfPeer(ipaddress.ip_network("127.0.0.1/32"), frozenset({"10.0.0.1"}))])


@pytest.fixture
def endpoint(tmp_path) -> Iterator[Endpoint]:
    """The endpoint of the UPF tests (conftest), with both allow-lists: conftest's `smf` uses it."""
    endpoint = Endpoint(tmp_path / "netapp.db", ADMITTED, Destinations([GNBS]))
    try:
        yield endpoint
    finally:
        endpoint.close()


def _establish(smf: Smf, far=None):  # noqa: ANN001
    ies = establishment_ies(0x5EED)
    if far is not None:
        ies = [far if item["Type"] == 3 and item["Data"][0]["Data"]["Val"] == 2 else item for item in ies]
    return smf.ask("PFCPSessionEstablishmentReq", ies, seid=0)


def test_a_host_not_in_pfcp_peers_is_rejected_and_nothing_it_sends_is_acted_on(endpoint, smf, caplog):
    assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
    up_seid = find(_establish(smf), 57)["Data"]["SEID"].get_val()
    before = endpoint.rows()
    stranger = Smf(endpoint.server.address, local="127.0.0.2")
    try:
        with caplog.at_level(logging.WARNING, "netapp.upf.pfcp"):
            stranger.send(stranger.build("PFCPHeartbeatReq", [recovery(7)]))
            stranger.send(stranger.build("PFCPSessionDeletionReq", [], seid=up_seid))
            setup = stranger.ask("PFCPAssociationSetupReq", [node_id("10.0.0.2"), recovery(2000)])
            again = stranger.ask("PFCPAssociationSetupReq", [node_id("10.0.0.2"), recovery(2000)])
    finally:
        stranger.close()
    # the first datagram back answers the third sent: the heartbeat and the deletion got none
    assert setup["Hdr"]["Type"].get_val() == 6 and setup["Hdr"]["SeqNum"].get_val() == 3
    assert cause(setup) == cause(again) == Cause.REQUEST_REJECTED
    assert value(find(setup, 96))["Val"] == endpoint.upf.recovery_time_stamp, "a setup response, whole"
    assert endpoint.server.counters["refused_peer"] == 4
    assert endpoint.rows() == before and up_seid in endpoint.upf.sessions
    refused = [record for record in caplog.records if "127.0.0.2 is not in pfcp.peers" in record.getMessage()]
    assert len(refused) == 1, "logged once per peer, not per datagram"


def test_a_node_id_pfcp_peers_does_not_list_for_the_address_is_rejected(endpoint, smf):
    assert cause(smf.ask("PFCPAssociationSetupReq", [node_id("10.0.0.9"), recovery(1000)])) == Cause.REQUEST_REJECTED
    assert endpoint.upf.associations == {}
    assert cause(smf.ask("PFCPAssociationSetupReq", [node_id("10.0.0.1"), recovery(1000)])) == Cause.REQUEST_ACCEPTED
    assert set(endpoint.upf.associations) == {"10.0.0.1"}
    assert endpoint.server.counters["refused_peer"] == 1


def test_no_usage_report_goes_to_an_association_pfcp_peers_no_longer_admits(endpoint, smf):
    assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
    up_seid = find(_establish(smf), 57)["Data"]["SEID"].get_val()
    endpoint.restart(SmfPeers([SmfPeer(ipaddress.ip_network("10.40.0.0/24"))]))  # the setting narrowed
    report = UsageReport(urr_id=1, seqn=0, trigger="volume_threshold", start=100, end=160)
    with pytest.raises(RuleError, match="no longer in pfcp.peers") as refused:
        endpoint.server.report_usage(up_seid, [report], t1_s=0.01, n1=1)
    assert refused.value.cause == Cause.NO_ESTABLISHED_ASSOCIATION


def test_a_far_tunnelling_outside_upf_peer_networks_is_refused_naming_it_and_nothing_changes(endpoint, smf):
    assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
    before, calls = endpoint.rows(), len(endpoint.applier.calls)
    refused = _establish(smf, create_far(2, core=False, gnb=OUTSIDE))
    assert cause(refused) == Cause.RULE_CREATION_MODIFICATION_FAILURE
    assert value(find(refused, 40)) == IEType.OUTER_HEADER_CREATION  # Offending IE
    failed = find(refused, 114)["Data"].to_bytes()
    assert failed[0] & 0x07 == RuleType.FAR and int.from_bytes(failed[1:], "big") == 2
    assert endpoint.rows() == before and len(endpoint.applier.calls) == calls, "all or nothing"

    up_seid = find(_establish(smf), 57)["Data"]["SEID"].get_val()
    session = endpoint.upf.sessions[up_seid]
    away = ie(10, [ie(108, {"Val": 2}), ie(11, [ie(84, {"GTPU_UDP_IPv4": 1, "TEID": 0x200, "IPv4Addr": OUTSIDE})])])
    assert cause(smf.ask("PFCPSessionModificationReq", [away], seid=up_seid)) == Cause.RULE_CREATION_MODIFICATION_FAILURE
    assert endpoint.upf.sessions[up_seid] == session
    udp_away = ie(10, [ie(108, {"Val": 2}), ie(11, [ie(84, {"UDP_IPv4": 1, "IPv4Addr": OUTSIDE, "Port": 5555})])])
    assert cause(smf.ask("PFCPSessionModificationReq", [udp_away], seid=up_seid)) == (
        Cause.RULE_CREATION_MODIFICATION_FAILURE), "UDP outer header creation too"
    assert endpoint.upf.sessions[up_seid] == session
    inside = ie(10, [ie(108, {"Val": 2}), ie(11, [ie(84, {"GTPU_UDP_IPv4": 1, "TEID": 0x200, "IPv4Addr": "192.0.2.11"})])])
    assert cause(smf.ask("PFCPSessionModificationReq", [inside], seid=up_seid)) == Cause.REQUEST_ACCEPTED


def test_destinations_refuse_unspecified_and_multicast_and_name_the_far():
    allowed = Destinations(["0.0.0.0/0", "::/0"])
    assert allowed.allows("192.0.2.1") and allowed.allows("2001:db8::1")
    assert not allowed.allows("0.0.0.0") and not allowed.allows("224.0.0.5") and not allowed.allows("ff02::1")
    assert not Destinations([]).allows("192.0.2.1"), "an empty list: nowhere"
    assert not Destinations(["10.0.0.0/8"]).allows("::ffff:10.0.0.1"), "a family is judged by its own prefixes"
    with pytest.raises(RuleError) as refused:
        Destinations([GNBS]).check_address(7, OUTSIDE, IEType.DUPLICATING_PARAMETERS)
    assert (refused.value.cause, refused.value.rule, refused.value.ie_type) == (
        Cause.RULE_CREATION_MODIFICATION_FAILURE, (RuleType.FAR, 7), IEType.DUPLICATING_PARAMETERS)


def test_no_end_marker_goes_outside_upf_peer_networks():
    """A tunnel set up while the list allowed it, moved after the list narrowed: no End Marker."""
    old, new = session("10.31.0.2", 0x100), session("10.32.0.2", 0x200, sndem=True)
    sent: list[tuple[str, int]] = []
    for networks in (["10.31.0.0/24"], ["10.32.0.0/24"]):
        EndMarkers(RecordingApplier(), N3, None, lambda peer, teid, source: sent.append((peer, teid)),
                   allowed=Destinations(networks)).settled([(old, new)])
    assert sent == [("10.31.0.2", 0x100)], "sent where allowed, and only there"


def test_a_far_whose_copies_go_outside_upf_peer_networks_is_refused_naming_its_duplicating_parameters():
    inside = OuterHeaderCreation(kind="gtpu-ipv4", address="192.0.2.10", teid=1)
    outside = OuterHeaderCreation(kind="gtpu-ipv4", address=OUTSIDE, teid=1)
    far = Far(id=3, apply_action=frozenset({"FORW", "DUPL"}),
              forwarding=ForwardingParameters(destination_interface=Interface.ACCESS, outer_header_creation=inside),
              duplicating=(DuplicatingParameters(destination_interface=Interface.LI_FUNCTION,
                                                 outer_header_creation=outside),))
    copying = Session(seid=1, node_id="smf", remote=FSeid(seid=1, ipv4="10.0.0.1"), fars={3: far})
    with pytest.raises(RuleError) as refused:
        Destinations([GNBS]).check_session(copying)
    assert (refused.value.rule, refused.value.ie_type) == ((RuleType.FAR, 3), IEType.DUPLICATING_PARAMETERS)
    Destinations([GNBS, f"{OUTSIDE}/32"]).check_session(copying)  # allowed: no refusal


def test_an_ipv4_smf_of_a_dual_stack_endpoint_is_judged_by_its_ipv4_address(tmp_path):
    """pfcp.address `::`: an IPv4 SMF sends from ::ffff:a.b.c.d; its IPv4 entry admits it, and an
    IPv6 entry, ::/0 included, does not."""
    assert ADMITTED.admits("::ffff:127.0.0.1") and ADMITTED.admits_node("::ffff:127.0.0.1", "10.0.0.1")
    ipv6_only = SmfPeers([SmfPeer(ipaddress.ip_network("::/0"))])
    assert not ipv6_only.admits("::ffff:127.0.0.1") and ipv6_only.admits("2001:db8::1")
    for peers, answer in ((ADMITTED, Cause.REQUEST_ACCEPTED), (ipv6_only, Cause.REQUEST_REJECTED)):
        store = Store.open(tmp_path / f"{answer.name}.db", synchronous="NORMAL")
        server = PfcpServer(Upf(store, n3_ipv4=N3), "::", 0, peers=peers)
        server.start()
        smf = Smf(("127.0.0.1", server.address[1]))
        try:
            assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == answer
        finally:
            smf.close()
            server.close()
            store.close()


def test_refused_addresses_are_logged_once_each_up_to_a_bound(caplog):
    """Datagrams from ever new (spoofed) sources: the log and the memory of what was logged stop
    growing; the refusals go on."""
    gate = PeerGate(ADMITTED)
    gate.LOGGED = 3
    with caplog.at_level(logging.WARNING, "netapp.upf.pfcp"):
        refusals = [gate.refusal(f"203.0.113.{host}") for host in (1, 2, 1, 3, 4, 5)]
    assert all(refusals)
    logged = [record.getMessage() for record in caplog.records]
    assert [line for line in logged if "not in pfcp.peers" in line] == [
        f"PFCP: refused 203.0.113.{host} is not in pfcp.peers; what it sends is not acted on" for host in (1, 2, 3)]
    assert len(logged) == 4 and "counted, not logged" in logged[-1]
    assert len(gate._logged) == 3
