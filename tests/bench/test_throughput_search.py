"""The RFC 2544 search and the sweep of bench.throughput, against made-up systems."""

from __future__ import annotations

import math

import pytest

from bench.throughput.search import Probe, binary_search, sweep_rates


def system(capacity: float, generator_max: float = math.inf, short: float = 0.0):
    """A system that loses frames above `capacity`; the generator offers at most `generator_max`
    and always falls `short` (a fraction) below what it is asked for."""
    asked: list[float] = []

    def trial(rate: float) -> Probe:
        asked.append(rate)
        offered = min(rate, generator_max) * (1.0 - short)
        passed = offered <= capacity
        return Probe(rate, offered, passed, None if passed else "loss", {"target_pps": rate})

    trial.asked = asked  # type: ignore[attr-defined]
    return trial


@pytest.mark.parametrize("capacity", [1.0, 123_456.0, 700_000.0, 999_999.0])
def test_given_a_loss_threshold_when_searching_then_the_result_is_within_the_resolution_below_it(capacity):
    trial = system(capacity)
    result = binary_search(trial, high=1_000_000.0, resolution=0.01)
    assert result.zero_loss_pps <= capacity
    assert capacity - result.zero_loss_pps <= 0.01 * 1_000_000.0
    assert result.limited_by == "loss"
    assert len(trial.asked) <= math.ceil(math.log2(100)) + 1
    assert [p.target_pps for p in result.trials] == trial.asked


def test_given_the_top_rate_passes_then_the_result_is_a_lower_bound_set_by_the_generator():
    trial = system(capacity=5e6)
    result = binary_search(trial, high=2e6, resolution=0.01)
    assert result.zero_loss_pps == 2e6
    assert result.limited_by == "generator" and result.lower_bound_only
    assert len(result.trials) == 1


def test_given_every_rate_loses_then_nothing_passes():
    result = binary_search(system(capacity=0.0), high=1e6, resolution=0.05)
    assert result.zero_loss_pps == 0.0
    assert result.limited_by == "loss"
    assert result.trials[-1].target_pps <= 0.05 * 1e6


def test_given_a_generator_that_falls_short_then_the_result_is_the_rate_it_offered():
    result = binary_search(system(capacity=400_000.0, short=0.02), high=1e6, resolution=0.01)
    best = max((p for p in result.trials if p.passed), key=lambda p: p.offered_pps)
    assert result.zero_loss_pps == best.offered_pps
    assert result.target_pps == best.target_pps
    assert result.zero_loss_pps <= 400_000.0


def test_given_an_invalid_trial_then_the_search_says_so():
    def trial(rate: float) -> Probe:
        ok = rate < 300
        return Probe(rate, rate, ok, None if ok else "invalid")

    assert binary_search(trial, high=1000.0, resolution=0.01).limited_by == "invalid"


@pytest.mark.parametrize("high, resolution", [(0.0, 0.01), (1e6, 0.0), (1e6, 1.0)])
def test_given_nonsense_bounds_then_the_search_refuses(high, resolution):
    with pytest.raises(ValueError):
        binary_search(system(1.0), high, resolution)


def test_sweep_is_evenly_spaced_up_to_the_top_plus_points_around_the_knee_below_it():
    rates = sweep_rates(1_000_000.0, 4, knee=300_000.0, knee_factors=(0.5, 1.0, 2.0, 4.0))
    assert rates == [150_000, 250_000, 300_000, 500_000, 600_000, 750_000, 1_000_000]


def test_sweep_without_a_knee_and_with_nonsense_points():
    assert sweep_rates(10.0, 2) == [5, 10]
    with pytest.raises(ValueError):
        sweep_rates(10.0, 0)
