"""What a confined tenant's ATSSS session may steer: the downlink of a UE it owns.

A session acts on every packet to its UE's address (the downlink it splits over the paths),
whatever interface it comes in on. So the UE must lie inside one of the tenant's grants as a
destination, that grant holding every packet to it, compared as an intent's match is
(netapp.tenancy.confine): a grant that fixes the ingress interface, an overlay, TEIDs, a VLAN or a
source cannot. Since the grants of different tenants never intersect, no other tenant owns a
packet to that UE, and no session of one tenant steers a packet of another.

The interfaces a path's MAC addresses are looked up on (and its copies leave by) are the tenant's
when they are among its destinations (netapp.tenancy.destinations: without them, the interfaces its
grants name). A path's peer is the UE's own address on that access, the tenant's subscriber, and is
not checked against the destinations' peers. A path's `local`, the outer source of its downlink
copies, must be an address of the node, as a tunnel's source must (netapp.tenancy.destinations
.foreign): a tenant's packets must not claim to come from another host, whose peers' answers would
go there. A site-wide tenant may use any (a service address may live on another box of the site).
"""

from __future__ import annotations

from ipaddress import ip_network
from typing import AbstractSet, Callable, Optional, Sequence

from netapp.atsss.models import SessionDefinition
from netapp.core.addresses import Address
from netapp.intents.models import Match
from netapp.service.contract import Forbidden
from netapp.tenancy.confine import INSIDE, fit
from netapp.tenancy.destinations import foreign, own_listed
from netapp.tenancy.models import TrafficGrant


def check_scope(session: SessionDefinition, grants: Optional[Sequence[TrafficGrant]], tenant: str,
                interfaces: Optional[Sequence[str]] = None,
                addresses: Optional[Callable[[], AbstractSet[Address]]] = None) -> None:
    """Forbidden naming the field when `session` reaches outside the tenant's `grants` (None: site-wide),
    sends out of an interface not among `interfaces` (None: those its grants name), or from a `local`
    that is not one of the node's `addresses` (None: not asked; a tenant record's change checks
    what the record decides, as with a tunnel's source)."""
    if grants is None:
        return
    if not any(fit(Match(dst=ip_network(session.ue)), grant).kind == INSIDE for grant in grants):
        raise Forbidden(
            f"ue: the packets to {session.ue} are not all in the traffic of tenant {tenant!r} "
            f"({_described(grants)}): a session steers every packet to its UE on every interface, so the UE must "
            "lie in a grant of dst alone (no interface, overlay, TEIDs, VLAN or src)",
            field="ue",
        )
    owned = sorted(interfaces if interfaces is not None else
                   {grant.interface for grant in grants if grant.interface is not None})
    for i, path in enumerate(session.paths):
        if path.interface is not None and path.interface not in owned:
            raise Forbidden(
                f"paths[{i}].interface: interface {path.interface!r} is not granted to tenant {tenant!r} "
                f"(granted: {', '.join(owned) or 'none'})",
                field=f"paths[{i}].interface",
                allowed=", ".join(owned) or "none",
            )
    if addresses is not None:
        _check_locals(session, addresses())


def _check_locals(session: SessionDefinition, own: AbstractSet[Address]) -> None:
    """Each path's `local` is one of the node's addresses `own`."""
    for i, path in enumerate(session.paths):
        why = foreign(path.local, own, "a path's local (its downlink's outer source)")
        if why is not None:
            raise Forbidden(f"paths[{i}].local: {why}", field=f"paths[{i}].local", reason=why,
                            allowed=", ".join(own_listed(path.local, own)) or "none")


def _described(grants: Sequence[TrafficGrant]) -> str:
    return "; ".join(grant.describe() for grant in grants) or "none granted"
