"""MEC 015 bandwidth allocations as policed intents (pure): fixedAllocation becomes the `police` rate
of the intents that carry the allocation's traffic, so the data plane's policers enforce it.

Directions: MEC 015's uplink is "towards the application/session", its downlink "towards the UE".
A session filter is read as the uplink has it (sourceIp the UE, dstAddress the application), and a
traffic rule's filter too (MEC 011: a FLOW filter matches the UE->EPC packets, its reverse the
packets back). An intent matches one direction, so each direction has its own policer at the rate.

| allocation                                  | intents                                                   |
|---------------------------------------------|-----------------------------------------------------------|
| SESSION_SPECIFIC (requestType 1)            | its own, source `mec015`: pass, policed; uplink the filter as written, downlink its reverse |
| APPLICATION_SPECIFIC (requestType 0)        | the application's traffic rules' intents, policed: the one intent of each direction asked |

What cannot be enforced is refused (IntentError naming the ETSI field): a rate out of the policers'
range, a direction other than 00, 01, 10, a session filter that is not one session (ranges, several
ports, no filter), an application whose active rules do not give exactly one intent per direction
asked (a policer per intent: two would let twice the allocation through), or a filter that reads the
same reversed (one entry would carry both directions).
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from pydantic import ValidationError

from netapp.intents.errors import IntentError
from netapp.intents.models import Intent, Match
from netapp.intents.native import Policed
from netapp.mec.bwm_models import APPLICATION_SPECIFIC, DOWNLINK, SYMMETRICAL, UPLINK, BwInfo, SessionFilter
from netapp.mec.compiler import MEC_PRIORITY_BASE, decimal, parse_address, parse_port, parse_protocol
from netapp.mec.models import FilterType, TrafficRule
from netapp.qos.abi import RATE_MAX, RATE_MIN

BWM_SOURCE = "mec015"  # the source of a session allocation's intents
# Below every MEC 011 rule (an application's rule decides where its traffic goes) and above slices'.
SESSION_PRIORITY = MEC_PRIORITY_BASE - 1
TAG_DIGITS = 16
SESSION = "sessionFilter[0]"
_DIRECTIONS = {UPLINK: (True, False), DOWNLINK: (False, True), SYMMETRICAL: (True, True)}
_NAMES = ("uplink", "downlink")
# Session filter members -> the match fields they become.
_MEMBERS = {"sourceIp": "src", "dstAddress": "dst", "sourcePort": "src_port", "dstPort": "dst_port",
            "protocol": "protocol"}


def allocation_intent_ids(allocation_id: str) -> list[str]:
    """The ids of a session allocation's intents, uplink then downlink."""
    tag = hashlib.sha256(allocation_id.encode()).hexdigest()[:TAG_DIGITS]
    return [f"bwm-{tag}-0", f"bwm-{tag}-1"]


def rate_bps(info: BwInfo) -> int:
    """fixedAllocation as a policer's rate; IntentError naming it when the policers cannot hold it."""
    text = info.fixedAllocation.strip()
    if not decimal(text):
        raise IntentError.at("fixedAllocation", f"{info.fixedAllocation!r} is not a whole number of bits per second")
    if not RATE_MIN <= int(text) <= RATE_MAX:
        raise IntentError.at(
            "fixedAllocation", f"{int(text)} bit/s: the policers enforce {RATE_MIN} to {RATE_MAX} bit/s"
        )
    return int(text)


def directions(info: BwInfo) -> tuple[bool, bool]:
    """(uplink, downlink) that the allocation polices."""
    if info.allocationDirection not in _DIRECTIONS:
        raise IntentError.at(
            "allocationDirection", f"{info.allocationDirection!r} is not 00 (downlink), 01 (uplink) or 10 (symmetrical)"
        )
    return _DIRECTIONS[info.allocationDirection]


def check_allocation(info: BwInfo) -> None:
    """What every allocation must be, whatever it is for."""
    rate_bps(info)
    directions(info)
    if info.requestType == APPLICATION_SPECIFIC and info.sessionFilter:
        raise IntentError.at(
            "sessionFilter", "an APPLICATION_SPECIFIC allocation applies to the application's traffic rules; "
            "a session filter is for SESSION_SPECIFIC (requestType 1)"
        )


# --- a session's allocation ----------------------------------------------------------------------


def session_intents(allocation_id: str, info: BwInfo) -> list[Intent]:
    """The policed pass intents of a SESSION_SPECIFIC allocation (uplink, downlink as asked)."""
    check_allocation(info)
    uplink = _session_match(_one_session(info.sessionFilter))
    downlink = _reversed(uplink)
    if downlink == uplink:
        raise IntentError.at(
            SESSION, "reads the same reversed: one entry would carry both directions; name an address or a port"
        )
    action = {"type": "pass", "police": {"rate_bps": rate_bps(info)}}
    ids = allocation_intent_ids(allocation_id)
    label = f"MEC 015 bandwidth allocation {allocation_id!r} of application {info.appInsId[:96]!r}"
    wanted = directions(info)
    return [
        Intent(id=ids[n], priority=SESSION_PRIORITY, match=match, action=action, label=f"{label} ({_NAMES[n]})")
        for n, match in enumerate((uplink, downlink))
        if wanted[n]
    ]


