"""QERs' policers in the kernel (BPF_PROG_TEST_RUN), through `netapp serve`'s UPF (start_pfcp) and an
SMF speaking pycrate: a QER's MBR polices its uplink and downlink PDRs (a token bucket of the
settings' burst, full when written: 3000 bytes, two MTUs, at the small rates here, so that three
packets of 1000 bytes pass and the next ones drop within the test's milliseconds), a closed gate drops
every packet, Update QER rewrites the policer, its removal frees it, a refused request leaves it as it
was, and a restart keeps ids, configuration and counters; the API's view of them counts what was sent."""

from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator, Optional

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from netapp.qos.abi import Algo, Clock, Gate
from netapp.qos.applier import COARSE_LAG_TICKS, coarse_tick_ns
from netapp.service.contract import Principal, Scope
from netapp.upf import store as rows
from netapp.upf.pfcp.ies import Cause
from netapp.upf.pfcp.server import PfcpServer
from netapp.upf.views import SessionViews
from tests.upf import test_datapath as base
from tests.upf.smf import Smf, cause, create_far, create_pdr, create_urr, find, fseid, ie, node_id, recovery, value
from tests.upf.test_datapath import DL_TEID, GNB, MACS, N3_IP, SERVER, UE, dp  # noqa: F401 - dp: the module's
from tests.upf.test_restart import ANYWHERE, serving, smf_and_store, upf_settings
from tests.utils.packets.gtp import gtpu

ADMIN = Principal(tenant="", scopes=frozenset({Scope.ADMIN}))
UE_PACKET = 1000
PAYLOAD = b"p" * (UE_PACKET - 28)  # IPv4 and UDP headers, 28


def qer(qer_id: int = 1, ul_kbps: Optional[int] = None, dl_kbps: Optional[int] = None, ul_closed: bool = False,
        dl_closed: bool = False, update: bool = False) -> dict[str, Any]:
    """Create QER (Update QER): its gates and, if given, its MBR (kbit/s; 0 a direction not limited)."""
    fields = [ie(109, {"Val": qer_id}), ie(25, {"ULGate": int(ul_closed), "DLGate": int(dl_closed)})]
    if ul_kbps is not None or dl_kbps is not None:
        fields.append(ie(26, {"UL": ul_kbps or 0, "DL": dl_kbps or 0}))
    return ie(14 if update else 7, fields)


def establish(smf: Smf, *qers: dict[str, Any], cp_seid: int = 1, ue: str = UE) -> int:
    """An uplink PDR (a TEID the UPF chooses) and a downlink one to `ue` towards the gNB, with QER 1."""
    ies = [node_id(), fseid(cp_seid), create_pdr(1, 1, access=True, choose_id=1, flow=None, ue=ue),
           create_pdr(2, 2, access=False, flow=None, ue=ue), create_far(1, core=True),
           create_far(2, core=False, gnb=GNB, teid=DL_TEID), *qers, create_urr()]
    response = smf.ask("PFCPSessionEstablishmentReq", ies, seid=0)
    assert cause(response) == Cause.REQUEST_ACCEPTED
    return smf_seid(response)


def smf_seid(response: Any) -> int:
    return find(response, 57)["Data"]["SEID"].get_val()


def uplink(server: PfcpServer, seid: int, pdr_id: int = 1) -> bytes:
    teid = server.upf.sessions[seid].pdrs[pdr_id].pdi.local_fteid.teid
    inner = IP(src=UE, dst=SERVER) / UDP(sport=40000, dport=5004) / PAYLOAD
    return bytes(Ether(**MACS) / IP(src=GNB, dst=N3_IP) / UDP(sport=2152, dport=2152) / gtpu(teid, 9, ul=True, inner=inner))


def downlink() -> bytes:
    return bytes(Ether(**MACS) / IP(src=SERVER, dst=UE) / UDP(sport=5004, dport=40000) / PAYLOAD)


def verdicts(dp, frame: bytes, ifindex: int, count: int) -> list[Optional[str]]:  # noqa: F811
    """The reason of each of `count` runs of `frame` (None: it went on, the UPF's action)."""
    reasons = []
    for _ in range(count):
        out = dp.test_run(frame, ifindex)
        reasons.append(out.reason if out.verdict == "DROP" else None)
    return reasons


