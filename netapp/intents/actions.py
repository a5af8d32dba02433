"""What a network function's compiler gives the shared core (netapp.intents.compiler) for each intent
action it owns: a `RuleAction`, which the core's registry (`RULE_ACTIONS`) names once.

A rule carries its action's argument as one index into the action's own table (struct dpp_rule.arg:
a CPU, a group, a port), so an action's compiler is one function from an intent to that index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Optional

from netapp.intents.errors import CompileError
from netapp.intents.native import Intent


class RuleArgument(NamedTuple):
    """An action's argument: the index the data plane looks its arguments up by, and how messages
    name it (e.g. "cpu 3", "to ens5")."""

    index: Optional[int] = None  # None: DPP_NONE
    text: str = ""
    entry: Any = None  # the entry index names, for a table written with its rules (tunnel: dpp_tunnels)
    copies: tuple[tuple[int, bool], ...] = ()  # duplicate: its group, (ifindex, decapsulated) each


def no_argument(intent: Intent, interfaces: Mapping[str, int]) -> RuleArgument:
    return RuleArgument()


def intent_alternative(intent: Intent) -> Optional[int]:
    """The intent's own overflow group (None: the site default)."""
    return intent.alternative


@dataclass(frozen=True)
class RuleAction:
    """One intent action, as the core compiles and installs it.

    c_action: its member of enum dpp_action (DPP_ACTION_<c_action>; the ABI test checks the list).
    argument: its rule argument, resolved from the intent (CompileError names the field it cannot).
    overflows: its flows overflow to an alternative group (best-effort traffic always does).
    overflow_group: which group that is.
    """

    c_action: str
    argument: Callable[[Intent, Mapping[str, int]], RuleArgument] = no_argument
    overflows: bool = False
    overflow_group: Callable[[Intent], Optional[int]] = intent_alternative


def resolve_interface(
    name: str, interfaces: Mapping[str, int], field: str, intent_id: Optional[str] = None
) -> int:
    if name in interfaces:
        return interfaces[name]
    known = ", ".join(sorted(interfaces)) or "none"
    raise CompileError(field, f"unknown interface {name!r} (known: {known})", intent_id)
