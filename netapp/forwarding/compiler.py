"""Forwarding's compiler: alternative groups with their egress interfaces resolved, and the forward
action (its rule argument is the group's id; its flows overflow, when best effort, to that group)."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from typing import TYPE_CHECKING, Iterable, Mapping, Optional

from netapp.forwarding.models import AlternativeGroup
from netapp.intents.actions import RuleAction, RuleArgument, resolve_interface
from netapp.intents.native import ForwardAction, Intent

if TYPE_CHECKING:
    from netapp.intents.compiler import CompiledRule


@dataclass(frozen=True)
class CompiledAltMember:
    """An alternative node with its egress interface resolved (ifindex 0: back out of ingress)."""

    mac: str
    source_mac: Optional[str] = None
    ifindex: int = 0
    ip4: Optional[IPv4Address] = None
    ip6: Optional[IPv6Address] = None


@dataclass(frozen=True)
class CompiledAltGroup:
    group_id: int
    members: tuple[CompiledAltMember, ...]

    @property
    def egress_ifindexes(self) -> frozenset[int]:
        return frozenset(member.ifindex for member in self.members if member.ifindex)


def compile_alternatives(
    groups: Iterable[AlternativeGroup], interfaces: Mapping[str, int]
) -> tuple[CompiledAltGroup, ...]:
    """Alternative groups with member egress interfaces resolved to ifindexes."""
    compiled = []
    for group_index, group in enumerate(groups):
        members = []
        for member_index, member in enumerate(group.members):
            ifindex = 0
            if member.interface is not None:
                where = f"alternatives[{group_index}].members[{member_index}].interface"
                ifindex = resolve_interface(member.interface, interfaces, where)
            members.append(CompiledAltMember(member.mac, member.source_mac, ifindex, member.ip4, member.ip6))
        compiled.append(CompiledAltGroup(group.id, tuple(members)))
    return tuple(compiled)


def forward_group(intent: Intent) -> Optional[int]:
    """A forward intent's group: where it forwards to, and where it overflows to (one group)."""
    assert isinstance(intent.action, ForwardAction)
    return intent.action.alternative


def forward_argument(intent: Intent, interfaces: Mapping[str, int]) -> RuleArgument:
    group = forward_group(intent)
    return RuleArgument(group, f"group {group}")  # dpp_alt_groups


FORWARD = RuleAction("FORWARD", forward_argument, overflow_group=forward_group)


def rule_group(rule: CompiledRule) -> Optional[int]:
    """The alternative group a compiled rule uses: a forward rule's, or where its flows overflow."""
    return rule.arg if rule.action == "forward" else rule.overflow_group
