"""The ATSSS flows benchmark's cases are what they say (bench/atsss/flows.py): through the pipeline
of this tree's build, four frames matched by the MTS session's rule leave on one path
(active-standby) or on both (its round-robin or weighted 3:1 flow, on the MTS session's own state),
four of a session without flow rules, or missing the rule, on both (round-robin, weighted 3:1); a
case whose frames do not is refused before it is timed."""

from __future__ import annotations

import dataclasses

import pytest

from bench.atsss import flows
from bench.atsss.__main__ import FIRST_UE, path, ue_frame
from bench.harness import DATAPLANE
from tests.utils.kernel import require_kernel


@pytest.mark.parametrize("case", list(flows.CASES))
def test_each_case_runs_the_mode_it_names(case):
    require_kernel()
    flow_case = flows.CASES[case]
    pipeline = flows.FlowPipeline(DATAPLANE / "build", FIRST_UE, path)
    try:
        pipeline.configure(flow_case)
        pipeline.check(ue_frame(), flow_case)
        with pytest.raises(RuntimeError, match="not what it says"):
            pipeline.configure(flow_case)
            pipeline.check(ue_frame(), dataclasses.replace(flow_case, paths=3 - flow_case.paths))
    finally:
        pipeline.close()


def test_a_build_is_compared_on_flow_rules_only_when_it_looks_them_up():
    """This tree's pipeline has the room of the flows' lookup: main's runs the flow-rules cases beside it."""
    require_kernel()
    pipeline = flows.FlowPipeline(DATAPLANE / "build", FIRST_UE, path)
    try:
        assert pipeline.classifies_flows
    finally:
        pipeline.close()