def assert_polices_at(dp, frame: bytes, rate_bps: int, burst: int, clock: Clock, count: int = 60) -> None:  # noqa: F811
    """The kernel's clock runs while the frames are sent (a loaded machine may take milliseconds between two),
    so what passes is bounded, not fixed: the whole burst first, then no more than what the rate refilled
    in the time measured around the runs (one frame of rounding), and on the coarse clock in two ticks
    more (dataplane/bpf/nf/qos/police.h: its steps come up to two ticks late)."""
    frame_bytes = UE_PACKET  # what the policer counts: the UE packet, outer headers removed
    started = time.monotonic_ns()
    seen = verdicts(dp, frame, base.N3_IF, count)
    elapsed_ns = time.monotonic_ns() - started
    in_burst = burst // frame_bytes
    assert seen[:in_burst] == [None] * in_burst, "the new burst lets its frames through"
    lag_ns = COARSE_LAG_TICKS * coarse_tick_ns() if clock == Clock.COARSE else 0
    refilled = rate_bps * (elapsed_ns + lag_ns) // 8 // 10**9 // frame_bytes
    assert seen.count(None) <= in_burst + refilled + 1, (seen, elapsed_ns)


def policers(server: PfcpServer, seid: int) -> tuple[int, int]:
    return server.upf.sessions[seid].qer_policers[1]


@contextlib.contextmanager
def associated(tmp_path, dp) -> Iterator[tuple[Smf, PfcpServer, Any, Any]]:  # noqa: F811
    settings = upf_settings(tmp_path, ANYWHERE)
    with smf_and_store(tmp_path) as (smf, store), serving(settings, store, dp, smf) as server:
        assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
        try:
            yield smf, server, store, settings
        finally:
            for seid in list(server.upf.sessions):
                server.upf.delete(seid)


POLICED = [None, None, None, "qos_policed", "qos_policed"]


def test_a_qers_mbr_polices_its_uplink_and_downlink_pdrs_each_on_its_own_policer(dp, tmp_path):  # noqa: F811
    with associated(tmp_path, dp) as (smf, server, store, _):
        seid = establish(smf, qer(ul_kbps=8, dl_kbps=16))
        ul, dl = policers(server, seid)
        assert ul and dl and ul != dl
        applied = server.upf.applier.policers
        assert (applied.state(ul).rate, applied.state(ul).burst, applied.state(ul).algo) == (8000, 3000, Algo.TOKEN_BUCKET)
        assert applied.state(dl).rate == 16000
        assert verdicts(dp, uplink(server, seid), base.N3_IF, 5) == POLICED
        assert verdicts(dp, downlink(), base.N6_IF, 5) == POLICED
        for policer_id in (ul, dl):
            counts = applied.counters(policer_id)
            assert (counts.passed_packets, counts.passed_bytes, counts.dropped_packets, counts.dropped_bytes) == (
                3, 3000, 2, 2000)
        slot = server.upf.sessions[seid].urr_slots[1]
        usage = server.upf.usage([slot])[slot]
        assert (usage.ul_packets, usage.dl_packets, usage.ul_bytes) == (3, 3, 3000), "the URR counts what passed"
        shown = SessionViews(store, policers=applied).session_policers(ADMIN, seid)
        assert [(item.id, item.direction, item.rate_bps, item.counters.passed_packets, item.counters.dropped_bytes)
                for item in shown] == [(ul, "uplink", 8000, 3, 2000), (dl, "downlink", 16000, 3, 2000)]
        assert shown[0].state.credit_bytes < 1000 and shown[0].state.last_ns, "what three packets left"


def test_a_closed_gate_drops_every_packet_of_its_direction_only(dp, tmp_path):  # noqa: F811
    with associated(tmp_path, dp) as (smf, server, _, _):
        seid = establish(smf, qer(ul_closed=True))
        ul, dl = policers(server, seid)
        assert ul and not dl, "an open gate without an MBR polices nothing"
        assert server.upf.applier.policers.state(ul).gate == Gate.CLOSED
        assert verdicts(dp, uplink(server, seid), base.N3_IF, 3) == ["qos_policed"] * 3
        assert verdicts(dp, downlink(), base.N6_IF, 3) == [None] * 3
        assert server.upf.applier.policers.counters(ul).dropped_packets == 3


