"""Keeping a tenant's match inside the traffic it owns (pure).

A match fits a grant in one of four ways:
- inside: every packet it matches is in the grant; it is installed as it is;
- narrowed: it matches more than the grant, and `match ∧ grant` is itself a match (the grant's
  fields added, or a prefix made longer); that is what is installed, and the caller is told;
- disjoint: no packet is in both;
- unrepresentable: they share packets, but no match describes exactly those (a TEID range wider
  than one TEID, with no TEID in the match: intents compare TEIDs exactly).

A match inside one of the tenant's grants is installed as it is; one that overlaps exactly one
grant, and can be narrowed to it, is narrowed; anything else is refused, naming the field. Because
the grants of different tenants never intersect (`grants_intersect`, checked when they are
granted), no rule of one tenant can match a packet of another.
"""

from __future__ import annotations

import ipaddress
import dataclasses
from typing import Any, Optional, Sequence

from pydantic import ValidationError

from netapp.intents.errors import IntentError
from netapp.intents.models import Match
from netapp.tenancy.models import TrafficGrant

INSIDE, NARROWED, DISJOINT, UNREPRESENTABLE = "inside", "narrowed", "disjoint", "unrepresentable"
EXACT_FIELDS = ("interface", "vlan", "overlay", "vni")
PREFIX_FIELDS = ("src", "dst")
SHOWN_GRANTS = 4


@dataclasses.dataclass
class Fit:
    kind: str
    field: str = ""  # the deciding field (disjoint, unrepresentable)
    why: str = ""
    added: dict[str, Any] = dataclasses.field(default_factory=dict)  # narrowed: the fields set, their values
    match: Optional[Match] = None  # inside: the match; narrowed: the narrowed one


def fit(match: Match, grant: TrafficGrant) -> Fit:
    """How `match` relates to `grant` (see the module's docstring)."""
    added: dict[str, Any] = {}
    unrepresentable: Optional[Fit] = None
    for check, names in _CHECKS:
        for name in names:
            outcome = check(match, grant, name)
            if isinstance(outcome, dict):
                added.update(outcome)
            elif outcome.kind == DISJOINT:
                return outcome
            else:
                unrepresentable = unrepresentable or outcome
    if unrepresentable is not None:
        return unrepresentable
    if not added:
        return Fit(INSIDE, match=match)
    try:
        narrowed = Match.model_validate({**match.model_dump(exclude_none=True), **added})
    except ValidationError as exc:
        # E.g. an IPv6 grant prefix with an icmp match: no packet is both.
        return Fit(DISJOINT, field=next(iter(added)), why=exc.errors()[0]["msg"].removeprefix("Value error, "))
    return Fit(NARROWED, added=added, match=narrowed)


def _fit_exact(match: Match, grant: TrafficGrant, name: str) -> Fit | dict[str, Any]:
    granted, asked = getattr(grant, name), getattr(match, name)
    if granted is None or asked == granted:
        return {}
    if asked is None:
        return {name: granted}
    return Fit(DISJOINT, field=name, why=f"{name} {asked} is not the granted {granted}")


def _fit_teid(match: Match, grant: TrafficGrant, _: str) -> Fit | dict[str, Any]:
    granted = grant.teids
    if granted is None:
        return {}
    if match.teid is None:
        if granted.first == granted.last:
            return {"teid": granted.first}
        return Fit(
            UNREPRESENTABLE,
            field="teid",
            why=f"the grant covers {granted}, and an intent matches one TEID: name one in match.teid",
        )
    if match.teid in granted:
        return {}
    return Fit(DISJOINT, field="teid", why=f"teid {match.teid:#x} is outside the granted {granted}")


def _fit_prefix(match: Match, grant: TrafficGrant, name: str) -> Fit | dict[str, Any]:
    granted, asked = getattr(grant, name), getattr(match, name)
    if granted is None:
        return {}
    if asked is None:
        return {name: granted}
    if asked.version == granted.version and asked.subnet_of(granted):  # type: ignore[arg-type]
        return {}
    if asked.version == granted.version and granted.subnet_of(asked):  # type: ignore[arg-type]
        return {name: granted}
    return Fit(DISJOINT, field=name, why=f"{name} {asked} is outside the granted {granted}")


# Each field of a grant, and how a match is compared with it.
_CHECKS = ((_fit_exact, EXACT_FIELDS), (_fit_teid, ("teids",)), (_fit_prefix, PREFIX_FIELDS))


def confine(match: Match, grants: Sequence[TrafficGrant], tenant: str) -> tuple[Match, Optional[str]]:
    """The match to install for `tenant`, and a description of the narrowing (None: unchanged).
    IntentError (field below `match`) when it cannot be confined to one grant."""
    if not grants:
        raise IntentError.at(
            "match",
            f"tenant {tenant!r} owns no traffic yet: an administrator grants it with "
            f"PUT /api/v1/tenants/{tenant}",
        )
    fits = [fit(match, grant) for grant in grants]
    inside = next((f for f in fits if f.kind == INSIDE), None)
    if inside is not None:
        return match, None
    overlapping = [(grant, f) for grant, f in zip(grants, fits) if f.kind != DISJOINT]
    if not overlapping:
        first = fits[0]
        raise IntentError.at(
            f"match.{first.field}",
            f"{first.why}: the match is outside the traffic of tenant {tenant!r} ({_owned(grants)})",
        )
    if len(overlapping) > 1:
        shown = "; ".join(grant.describe() for grant, _ in overlapping[:SHOWN_GRANTS])
        raise IntentError.at(
            "match",
            f"the match spans {len(overlapping)} of the grants of tenant {tenant!r} ({shown}): "
            "split it into one intent per grant",
        )
    grant, only = overlapping[0]
    if only.kind == UNREPRESENTABLE:
        raise IntentError.at(f"match.{only.field}", only.why)
    assert only.match is not None
    return only.match, f"narrowed to the grant {grant.describe()} (set {_values(only.added)})"


def _owned(grants: Sequence[TrafficGrant]) -> str:
    shown = "; ".join(grant.describe() for grant in grants[:SHOWN_GRANTS])
    more = len(grants) - SHOWN_GRANTS
    return shown + (f"; and {more} more" if more > 0 else "")


def _values(added: dict[str, Any]) -> str:
    return ", ".join(f"{name} {value:#x}" if name == "teid" else f"{name} {value}" for name, value in added.items())


def grants_intersect(a: TrafficGrant, b: TrafficGrant) -> bool:
    """Whether some packet is in both grants: every field both constrain is compatible."""
    for name in EXACT_FIELDS:
        mine, theirs = getattr(a, name), getattr(b, name)
        if mine is not None and theirs is not None and mine != theirs:
            return False
    if a.teids is not None and b.teids is not None:
        if a.teids.last < b.teids.first or b.teids.last < a.teids.first:
            return False
    return all(_prefixes_meet(getattr(a, name), getattr(b, name)) for name in PREFIX_FIELDS) and _families_meet(a, b)


def _prefixes_meet(mine: Optional[ipaddress._BaseNetwork], theirs: Optional[ipaddress._BaseNetwork]) -> bool:
    if mine is None or theirs is None:
        return True
    return mine.version == theirs.version and mine.overlaps(theirs)  # type: ignore[arg-type]


def _families_meet(a: TrafficGrant, b: TrafficGrant) -> bool:
    """A packet has one IP family: an IPv4 src grant and an IPv6 dst grant share nothing."""
    families = {p.version for p in (a.src, a.dst, b.src, b.dst) if p is not None}
    return len(families) <= 1
