"""bench.qos.insns: the pipeline's policed rules counted on the real program (dpp_xdp), each case
on its own rule and frame: a drop executes the rule's drop by its policers and a pass does not, a
pass on its CPU's credit makes no call, a slice's policer is decided in dpp_police_rule."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from bench.qos import insns
from tests.utils.kernel import require_kernel

# nf/qos/rule.h's rule_policed, inlined (its reason's store is put on another line)
POLICED_DROP = re.compile(r"rule\.h:\d+ o->action = DPP_ACTION_DROP;")
POLICE_RULE = "int dpp_police_rule("  # nf/qos/rule.h: the policers a frame's credit did not cover


def printed_lines(printed: str) -> dict[str, str]:
    """--lines' output: each case's lines (insns_command.format_lines), by case name."""
    blocks = [block for block in printed.split("\n\n") if block.strip()]
    return {block.split(":\n", 1)[0]: block.split(":\n", 1)[1] for block in blocks}


@pytest.fixture(scope="module")
def counted_with_lines():
    require_kernel()
    names = ["unpoliced", "own token_bucket pass", "own token_bucket drop", "own sliding_window pass",
             "own fixed_window drop", "slice token_bucket pass", "slice sliding_window drop",
             "own token_bucket shared", "own gcra shared"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        counted = insns.count_cases(names, top=2000)
    return counted, printed_lines(printed.getvalue())


def test_a_drop_executes_the_policers_drop_and_a_pass_does_not(counted_with_lines):
    counted, lines = counted_with_lines
    for name in ("own token_bucket drop", "own fixed_window drop", "slice sliding_window drop"):
        assert POLICED_DROP.search(lines[name]), f"{name}: the rule's drop by its policers not executed"
    for name in ("unpoliced", "own token_bucket pass", "own sliding_window pass", "slice token_bucket pass",
                 "own token_bucket shared", "own gcra shared"):
        assert not POLICED_DROP.search(lines[name]), f"{name}: a pass executed the policers' drop"


def test_only_the_policed_rules_run_a_policer_and_each_adds_to_the_unpoliced_path(counted_with_lines):
    counted, lines = counted_with_lines
    assert "police.h:" not in lines["unpoliced"] and "dpp_rule_policers" not in lines["unpoliced"]
    for name, count in counted.items():
        assert "int dpp_xdp(struct xdp_md *ctx)" in lines[name], f"{name}: not the pipeline's entry, dpp_xdp"
        if name != "unpoliced":
            assert "police.h:" in lines[name]
            assert count.instructions > counted["unpoliced"].instructions
    # no more than a policer's decision above the path: not another program or a loop's worth
    assert max(c.instructions for c in counted.values()) < 2 * counted["unpoliced"].instructions


def test_a_pass_on_the_cpus_credit_makes_no_call_and_a_slices_policer_is_called(counted_with_lines):
    """rule_police passes a frame its CPU's credit covers inline (nf/qos/rule.h); a rule with no
    policer of its own goes to dpp_police_rule for its slice's, and the clock is read for a drop
    only (the passes are on their credit)."""
    counted, lines = counted_with_lines
    unpoliced = counted["unpoliced"]
    assert counted["own token_bucket pass"].calls == counted["own sliding_window pass"].calls == unpoliced.calls
    assert POLICE_RULE not in lines["own token_bucket pass"]
    assert counted["slice token_bucket pass"].calls == unpoliced.calls + 1
    assert POLICE_RULE in lines["slice token_bucket pass"]
    for name, count in counted.items():
        reads_clock = any(helper.startswith("bpf_ktime_get") for helper in count.helpers)
        assert reads_clock == name.endswith(("drop", "shared")), f"{name}: helpers {count.helpers}"


def test_a_pass_the_credit_does_not_cover_is_decided_on_the_shared_state(counted_with_lines):
    """A burst too small for a CPU's chunk: every pass is the policer's, in dpp_police_rule, the
    token bucket under its lock, GCRA by compare-and-swap (no lock), both on the precise clock."""
    counted, lines = counted_with_lines
    for name in ("own token_bucket shared", "own gcra shared"):
        assert POLICE_RULE in lines[name], f"{name}: not decided in dpp_police_rule"
        assert counted[name].calls == counted["unpoliced"].calls + 1
    assert counted["own token_bucket shared"].instructions > counted["own token_bucket pass"].instructions
    assert "bpf_spin_lock" in counted["own token_bucket shared"].helpers
    assert "bpf_spin_lock" not in counted["own gcra shared"].helpers


def test_every_case_has_its_own_rule_and_the_command_refuses_a_case_it_has_not():
    ports = [case.port for _, case in insns.CASES.values()]
    assert len(set(ports)) == len(ports)
    slices = [case.slice.owner for _, case in insns.CASES.values() if case.slice is not None]
    assert len(set(slices)) == len(slices)
    with pytest.raises(SystemExit):
        insns.main(["--cases", "unpoliced,own token_bucket overflow"])
