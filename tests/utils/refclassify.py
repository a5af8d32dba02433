"""Reference classifier: which intent a packet gets, and its verdict, from api/intents.md alone.

Works on what refparser.parse returns (a key or a parse reason) and on native intents as a client
sends them (plain dicts), independently of the compiler, the binding and the C classifier:

- a field of `match` holds when the packet has it (api/intents.md, "match"): a VNI only when the
  overlay header carries one, a TEID only in a T-PDU, a QFI only with a PDU Session Container,
  ports only when the innermost IP header is not a non-first fragment, a prefix only in its family;
- among the intents that match, the highest priority wins; at equal priority, the one whose shape
  is searched first ("How ambiguous packets are classified"): the shape holding the higher
  highest priority, then the one comparing more conditions, then the one with longer prefixes.
  Past that the order is fixed but unspecified, so the reference accepts any of those left;
- two intents of one shape with equal masked matches: only the higher priority (then smaller id)
  is installed ("How intents become rules").

Verdicts, for the actions the fuzz uses: pass and best-effort traffic PASS (no CPU is overloaded),
drop DROP, forward TX, a steer to a CPU outside the set TX to its alternative group or, with none,
the default verdict; a parse failure the default verdict, not_ip and gtp_signalling PASS.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Optional

from tests.utils import refparser as rp

PROTOCOLS = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "sctp": 132}
OVERLAYS = {"vxlan": rp.OVERLAY_VXLAN, "geneve": rp.OVERLAY_GENEVE, "gre": rp.OVERLAY_GRE}
BENIGN = ("not_ip", "gtp_signalling")


@dataclass(frozen=True)
class Shape:
    """What the data plane compares for an intent: its conditions and prefix lengths."""

    conditions: frozenset[str]
    src_len: int
    dst_len: int
    family: int

    @property
    def prefix_bits(self) -> int:
        return self.src_len + self.dst_len


def _prefix(value: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(value, strict=False)


def shape_of(match: dict[str, Any]) -> Shape:
    """The conditions a match makes a packet meet, implied ones included (api/intents.md)."""
    conditions = {name for name in match if name not in ("src", "dst")}
    if "vni" in match:
        conditions.add("has a VNI")
    if "teid" in match or "qfi" in match:
        conditions.add("is a T-PDU")
    if "qfi" in match:
        conditions.add("has a PDU Session Container")
    if "src_port" in match or "dst_port" in match:
        conditions.add("is not a later fragment")
    lengths, family = {"src": 0, "dst": 0}, 0
    for name in ("src", "dst"):
        if name in match:
            prefix = _prefix(match[name])
            family = prefix.version
            lengths[name] = prefix.prefixlen
            if prefix.prefixlen:
                conditions.add(name)
    if family:
        conditions.add("family")
    return Shape(frozenset(conditions), lengths["src"], lengths["dst"], family)


def masked_match(match: dict[str, Any]) -> tuple:
    """What two matches of one shape must share to collide (prefixes by network, names by number)."""
    values = []
    for name, value in sorted(match.items()):
        if name in ("src", "dst"):
            value = str(_prefix(value))
        elif name == "protocol":
            value = PROTOCOLS.get(value, value)
        values.append((name, value))
    return tuple(values)


def matches(match: dict[str, Any], key: dict[str, Any]) -> bool:
    """Whether a parsed packet (refparser key) has every field of match."""
    return all(_field_holds(name, value, key) for name, value in match.items())


def _field_holds(name: str, value: Any, key: dict[str, Any]) -> bool:
    flags = key["flags"]
    if name == "vlan":
        return key["vlan"] == value
    if name == "overlay":
        return key["overlay"] == OVERLAYS[value]
    if name == "vni":
        return bool(flags & rp.KEY_VNI) and key["vni"] == value
    if name == "teid":
        return bool(flags & rp.KEY_GTP) and key["teid"] == value
    if name == "qfi":
        return bool(flags & rp.KEY_GTP and flags & rp.KEY_GTP_QFI) and key["qfi"] == value
    if name == "protocol":
        return key["proto"] == PROTOCOLS.get(value, value)
    if name in ("src_port", "dst_port"):
        return not flags & rp.KEY_FRAGMENT and key["sport" if name == "src_port" else "dport"] == value
    if name == "dscp":
        return key["dscp"] == value
    if name in ("src", "dst"):
        return _in_prefix(_prefix(value), key["family"], key[name])
    raise ValueError(f"the reference classifier does not know match.{name}")


def _in_prefix(prefix, family: int, packed: bytes) -> bool:
    if family != prefix.version:
        return False
    address = ipaddress.ip_address(packed[:4] if family == 4 else packed)
    return address in prefix


def installed(intents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The intents the data plane holds: of colliding ones, the highest priority, then smallest id."""
    kept: dict[tuple, dict[str, Any]] = {}
    for intent in sorted(intents, key=lambda i: (-priority(i), i["id"])):
        kept.setdefault((shape_of(intent["match"]), masked_match(intent["match"])), intent)
    return list(kept.values())


def priority(intent: dict[str, Any]) -> int:
    return intent.get("priority", 100)


def winners(intents: list[dict[str, Any]], key: dict[str, Any]) -> frozenset[Optional[str]]:
    """The ids that may win for this packet: one, or several the documented order leaves tied;
    {None} when no intent matches."""
    rules = installed(intents)
    top = {}
    for intent in rules:
        shape = shape_of(intent["match"])
        top[shape] = max(top.get(shape, 0), priority(intent))
    matching = [intent for intent in rules if matches(intent["match"], key)]
    if not matching:
        return frozenset({None})

    def order(intent):
        shape = shape_of(intent["match"])
        return (-priority(intent), -top[shape], -len(shape.conditions), -shape.prefix_bits)

    best = min(order(intent) for intent in matching)
    return frozenset(intent["id"] for intent in matching if order(intent) == best)


@dataclass(frozen=True)
class Expected:
    """What the reference says a frame gets."""

    parsed: tuple[str, Any]  # refparser.parse's answer
    intents: frozenset[Optional[str]]  # acceptable winners ({None}: no intent)
    verdicts: frozenset[str]  # acceptable verdicts, one per acceptable winner


def classify(frame: bytes, document: dict[str, Any]) -> Expected:
    """The parse, the winning intent(s) and the verdict(s) a frame gets under an intent document."""
    parsed = rp.parse(frame)
    default = document.get("default_verdict", "pass").upper()
    if parsed[0] == "reason":
        verdict = "PASS" if parsed[1] in BENIGN else default
        return Expected(parsed, frozenset({None}), frozenset({verdict}))
    intents = document.get("intents", [])
    ids = winners(intents, parsed[1])
    by_id = {intent["id"]: intent for intent in intents}
    verdicts = frozenset(verdict_of(by_id.get(intent_id), document) for intent_id in ids)
    return Expected(parsed, ids, verdicts)


def verdict_of(intent: Optional[dict[str, Any]], document: dict[str, Any]) -> str:
    if intent is None:
        return "PASS"  # best effort, handled here: no CPU is overloaded
    action = intent["action"]
    if action["type"] == "pass":
        return "PASS"
    if action["type"] == "drop":
        return "DROP"
    if action["type"] == "forward":
        return "TX"
    if action["type"] == "steer" and action["cpu"] not in {cpu["cpu"] for cpu in document.get("cpus", [])}:
        group = intent.get("alternative", document.get("default_alternative"))
        groups = {group_spec["id"] for group_spec in document.get("alternatives", [])}
        return "TX" if group in groups else document.get("default_verdict", "pass").upper()
    raise ValueError(f"the reference classifier has no verdict for {action}")
