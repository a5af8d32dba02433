"""Steering's compiler: the steer action, whose rule argument is the CPU it steers to and whose
flows overflow (over the CPU's capacity, or to a CPU outside the set) to the intent's group.

The CPU set itself compiles to nothing: a document's CPUs go to the data plane as they are."""

from __future__ import annotations

from typing import Mapping

from netapp.intents.actions import RuleAction, RuleArgument
from netapp.intents.native import Intent, SteerAction


def steer_argument(intent: Intent, interfaces: Mapping[str, int]) -> RuleArgument:
    assert isinstance(intent.action, SteerAction)
    return RuleArgument(intent.action.cpu, f"cpu {intent.action.cpu}")  # dpp_cpus, dpp_cpu_map


STEER = RuleAction("STEER", steer_argument, overflows=True)
