"""The CPU rate meter (nf/steer/meter.h, cpu_overloaded) when several CPUs steer to one CPU at
once: each receiving CPU counts down a share of the target's window budget of its own, so they meet
on the target's counter once per share; within one window they admit at most the budget, and at
least the budget less a share per receiver still unspent. Run in the kernel, one receiving thread
per CPU."""

from __future__ import annotations

import os

import pytest

from netapp.dataplane.binding import METER_SHARE_DIVISOR, METER_SHARE_MAX, Verdict
from tests.dataplane.test_actions import make_dataplane, ns, site, tunnel_frame, tunnel_intent  # noqa: F401
from tests.utils.dataplane import run_on_cpus

WINDOW_NS = 600 * 10**9  # one window for the whole test, however slow the machine
CAPACITY_PPS = 10  # 6,000 packets per window
BUDGET = CAPACITY_PPS * WINDOW_NS // 10**9
SHARE = min(max(BUDGET // METER_SHARE_DIVISOR, 1), METER_SHARE_MAX)
PER_RECEIVER = BUDGET  # each receiver alone offers the whole budget


def test_two_receiving_cpus_together_admit_the_budget_less_at_most_a_share_each(ns):  # noqa: F811
    receivers = sorted(os.sched_getaffinity(0))[:2]
    if len(receivers) < 2:
        pytest.skip("needs two CPUs to receive on")
    document = site(
        [tunnel_intent("rule", {"type": "steer", "cpu": receivers[0]}, alternative=0)],
        cpus=[{"cpu": receivers[0], "capacity_pps": CAPACITY_PPS}],
    )
    with make_dataplane(document, meter_window_ns=WINDOW_NS) as dp:
        results = run_on_cpus(dp._dpp.prog_fd(), tunnel_frame(), PER_RECEIVER, receivers)
        actions = dp.action_stats()
    steered, forwarded = actions["steer"][0], actions["forward"][0]
    assert set(results.values()) <= {Verdict.TX, Verdict.REDIRECT}  # forwarded or steered
    assert steered + forwarded == len(receivers) * PER_RECEIVER
    assert BUDGET - len(receivers) * (SHARE - 1) <= steered <= BUDGET
