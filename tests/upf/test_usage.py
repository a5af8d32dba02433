"""The URR logic in the kernel: a session established over PFCP by the test SMF (pycrate), packets
through the real program (BPF_PROG_TEST_RUN), the URR logic's poll run by the test with its own
clock (`UsageMonitor.step(now)`), and the usage reports decoded by pycrate: a volume threshold, a
volume quota that stops the traffic until a new quota, periods, and the final usage of a deletion."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from pycrate_mobile import TS29244_PFCP as P
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.service.store import Store
from netapp.upf.pfcp.ies import Cause
from netapp.upf.pfcp.server import PfcpServer
from netapp.upf.sessions import Upf
from netapp.upf.store import NTP_EPOCH_OFFSET
from netapp.upf.telemetry import UsagePoints
from netapp.upf.usage import UsageMonitor
from netapp.telemetry.poll import UPF_ASSOCIATION, UPF_URR
from tests.telemetry.test_schema import FakeUpf
from tests.upf.smf import (
    Smf,
    cause,
    create_far,
    create_pdr,
    create_qer,
    find,
    fseid,
    grouped,
    ie,
    node_id,
    recovery,
    value,
)
from tests.upf import test_datapath as datapath
from tests.upf.test_datapath import (  # noqa: F401 - dp is the module's data plane fixture
    DL_TEID,
    GNB,
    MACS,
    N3_IP,
    SERVER,
    UE,
    applier,
    decapsulated,
    dp,
    ue_packet,
    uplink_frame,
)

UL_SIZE = len(ue_packet())  # 92: what the URR counts of each uplink packet (the UE's IP packet)
T0 = 1_800_000_000.0  # the fake clock's start (Unix seconds)


def urr(*children: dict[str, Any], urr_id: int = 1) -> dict[str, Any]:
    return ie(6, [ie(81, {"Val": urr_id}), *children])


def with_urrs(pdr: dict[str, Any], urr_ids: tuple[int, ...]) -> dict[str, Any]:
    """A Create PDR (tests.upf.smf.create_pdr with its URR 1) naming the URRs instead."""
    kept = [child for child in pdr["Data"] if child["Type"] != 81]
    return ie(pdr["Type"], [*kept, *(ie(81, {"Val": urr_id}) for urr_id in urr_ids)])


@contextlib.contextmanager
def site(dp, tmp_path, created_urr: dict[str, Any], *more_urrs: dict[str, Any], uplink_urrs: tuple[int, ...] = (1,),
         downlink_urrs: tuple[int, ...] = (1,), downlink_far: Optional[dict[str, Any]] = None
         ) -> Iterator[tuple[PfcpServer, Smf, int, int]]:
    """A UPF over the data plane serving PFCP, an SMF associated, and one session established with
    `created_urr` (and `more_urrs`), its uplink and downlink PDRs naming the URRs given, the downlink
    FAR (id 2) GTP-U to GNB unless given: (server, smf, UP SEID, uplink TEID)."""
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    data_path = applier(dp)
    upf = Upf(store, data_path, n3_ipv4=N3_IP)
    data_path.reconcile(upf.sessions.values())  # as a start does: the maps hold the store's sessions, no others'
    server = PfcpServer(upf, "127.0.0.1", 0)
    server.start()
    smf = Smf(server.address)
    try:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
        ies = [node_id(), fseid(0x51), with_urrs(create_pdr(1, 1, access=True, choose_id=1, flow=None), uplink_urrs),
               with_urrs(create_pdr(3, 2, access=False, ue=UE, flow=None), downlink_urrs), create_far(1, core=True),
               downlink_far or create_far(2, core=False, gnb=GNB, teid=DL_TEID), create_qer(), created_urr, *more_urrs]
        assert cause(smf.ask("PFCPSessionEstablishmentReq", ies, seid=0)) == Cause.REQUEST_ACCEPTED
        (session,) = server.upf.sessions.values()
        yield server, smf, session.seid, session.pdrs[1].pdi.local_fteid.teid
    finally:
        smf.close()
        server.close()
        store.close()


def report_of(smf: Smf, up_seid: int) -> dict[str, Any]:
    """The Session Report Request the SMF receives, answered: its one Usage Report's values."""
    request, error = P.parse_PFCP(smf.receive_raw())
    # pycrate's table of the Usage Report's mandatory IEs is wrong: read without it
    assert request is not None and error in (0, P.ERR_PFCP_MAND_IE_MISS)
    assert request["Hdr"]["Type"].get_val() == 56 and request["Hdr"]["SEID"].get_val() == 0x51
    answer = P.PFCPSessionReportResp(val={
        "Hdr": {"SeqNum": request["Hdr"]["SeqNum"].get_val(), "SEID": up_seid},
        "PFCPSessionReportRespIEs": [ie(19, Cause.REQUEST_ACCEPTED)],
    })
    smf.send(answer.to_bytes())
    return usage_values(grouped(find(request, 80), "UsageReportSessionReportReq"))


