"""The dispatcher's settings, plans and hash model, without a kernel (tests/dataplane/test_rss*.py
run the program)."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from netapp.core.config import Settings
from netapp.dataplane.handle import possible_cpus
from netapp.qos.dispatch import DispatchPlan, plan_refusal, worker_of
from netapp.qos.rss_abi import MAX_RSS_IFACES, rss_hash, worker_slot

N3 = {"interfaces": [{"name": "n3"}]}


def settings(**fields) -> Settings:
    return Settings(auth_disabled=True, **fields)


def test_dispatch_is_off_by_default():
    dispatch = settings().dispatch
    assert (dispatch.interfaces, dispatch.workers) == ([], [])


def test_a_dispatcher_with_workers_on_an_attached_interface_is_taken():
    dispatch = settings(**N3, dispatch={"interfaces": ["n3"], "workers": [0]}).dispatch
    assert (dispatch.interfaces, dispatch.workers, dispatch.queue_size) == (["n3"], [0], 2048)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dispatch": {"workers": [0]}}, "dispatch.interfaces: required with dispatch.workers"),
        ({**N3, "dispatch": {"interfaces": ["n3"]}}, "dispatch.workers: required with dispatch.interfaces"),
        ({"dispatch": {"interfaces": ["n3"], "workers": [0]}}, "dispatch.interfaces: n3: not one of `interfaces`"),
        ({**N3, "dispatch": {"interfaces": ["n3"], "workers": [0, 0]}}, "a CPU listed twice"),
        ({**N3, "dispatch": {"interfaces": ["n3"], "workers": [possible_cpus()]}}, "not a CPU of this node"),
        ({**N3, "dispatch": {"interfaces": ["n3"], "workers": [0], "queue_size": 0}}, "queue_size"),
    ],
    ids=["no-interfaces", "no-workers", "not-attached", "twice", "no-such-cpu", "empty-queue"],
)
def test_a_wrong_dispatcher_is_refused_naming_the_field(fields, message):
    with pytest.raises(ValidationError, match=message.replace("`", ".")):
        settings(**fields)


def test_interfaces_that_would_share_a_slot_are_refused():
    assert plan_refusal(DispatchPlan((0,), (3, 3 + MAX_RSS_IFACES))) is not None
    assert plan_refusal(DispatchPlan((0,), (3, 4))) is None


def test_the_hash_model_keeps_to_32_bits_and_mixes_the_qfi_in():
    assert rss_hash(0, 0) == 0  # murmur3's finalizer fixes 0
    values = {rss_hash(teid, qfi) for teid in range(64) for qfi in range(64)}
    assert len(values) == 64 * 64 and all(0 <= v < 1 << 32 for v in values)


@pytest.mark.parametrize("workers", [2, 3, 8, 16])
def test_ten_thousand_tunnels_spread_over_any_number_of_workers(workers):
    """The model's spread (the program's equals it: tests/dataplane/test_rss.py): max/min load."""
    for teids in (range(1, 10_001), random.Random(workers).sample(range(1 << 32), 10_000)):
        counts = [0] * workers
        for teid in teids:
            counts[worker_slot(teid, 9, workers)] += 1
        # each worker's count is binomial: 4.5 sigma either way bounds the ratio for 16 workers
        mean = 10_000 / workers
        sigma = (mean * (1 - 1 / workers)) ** 0.5
        assert max(counts) / min(counts) <= (mean + 4.5 * sigma) / (mean - 4.5 * sigma), counts


def test_a_tunnel_s_worker_is_a_cpu_of_the_list():
    assert {worker_of(teid, 0, [5, 7]) for teid in range(100)} == {5, 7}