def _one_session(filters: Optional[list[SessionFilter]]) -> SessionFilter:
    if not filters or len(filters) != 1:
        raise IntentError.at(
            "sessionFilter", f"{len(filters or [])} filters: a SESSION_SPECIFIC allocation is for one session (MEC 015)"
        )
    return filters[0]


def _session_match(session: SessionFilter) -> Match:
    fields: dict[str, Any] = {}
    for member in ("sourceIp", "dstAddress"):
        value = getattr(session, member)
        if value is not None:
            fields[_MEMBERS[member]] = parse_address(value, f"{SESSION}.{member}")
    for member in ("sourcePort", "dstPort"):
        ports = getattr(session, member) or []
        if len(ports) > 1:
            raise IntentError.at(f"{SESSION}.{member}", f"{len(ports)} ports: a session has one (the classifier holds one)")
        if ports:
            fields[_MEMBERS[member]] = parse_port(ports[0], f"{SESSION}.{member}[0]")
    if session.protocol is not None:
        fields["protocol"] = parse_protocol(session.protocol, f"{SESSION}.protocol")
    if not fields:
        raise IntentError.at(SESSION, "matches every packet: a session needs addresses, ports or a protocol")
    try:
        return Match.model_validate(fields)
    except ValidationError as exc:
        raise IntentError([(session_path(path), message) for path, message in
                           IntentError.from_validation(exc).problems]) from None


def session_path(path: str) -> str:
    """A match field's path (`dst_port`, `match.src`) as the session filter member it came from."""
    name = path.removeprefix("match.").split(".", 1)[0]
    member = next((etsi for etsi, field in _MEMBERS.items() if field == name), None)
    return f"{SESSION}.{member}" if member else SESSION


def _reversed(match: Match) -> Match:
    return match.model_copy(
        update={"src": match.dst, "dst": match.src, "src_port": match.dst_port, "dst_port": match.src_port}
    )


# --- an application's allocation ---------------------------------------------------------------


def policed_rule_intents(
    rules: list[tuple[TrafficRule, list[Intent]]], info: BwInfo, require_every_direction: bool
) -> list[list[Intent]]:
    """The intents of an application's rules (each rule's as netapp.mec.compiler gives them: the
    filter as written, then its reverse for FLOW) with the allocation's policer on the one intent of
    each direction asked. `require_every_direction`: refuse a direction no rule carries (when the
    allocation is made; a rule turned INACTIVE later leaves it with nothing to police)."""
    check_allocation(info)
    wanted, police = directions(info), {"rate_bps": rate_bps(info)}
    carriers: list[list[tuple[int, int]]] = [[], []]  # per direction: (rule, intent) positions
    for r, (rule, intents) in enumerate(rules):
        for n, intent in enumerate(intents):
            if not isinstance(intent.action, Policed):
                continue  # DROP: nothing goes through to police
            if n == 0 and rule.filterType == FilterType.FLOW.value and len(intents) == 1:
                raise IntentError.at("appInsId", f"traffic rule {rule.trafficRuleId!r} reads the same reversed: "
                                     "one entry carries both directions, which an allocation cannot tell apart")
            carriers[n].append((r, n))
    policed = [list(intents) for _, intents in rules]
    for direction, (asked, found) in enumerate(zip(wanted, carriers)):
        if not asked:
            continue
        _require_one_carrier(rules, found, direction, require_every_direction)
        for r, n in found:
            policed[r][n] = _with_police(policed[r][n], police)
    return policed


def _require_one_carrier(
    rules: list[tuple[TrafficRule, list[Intent]]], found: list[tuple[int, int]], direction: int, required: bool
) -> None:
    name = _NAMES[direction]
    if len(found) > 1:
        names = ", ".join(repr(rules[r][0].trafficRuleId) for r, _ in found)
        raise IntentError.at(
            "appInsId", f"the application's active rules {names} all carry {name} traffic: each intent has its own "
            "policer, so they would let through the allocation each; one rule per direction can be policed"
        )
    if required and not found:
        why = " (a PACKET rule's filter is the uplink; FLOW rules carry both)" if direction else ""
        raise IntentError.at(
            "allocationDirection", f"no active traffic rule of the application lets {name} traffic through{why}"
        )


def _with_police(intent: Intent, police: dict[str, Any]) -> Intent:
    action = type(intent.action).model_validate({**intent.action.model_dump(), "police": police})
    return intent.model_copy(update={"action": action})
