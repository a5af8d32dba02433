"""The intent action `duplicate` as the core compiles it (netapp.intents.actions): a rule with the
C action DUPLICATE whose argument is its copy group, and the group's interfaces (the rule's
`copies`), which the data plane writes before the rule (netapp.duplicate.groups).

A group is named by its interfaces: its id is a hash of their ifindexes, so two intents that
duplicate to the same interfaces share one group, a restart finds the same ids, and no table of
ids needs keeping beside the rules. Two sets whose ids collide are refused when the second is
written (netapp.duplicate.groups), not merged."""

from __future__ import annotations

import hashlib
from typing import Iterable, Mapping

from netapp.intents.actions import RuleAction, RuleArgument, resolve_interface
from netapp.intents.native import DuplicateAction, Intent

GROUP_ID_MASK = 0x7FFFFFFF  # below DPP_NONE, which a rule's arg never is


def group_id(ifindexes: Iterable[int]) -> int:
    """The id of the copy group of these interfaces (order and repeats do not matter)."""
    text = ",".join(str(ifindex) for ifindex in sorted(set(ifindexes)))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & GROUP_ID_MASK


def _duplicate_argument(intent: Intent, interfaces: Mapping[str, int]) -> RuleArgument:
    assert isinstance(intent.action, DuplicateAction)
    names = intent.action.interfaces
    ifindexes = tuple(sorted(
        resolve_interface(name, interfaces, f"action.interfaces[{n}]", intent.id) for n, name in enumerate(names)
    ))
    return RuleArgument(group_id(ifindexes), f"to {', '.join(names)}", copies=ifindexes)


DUPLICATE = RuleAction("DUPLICATE", _duplicate_argument)
