"""The intent action `duplicate` as the core compiles it (netapp.intents.actions): a rule with the
C action DUPLICATE whose argument is its copy group, and the group's interfaces (the rule's
`copies`), which the data plane writes before the rule (netapp.duplicate.groups).

A group is named by its interfaces: its id is a hash of their ifindexes, so two intents that
duplicate to the same interfaces share one group, a restart finds the same ids, and no table of
ids needs keeping beside the rules. Two sets whose ids collide are refused when the second is
written (netapp.duplicate.groups), not merged.

The interfaces of `decapsulate` get their copy of a GTP-U packet without its tunnel (their DEVMAP
entries run dpp_dup_decap): a group is its interfaces with, for each, whether it decapsulates, and
the id of a group where one does has GROUP_DECAP set, which tells the stage to give each frame
what the egress program needs (dpp/nf/duplicate.h)."""

from __future__ import annotations

import hashlib
from typing import Iterable, Mapping

from netapp.duplicate.abi import GROUP_DECAP
from netapp.intents.actions import RuleAction, RuleArgument, resolve_interface
from netapp.intents.native import DuplicateAction, Intent

GROUP_ID_MASK = GROUP_DECAP - 1  # below the flag, so below DPP_NONE, which a rule's arg never is

Copy = tuple[int, bool]  # a copy's interface (ifindex), and whether it leaves decapsulated


def group_id(ifindexes: Iterable[int], decapsulated: Iterable[int] = ()) -> int:
    """The id of the copy group of these interfaces, those of `decapsulated` decapsulating (order
    and repeats do not matter)."""
    decap = set(decapsulated)
    text = ",".join(f"{ifindex}{'d' if ifindex in decap else ''}" for ifindex in sorted(set(ifindexes)))
    digest = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & GROUP_ID_MASK
    return digest | (GROUP_DECAP if decap else 0)


def copies_id(copies: Iterable[Copy]) -> int:
    """group_id of a group given as its copies."""
    copies = list(copies)
    return group_id([ifindex for ifindex, _ in copies], [ifindex for ifindex, decap in copies if decap])


def _duplicate_argument(intent: Intent, interfaces: Mapping[str, int]) -> RuleArgument:
    assert isinstance(intent.action, DuplicateAction)
    names, decapsulate = intent.action.interfaces, set(intent.action.decapsulate)
    copies = tuple(sorted(
        (resolve_interface(name, interfaces, f"action.interfaces[{n}]", intent.id), name in decapsulate)
        for n, name in enumerate(names)
    ))
    shown = ", ".join(f"{name} (decapsulated)" if name in decapsulate else name for name in names)
    return RuleArgument(copies_id(copies), f"to {shown}", copies=copies)


DUPLICATE = RuleAction("DUPLICATE", _duplicate_argument)
