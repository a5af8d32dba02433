"""Keeping where a tenant's rules send its traffic inside what an administrator allowed (pure).

A confined tenant's grants say which packets its rules may act on (netapp.tenancy.confine); its
`destinations` say where those rules may send them: out of which interfaces, towards which
addresses. Every field of an intent that names a destination is checked: a redirect's or a tunnel
action's interface, a duplicate's interfaces, a tunnel's peer or `towards`, and the members of an
alternative group the intent forwards or overflows to (each member's egress interface and the
addresses it rewrites to; a member without an interface goes back out of the ingress interface, the
link the tenant's own packet came in on). An intent whose flows overflow and that names no group
overflows to the site's default group (settings default_alternative): that group's members are
checked the same way, and the error says to name a group. FRER member ports and ATSSS paths ask
`interfaces_of`.

A tunnel's outer source (`action.encapsulate.source`; MEC 011's tunnelSrcAddress) must be an address
of the node, one of its interfaces': a tenant's packets must not claim to come from another host (a
peer would take them for that host's, and its answers would go there). Without a source the packet
keeps the address its own GTP-U tunnel was sent to, which reached this node. A site tenant (the
operator) may name any: a service address may live on another box of the site.

An ATSSS path's `peer` is not checked here: it is the UE's own address on an access network (Wi-Fi,
cellular), which generally lies outside the tenant's grants (they hold the UE's PDU session address,
the downlink's destination), so requiring it inside them would refuse real sessions. What a session
sends to it is its own UE's downlink only (netapp.atsss.scope keeps the UE inside the tenant's
grants), never another tenant's packets. Its `local`, the outer source of those packets, is the
node's address as a tunnel's source is (netapp.atsss.scope, with `foreign` below).

Without `destinations`, a confined tenant may send out of the interfaces its grants name (as FRER
and ATSSS always did) and towards no address: an administrator who wants its traffic tunnelled or
sent to a node says where. A site tenant may send anywhere (None below).
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address
from typing import AbstractSet, Callable, Iterator, Optional, Union

from netapp.forwarding.models import AlternativeGroup
from netapp.intents.compiler import uses_default_group
from netapp.intents.errors import IntentError
from netapp.intents.models import DuplicateAction, ForwardAction, Intent, RedirectAction, TunnelAction
from netapp.tenancy.models import Destinations, TenantSpec

AddressValue = Union[IPv4Address, IPv6Address]
GroupLookup = Callable[[int], Optional[AlternativeGroup]]


def allowed(spec: TenantSpec) -> Optional[Destinations]:
    """Where the tenant's rules may send; None: anywhere (a site tenant)."""
    if spec.site:
        return None
    if spec.destinations is not None:
        return spec.destinations
    return Destinations(interfaces=sorted({grant.interface for grant in spec.traffic if grant.interface is not None}))


def interfaces_of(spec: TenantSpec) -> Optional[list[str]]:
    """The interfaces the tenant's rules may send out of; None: any."""
    where = allowed(spec)
    return None if where is None else where.interfaces


def check_intent(intent: Intent, where: Optional[Destinations], tenant: str, groups: GroupLookup,
                 default_group: Optional[int] = None) -> None:
    """IntentError naming the field when the intent sends somewhere `where` does not allow.
    default_group: the site's default overflow group (None: overflow takes the default verdict)."""
    if where is None:
        return
    for field, interface in _interfaces(intent):
        check_interface(field, interface, where, tenant)
    for field, address in _addresses(intent):
        check_address(field, address, where, tenant)
    for field, group_id in _groups(intent):
        _check_group(field, group_id, where, tenant, groups)
    if default_group is not None and uses_default_group(intent):
        _check_default_group(default_group, where, tenant, groups)


def check_interface(field: str, interface: str, where: Destinations, tenant: str) -> None:
    if interface not in where.interfaces:
        raise IntentError.at(
            field,
            f"interface {interface!r} is not a destination of tenant {tenant!r}: its rules may send out of "
            f"{_listed(where.interfaces)} (an administrator sets destinations.interfaces)",
        )


