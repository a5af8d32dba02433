"""The PFCP endpoint over real UDP on loopback, driven by an SMF that speaks pycrate."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import socket
import sqlite3
import threading

import pytest
from pycrate_mobile import TS29244_PFCP as P

from netapp.dataplane.errors import DataplaneError
from netapp.upf.endmarker import EndMarkers
from netapp.upf.pfcp import server
from netapp.upf.pfcp.ies import Cause, Interface
from netapp.upf.pfcp.server import UsageReport
from tests.upf.conftest import N3, Endpoint, RecordingApplier
from tests.upf.smf import (
    Smf,
    cause,
    create_far,
    create_pdr,
    establishment_ies,
    find,
    grouped,
    ie,
    ies_of,
    node_id,
    recovery,
    value,
)

CP_SEID = 0x5EED


def _establish(smf, cp_seid=CP_SEID):
    return smf.ask("PFCPSessionEstablishmentReq", establishment_ies(cp_seid), seid=0)


def _up_seid(response) -> int:
    return find(response, 57)["Data"]["SEID"].get_val()


def test_heartbeat_answers_with_our_recovery_time_stamp(endpoint, smf):
    response = smf.ask("PFCPHeartbeatReq", [recovery(1000)])
    assert response["Hdr"]["Type"].get_val() == 2
    assert value(find(response, 96))["Val"] == endpoint.upf.recovery_time_stamp


def test_association_setup_update_release(endpoint, smf):
    response = smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])
    assert cause(response) == Cause.REQUEST_ACCEPTED
    assert value(find(response, 60))["Val"] == socket.inet_aton(N3)
    assert find(response, 43)["Data"].to_bytes()[0] & 0x10, "UP function features: FTUP"
    assert endpoint.upf.associations["10.0.0.1"].recovery_time_stamp == 1000
    assert cause(smf.ask("PFCPAssociationUpdateReq", [node_id()])) == Cause.REQUEST_ACCEPTED
    _establish(smf)
    assert cause(smf.ask("PFCPAssociationReleaseReq", [node_id()])) == Cause.REQUEST_ACCEPTED
    assert endpoint.upf.associations == {} and endpoint.upf.sessions == {}
    assert cause(smf.ask("PFCPAssociationUpdateReq", [node_id()])) == Cause.NO_ESTABLISHED_ASSOCIATION


def test_establishment_creates_the_session_with_chosen_teids(endpoint, associated):
    response = _establish(associated)
    assert cause(response) == Cause.REQUEST_ACCEPTED
    assert response["Hdr"]["SEID"].get_val() == CP_SEID
    session = endpoint.upf.sessions[_up_seid(response)]
    assert (len(session.pdrs), len(session.fars), len(session.qers), len(session.urrs)) == (4, 2, 1, 1)
    created = {value(find(item["Data"], 56))["Val"]: value(find(item["Data"], 21)) for item in ies_of(response)
               if item["Type"].get_val() == 8}
    assert set(created) == {1, 2}, "a Created PDR for each PDR whose F-TEID said CHOOSE"
    assert created[1]["TEID"] == created[2]["TEID"], "one CHOOSE ID, one TEID"
    assert created[1]["IPv4Addr"] == socket.inet_aton(N3)
    assert session.pdrs[1].pdi.local_fteid.teid == created[1]["TEID"]
    assert session.pdrs[4].pdi.sdf_filters[0].source.ports == ((80, 80), (443, 443))
    assert session.fars[2].forwarding.outer_header_creation.address == "192.0.2.10"
    assert endpoint.applier.calls == [(None, session)]


def test_modification_moves_the_downlink_with_an_end_marker(endpoint, associated):
    up_seid = _up_seid(_establish(associated))
    before = endpoint.upf.sessions[up_seid]
    update = ie(10, [ie(108, {"Val": 2}), ie(11, [
        ie(84, {"GTPU_UDP_IPv4": 1, "TEID": 0x200, "IPv4Addr": "192.0.2.20"}),
        ie(49, {"SNDEM": 1}),
    ])])
    response = associated.ask("PFCPSessionModificationReq", [update], seid=up_seid)
    assert cause(response) == Cause.REQUEST_ACCEPTED
    assert response["Hdr"]["SEID"].get_val() == CP_SEID
    far = endpoint.upf.sessions[up_seid].fars[2]
    assert (far.forwarding.outer_header_creation.teid, far.forwarding.outer_header_creation.address) == (
        0x200, "192.0.2.20")
    assert far.forwarding.destination_interface == Interface.ACCESS, "kept from the FAR as created"
    assert far.send_end_marker
    assert endpoint.applier.calls[-1] == (before, endpoint.upf.sessions[up_seid])
    associated.ask("PFCPSessionModificationReq", [], seid=up_seid)
    assert not endpoint.upf.sessions[up_seid].fars[2].send_end_marker, "asked once, of one modification"


def test_the_end_marker_leaves_once_the_modification_is_committed_and_its_locks_released(tmp_path):
    """The End Marker goes out after the COMMIT (a modification undone sends none), and not under the
    service's lock or the store's, which every other change of the node waits for."""
    service_lock = threading.RLock()
    endpoint = Endpoint(tmp_path / "netapp.db", rules_lock=service_lock)
    noted: list = []

    def send(peer: str, teid: int, _source) -> None:  # noqa: ANN001
        with contextlib.closing(sqlite3.connect(tmp_path / "netapp.db")) as reader:  # what is committed
            bodies = [body for (body,) in reader.execute("SELECT body FROM upf_sessions")]
        locks = (service_lock._is_owned(), endpoint.store._lock._is_owned())  # type: ignore[attr-defined]
        noted.append((peer, teid, locks, ["192.0.2.20" in body for body in bodies]))

    endpoint.applier = EndMarkers(endpoint.applier, N3, None, send=send)  # type: ignore[assignment]
    endpoint.restart()
    smf = Smf(endpoint.server.address)
    try:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
        up_seid = _up_seid(_establish(smf))
        update = ie(10, [ie(108, {"Val": 2}), ie(11, [
            ie(84, {"GTPU_UDP_IPv4": 1, "TEID": 0x200, "IPv4Addr": "192.0.2.20"}), ie(49, {"SNDEM": 1})])])
        assert cause(smf.ask("PFCPSessionModificationReq", [update], seid=up_seid)) == Cause.REQUEST_ACCEPTED
        assert noted == [("192.0.2.10", 0x100, (False, False), [True])], "to the old gNB, its TEID, committed"
    finally:
        smf.close()
        endpoint.close()


def test_a_change_whose_sends_fail_once_committed_stands_and_is_answered_accepted(tmp_path, caplog):
    """What a committed change sends out (End Markers, replays: `settled`) failing does not make it a
    failed change: not refused to the SMF, not made a second time (a group's fallback makes each
    change again alone)."""

    class FailingSends(RecordingApplier):
        def settled(self, pairs) -> None:  # noqa: ANN001
            raise DataplaneError(5, "read the punt ring", "Input/output error")

    endpoint = Endpoint(tmp_path / "netapp.db")
    endpoint.applier = FailingSends()
    endpoint.restart()
    smf = Smf(endpoint.server.address)
    try:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
        assert cause(_establish(smf)) == Cause.REQUEST_ACCEPTED
        assert len(endpoint.upf.sessions) == 1 and len(endpoint.rows()["upf_sessions"]) == 1
        assert len(endpoint.applier.calls) == 1, "applied once"
        assert "what a committed change sends out" in caplog.text
    finally:
        smf.close()
        endpoint.close()


def test_deletion_removes_the_session_and_frees_its_teids(endpoint, associated):
    up_seid = _up_seid(_establish(associated))
    response = associated.ask("PFCPSessionDeletionReq", [], seid=up_seid)
    assert cause(response) == Cause.REQUEST_ACCEPTED and response["Hdr"]["SEID"].get_val() == CP_SEID
    assert endpoint.upf.sessions == {} and endpoint.upf._teids.held == {}
    assert endpoint.applier.calls[-1][1] is None


def test_one_bad_rule_refuses_the_request_and_changes_nothing(endpoint, associated):
    up_seid = _up_seid(_establish(associated))
    rows, calls, sessions = endpoint.rows(), list(endpoint.applier.calls), dict(endpoint.upf.sessions)
    ies = establishment_ies(0x77)
    ies[4] = create_pdr(3, 9, access=False)  # FAR 9 does not exist
    response = associated.ask("PFCPSessionEstablishmentReq", ies, seid=0)
    assert cause(response) == Cause.RULE_CREATION_MODIFICATION_FAILURE
    assert value(find(response, 40)) == 108, "Offending IE: FAR ID"
    failed = value(find(response, 114))
    assert (failed["RuleIDType"], failed["RuleIDVal"]) == (0, 3), "Failed Rule ID: PDR 3"
    bad_flow = [ie(1, [ie(56, {"Val": 7}), ie(29, {"Val": 1}), ie(2, [
        ie(20, {"If": 2}), ie(23, {"FD": 1, "FlowDesc": {"Val": b"permit out ip from nowhere to any"}})]),
        ie(108, {"Val": 1})]), create_far(5, core=True)]
    response = associated.ask("PFCPSessionModificationReq", bad_flow, seid=up_seid)
    assert cause(response) == Cause.RULE_CREATION_MODIFICATION_FAILURE
    assert value(find(response, 114))["RuleIDVal"] == 7 and value(find(response, 40)) == 23
    assert (endpoint.rows(), endpoint.applier.calls, endpoint.upf.sessions) == (rows, calls, sessions)


def test_a_refusing_data_path_leaves_tables_and_store_as_before(endpoint, associated):
    up_seid = _up_seid(_establish(associated))
    rows, sessions, teids = endpoint.rows(), dict(endpoint.upf.sessions), dict(endpoint.upf._teids.held)
    endpoint.applier.fail = True
    assert cause(_establish(associated, 0x99)) == Cause.SYSTEM_FAILURE
    assert cause(associated.ask("PFCPSessionDeletionReq", [], seid=up_seid)) == Cause.SYSTEM_FAILURE
    assert (endpoint.rows(), endpoint.upf.sessions, endpoint.upf._teids.held) == (rows, sessions, teids)
    endpoint.applier.fail = False
    assert cause(_establish(associated, 0x99)) == Cause.REQUEST_ACCEPTED


def test_a_retransmitted_request_gets_the_same_bytes_and_has_one_effect(endpoint, associated):
    request = associated.build("PFCPSessionEstablishmentReq", establishment_ies(CP_SEID), seid=0, seq=4242)
    associated.send(request)
    first = associated.receive_raw()
    associated.send(request)
    assert associated.receive_raw() == first
    assert len(endpoint.upf.sessions) == 1 and len(endpoint.applier.calls) == 1
    assert endpoint.server.counters["retransmission"] == 1


def test_an_unknown_seid_is_session_context_not_found(endpoint, associated):
    response = associated.ask("PFCPSessionModificationReq", [], seid=0xDEAD)
    assert cause(response) == Cause.SESSION_CONTEXT_NOT_FOUND
    assert response["Hdr"]["SEID"].get_val() == 0
    assert cause(associated.ask("PFCPSessionDeletionReq", [], seid=0xDEAD)) == Cause.SESSION_CONTEXT_NOT_FOUND


def test_a_missing_mandatory_ie_is_named(endpoint, associated):
    ies = [item for item in establishment_ies(CP_SEID) if item["Type"] != 57]  # no CP F-SEID
    P.PFCPIEs.VERIF_MAND = False  # pycrate would add the IE it knows to be mandatory
    P.PFCPIEs._SET_MAND = False
    try:
        request = associated.build("PFCPSessionEstablishmentReq", ies, seid=0)
    finally:
        P.PFCPIEs.VERIF_MAND = True
        P.PFCPIEs._SET_MAND = True
    associated.send(request)
    response = associated.receive()
    assert cause(response) == Cause.MANDATORY_IE_MISSING
    assert value(find(response, 40)) == 57
    assert endpoint.upf.sessions == {}


def test_establishment_without_association_is_refused(endpoint, smf):
    assert cause(_establish(smf)) == Cause.NO_ESTABLISHED_ASSOCIATION
    assert endpoint.upf.sessions == {}


def test_a_restarted_peer_loses_its_sessions(endpoint, associated):
    _establish(associated)
    associated.ask("PFCPHeartbeatReq", [recovery(1000)])
    assert len(endpoint.upf.sessions) == 1, "same recovery time stamp: same peer life"
    associated.ask("PFCPHeartbeatReq", [recovery(2000)])
    assert endpoint.upf.sessions == {}
    _establish(associated)
    assert cause(associated.ask("PFCPAssociationSetupReq", [node_id(), recovery(3000)])) == Cause.REQUEST_ACCEPTED
    assert endpoint.upf.sessions == {} and endpoint.upf.associations["10.0.0.1"].recovery_time_stamp == 3000


def test_a_usage_report_reaches_the_smf(endpoint, associated):
    up_seid = _up_seid(_establish(associated))
    report = UsageReport(urr_id=1, seqn=0, trigger="volume_threshold", start=100, end=160,
                         uplink_bytes=1000, downlink_bytes=9000)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        sent = pool.submit(endpoint.server.report_usage, up_seid, [report])
        data = associated.receive_raw()
        # pycrate's table of the Usage Report's mandatory IEs is wrong (45, 250, 260): read without it.
        request, error = P.parse_PFCP(data)
        assert request is not None and error in (0, P.ERR_PFCP_MAND_IE_MISS)
        assert request["Hdr"]["Type"].get_val() == 56 and request["Hdr"]["SEID"].get_val() == CP_SEID
        usage = grouped(find(request, 80), "UsageReportSessionReportReq")
        volume = value(find(usage, 66))
        assert (volume["TotalVolume"], volume["UplinkVolume"], volume["DownlinkVolume"]) == (10000, 1000, 9000)
        assert value(find(usage, 81))["Val"] == 1
        answer = P.PFCPSessionReportResp(val={
            "Hdr": {"SeqNum": request["Hdr"]["SeqNum"].get_val(), "SEID": up_seid},
            "PFCPSessionReportRespIEs": [ie(19, Cause.REQUEST_ACCEPTED)],
        })
        associated.send(answer.to_bytes())
        assert sent.result(timeout=10) == Cause.REQUEST_ACCEPTED


def test_a_restart_keeps_sessions_associations_and_recovery_time_stamp(endpoint, associated):
    response = _establish(associated)
    sessions, associations = dict(endpoint.upf.sessions), dict(endpoint.upf.associations)
    stamp = endpoint.upf.recovery_time_stamp
    endpoint.restart()
    assert endpoint.upf.sessions == sessions and endpoint.upf.associations == associations
    assert endpoint.upf.recovery_time_stamp == stamp
    associated.upf = endpoint.server.address
    second = _establish(associated, 0x78)
    assert cause(second) == Cause.REQUEST_ACCEPTED
    assert _up_seid(second) != _up_seid(response)
    teids = [session.teids() for session in endpoint.upf.sessions.values()]
    assert not teids[0] & teids[1], "the TEID allocator went on where it was"


def test_another_peer_can_neither_take_over_nor_touch_an_association(endpoint, associated):
    """The node id is the tenant: a second peer (another loopback address) that claims it, or names
    the first one's session, changes nothing."""
    up_seid = _up_seid(_establish(associated))
    before = endpoint.rows()
    intruder = Smf(endpoint.server.address, local="127.0.0.2")
    try:
        assert cause(intruder.ask("PFCPAssociationSetupReq", [node_id(), recovery(2000)])) == Cause.REQUEST_REJECTED
        assert cause(intruder.ask("PFCPAssociationUpdateReq", [node_id()])) == Cause.NO_ESTABLISHED_ASSOCIATION
        assert cause(intruder.ask("PFCPAssociationReleaseReq", [node_id()])) == Cause.NO_ESTABLISHED_ASSOCIATION
        assert cause(_establish(intruder, cp_seid=0xBAD)) == Cause.NO_ESTABLISHED_ASSOCIATION
        assert cause(intruder.ask("PFCPSessionDeletionReq", [], seid=up_seid)) == Cause.SESSION_CONTEXT_NOT_FOUND
        update = ie(10, [ie(108, {"Val": 2}), ie(11, [ie(42, {"Val": Interface.ACCESS})])])
        assert cause(intruder.ask("PFCPSessionModificationReq", [update], seid=up_seid)) == Cause.SESSION_CONTEXT_NOT_FOUND
    finally:
        intruder.close()
    assert endpoint.rows() == before
    assert cause(associated.ask("PFCPSessionDeletionReq", [], seid=up_seid)) == Cause.REQUEST_ACCEPTED


