"""The policy: which flow moves where, when it marks a CPU instead, and what keeps it from flapping."""

from __future__ import annotations

import math

import pytest

from netapp.ai.policy import (
    CLEAR_OVERLOADED,
    MARK_OVERLOADED,
    MOVE,
    CpuView,
    Policy,
    PolicyConfig,
    SteerIntent,
)

CONFIG = PolicyConfig(high=0.8, low=0.6, confirm=2, cooldown_s=10.0)


def cpu(number, forecast, *, load=None, capacity=1000, enabled=True, overloaded=False):
    return CpuView(number, enabled, overloaded, capacity, forecast if load is None else load, forecast)


def flow(name, on_cpu, rate, tenant="operator"):
    return SteerIntent(tenant, name, on_cpu, rate)


def flows(*intents):
    return lambda: list(intents)


def no_intents_needed():
    raise AssertionError("the intents were read although nothing needed them")


def confirmed(policy, cpus, intents, now=0.0):
    """Decide twice (CONFIG.confirm), as two loop steps would; the second step's decisions."""
    assert policy.decide(cpus, intents, now) == []
    return policy.decide(cpus, intents, now + 1)


# --- moving a flow ---------------------------------------------------------------------------------


def test_given_a_hot_cpu_then_the_smallest_flow_that_brings_it_below_low_moves_to_the_least_loaded_cpu():
    cpus = [cpu(0, 0.95, load=0.7), cpu(1, 0.5), cpu(2, 0.1)]
    intents = flows(
        flow("largest", 0, 500),
        flow("small", 0, 100),
        flow("medium", 0, 200),
        flow("large", 0, 400),
        flow("elsewhere", 1, 50),
    )
    (decision,) = confirmed(Policy(CONFIG), cpus, intents)
    assert decision.action == MOVE
    # medium would leave CPU 0 at 0.75: under `high`, still above `low`; large leaves 0.55.
    assert (decision.cpu, decision.target_cpu, decision.intent, decision.tenant) == (
        0,
        2,
        "large",
        "operator",
    )
    assert (decision.load, decision.forecast) == (0.7, 0.95)
    assert "0.95" in decision.reason


def test_given_no_flow_brings_it_below_low_then_the_largest_that_fits_on_the_target_moves():
    cpus = [cpu(0, 1.4), cpu(1, 0.1)]
    intents = flows(flow("a", 0, 200), flow("b", 0, 400), flow("too-big", 0, 600))
    (decision,) = confirmed(Policy(CONFIG), cpus, intents)
    assert (decision.action, decision.intent, decision.target_cpu) == (MOVE, "b", 1)


def test_a_cpu_takes_a_flow_only_while_it_stays_below_low_with_it():
    # With 350 pkt/s CPU 1 would be at 0.65: under `high`, but the next surge away from being relieved.
    (decision,) = confirmed(Policy(CONFIG), [cpu(0, 0.9), cpu(1, 0.3)], flows(flow("a", 0, 350)))
    assert decision.action == MARK_OVERLOADED
    (decision,) = confirmed(Policy(CONFIG), [cpu(0, 0.9), cpu(1, 0.3)], flows(flow("a", 0, 250)))
    assert (decision.action, decision.intent) == (MOVE, "a")


@pytest.mark.parametrize(
    "intents",
    [
        [flow("idle", 0, 0.0), flow("unmeasured", 0, 0.0)],  # no rate in the window reads as 0 pkt/s
        [flow("idle", 0, 0.0), flow("too-big", 0, 900)],  # the idle one fits, the busy one does not
    ],
    ids=["all-idle", "only-the-idle-one-fits"],
)
def test_a_flow_without_packets_is_never_moved(intents):
    (decision,) = confirmed(Policy(CONFIG), [cpu(0, 0.9), cpu(1, 0.1)], flows(*intents))
    assert (decision.action, decision.intent) == (MARK_OVERLOADED, None)


def test_given_only_flows_without_packets_then_the_mark_says_so():
    intents = flows(flow("idle", 0, 0.0), flow("unmeasured", 0, 0.0))
    (decision,) = confirmed(Policy(CONFIG), [cpu(0, 0.9), cpu(1, 0.1)], intents)
    assert "none of its 2 priority flows carries packets" in decision.reason


