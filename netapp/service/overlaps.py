"""Overlap warnings: the installed intents of other shapes that a request's intents overlap, as the
caller may see them.

An intent and an installed intent of another shape may both match some packets; the data plane
gives those to one of them (netapp.intents.overlap says which and why). Creates, replaces and dry
runs answer each such pair as an `overlap` warning, at most OVERLAP_LIMIT per intent of the
request, and one `more_overlaps` warning with the count of the others.

Names go through the service's `display`, as they do in conflicts: the caller's own intents by id,
everything to an admin, and another tenant's intent anonymously ("an intent of another tenant",
or to a confined tenant "a site-wide rule"). Of such an intent nothing is said that the caller's own match does not already say: unless it shares all of
the caller's packets, the shared packets are "some" of the caller's, not their intersection with
its match, which would tell what the other tenant's intent matches.
"""

from __future__ import annotations

from typing import Callable, Collection, Iterable, Mapping

from netapp.intents.index import OVERLAP_BUDGET, OVERLAP_LIMIT, OverlapSearch, RuleIndex
from netapp.intents.overlap import Overlap, describe_values
from netapp.service.contract import IntentWarning


def overlap_warnings(
    index: RuleIndex, qualified: Iterable[str], display: Callable[[str], str], hidden: Collection[str]
) -> list[IntentWarning]:
    """Warnings about the overlaps of these installed intents (data plane ids); `display` names an
    intent for the caller, and names the ones it may not see by one of `hidden`."""
    interface_names = {ifindex: name for name, ifindex in index.interfaces.items()}
    warnings: list[IntentWarning] = []
    seen: set[frozenset[str]] = set()
    for name in dict.fromkeys(qualified):
        search = index.overlaps(name, OVERLAP_LIMIT)
        for found in search.overlaps:
            pair = frozenset((found.rule.intent_id, found.other.intent_id))
            if pair not in seen:  # two intents of one request overlap each other
                seen.add(pair)
                warnings.append(_overlap_warning(found, interface_names, display, hidden))
        if search.more or search.unchecked:
            warnings.append(_more_warning(display(name), search))
    return warnings


def _overlap_warning(
    found: Overlap, interface_names: Mapping[int, str], display: Callable[[str], str], hidden: Collection[str]
) -> IntentWarning:
    other = display(found.other.intent_id)
    if other in hidden and found.shared != found.rule.values:
        mine = describe_values(found.rule.values, interface_names)
        shared = "some packets" if not found.rule.values else f"some {mine}"
    else:
        shared = describe_values(found.shared, interface_names)
    return IntentWarning(
        kind="overlap",
        intent_a=display(found.rule.intent_id),
        intent_b=other,
        shared=shared,
        winner=display(found.winner.intent_id),
        reason=found.reason,
    )


def _more_warning(name: str, search: OverlapSearch) -> IntentWarning:
    reason = f"{name!r} overlaps {search.more} more intents of other shapes than are listed"
    if search.unchecked:
        reason = (
            f"{name!r} overlaps at least {search.more} more intents of other shapes than are listed: "
            f"the search stops after {OVERLAP_BUDGET} rules and left {search.unchecked} unchecked"
        )
    return IntentWarning(kind="more_overlaps", intent_a=name, reason=reason, count=search.more)