def usage_values(usage: Any) -> dict[str, Any]:
    return {
        "urr": _scalar(usage, 81),
        "seqn": _scalar(usage, 104),
        "trigger": _flags(find(usage, 63)["Data"]),
        "start": _scalar(usage, 75),
        "end": _scalar(usage, 76),
        "volume": value(find(usage, 66)),
        "duration": None if find(usage, 67) is None else _scalar(usage, 67),
    }


def _scalar(usage: Any, ie_type: int) -> int:
    found = value(find(usage, ie_type))
    return found["Val"] if isinstance(found, dict) else found


def _flags(trigger: Any) -> set[str]:
    """The flags set in a Usage Report Trigger (three octets of named bits)."""
    octets = [trigger[name] for name in ("Octet1", "Octet2", "Octet3") if name in trigger._by_name]
    return {name for octet in octets for name in octet._by_name if octet[name].get_val()}


def volumes(volume: dict[str, Any]) -> tuple[int, ...]:
    return tuple(volume[name] for name in ("TotalVolume", "UplinkVolume", "DownlinkVolume", "TotalNumPackets",
                                           "UplinkNumPackets", "DownlinkNumPackets"))


def downlink_frame() -> bytes:
    return bytes(Ether(**MACS) / IP(src=SERVER, dst=UE) / UDP(sport=5004, dport=40000) / (b"d" * 64))


def test_a_volume_threshold_reached_is_reported_with_the_volumes_and_re_armed(dp, tmp_path):
    threshold = urr(ie(62, {"VOLUM": 1}), ie(37, {"Octet1": {"VOLTH": 1}}), ie(31, {"TOVOL": 1, "Total": 250}))
    with site(dp, tmp_path, threshold) as (server, smf, up_seid, teid):
        monitor = server.usage
        monitor.step(T0)
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        dp.test_run(downlink_frame(), datapath.N6_IF)
        monitor.step(T0 + 1)
        assert monitor.reports_sent == 0, f"{UL_SIZE + 92} bytes: under the threshold"
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        monitor.step(T0 + 2)
        report = report_of(smf, up_seid)
        assert report["trigger"] == {"VOLTH"} and (report["urr"], report["seqn"]) == (1, 0)
        assert volumes(report["volume"]) == (3 * UL_SIZE, 2 * UL_SIZE, UL_SIZE, 3, 2, 1)
        assert (report["start"], report["end"]) == (int(T0) + NTP_EPOCH_OFFSET, int(T0) + 2 + NTP_EPOCH_OFFSET)

        monitor.step(T0 + 3)
        assert monitor.reports_sent == 1, "re-armed: the next measurement starts from the report"
        for _ in range(3):
            dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        monitor.step(T0 + 4)
        again = report_of(smf, up_seid)
        assert again["seqn"] == 1 and volumes(again["volume"]) == (3 * UL_SIZE, 3 * UL_SIZE, 0, 3, 3, 0)


def test_a_volume_quota_used_up_is_reported_and_stops_the_traffic_until_a_new_quota(dp, tmp_path):
    quota = urr(ie(62, {"VOLUM": 1}), ie(37, {"Octet2": {"VOLQU": 1}}), ie(73, {"ULVOL": 1, "Uplink": 150}))
    with site(dp, tmp_path, quota) as (server, smf, up_seid, teid):
        monitor = server.usage
        monitor.step(T0)
        assert dp.test_run(uplink_frame(teid=teid), datapath.N3_IF).data == decapsulated()
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        monitor.step(T0 + 1)
        report = report_of(smf, up_seid)
        assert report["trigger"] == {"VOLQU"} and volumes(report["volume"])[1] == 2 * UL_SIZE

        slot = server.upf.sessions[up_seid].urr_slots[1]
        before = server.upf.usage([slot])[slot].ul_packets
        for frame, ingress in ((uplink_frame(teid=teid), datapath.N3_IF), (downlink_frame(), datapath.N6_IF)):
            outcome = dp.test_run(frame, ingress)
            assert (outcome.verdict, outcome.reason) == ("DROP", "upf_far_drop")
        assert server.upf.usage([slot])[slot].ul_packets == before, "dropped packets are no usage"
        assert server.upf.sessions[up_seid].urrs[1].quota_exhausted

        new_quota = [ie(13, [ie(81, {"Val": 1}), ie(73, {"ULVOL": 1, "Uplink": 10_000})])]  # Update URR
        assert cause(smf.ask("PFCPSessionModificationReq", new_quota, seid=up_seid)) == Cause.REQUEST_ACCEPTED
        assert dp.test_run(uplink_frame(teid=teid), datapath.N3_IF).data == decapsulated(), "forwarding again"
        monitor.step(T0 + 2)
        assert monitor.reports_sent == 1