def test_a_usage_report_is_answered_only_by_the_smf_it_went_to(endpoint, associated):
    """Another admitted peer that sends a Session Report Response with the report's sequence number
    does not answer it (counted as unexpected); the session's SMF does."""
    up_seid = _up_seid(_establish(associated))
    report = UsageReport(urr_id=1, seqn=0, trigger="volume_threshold", start=100, end=160)
    other = Smf(endpoint.server.address, local="127.0.0.2")
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            sent = pool.submit(endpoint.server.report_usage, up_seid, [report])
            request, _ = P.parse_PFCP(associated.receive_raw())
            seq = request["Hdr"]["SeqNum"].get_val()
            other.send(other.build("PFCPSessionReportResp", [ie(19, Cause.REQUEST_REJECTED)], seid=up_seid, seq=seq))
            other.ask("PFCPHeartbeatReq", [recovery(7)])  # answered after the response before it was read
            assert not sent.done() and endpoint.server.counters["unexpected_message"] == 1
            associated.send(associated.build("PFCPSessionReportResp", [ie(19, Cause.REQUEST_ACCEPTED)], seid=up_seid,
                                             seq=seq))
            assert sent.result(timeout=10) == Cause.REQUEST_ACCEPTED
    finally:
        other.close()


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_requests_that_wait_together_are_one_transaction_each_answered(tmp_path, monkeypatch, event_loop):
    if event_loop == "asyncio":  # one datagram a turn of the loop: the group is read a turn at a time
        monkeypatch.setattr(server, "_event_loop", asyncio.new_event_loop)
    endpoint = Endpoint(tmp_path / "netapp.db")
    smf = Smf(endpoint.server.address)
    groups: list[int] = []
    run_group = endpoint.upf.run_group
    monkeypatch.setattr(endpoint.upf, "run_group", lambda changes: (groups.append(len(changes)), run_group(changes))[1])
    try:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
        groups.clear()
        busy, release = threading.Event(), threading.Event()
        endpoint.server._loop.call_soon_threadsafe(lambda: (busy.set(), release.wait(30)))
        assert busy.wait(30)  # the loop held: the requests wait together in its socket
        try:
            for cp_seid in range(1, 25):
                smf.send(smf.build("PFCPSessionEstablishmentReq", establishment_ies(cp_seid), seid=0))
        finally:
            release.set()
        assert sorted(cause(smf.receive()) for _ in range(24)) == [Cause.REQUEST_ACCEPTED] * 24
        assert groups == [24]
    finally:
        smf.close()
        endpoint.close()


def test_a_burst_waits_in_the_n4_socket_rather_than_being_dropped(endpoint):
    """A thousand requests (an SMF's burst) come while the endpoint's loop is busy: every one is
    answered. The kernel counts about 1 KiB a datagram: a socket of net.core.rmem_default (212,992
    bytes) holds some 200 and drops the rest."""
    if os.geteuid() != 0:
        pytest.skip("the N4 socket's buffer is forced past net.core.rmem_max as root (CAP_NET_ADMIN)")
    smf = Smf(endpoint.server.address)
    smf.socket.setsockopt(socket.SOL_SOCKET, server.SO_RCVBUFFORCE, server.RECEIVE_BUFFER)  # the answers' burst
    try:
        busy, release = threading.Event(), threading.Event()
        endpoint.server._loop.call_soon_threadsafe(lambda: (busy.set(), release.wait(30)))
        assert busy.wait(30)
        try:
            for seq in range(1, 1001):
                smf.send(smf.build("PFCPHeartbeatReq", [recovery(1000)], seq=seq))
        finally:
            release.set()
        answered = {smf.receive()["Hdr"]["SeqNum"].get_val() for _ in range(1000)}
        assert answered == set(range(1, 1001))
    finally:
        smf.close()
