"""What a confined tenant's stream may use: identities inside its traffic, interfaces its grants name.

An identity acts on frames of every ingress interface (the identification tables have no port), so
it must lie inside one of the tenant's grants as a whole: its VLAN (an identity without one holds
frames of every VLAN, so only a grant that fixes none holds it) and, for IP identification, its
addresses inside the grant's prefixes, compared as an intent's match is (netapp.tenancy.confine).
A grant that fixes the ingress interface, an overlay or TEIDs cannot hold one. Since the grants of
different tenants never intersect, no stream of one tenant identifies a frame of another.

The member ports a stream is replicated to, and the interface a recovered stream is delivered to,
are the tenant's when they are among its destinations (netapp.tenancy.destinations: without them,
the interfaces its grants name). A site-wide tenant may use any.
"""

from __future__ import annotations

from typing import Optional, Sequence

from netapp.frer.models import StreamDefinition, StreamIdentity
from netapp.intents.models import Match
from netapp.service.contract import Forbidden
from netapp.tenancy.confine import INSIDE, fit
from netapp.tenancy.models import TrafficGrant


def identity_match(identity: StreamIdentity) -> Match:
    """A match holding every frame the identity does (what a grant can say of them: VLAN, addresses)."""
    if identity.null is not None:
        return Match(vlan=identity.null.vlan)
    assert identity.ip is not None
    return Match(vlan=identity.ip.vlan, src=identity.ip.source, dst=identity.ip.destination)  # None: any


def check_scope(stream: StreamDefinition, grants: Optional[Sequence[TrafficGrant]], tenant: str,
                interfaces: Optional[Sequence[str]] = None) -> None:
    """Forbidden naming the field when `stream` reaches outside the tenant's `grants` (None: site-wide),
    or sends out of an interface not among `interfaces` (None: those its grants name)."""
    if grants is None:
        return
    for i, identity in enumerate(stream.identification):
        kind = "null" if identity.null is not None else "ip"
        if not any(fit(identity_match(identity), grant).kind == INSIDE for grant in grants):
            raise Forbidden(
                f"identification[{i}].{kind}: these frames are not all in the traffic of tenant {tenant!r} "
                f"({_described(grants)}): an identity acts on frames of every ingress interface, so only a grant of "
                "VLAN and addresses (no interface, overlay or TEIDs) can hold it",
                field=f"identification[{i}].{kind}",
            )
    owned = sorted(interfaces if interfaces is not None else
                   {grant.interface for grant in grants if grant.interface is not None})
    for field, interface in _interfaces(stream):
        if interface not in owned:
            raise Forbidden(
                f"{field}: interface {interface!r} is not granted to tenant {tenant!r} "
                f"(granted: {', '.join(owned) or 'none'})",
                field=field,
                allowed=", ".join(owned) or "none",
            )


def _interfaces(stream: StreamDefinition) -> list[tuple[str, str]]:
    """(field, interface) of every interface the stream sends to."""
    if stream.generation is not None:
        return [(f"generation.ports[{i}].interface", port.interface) for i, port in enumerate(stream.generation.ports)]
    assert stream.recovery is not None
    deliver = stream.recovery.deliver_interface
    return [] if deliver is None else [("recovery.deliver_interface", deliver)]


def _described(grants: Sequence[TrafficGrant]) -> str:
    return "; ".join(grant.describe() for grant in grants) or "none granted"