def test_a_rising_load_is_acted_on_before_it_crosses_the_threshold():
    # What the loop feeds the policy on a ramp: load 0.5 and rising, forecast 0.8 three polls ahead.
    cpus = [cpu(0, 0.8, load=0.5), cpu(1, 0.1)]
    (decision,) = confirmed(Policy(CONFIG), cpus, flows(flow("prio-0", 0, 250)))
    assert decision.action == MOVE and decision.load < CONFIG.high


# --- marking a CPU overloaded ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "others, intents, why",
    [
        ([cpu(1, 0.65)], [flow("a", 0, 100)], "no other CPU is forecast below 0.6"),
        ([cpu(1, 0.5)], [flow("a", 0, 400)], "none of its 1 priority flows with packets fits on CPU 1"),
        ([cpu(1, 0.1)], [flow("elsewhere", 1, 100)], "it steers no priority flow that could move"),
    ],
    ids=["no-target", "nothing-fits", "nothing-to-move"],
)
def test_given_no_move_is_possible_then_the_cpu_is_marked_overloaded(others, intents, why):
    (decision,) = confirmed(Policy(CONFIG), [cpu(0, 0.9), *others], flows(*intents))
    assert (decision.action, decision.cpu, decision.target_cpu, decision.intent) == (
        MARK_OVERLOADED,
        0,
        None,
        None,
    )
    assert why in decision.reason


@pytest.mark.parametrize(
    "target",
    [
        cpu(1, 0.1, enabled=False),
        cpu(1, 0.1, overloaded=True),
        cpu(1, 0.1, capacity=0),  # unmetered: its load means nothing
        cpu(1, math.nan),  # too few polls to forecast
    ],
    ids=["disabled", "overloaded", "unmetered", "no-forecast"],
)
def test_a_cpu_that_cannot_be_judged_or_used_takes_no_flow(target):
    (decision,) = confirmed(Policy(CONFIG), [cpu(0, 0.9), target], flows(flow("a", 0, 100)))
    assert decision.action == MARK_OVERLOADED


@pytest.mark.parametrize(
    "hot",
    [cpu(0, 2.0, capacity=0), cpu(0, math.nan), cpu(0, 2.0, overloaded=True), cpu(0, 2.0, enabled=False)],
    ids=["unmetered", "no-forecast", "already-overloaded", "disabled"],
)
def test_a_cpu_that_cannot_be_judged_or_is_already_relieved_is_never_hot(hot):
    policy = Policy(CONFIG)
    for now in range(5):
        assert policy.decide([hot, cpu(1, 0.1)], no_intents_needed, now) == []


# --- against flapping ------------------------------------------------------------------------------


def test_one_forecast_above_high_is_not_enough_and_a_dip_restarts_the_count():
    policy = Policy(CONFIG)
    intents = flows(flow("a", 0, 100))
    assert policy.decide([cpu(0, 0.9), cpu(1, 0.1)], intents, 0) == []
    assert policy.decide([cpu(0, 0.7), cpu(1, 0.1)], no_intents_needed, 1) == []
    assert policy.decide([cpu(0, 0.9), cpu(1, 0.1)], intents, 2) == []
    assert len(policy.decide([cpu(0, 0.9), cpu(1, 0.1)], intents, 3)) == 1


def test_given_a_move_then_both_cpus_are_left_alone_until_the_cool_down_ends():
    policy = Policy(CONFIG)
    cpus = [cpu(0, 0.9), cpu(1, 0.1), cpu(2, 0.85)]
    intents = flows(flow("a", 0, 100), flow("b", 0, 100), flow("c", 2, 100))
    move, mark = confirmed(policy, cpus, intents, now=0)
    assert (move.action, move.cpu, move.target_cpu) == (MOVE, 0, 1)  # the hottest first
    # CPU 2 is hot too, but its only target has just taken a flow: it is marked instead.
    assert (mark.action, mark.cpu) == (MARK_OVERLOADED, 2)
    # CPU 0 still looks hot (its series lags the move): nothing until the cool-down ends.
    assert policy.decide([cpu(0, 0.9), cpu(1, 0.1)], intents, 10.9) == []
    (again,) = policy.decide([cpu(0, 0.9), cpu(1, 0.1)], intents, 11)
    assert (again.action, again.cpu, again.target_cpu) == (MOVE, 0, 1)


