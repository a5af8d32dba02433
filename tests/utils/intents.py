"""Factories for intents, legacy messages and documents (plain dicts, as a client would send)."""

from __future__ import annotations

import copy
from typing import Any, Callable, Optional

from netapp.intents.overlap import IMPLIED_FIELDS

# The paper's example message, verbatim.
PAPER_MESSAGE_JSON = (
    '{"Resources":[{"resourceId":"F8A4C949","encapsulationID1":"00000445","encapsulationType1":"vxlan"},'
    '{"resourceId":"B6E6B2B3","encapsulationID2":"8894D0D4","encapsulationType2":"gtp"},'
    '{"resourceId":"5A07C580","srcIP":"192.168.0.140","dstPort":"5004"}],'
    '"Action":{"actionType":"INSERT","actionName":"PRIO_QUEUE","flow_hash":"E918D704","rx_queue":"1"},'
    '"Params":[{"paramName":"interfaceName","paramValue":"eth0"}]}'
)

# An interface table for compiling without a host (name -> ifindex).
INTERFACES = {"lo": 1, "eth0": 2, "eth1": 3, "ens5": 7}


def paper_message() -> dict[str, Any]:
    import json

    return json.loads(PAPER_MESSAGE_JSON)


def native_intent(
    intent_id: str = "video-prio",
    match: Optional[dict[str, Any]] = None,
    action: Optional[dict[str, Any]] = None,
    **fields: Any,
) -> dict[str, Any]:
    """A valid native intent (steer UDP 5004 to CPU 1) with the given parts replaced."""
    intent = {
        "id": intent_id,
        "match": {"protocol": "udp", "dst_port": 5004} if match is None else match,
        "action": {"type": "steer", "cpu": 1} if action is None else action,
    }
    intent.update(fields)
    return intent


def changed(original: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    """A deep copy of `original` after `change` mutated it (for table-driven rejection cases)."""
    result = copy.deepcopy(original)
    change(result)
    return result


def site_document(intents: list[dict[str, Any]]) -> dict[str, Any]:
    """A full document: two alternative groups, two CPUs, site defaults."""
    return {
        "intents": intents,
        "alternatives": [
            {"id": 0, "members": [{"mac": "02:00:00:00:00:09", "ip4": "10.0.0.9"}]},
            {
                "id": 1,
                "members": [
                    {"mac": "02:00:00:00:00:0a", "ip6": "2001:db8::a", "interface": "eth1"},
                    {"mac": "02:00:00:00:00:0b", "ip4": "10.0.0.11", "ip6": "2001:db8::b"},
                ],
            },
        ],
        "cpus": [{"cpu": 1, "capacity_pps": 1000000}, {"cpu": 0, "overloaded": True}],
        "default_verdict": "pass",
        "default_alternative": 0,
    }


def native_match(values: Any) -> dict[str, Any]:
    """Compiled key values (a rule's FieldValues) as a native match again, e.g. for the reference
    classifier: the fields a match implies go, prefixes become strings, a family alone a /0."""
    match = {name: value for name, value in values.items() if name not in IMPLIED_FIELDS}
    for name in ("src", "dst"):
        if name in match:
            match[name] = str(match[name])
    if "family" in values and "src" not in match and "dst" not in match:
        match["dst"] = "0.0.0.0/0" if values["family"] == 4 else "::/0"
    return match
