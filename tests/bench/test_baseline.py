"""bench.baseline's bridges over ABI changes a --baseline revision may predate: they translate what
HEAD's binding passes into the revision's layout, and nothing else."""

from __future__ import annotations

from pathlib import Path

from netapp.dataplane import binding

from bench.baseline import _differs, has_legacy_rules, legacy_rules

NONE = binding.NONE


def rules(*values: tuple[int, int, int]) -> object:
    return (binding.Rule * len(values))(
        *(binding.Rule(slot=n, priority=7, action=action, flags=0, arg=arg, overflow_group=group)
          for n, (action, arg, group) in enumerate(values))
    )


def test_only_forward_rules_move_their_group_back_to_the_last_word():
    head = rules(
        (binding.Action.FORWARD, 4, NONE),
        (binding.Action.STEER, 1, 5),
        (binding.Action.REDIRECT, 9, NONE),
        (binding.Action.PASS, NONE, 2),
    )
    old = legacy_rules(head, 4)
    assert [(r.slot, r.priority, r.action, r.arg, r.overflow_group) for r in old] == [
        (0, 7, binding.Action.FORWARD, NONE, 4),
        (1, 7, binding.Action.STEER, 1, 5),
        (2, 7, binding.Action.REDIRECT, 9, NONE),
        (3, 7, binding.Action.PASS, NONE, 2),
    ]
    assert (head[0].arg, head[0].overflow_group) == (4, NONE), "the caller's rules are left as they are"


def test_a_tree_is_legacy_when_its_rule_names_alt_group(tmp_path: Path):
    include = tmp_path / "include" / "dpp" / "core"
    include.mkdir(parents=True)
    header = include / "structs.h"
    header.write_text("struct dpp_rule {\n\t__u32 slot;\n\t__u32 target;\n\t__u32 alt_group; /* x */\n};\n")
    assert has_legacy_rules(tmp_path)
    header.write_text("struct dpp_rule {\n\t__u32 arg;\n\t__u32 overflow_group;\n};\n")
    assert not has_legacy_rules(tmp_path)


def test_only_a_smaller_reason_count_is_tolerated():
    assert not _differs(("DPP_REASON_MAX", "."), 24, 256)
    assert _differs(("DPP_REASON_MAX", "."), 512, 256)
    assert _differs(("DPP_REASON_MAX", "."), None, 256)
    assert _differs(("DPP_ACTION_MAX", "."), 5, 6)