def test_periodic_reports_follow_the_measurement_period_of_a_fake_clock(dp, tmp_path):
    periodic = urr(ie(62, {"VOLUM": 1, "DURAT": 1}), ie(37, {"Octet1": {"PERIO": 1}}), ie(64, {"Val": 10}))
    with site(dp, tmp_path, periodic) as (server, smf, up_seid, teid):
        monitor = server.usage
        monitor.step(T0)
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        monitor.step(T0 + 4)
        monitor.step(T0 + 9.5)
        assert monitor.reports_sent == 0
        monitor.step(T0 + 10)
        first = report_of(smf, up_seid)
        assert first["trigger"] == {"PERIO"} and volumes(first["volume"])[4] == 1
        assert first["end"] - first["start"] == 10 and first["duration"] == 6, "traffic first seen at T0 + 4"
        monitor.step(T0 + 21)  # a late poll: the period stays on its grid (T0 + 20, then T0 + 30)
        second = report_of(smf, up_seid)
        assert second["seqn"] == 1 and volumes(second["volume"]) == (0,) * 6 and second["duration"] == 0
        monitor.step(T0 + 29)
        assert monitor.reports_sent == 2
        monitor.step(T0 + 30)
        assert report_of(smf, up_seid)["seqn"] == 2


def test_the_deletion_response_carries_the_final_usage(dp, tmp_path):
    plain = urr(ie(62, {"VOLUM": 1}), ie(37, {"Octet1": {}}))
    with site(dp, tmp_path, plain) as (server, smf, up_seid, teid):
        server.usage.step(T0)
        for _ in range(2):
            dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        dp.test_run(downlink_frame(), datapath.N6_IF)
        response = smf.ask("PFCPSessionDeletionReq", [], seid=up_seid)
        assert cause(response) == Cause.REQUEST_ACCEPTED
        final = usage_values(grouped(find(response, 79), "UsageReportSessionDeletionResp"))
        assert final["trigger"] == {"TERMR"} and final["seqn"] == 0
        assert volumes(final["volume"]) == (3 * UL_SIZE, 2 * UL_SIZE, UL_SIZE, 3, 2, 1)
        association = {p.tags["tenant"]: p.fields for p in _association_points(server)}
        assert association["10.0.0.1"]["ul_packets"] == 2, "the association's totals keep a session gone"


def test_a_query_urr_is_answered_in_the_modification_response(dp, tmp_path):
    plain = urr(ie(62, {"VOLUM": 1}), ie(37, {"Octet1": {}}))
    with site(dp, tmp_path, plain) as (server, smf, up_seid, teid):
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        query = [ie(77, [ie(81, {"Val": 1})])]
        response = smf.ask("PFCPSessionModificationReq", query, seid=up_seid)
        assert cause(response) == Cause.REQUEST_ACCEPTED
        queried = usage_values(grouped(find(response, 78), "UsageReportSessionModResp"))
        assert queried["trigger"] == {"IMMER"} and volumes(queried["volume"])[4] == 1
        response = smf.ask("PFCPSessionModificationReq", query, seid=up_seid)
        again = usage_values(grouped(find(response, 78), "UsageReportSessionModResp"))
        assert again["seqn"] == 1 and volumes(again["volume"]) == (0,) * 6, "a query starts a new measurement"


def _association_points(server: PfcpServer) -> list[Any]:
    return UsagePoints(server.usage, "edge-1").snapshot(0)


def test_a_scrape_shows_the_associations_unless_asked_and_reports_nothing():
    sent: list[Any] = []
    monitor = UsageMonitor(FakeUpf(), lambda seid, reports: sent.append(reports))
    by_default = {point.measurement for point in UsagePoints(monitor, "edge-1").snapshot(0)}
    asked = {point.measurement for point in UsagePoints(monitor, "edge-1", session_metrics=True).snapshot(0)}
    assert by_default == {UPF_ASSOCIATION} and asked == {UPF_ASSOCIATION, UPF_URR}
    assert sent == [] and monitor.counts()[0].counts == (3, 300, 6, 900), "read, not reported"