def steady_views(rates, placement, capacity=1000):
    """CPUs 0 and 1 as steady rates load them: the forecast is the load."""
    return [
        cpu(number, sum(rate for name, rate in rates.items() if placement[name] == number) / capacity)
        for number in (0, 1)
    ]


def test_given_steady_rates_then_a_moved_flow_is_not_moved_back():
    # With 700 of 800 pkt/s moved, CPU 1 would be at 0.8 and relieved in turn, of the same flow.
    rates, placement = {"a": 100, "b": 700, "x": 100}, {"a": 0, "b": 0, "x": 1}
    policy, moves = Policy(CONFIG), []
    for now in range(120):
        steered = flows(*(flow(name, placement[name], rate) for name, rate in rates.items()))
        for decision in policy.decide(steady_views(rates, placement), steered, now):
            if decision.action == MOVE:
                placement[decision.intent] = decision.target_cpu
                moves.append((now, decision.intent, decision.cpu, decision.target_cpu))
    assert moves == [(1, "a", 0, 1)]


def test_a_cpu_between_low_and_high_is_neither_relieved_nor_given_a_flow():
    policy = Policy(CONFIG)
    for now in range(4):
        assert policy.decide([cpu(0, 0.7), cpu(1, 0.65)], no_intents_needed, now) == []


# --- recovering ------------------------------------------------------------------------------------


def marked_cpu_0(policy):
    """CPU 0 marked overloaded by `policy` at time 1; what the next polls show: the flag set."""
    (mark,) = confirmed(policy, [cpu(0, 0.9), cpu(1, 0.7)], flows(flow("a", 0, 900)), now=0)
    assert mark.action == MARK_OVERLOADED and policy.marked == {0}
    return [cpu(0, 0.0, overloaded=True), cpu(1, 0.7)]


def test_given_a_mark_of_its_own_then_it_is_cleared_once_the_flows_ask_for_less_than_low():
    policy = Policy(CONFIG)
    after = marked_cpu_0(policy)
    assert policy.decide(after, flows(flow("a", 0, 500)), 5) == []  # cooling down
    assert policy.decide(after, flows(flow("a", 0, 700)), 12) == []  # still asks for 0.7
    (clear,) = policy.decide(after, flows(flow("a", 0, 500)), 13)
    assert (clear.action, clear.cpu, clear.load) == (CLEAR_OVERLOADED, 0, 0.5)
    assert policy.marked == frozenset()


def test_given_an_operator_cleared_its_mark_then_it_is_theirs_and_never_cleared_again():
    policy = Policy(CONFIG)
    marked_cpu_0(policy)
    # The flag still shows set right after the mark; the operator clears it later.
    assert policy.decide([cpu(0, 0.0, overloaded=False), cpu(1, 0.7)], no_intents_needed, 12) == []
    assert policy.marked == frozenset()
    # Set again, by the operator this time: not ours to clear.
    assert policy.decide([cpu(0, 0.0, overloaded=True), cpu(1, 0.7)], no_intents_needed, 30) == []


def test_marks_set_by_someone_else_are_never_cleared():
    policy = Policy(CONFIG)
    for now in range(0, 40, 10):
        assert policy.decide([cpu(0, 0.0, overloaded=True), cpu(1, 0.1)], no_intents_needed, now) == []


def test_nothing_hot_and_nothing_marked_reads_no_intent():
    assert Policy(CONFIG).decide([cpu(0, 0.3), cpu(1, 0.1)], no_intents_needed, 0) == []


@pytest.mark.parametrize(
    "settings", [{"high": 0.6, "low": 0.6}, {"high": 0.8, "low": 0}, {"confirm": 0}, {"cooldown_s": -1}]
)
def test_inconsistent_settings_are_refused(settings):
    with pytest.raises(ValueError):
        PolicyConfig(**settings)
