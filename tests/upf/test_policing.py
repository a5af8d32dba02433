"""netapp.upf.policing and the compiler's policers: which QER polices a PDR, the policer a QER's
direction asks for, the entries naming it; and the applier's policer writes undone with a change the
maps refuse half-way (FakeDpp)."""

from __future__ import annotations

import pytest

from netapp.dataplane.facade import Dataplane
from netapp.qos.abi import RATE_MIN, Algo, Gate, Policer
from netapp.qos.applier import PolicerSpec
from netapp.service.contract import DataplaneUnavailable
from netapp.upf.abi import FarAction
from netapp.upf.applier import BpfApplier, iface_entries
from netapp.upf.compiler import Site, compile_session
from netapp.upf.models import Qer, RuleError, Session
from netapp.upf.policing import DOWNLINK, UPLINK, PoliceDefaults, policer_spec, policing_qer, wanted
from netapp.upf.pfcp.ies import IEType, RuleType
from netapp.upf.slots import Slots
from tests.upf.test_applier import CrampedDpp, _other
from tests.upf.test_datapath import N3_IP, session

SITE = Site(net_instances={"internet": 1}, default_instance="internet", n3_ipv4=N3_IP)


def _with(qers: dict[int, Qer], qer_ids: tuple[int, ...] = (1,), policers: dict[int, tuple[int, int]] = {}) -> Session:
    base = session()
    pdrs = {pdr_id: pdr.model_copy(update={"qer_ids": qer_ids}) for pdr_id, pdr in base.pdrs.items()}
    return base.model_copy(update={"qers": qers, "pdrs": pdrs, "qer_policers": policers})


def test_a_closed_gate_polices_first_then_the_lowest_mbr_of_the_pdrs_direction():
    ambr, flow = Qer(id=1, mbr_ul_kbps=50_000, mbr_dl_kbps=100_000), Qer(id=2, mbr_ul_kbps=80_000, mbr_dl_kbps=20_000)
    policed = _with({1: ambr, 2: flow}, (1, 2))
    assert policing_qer(policed, policed.pdrs[1]).id == 1, "uplink: 50 < 80 Mbit/s"
    assert policing_qer(policed, policed.pdrs[2]).id == 2, "downlink: 20 < 100 Mbit/s"
    assert wanted(policed) == {(1, UPLINK), (2, DOWNLINK)}
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
