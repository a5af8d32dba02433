"""netapp.upf.policing and the compiler's policers: which QER polices a PDR, the policer a QER's
direction asks for, the entries naming it; and the applier's policer writes undone with a change the
maps refuse half-way (FakeDpp)."""

from __future__ import annotations

import re

import pytest

from netapp.dataplane.facade import Dataplane
from netapp.qos.abi import RATE_MIN, Algo, Gate, Policer
from netapp.qos.applier import PolicerSpec
from netapp.service.contract import DataplaneUnavailable
from netapp.upf.abi import FarAction
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site, compile_session
from netapp.upf.models import Qer, RuleError, Session
from netapp.upf.policing import (
    DOWNLINK,
    UPLINK,
    PoliceDefaults,
    parents,
    policer_spec,
    policing_qer,
    policing_qers,
    wanted,
)
from netapp.upf.pfcp.ies import IEType, RuleType
from netapp.upf.slots import Slots
from tests.upf.test_applier import CrampedDpp, _other
from tests.upf.test_datapath import N3_IP, session

SITE = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP)


def _with(qers: dict[int, Qer], qer_ids: tuple[int, ...] = (1,), policers: dict[int, tuple[int, int]] = {}) -> Session:
    base = session()
    pdrs = {pdr_id: pdr.model_copy(update={"qer_ids": qer_ids}) for pdr_id, pdr in base.pdrs.items()}
    return base.model_copy(update={"qers": qers, "pdrs": pdrs, "qer_policers": policers})


def test_between_qers_equally_shared_a_closed_gate_polices_first_then_the_lowest_mbr_of_the_pdrs_direction():
    ambr, flow = Qer(id=1, mbr_ul_kbps=50_000, mbr_dl_kbps=100_000), Qer(id=2, mbr_ul_kbps=80_000, mbr_dl_kbps=20_000)
    policed = _with({1: ambr, 2: flow}, (1, 2))
    assert [qer.id for qer in policing_qers(policed, policed.pdrs[1])] == [1, 2], "uplink: 50 < 80 Mbit/s"
    assert [qer.id for qer in policing_qers(policed, policed.pdrs[2])] == [2, 1], "downlink: 20 < 100 Mbit/s"
    assert policing_qer(policed, policed.pdrs[1]).id == 1
    assert wanted(policed) == {(1, UPLINK), (2, UPLINK), (1, DOWNLINK), (2, DOWNLINK)}, "every QER of a chain"
    gated = _with({1: ambr, 2: flow.model_copy(update={"gate_ul_open": False})}, (1, 2))
    assert policing_qer(gated, gated.pdrs[1]).id == 2


@pytest.mark.parametrize("mbr_kbps", [None, 0, 400_000_000, 500_000_000])
def test_no_mbr_a_zero_one_and_one_of_400_gbits_and_more_police_nothing(mbr_kbps):
    unpoliced = _with({1: Qer(id=1, mbr_ul_kbps=mbr_kbps, mbr_dl_kbps=mbr_kbps)})
    assert wanted(unpoliced) == set()


def test_the_burst_is_the_settings_milliseconds_at_the_rate_but_two_mtus_at_least():
    defaults = PoliceDefaults(algo=Algo.SLIDING_WINDOW, burst_ms=10)
    fast = policer_spec(Qer(id=1, mbr_ul_kbps=100_000), UPLINK, defaults)
    assert fast == PolicerSpec(rate=100_000_000, burst=125_000, algo=Algo.SLIDING_WINDOW)
    assert policer_spec(Qer(id=1, mbr_dl_kbps=64), DOWNLINK, defaults).burst == 3000
    assert policer_spec(Qer(id=1, gate_dl_open=False), DOWNLINK, defaults) == PolicerSpec(
        rate=RATE_MIN, burst=3000, algo=Algo.SLIDING_WINDOW, gate=Gate.CLOSED)
    with pytest.raises(RuleError) as refused:
        policer_spec(Qer(id=3, mbr_ul_kbps=7), UPLINK, defaults)
    assert (refused.value.ie_type, refused.value.rule) == (IEType.MBR, (RuleType.QER, 3))