def check_address(field: str, address: AddressValue, where: Destinations, tenant: str) -> None:
    if not any(address.version == peer.version and address in peer for peer in where.peers):
        raise IntentError.at(
            field,
            f"{address} is not a destination of tenant {tenant!r}: its rules may send towards "
            f"{_listed([str(peer) for peer in where.peers])} (an administrator sets destinations.peers)",
        )


def check_source(intent: Intent, addresses: Callable[[], AbstractSet[AddressValue]]) -> None:
    """IntentError on `action.encapsulate.source` when it is not one of the node's `addresses`
    (asked only when the intent names a source)."""
    action = intent.action
    if not isinstance(action, TunnelAction) or action.encapsulate is None or action.encapsulate.source is None:
        return
    source = action.encapsulate.source
    why = foreign(source, addresses(), "a tunnel's source")
    if why is not None:
        raise IntentError.at("action.encapsulate.source", why)


def foreign(address: AddressValue, own: AbstractSet[AddressValue], what: str) -> Optional[str]:
    """Why `address` may not be `what` (the outer source of a tenant's packets) when it is not one of
    the node's `own` addresses, naming those of its family that it may be; None: it is the node's."""
    if address in own:
        return None
    return (f"{address} is not an address of this node: {what} must be one of its interfaces' addresses "
            f"({_listed(own_listed(address, own))}), not another host's")


def own_listed(address: AddressValue, own: AbstractSet[AddressValue]) -> list[str]:
    """The node's addresses of `address`'s family a source may be (link-local ones left out)."""
    return sorted(str(a) for a in own if a.version == address.version and not a.is_link_local)


def outside(intents: list[Intent], where: Optional[Destinations], tenant: str,
            groups: GroupLookup, default_group: Optional[int] = None) -> list[tuple[str, IntentError]]:
    """The intents that would send outside `where`: each one's id, and why."""
    found = []
    for intent in intents:
        try:
            check_intent(intent, where, tenant, groups, default_group)
        except IntentError as exc:
            found.append((intent.id, exc))
    return found


def _interfaces(intent: Intent) -> Iterator[tuple[str, str]]:
    action = intent.action
    if isinstance(action, (RedirectAction, TunnelAction)) and action.interface is not None:
        yield "action.interface", action.interface
    if isinstance(action, DuplicateAction):
        for n, interface in enumerate(action.interfaces):
            yield f"action.interfaces[{n}]", interface


def _addresses(intent: Intent) -> Iterator[tuple[str, AddressValue]]:
    action = intent.action
    if not isinstance(action, TunnelAction):
        return
    if action.encapsulate is not None:
        yield "action.encapsulate.peer", action.encapsulate.peer
    if action.towards is not None:
        yield "action.towards", action.towards


def _groups(intent: Intent) -> Iterator[tuple[str, int]]:
    """The alternative groups the intent sends to: a forward's, and the one it overflows to."""
    if isinstance(intent.action, ForwardAction):
        yield "action.alternative", intent.action.alternative
    elif intent.alternative is not None:
        yield "alternative", intent.alternative


def _check_group(field: str, group_id: int, where: Destinations, tenant: str, groups: GroupLookup) -> None:
    """Each member's egress interface and rewritten addresses are destinations of the tenant."""
    group = groups(group_id)
    if group is None:
        return  # compiling the intent refuses an unknown group, naming it
    for n, member in enumerate(group.members):
        try:
            if member.interface is not None:
                check_interface(field, member.interface, where, tenant)
            for address in (member.ip4, member.ip6):
                if address is not None:
                    check_address(field, address, where, tenant)
        except IntentError as exc:
            raise IntentError.at(field, f"alternative group {group_id}, members[{n}]: {exc.message}") from None


def _check_default_group(group_id: int, where: Destinations, tenant: str, groups: GroupLookup) -> None:
    """The site's default group takes the overflow of an intent that names none: its members are
    checked as a named group's, and the error says how the tenant gets out of it."""
    try:
        _check_group("alternative", group_id, where, tenant, groups)
    except IntentError as exc:
        raise IntentError.at(
            "alternative",
            f"names no group, so its overflow goes to the site's default group; {exc.message}; "
            "name an alternative group whose members are destinations of the tenant",
        ) from None


def _listed(items: list[str]) -> str:
    return ", ".join(items) if items else "none"

