"""Holt's linear trend method against series whose forecasts are known by hand."""

from __future__ import annotations

import math

import pytest

from netapp.ai.forecast import DEFAULT_ALPHA, DEFAULT_BETA, Holt


def test_a_constant_series_forecasts_itself_at_every_horizon():
    for horizon in (0, 1, 5):
        assert Holt().forecast([0.4] * 10, horizon).value == pytest.approx(0.4)


def test_a_straight_line_is_extrapolated_exactly_whatever_the_weights():
    line = [0.1 + 0.05 * t for t in range(12)]
    for alpha, beta in ((0.2, 0.1), (DEFAULT_ALPHA, DEFAULT_BETA), (1.0, 1.0)):
        forecast = Holt(alpha, beta).forecast(line, 3)
        assert forecast.trend == pytest.approx(0.05)
        assert forecast.value == pytest.approx(0.1 + 0.05 * 14)


def test_a_short_series_by_hand():
    # level0 = 1, trend0 = 1
    # y=2: level = .5*2 + .5*(1+1) = 2,     trend = .5*(2-1) + .5*1 = 1
    # y=4: level = .5*4 + .5*(2+1) = 3.5,   trend = .5*(3.5-2) + .5*1 = 1.25
    forecast = Holt(alpha=0.5, beta=0.5).forecast([1, 2, 4], horizon=2)
    assert (forecast.level, forecast.trend, forecast.value) == (3.5, 1.25, 6.0)
    assert forecast.observations == 3


def test_a_step_with_the_default_weights_by_hand():
    # Flat at 0 then 1: level = .5*1 + .5*0 = .5, trend = .3*.5 = .15; 3 ahead: .5 + 3*.15
    forecast = Holt().forecast([0, 0, 0, 1], horizon=3)
    assert forecast.level == pytest.approx(0.5)
    assert forecast.trend == pytest.approx(0.15)
    assert forecast.value == pytest.approx(0.95)


def test_a_rising_load_is_forecast_above_where_it_is_now():
    ramp = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]  # one tenth per poll
    forecast = Holt().forecast(ramp, horizon=3)
    assert forecast.value == pytest.approx(0.9)  # a line: 0.6 + 3 * 0.1
    assert forecast.value > ramp[-1]


def test_polls_without_a_load_are_skipped():
    with_gaps = [0.1, math.nan, 0.2, math.nan, 0.3]
    assert Holt().forecast(with_gaps, 1).value == pytest.approx(0.4)
    assert Holt().forecast(with_gaps, 1).observations == 3


def test_one_observation_has_no_trend():
    forecast = Holt().forecast([0.7], horizon=4)
    assert (forecast.trend, forecast.value) == (0.0, 0.7)


@pytest.mark.parametrize("alpha, beta", [(0, 0.3), (0.5, 0), (1.5, 0.3), (0.5, -0.1)])
def test_weights_outside_0_1_are_refused(alpha, beta):
    with pytest.raises(ValueError, match="must be in"):
        Holt(alpha, beta)


def test_nothing_to_forecast_from_or_a_negative_horizon_is_refused():
    with pytest.raises(ValueError, match="no observations"):
        Holt().forecast([math.nan], 1)
    with pytest.raises(ValueError, match="horizon"):
        Holt().forecast([1.0], -1)
