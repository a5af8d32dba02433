"""A rule's policers in the kernel (nf/qos/rule.h, run by xdp_police_rule with the test's times):
its own first, then the one it shares with the other rules of its slice, each against the
reference model; a packet its own policer drops never reaches the shared one; rule slots that name
no policer pass uncounted."""

from __future__ import annotations

import itertools
import os

from netapp.qos.abi import Algo
from netapp.qos.model import Policer, PolicerConfig
from tests.qos.police import counters_tuple, on_cpu

OWN_A, OWN_B, SHARED = 11, 12, 13  # policer ids
PARENT, OWN_C = 14, 15
SLOT_A, SLOT_B, SLOT_SLICE_ONLY, SLOT_NONE = 3, 4, 5, 6
SLOT_C, SLOT_ALONE = 7, 8
CHUNK = 2000  # bytes of a CPU's credit
ORDER = (SLOT_A, SLOT_B, SLOT_SLICE_ONLY, SLOT_A)  # the rules' packets, in turn


def model_counters(model: Policer) -> tuple[int, int, int, int]:
    return (model.passed_packets, model.passed_bytes, model.dropped_packets, model.dropped_bytes)


def test_own_policer_then_the_shared_one_decide_as_the_models(police):
    """Two rules at 8 Mb/s each (token buckets) share a slice's 10 Mb/s (a sliding window) with a
    third rule of the slice that has no policer of its own (250 us of synthetic time between
    packets, the rules' packets interleaved): every decision is the own model's and
    then, for what it passed, the shared model's; every counter is its model's."""
    own = PolicerConfig(rate=8 * 10**6, burst=3000, algo=Algo.TOKEN_BUCKET)
    shared = PolicerConfig(rate=10 * 10**6, burst=4000, algo=Algo.SLIDING_WINDOW, window_shift=22)
    for policer_id, config in ((OWN_A, own), (OWN_B, own), (SHARED, shared)):
        police.configure(policer_id, config)
    police.name_rule_policers(SLOT_A, OWN_A, SHARED)
    police.name_rule_policers(SLOT_B, OWN_B, SHARED)
    police.name_rule_policers(SLOT_SLICE_ONLY, 0, SHARED)
    models = {OWN_A: Policer(own), OWN_B: Policer(own), SHARED: Policer(shared)}
    owns = {SLOT_A: OWN_A, SLOT_B: OWN_B, SLOT_SLICE_ONLY: None}
    slots = itertools.cycle(ORDER)
    expected, got = [], []
    for step in range(400):
        slot, size, now = next(slots), 400 + (step * 97) % 1100, 10**9 + step * 250_000
        own_id = owns[slot]
        passes = models[own_id].decide(size, now) if own_id else True
        expected.append(passes and models[SHARED].decide(size, now))
        got.append(police.rule_passes(slot, size, now))
    assert got == expected
    assert 0 < sum(got) < len(got), "offered above both rates, some pass and some are dropped"
    for policer_id, model in models.items():
        assert counters_tuple(police.counters(policer_id)) == model_counters(model), policer_id
    passed_by_owns = police.counters(OWN_A).passed_packets + police.counters(OWN_B).passed_packets
    slice_only = sum(1 for step in range(400) if ORDER[step % len(ORDER)] == SLOT_SLICE_ONLY)
    shared_counts = counters_tuple(police.counters(SHARED))
    assert shared_counts[0] + shared_counts[2] == passed_by_owns + slice_only, (
        "the shared policer is offered what the rules' own passed, and every packet of the slice-only rule")


def test_a_slot_that_names_no_policer_passes_uncounted(police):
    police.configure(OWN_A, PolicerConfig(rate=8_000, burst=100, algo=Algo.TOKEN_BUCKET))
    police.name_rule_policers(SLOT_NONE, 0, 0)
    before = counters_tuple(police.counters(OWN_A))
    assert all(police.rule_passes(SLOT_NONE, 1500, 10**9 + k) for k in range(5))
    assert counters_tuple(police.counters(OWN_A)) == before


def test_packets_own_credit_covers_still_meet_the_parent_and_the_shared_policer(police):
    """Own policers with a CPU credit (nf/qos/rule.h decides a packet the own policer's credit covers
    inline and calls for the rest): a rule whose own token bucket has a parent and a shared policer,
    one whose own GCRA has a shared one, one whose own token bucket is alone; on one CPU, 100 us
    apart, above the rates: every decision and every counter is the models' (own with its credit,
    then its parent, then the shared one, for what each passed)."""
    own = PolicerConfig(rate=8 * 10**6, burst=12_000, algo=Algo.TOKEN_BUCKET)
    gcra = PolicerConfig(rate=8 * 10**6, burst=12_000, algo=Algo.GCRA)
    parent = PolicerConfig(rate=12 * 10**6, burst=6000, algo=Algo.TOKEN_BUCKET)
    shared = PolicerConfig(rate=16 * 10**6, burst=8000, algo=Algo.SLIDING_WINDOW, window_shift=22)
    police.configure(OWN_A, own, parent=PARENT, chunk=CHUNK)
    police.configure(OWN_B, own, chunk=CHUNK)
    police.configure(OWN_C, gcra, chunk=CHUNK)
    police.configure(PARENT, parent)
    police.configure(SHARED, shared)
    police.name_rule_policers(SLOT_A, OWN_A, SHARED)
    police.name_rule_policers(SLOT_C, OWN_C, SHARED)
    police.name_rule_policers(SLOT_ALONE, OWN_B, 0)
    models = {OWN_A: Policer(own, CHUNK), OWN_B: Policer(own, CHUNK), OWN_C: Policer(gcra, CHUNK),
              PARENT: Policer(parent), SHARED: Policer(shared)}
    chains = {SLOT_A: (OWN_A, PARENT, SHARED), SLOT_C: (OWN_C, SHARED), SLOT_ALONE: (OWN_B,)}
    slots = itertools.cycle((SLOT_A, SLOT_ALONE, SLOT_C))
    cpu = min(os.sched_getaffinity(0))
    expected, got = [], []
    with on_cpu(cpu):
        for step in range(600):
            slot, size, now = next(slots), 300 + (step * 97) % 1200, 10**9 + step * 100_000
            expected.append(all(models[policer].decide(size, now, cpu) for policer in chains[slot]))
            got.append(police.rule_passes(slot, size, now))
    assert got == expected
    assert 0 < sum(got) < len(got), "offered above the rates, some pass and some are dropped"
    for policer_id, model in models.items():
        assert counters_tuple(police.counters(policer_id)) == model_counters(model), policer_id
    assert police.counters(PARENT).dropped_packets > 0 and police.counters(SHARED).dropped_packets > 0
