"""Several URRs on one PDR, in the kernel: the PDR counts on the slot of its set of URRs, and each
URR's usage is the sum of the slots of the PDRs that name it (netapp.upf.models.UrrSet). Packets
through the real program (BPF_PROG_TEST_RUN), the session driven over PFCP by the test SMF
(pycrate), the usage reports decoded by pycrate."""

from __future__ import annotations

from typing import Any

from netapp.service.store import Store
from netapp.upf.abi import Usage
from netapp.upf.pfcp.ies import Cause
from netapp.upf.sessions import Upf
from netapp.upf.usage import UsageMonitor
from tests.upf import test_datapath as datapath
from tests.upf.smf import Smf, cause, find, grouped, ie, ies_of
from tests.upf.test_datapath import N3_IP, applier, dp, uplink_frame  # noqa: F401 - dp: the data plane fixture
from tests.upf.test_usage import T0, UL_SIZE, downlink_frame, report_of, site, urr, usage_values, volumes

DL_SIZE = 20 + 8 + 64  # downlink_frame's IP packet


def threshold(urr_id: int, total: int) -> dict[str, Any]:
    return urr(ie(62, {"VOLUM": 1}), ie(37, {"Octet1": {"VOLTH": 1}}), ie(31, {"TOVOL": 1, "Total": total}),
               urr_id=urr_id)


def plain(urr_id: int) -> dict[str, Any]:
    return urr(ie(62, {"VOLUM": 1}), ie(37, {"Octet1": {}}), urr_id=urr_id)


def update_pdr(pdr_id: int, *urr_ids: int) -> dict[str, Any]:
    return ie(9, [ie(56, {"Val": pdr_id}), *(ie(81, {"Val": urr_id}) for urr_id in urr_ids)])


def queried(smf: Smf, up_seid: int, *urr_ids: int) -> dict[int, tuple[int, ...]]:
    """Query URR (IMMER) of the URRs: their volumes by URR id."""
    response = smf.ask("PFCPSessionModificationReq", [ie(77, [ie(81, {"Val": urr_id})]) for urr_id in urr_ids],
                       seid=up_seid)
    assert cause(response) == Cause.REQUEST_ACCEPTED
    return _reports(response)


def _reports(response: Any) -> dict[int, tuple[int, ...]]:
    return {report["urr"]: volumes(report["volume"]) for report in _usage_reports(response, 78)}


def _usage_reports(response: Any, ie_type: int) -> list[dict[str, Any]]:
    name = {78: "UsageReportSessionModResp", 79: "UsageReportSessionDeletionResp"}[ie_type]
    return [usage_values(grouped(child, name)) for child in ies_of(response) if child["Type"].get_val() == ie_type]


def test_two_urrs_on_a_pdr_report_at_their_own_thresholds_and_a_urr_on_two_pdrs_sums_both(dp, tmp_path):
    """The uplink PDR names URRs 1 and 2, the downlink PDR URR 1 alone: URR 2 (150 bytes) reports at
    the second uplink packet, URR 1 (250 bytes) once the downlink packet adds to its uplink ones."""
    with site(dp, tmp_path, threshold(1, 250), threshold(2, 150), uplink_urrs=(1, 2)) as (server, smf, seid, teid):
        session = server.upf.sessions[seid]
        (counted,) = session.urr_sets
        assert (counted.urr_ids, counted.members) == ((1, 2), (1, 2))
        assert counted.slot not in session.urr_slots.values()
        monitor = server.usage
        monitor.step(T0)
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        monitor.step(T0 + 1)
        assert monitor.reports_sent == 0
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        monitor.step(T0 + 2)
        second = report_of(smf, seid)
        assert (second["urr"], second["trigger"]) == (2, {"VOLTH"}) and monitor.reports_sent == 1
        assert volumes(second["volume"]) == (2 * UL_SIZE, 2 * UL_SIZE, 0, 2, 2, 0)
        dp.test_run(downlink_frame(), datapath.N6_IF)
        monitor.step(T0 + 3)
        first = report_of(smf, seid)
        assert (first["urr"], first["trigger"]) == (1, {"VOLTH"}) and monitor.reports_sent == 2
        assert volumes(first["volume"]) == (2 * UL_SIZE + DL_SIZE, 2 * UL_SIZE, DL_SIZE, 3, 2, 1)
        counts = {usage.urr_id: usage.counts for usage in monitor.counts()}
        assert counts == {1: (2, 2 * UL_SIZE, 1, DL_SIZE), 2: (2, 2 * UL_SIZE, 0, 0)}


def test_a_urr_added_by_modification_starts_at_zero_and_the_urrs_stay_exact(dp, tmp_path):
    with site(dp, tmp_path, plain(1)) as (server, smf, seid, teid):
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        added = [plain(2), update_pdr(1, 1, 2)]
        assert cause(smf.ask("PFCPSessionModificationReq", added, seid=seid)) == Cause.REQUEST_ACCEPTED
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        assert queried(smf, seid, 1, 2) == {1: (3 * UL_SIZE, 3 * UL_SIZE, 0, 3, 3, 0),
                                            2: (UL_SIZE, UL_SIZE, 0, 1, 1, 0)}

        # URR 2 removed (PDR 1 back to URR 1 alone): its final report; its set's slot stays for URR 1
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        removed = [update_pdr(1, 1), ie(17, [ie(81, {"Val": 2})])]
        response = smf.ask("PFCPSessionModificationReq", removed, seid=seid)
        assert cause(response) == Cause.REQUEST_ACCEPTED
        final = usage_values(grouped(find(response, 78), "UsageReportSessionModResp"))
        assert (final["urr"], final["trigger"], volumes(final["volume"])[4]) == (2, {"TERMR"}, 1)
        (kept,) = server.upf.sessions[seid].urr_sets
        assert (kept.urr_ids, kept.members) == ((1, 2), (1,))

        # URR 2 again, with its id: a slot of its own, from zero; URR 1 keeps all it counted
        assert cause(smf.ask("PFCPSessionModificationReq", added, seid=seid)) == Cause.REQUEST_ACCEPTED
        again = server.upf.sessions[seid].urr_sets
        assert len(again) == 2 and again[1].slot != kept.slot and again[1].members == (1, 2)
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        assert queried(smf, seid, 1, 2) == {1: (2 * UL_SIZE, 2 * UL_SIZE, 0, 2, 2, 0),
                                            2: (UL_SIZE, UL_SIZE, 0, 1, 1, 0)}

        # a restart over the same store and maps: the sets and their counts are back
        restarted = Upf(Store.open(tmp_path / "netapp.db", synchronous="NORMAL"), applier(dp), n3_ipv4=N3_IP)
        try:
            assert restarted.sessions[seid].urr_sets == again
            restarted_counts = {u.urr_id: u.counts for u in UsageMonitor(restarted, lambda *_: None).counts()}
            assert restarted_counts == {1: (5, 5 * UL_SIZE, 0, 0), 2: (1, UL_SIZE, 0, 0)}
        finally:
            restarted.store.close()

        # the session deleted: every slot freed, both final reports whole
        dp.test_run(uplink_frame(teid=teid), datapath.N3_IF)
        response = smf.ask("PFCPSessionDeletionReq", [], seid=seid)
        finals = _usage_reports(response, 79)
        assert {report["urr"]: volumes(report["volume"])[4] for report in finals} == {1: 1, 2: 1}
        freed = server.upf.usage([kept.slot, again[1].slot])
        assert [bytes(counts) for counts in freed.values()] == [bytes(Usage())] * 2, "freed slots are zeroed"