def test_update_qer_rewrites_the_policer_and_remove_qer_frees_it(dp, tmp_path):  # noqa: F811
    with associated(tmp_path, dp) as (smf, server, _, _):
        seid = establish(smf, qer(ul_kbps=8, dl_kbps=8))
        ul, dl = policers(server, seid)
        assert verdicts(dp, uplink(server, seid), base.N3_IF, 5) == POLICED
        faster = qer(ul_kbps=8000, dl_kbps=8, update=True)  # 8 Mbit/s: a burst of 10 ms, 10,000 bytes
        assert cause(smf.ask("PFCPSessionModificationReq", [faster], seid=seid)) == Cause.REQUEST_ACCEPTED
        assert policers(server, seid) == (ul, dl), "the same policers, rewritten"
        assert (server.upf.applier.policers.state(ul).rate, server.upf.applier.policers.state(ul).burst) == (
            8_000_000, 10_000)
        assert_polices_at(dp, uplink(server, seid), rate_bps=8_000_000, burst=10_000,
                          clock=server.upf.applier.policers.state(ul).clock)
        # the PDRs to a QER without an MBR, the first one removed: its policers are emptied
        update_pdrs = [ie(9, [ie(56, {"Val": pdr_id}), ie(109, {"Val": 2})]) for pdr_id in (1, 2)]
        changes = [qer(2), *update_pdrs, ie(18, [ie(109, {"Val": 1})])]
        assert cause(smf.ask("PFCPSessionModificationReq", changes, seid=seid)) == Cause.REQUEST_ACCEPTED
        assert server.upf.sessions[seid].qer_policers == {}
        assert server.upf.applier.policers.state(ul).algo == Algo.NONE
        assert server.upf.applier.policers.state(dl).algo == Algo.NONE
        assert verdicts(dp, uplink(server, seid), base.N3_IF, 5) == [None] * 5


def test_a_refused_request_leaves_the_policers_as_they_were(dp, tmp_path):  # noqa: F811
    with associated(tmp_path, dp) as (smf, server, _, _):
        seid = establish(smf, qer(ul_kbps=8, dl_kbps=8))
        ul, _ = policers(server, seid)
        assert verdicts(dp, uplink(server, seid), base.N3_IF, 4) == POLICED[:4]
        before = bytes(server.upf.applier.policers.state(ul))
        refused = [qer(ul_kbps=8000, dl_kbps=8, update=True), ie(16, [ie(108, {"Val": 99})])]  # Remove FAR 99: none
        assert cause(smf.ask("PFCPSessionModificationReq", refused, seid=seid)) != Cause.REQUEST_ACCEPTED
        too_slow = [qer(ul_kbps=7, dl_kbps=8, update=True)]  # under the policers' 8 kbit/s
        assert cause(smf.ask("PFCPSessionModificationReq", too_slow, seid=seid)) == (
            Cause.RULE_CREATION_MODIFICATION_FAILURE)
        assert bytes(server.upf.applier.policers.state(ul)) == before
        assert server.upf.applier.policers.counters(ul).dropped_packets == 1


def test_a_restart_keeps_the_policers_ids_configuration_and_counts(dp, tmp_path):  # noqa: F811
    settings = upf_settings(tmp_path, ANYWHERE)
    with smf_and_store(tmp_path) as (smf, store):
        with serving(settings, store, dp, smf) as first:
            assert cause(smf.ask("PFCPAssociationSetupReq", [node_id(), recovery(1000)])) == Cause.REQUEST_ACCEPTED
            seid = establish(smf, qer(ul_kbps=8, dl_kbps=16))
            ids = policers(first, seid)
            assert verdicts(dp, uplink(first, seid), base.N3_IF, 5) == POLICED
        with serving(settings, store, dp, smf) as again:
            try:
                assert policers(again, seid) == ids
                assert {session.seid: session.qer_policers for session, _ in rows.load_sessions(store)} == {
                    seid: {1: ids}}
                counts = again.upf.applier.policers.counters(ids[0])
                assert (counts.passed_packets, counts.dropped_packets) == (3, 2), "not written afresh"
                # Still policed: the bucket refills 1000 bytes a second, so however long the restart
                # took (a loaded machine), it holds at most its 3000-byte burst: of four packets of
                # 1000 bytes, one at least is dropped.
                assert "qos_policed" in verdicts(dp, uplink(again, seid), base.N3_IF, 4)
                second = establish(smf, qer(ul_kbps=8, dl_kbps=16), cp_seid=2, ue="10.45.0.8")
                assert not set(policers(again, second)) & set(ids), "none in use given again"
            finally:
                for each in list(again.upf.sessions):
                    again.upf.delete(each)