def test_ur_seqn_never_goes_back_over_a_restart(dp, tmp_path):
    """Two immediate reports (UR-SEQN 0, 1), then the UPF restarted over the same store and data
    plane: the next report of the URR is 2, and its periodic reports go on from there."""
    plain = urr(ie(62, {"VOLUM": 1}), ie(37, {"Octet1": {"PERIO": 1}}), ie(64, {"Val": 10}))
    query = [ie(77, [ie(81, {"Val": 1})])]

    def queried(smf: Smf, up_seid: int) -> int:
        response = smf.ask("PFCPSessionModificationReq", query, seid=up_seid)
        return usage_values(grouped(find(response, 78), "UsageReportSessionModResp"))["seqn"]

    with site(dp, tmp_path, plain) as (server, smf, up_seid, _):
        assert [queried(smf, up_seid), queried(smf, up_seid)] == [0, 1]
    with restarted(dp, tmp_path) as (server, smf):
        assert queried(smf, up_seid) == 2
        server.usage.step(T0)
        server.usage.step(T0 + 10)
        assert report_of(smf, up_seid)["seqn"] == 3
        assert cause(smf.ask("PFCPSessionDeletionReq", [], seid=up_seid)) == Cause.REQUEST_ACCEPTED
        assert server.upf.store.execute("SELECT name FROM upf_counters WHERE name LIKE 'urr_%'").fetchall() == [], \
            "dropped with the URR"


@contextlib.contextmanager
def restarted(dp, tmp_path) -> Iterator[tuple[PfcpServer, Smf]]:
    """The UPF of `site` started again over its store and maps, its SMF (a new socket) associated."""
    store = Store.open(tmp_path / "netapp.db", synchronous="NORMAL")
    server = PfcpServer(Upf(store, applier(dp), n3_ipv4=N3_IP), "127.0.0.1", 0)
    server.start()
    smf = Smf(server.address)
    try:
        assert cause(smf.ask("PFCPAssociationUpdateReq", [node_id()])) == Cause.REQUEST_ACCEPTED  # its new port
        yield server, smf
    finally:
        smf.close()
        server.close()
        store.close()


def test_after_a_restart_a_urr_measures_from_its_last_report(dp, tmp_path):
    """A quota used up and renewed before a restart: after it, what was reported is not measured
    again -- the renewed quota is not used up at once, and the next report holds only what is new."""
    quota = urr(ie(62, {"VOLUM": 1}), ie(37, {"Octet2": {"VOLQU": 1}}), ie(73, {"ULVOL": 1, "Uplink": 150}))
    with site(dp, tmp_path, quota) as (server, smf, up_seid, teid):
        server.usage.step(T0)
        for _ in range(2):
            dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        server.usage.step(T0 + 1)
        assert report_of(smf, up_seid)["trigger"] == {"VOLQU"}
        renewed = [ie(13, [ie(81, {"Val": 1}), ie(73, {"ULVOL": 1, "Uplink": 250})])]  # 2 of the 3 packets so far
        assert cause(smf.ask("PFCPSessionModificationReq", renewed, seid=up_seid)) == Cause.REQUEST_ACCEPTED
        assert dp.test_run(uplink_frame(teid=teid), datapath.N3_IF).data == decapsulated()
    with restarted(dp, tmp_path) as (server, smf):
        server.usage.step(T0 + 2)
        assert server.usage.reports_sent == 0 and not server.upf.sessions[up_seid].urrs[1].quota_exhausted
        assert dp.test_run(uplink_frame(teid=teid), datapath.N3_IF).data == decapsulated()
        response = smf.ask("PFCPSessionModificationReq", [ie(77, [ie(81, {"Val": 1})])], seid=up_seid)
        queried = usage_values(grouped(find(response, 78), "UsageReportSessionModResp"))
        assert volumes(queried["volume"]) == (2 * UL_SIZE, 2 * UL_SIZE, 0, 2, 2, 0), "since the VOLQU report"
        assert (queried["seqn"], queried["start"]) == (1, int(T0) + 1 + NTP_EPOCH_OFFSET)
        assert cause(smf.ask("PFCPSessionDeletionReq", [], seid=up_seid)) == Cause.REQUEST_ACCEPTED


def test_after_a_restart_the_final_report_holds_only_what_came_after_the_last_report(dp, tmp_path):
    plain = urr(ie(62, {"VOLUM": 1}), ie(37, {"Octet1": {}}))
    with site(dp, tmp_path, plain) as (server, smf, up_seid, teid):
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        assert cause(smf.ask("PFCPSessionModificationReq", [ie(77, [ie(81, {"Val": 1})])], seid=up_seid)) == 1
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
    with restarted(dp, tmp_path) as (server, smf):
        response = smf.ask("PFCPSessionDeletionReq", [], seid=up_seid)  # before any poll of the new start
        final = usage_values(grouped(find(response, 79), "UsageReportSessionDeletionResp"))
        assert (final["seqn"], volumes(final["volume"])) == (1, (UL_SIZE, UL_SIZE, 0, 1, 1, 0))