def test_the_entries_name_their_policer_and_a_closed_gate_without_one_is_a_far_that_drops():
    qers = {1: Qer(id=1, qfi=9, mbr_ul_kbps=8, gate_dl_open=False)}
    entries = compile_session(_with(qers, policers={1: (5, 6)}), SITE, {1: 1})
    (up,), down = entries.uplink.values(), list(entries.downlink.values())  # downlink: IPv4 and IPv6
    assert (up.policer, up.far) == (5, FarAction.FORWARD)
    assert [(each.policer, each.far) for each in down] == [(6, FarAction.FORWARD)] * 2
    assert sorted(entries.policers) == [5, 6] and entries.policers[6].gate == Gate.CLOSED
    bare = compile_session(_with(qers), SITE, {1: 1})  # no data path gave it policers
    (up,), down = bare.uplink.values(), list(bare.downlink.values())
    assert (up.policer, up.far) == (0, FarAction.FORWARD)
    assert [(each.policer, each.far) for each in down] == [(0, FarAction.DROP)] * 2
    assert bare.policers == {}


def _uplinks(*qer_ids: tuple[int, ...], extra: dict[int, Qer] = {}) -> Session:
    """Uplink PDRs 1, 3, 4... naming `qer_ids` (each its own TEID) and the downlink PDR 2 naming QER
    9: QER 9 the session's AMBR, 1 and 2 the flows' MBRs."""
    base = session()
    uplink, fteid = base.pdrs[1], base.pdrs[1].pdi.local_fteid
    pdrs = {pdr_id: uplink.model_copy(update={"id": pdr_id, "qer_ids": qers, "pdi": uplink.pdi.model_copy(
        update={"local_fteid": fteid.model_copy(update={"teid": fteid.teid + pdr_id})})})
        for pdr_id, qers in zip((1, 3, 4, 5), qer_ids)}
    pdrs[2] = base.pdrs[2].model_copy(update={"qer_ids": (9,)})
    qers = {1: Qer(id=1, mbr_ul_kbps=16), 2: Qer(id=2, mbr_ul_kbps=32), 9: Qer(id=9, mbr_ul_kbps=8, mbr_dl_kbps=8),
            **extra}
    return base.model_copy(update={"qers": qers, "pdrs": pdrs})


def test_a_pdr_with_a_flows_qer_and_the_sessions_shared_ambr_qer_chains_the_flow_to_one_shared_parent():
    two = _uplinks((1, 9), (2, 9))
    assert [qer.id for qer in policing_qers(two, two.pdrs[1])] == [1, 9], "shared by more PDRs: the parent"
    assert [qer.id for qer in policing_qers(two, two.pdrs[3])] == [2, 9]
    assert parents(two) == {(1, UPLINK): 9, (2, UPLINK): 9, (9, UPLINK): None, (9, DOWNLINK): None}
    ids = {1: (11, 0), 2: (12, 0), 9: (19, 20)}
    entries = compile_session(two.model_copy(update={"qer_policers": ids}), SITE, {1: 1})
    assert sorted(entry.policer for entry in entries.uplink.values()) == [11, 12], "each PDR names its flow's"
    assert {policer_id: (spec.rate, spec.parent) for policer_id, spec in entries.policers.items()} == {
        11: (16_000, 19), 12: (32_000, 19), 19: (8_000, 0), 20: (8_000, 0)}


@pytest.mark.parametrize("qer_ids, words", [
    (((1, 9), (2, 9, 4)), "PDR 3: uplink: QERs [2, 4, 9] police it; policers chain 2 deep at most"),
    # all named twice: by MBR, 9 under 1 (PDR 1), 1 under 2 (PDR 3), 2 under 9 (PDR 4)
    (((1, 9), (1, 2), (2, 9)), "PDR 3: uplink: QER 1 is under QER 2 here and under none in PDR 1"),
], ids=["three QERs", "a parent under another"])
def test_a_chain_the_data_path_cannot_follow_as_asked_is_refused_naming_the_pdr_and_its_qers(qer_ids, words):
    bad = _uplinks(*qer_ids, extra={4: Qer(id=4, mbr_ul_kbps=64)})
    bad = bad.model_copy(update={"qer_policers": {1: (11, 0), 2: (12, 0), 4: (14, 0), 9: (19, 20)}})
    with pytest.raises(RuleError, match=re.escape(words)) as refused:
        compile_session(bad, SITE, {1: 1})
    assert (refused.value.ie_type, refused.value.rule[0]) == (IEType.QER_ID, RuleType.PDR)


