"""The demo's traffic plan against its capacities: the surge must exceed a CPU's capacity even
after the AI module moved a flow off it, so that the data plane forwards the overflow, and leave
the other CPU unable to take another flow, so that the AI module marks the busy one overloaded.
(The demo itself, in a terminal: tests/integration/test_demo_screen.py.)"""

from __future__ import annotations

from netapp.testbed import scenario
from netapp.testbed.demo import (
    AI_POLICY,
    BEST_EFFORT_PPS,
    CALM_S,
    CAPACITY_PPS,
    METER_WINDOW_MS,
    MIN_GAP_S,
    PRIORITY_BASE_PPS,
    PRIORITY_PEAK_PPS,
    RAMP_S,
    Surge,
)

PER_CPU = scenario.PRIORITY_FLOWS // 2  # priority flows first steered to each of two CPUs
BEST_EFFORT = (scenario.FLOWS - scenario.PRIORITY_FLOWS) * BEST_EFFORT_PPS


def test_calm_cpus_can_take_a_flow_and_the_surge_overflows_the_busy_cpu_after_one_moved():
    assert PER_CPU * PRIORITY_BASE_PPS < AI_POLICY.low * CAPACITY_PPS  # calm: either CPU takes a flow
    assert PER_CPU * PRIORITY_PEAK_PPS > AI_POLICY.high * CAPACITY_PPS  # the AI module acts on the surge
    # After one surging flow moved, the three left and the best effort received there exceed the
    # capacity: the meter forwards the rest.
    assert (PER_CPU - 1) * PRIORITY_PEAK_PPS + BEST_EFFORT > 1.2 * CAPACITY_PPS
    # The other CPU, with its own flows and the moved one, takes no further flow, but is not hot.
    other = (PER_CPU * PRIORITY_BASE_PPS + PRIORITY_PEAK_PPS) / CAPACITY_PPS
    assert AI_POLICY.low <= other < AI_POLICY.high


def test_the_paced_sender_can_send_the_peak_and_the_meter_window_takes_many_frames():
    peak = PER_CPU * PRIORITY_PEAK_PPS + PER_CPU * PRIORITY_BASE_PPS + BEST_EFFORT
    assert peak < 0.8 / MIN_GAP_S
    assert CAPACITY_PPS * METER_WINDOW_MS // 1000 >= 10  # not a frame or two: bursts of a few fit


def test_the_services_of_each_cpu_surge_in_turn_sent_from_that_cpu():
    surge = Surge(cpus=2, busy_cpu=1)
    peak = CALM_S + RAMP_S
    flow0, flow1, best_effort = scenario.Flow(0), scenario.Flow(1), scenario.Flow(scenario.PRIORITY_FLOWS)
    assert (surge.rate(flow1, peak), surge.rate(flow0, peak)) == (PRIORITY_PEAK_PPS, PRIORITY_BASE_PPS)
    assert surge.rate(best_effort, peak) == BEST_EFFORT_PPS
    assert surge.sending_cpu(peak) == 1
    assert surge.rate(flow1, 1.0) == PRIORITY_BASE_PPS  # calm
    after = Surge.CYCLE_S + peak
    assert (surge.rate(flow0, after), surge.rate(flow1, after)) == (PRIORITY_PEAK_PPS, PRIORITY_BASE_PPS)
    assert surge.sending_cpu(after) == 0
    assert "surge at peak: prio-1, prio-3, prio-5, prio-7 at 120 pkt/s each" == surge.describe(peak)