def with_qers(pdr: dict[str, Any], *qer_ids: int) -> dict[str, Any]:
    """A Create PDR naming more QERs."""
    return ie(pdr["Type"], [*pdr["Data"], *(ie(109, {"Val": qer_id}) for qer_id in qer_ids)])


def test_two_flows_under_their_mbrs_share_the_sessions_ambr_policer(dp, tmp_path):  # noqa: F811
    """Uplink PDRs 1 and 3 (two TEIDs), each with its flow's QER (1, 2: 16 kbit/s, a bucket of 3000
    bytes) and the session's AMBR QER 9 (8 kbit/s, 3000 bytes), which the downlink PDR names too:
    2 packets of flow 1 and 3 of flow 3, each flow within its own bucket, together 5000 bytes: the
    AMBR lets 3000 through."""
    with associated(tmp_path, dp) as (smf, server, _, _):
        ies = [node_id(), fseid(1),
               with_qers(create_pdr(1, 1, access=True, choose_id=1, flow=None, ue=UE, qer=1), 9),
               with_qers(create_pdr(3, 1, access=True, choose_id=3, flow=None, ue=UE, qer=2), 9),
               create_pdr(2, 2, access=False, flow=None, ue=UE, qer=9), create_far(1, core=True),
               create_far(2, core=False, gnb=GNB, teid=DL_TEID), qer(1, ul_kbps=16, dl_kbps=16),
               qer(2, ul_kbps=16, dl_kbps=16), qer(9, ul_kbps=8, dl_kbps=8), create_urr()]
        response = smf.ask("PFCPSessionEstablishmentReq", ies, seid=0)
        assert cause(response) == Cause.REQUEST_ACCEPTED
        seid = smf_seid(response)
        ids = server.upf.sessions[seid].qer_policers
        (flow1, _), (flow2, _), (ambr, ambr_dl) = ids[1], ids[2], ids[9]
        applied = server.upf.applier.policers
        assert [applied.state(each).parent for each in (flow1, flow2, ambr, ambr_dl)] == [ambr, ambr, 0, 0]
        assert verdicts(dp, uplink(server, seid, 1), base.N3_IF, 2) == [None, None]
        assert verdicts(dp, uplink(server, seid, 3), base.N3_IF, 3) == [None, "qos_policed", "qos_policed"]
        counts = {each: applied.counters(each) for each in (flow1, flow2, ambr)}
        assert [(c.passed_packets, c.dropped_packets) for c in counts.values()] == [(2, 0), (3, 0), (3, 2)], (
            "the flows' policers passed all; the AMBR's dropped what was over its 3000 bytes")


def test_a_pdr_with_three_policing_qers_is_refused_naming_it_and_the_qer_id(dp, tmp_path):  # noqa: F811
    with associated(tmp_path, dp) as (smf, server, _, _):
        ies = [node_id(), fseid(1),
               with_qers(create_pdr(1, 1, access=True, choose_id=1, flow=None, ue=UE, qer=1), 2, 9),
               create_pdr(2, 2, access=False, flow=None, ue=UE, qer=9), create_far(1, core=True),
               create_far(2, core=False, gnb=GNB, teid=DL_TEID), qer(1, ul_kbps=16), qer(2, ul_kbps=32),
               qer(9, ul_kbps=8, dl_kbps=8), create_urr()]
        response = smf.ask("PFCPSessionEstablishmentReq", ies, seid=0)
        assert cause(response) == Cause.RULE_CREATION_MODIFICATION_FAILURE
        assert value(find(response, 40)) == 109, "Offending IE: QER ID"
        failed = value(find(response, 114))
        assert (failed["RuleIDType"], failed["RuleIDVal"]) == (0, 1), "Failed Rule ID: PDR 1"
        assert not server.upf.sessions