def _policers(fake: CrampedDpp) -> dict[int, bytes]:
    return {int.from_bytes(key, "little"): value for key, value in fake.tables.get("dpp_policers", {}).items()
            if Policer.from_buffer_copy(value).algo != Algo.NONE}


def test_policers_written_by_a_change_the_maps_refuse_half_way_are_put_back():
    fake = CrampedDpp()
    upf = BpfApplier(Dataplane(fake).table, SITE, iface_entries({}, N3_IP, None))
    qer = Qer(id=1, qfi=9, mbr_ul_kbps=8_000, mbr_dl_kbps=16_000)
    first = _with({1: qer}, policers={1: (1, 2)})
    upf.apply(None, first)
    before = _policers(fake)
    assert sorted(before) == [1, 2]
    faster = first.model_copy(update={"qers": {1: qer.model_copy(update={"mbr_ul_kbps": 80_000})}})
    second = _other(2, 0x5000, "10.45.0.8", "2001:db8:45::8").model_copy(
        update={"qers": {1: qer}, "qer_policers": {1: (3, 4)}})
    with pytest.raises(DataplaneUnavailable, match="E2BIG"):
        upf.apply_group([(first, faster), (None, second)])  # the second's downlink does not fit
    assert _policers(fake) == before, "policer 1 rewritten and 3, 4 written, then undone"
    upf.apply(first, faster)
    assert Policer.from_buffer_copy(_policers(fake)[1]).rate == 80_000_000 and _policers(fake)[2] == before[2]
    upf.apply(faster, None)
    assert _policers(fake) == {}


def test_the_reconcile_keeps_a_policer_configured_as_desired_and_empties_the_others():
    fake = CrampedDpp()
    upf = BpfApplier(Dataplane(fake).table, SITE, iface_entries({}, N3_IP, None))
    kept = _with({1: Qer(id=1, qfi=9, mbr_ul_kbps=8_000)}, policers={1: (1, 0)})
    upf.apply(None, kept)
    state = Policer.from_buffer_copy(_policers(fake)[1])
    state.credit, state.last_ns = 12345, 678  # what packets left
    stray = Policer(rate=8000, burst=3000, algo=Algo.TOKEN_BUCKET)
    upf.policers.apply({})
    Dataplane(fake).table("dpp_policers").update({1: state, 9: stray})
    assert upf.reconcile([kept]) == {}
    assert sorted(_policers(fake)) == [1] and bytes(upf.policers.state(1)) == bytes(state)


def _policed(slots: Slots, seid: int, ids: list[int]) -> Session:
    """A session of QER 1 policing both directions, holding the policer ids `ids`, held by `slots`."""
    held = _with({1: Qer(id=1, mbr_ul_kbps=8_000, mbr_dl_kbps=16_000)}, policers={1: (ids[0], ids[1])})
    held = held.model_copy(update={"seid": seid})
    slots.hold(held)
    return held


def _chosen(slots: Slots, seid: int, fast: bool) -> list[int]:
    """The policer ids a new session `seid` of QER 1 (both directions policed) is given, committed:
    by the fast path of establishments or the full one."""
    slots.begin()
    if fast:
        ids = slots.choose_new_policers(seid, 2)
    else:
        bare = _with({1: Qer(id=1, mbr_ul_kbps=8_000, mbr_dl_kbps=16_000)}).model_copy(update={"seid": seid})
        ids = list(slots.choose_policers(bare, bare)[1])
    slots.settle()
    return ids


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "full path"])
def test_policer_ids_are_given_after_the_last_given_and_a_freed_one_once_the_ids_wrap(fast):
    """From a cursor, as URR slots are: the first free id from 1 would walk every id held before it,
    one a session, on every establishment."""
    slots = Slots(0, 0, policer_count=6)  # ids 1 .. 5
    first = _policed(slots, 1, _chosen(slots, 1, fast))
    assert first.policer_ids() == [1, 2]
    _policed(slots, 2, _chosen(slots, 2, fast))
    slots.release(first)
    assert _chosen(slots, 3, fast) == [5, 1], "after 4, then 1: freed, once past the last id"


def test_policer_ids_chosen_by_a_change_that_is_not_committed_are_given_again():
    slots = Slots(0, 0, policer_count=6)
    slots.begin()
    assert slots.choose_new_policers(1, 2) == [1, 2]  # refused afterwards: never settled
    assert _chosen(slots, 2, fast=True) == [1, 2]
