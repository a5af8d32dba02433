"""Intents of different shapes that overlap: the packets both match, and which of the two gets them.

Two rules of one shape never overlap unless their keys are equal (a collision, reported by the
compiler). Rules of different shapes overlap when a packet can match both: every key field both
compare holds the same value, and of two prefixes of one field one contains the other. Such a
packet gets the rule of higher priority; at equal priority, the rule of the shape the data plane
searches first (classify.h, `search_shapes`: shapes by their highest priority, then
RuleShape.tie_break_key). Pure: the index (netapp.intents.index) finds the rules, this module says
what their overlap means.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network
from typing import Any, Iterable, Mapping, Optional, Union

from netapp.intents.compiler import PREFIX_FIELDS, CompiledRule, FieldValues, RuleShape
from netapp.intents.models import PROTOCOL_NUMBERS

Network = Union[IPv4Network, IPv6Network]
ShapeOrder = tuple[tuple[RuleShape, ...], tuple[int, ...]]

# Key fields that hold one constant value whenever a rule compares them (flag bits that other
# fields imply, and the family a prefix implies): they never tell two rules of a shape apart.
IMPLIED_FIELDS = frozenset({"has_vni", "gtp", "gtp_qfi", "fragment", "family"})

PROTOCOL_NAMES = {number: name for name, number in PROTOCOL_NUMBERS.items()}


@dataclass(frozen=True)
class Overlap:
    """`rule` and `other` (of another shape) both match the packets of `shared`; `winner` acts on
    them, for `reason`."""

    rule: CompiledRule
    other: CompiledRule
    shared: FieldValues
    winner: CompiledRule
    reason: str


def shared_values(a: FieldValues, b: FieldValues) -> Optional[FieldValues]:
    """The match of the packets that match both `a` and `b` (masked key values, as rules hold
    them), or None when no packet can: a field both compare must agree, and of two prefixes the
    longer one, which must lie in the shorter."""
    merged = a.as_dict()
    for name, value in b.as_dict().items():
        if name not in merged:
            merged[name] = value
        elif name in PREFIX_FIELDS:
            narrower = narrower_prefix(merged[name], value)
            if narrower is None:
                return None
            merged[name] = narrower
        elif merged[name] != value:
            return None
    return FieldValues(merged)


def agree(a: Mapping[str, Any], b: Mapping[str, Any], fields: Iterable[str]) -> bool:
    """Whether `a` and `b` can both hold on `fields`, which both compare (see shared_values)."""
    for name in fields:
        if name in PREFIX_FIELDS:
            if narrower_prefix(a[name], b[name]) is None:
                return False
        elif a[name] != b[name]:
            return False
    return True


def narrower_prefix(a: Network, b: Network) -> Optional[Network]:
    """The longer of two prefixes if it lies in the other, else None (no address is in both)."""
    if a.version != b.version:
        return None
    shorter, longer = (a, b) if a.prefixlen <= b.prefixlen else (b, a)
    return longer if longer.subnet_of(shorter) else None  # type: ignore[arg-type]


@dataclass(frozen=True)
class ShapeRanks:
    """Where each installed shape is in the search order, and its highest priority."""

    position: Mapping[RuleShape, int]
    top: Mapping[RuleShape, int]

    @classmethod
    def of(cls, shapes: ShapeOrder) -> "ShapeRanks":
        order, maxima = shapes
        return cls({shape: n for n, shape in enumerate(order)}, dict(zip(order, maxima)))


def overlap(rule: CompiledRule, other: CompiledRule, ranks: ShapeRanks) -> Optional[Overlap]:
    """What it means that `rule` and `other` (of different shapes) both match some packets, or None
    when they cannot."""
    shared = shared_values(rule.values, other.values)
    if shared is None:
        return None
    winner, reason = decide(rule, other, ranks)
    return Overlap(rule, other, shared, winner, reason)


def decide(a: CompiledRule, b: CompiledRule, ranks: ShapeRanks) -> tuple[CompiledRule, str]:
    """Which of two installed rules of different shapes a packet both match gets, and why."""
    if a.priority != b.priority:
        winner, loser = (a, b) if a.priority > b.priority else (b, a)
        return winner, f"priority {winner.priority} over {loser.priority}"
    winner, loser = sorted((a, b), key=lambda rule: ranks.position[rule.shape])
    why = _searched_first(winner.shape, loser.shape, ranks.top)
    return winner, (
        f"equal priority {a.priority}: {why}; give them different priorities to choose the winner"
    )


def _searched_first(first: RuleShape, second: RuleShape, top: Mapping[RuleShape, int]) -> str:
    """Why the data plane searches shape `first` before `second` (compiler.order_shapes)."""
    if top[first] != top[second]:
        return (
            f"the winner's shape is searched first, as it holds a higher priority "
            f"({top[first]} vs {top[second]}; shapes are searched by their highest priority)"
        )
    if len(first.fields) != len(second.fields):
        return f"the winner compares more conditions ({len(first.fields)} vs {len(second.fields)})"
    first_bits, second_bits = first.src_len + first.dst_len, second.src_len + second.dst_len
    if first_bits != second_bits:
        return f"the winner's prefixes are longer ({first_bits} vs {second_bits} bits)"
    return "the shapes are equally specific, so the order between them is fixed but unspecified"


# --- in words ------------------------------------------------------------------------------------


def describe_values(match: FieldValues, interface_names: Mapping[int, str]) -> str:
    """A match in words: "udp packets from 10.0.0.0/24 to port 5000 on n3"."""
    values = match.as_dict()
    words = [_subject(values)]
    for direction, prefix, port in (("from", "src", "src_port"), ("to", "dst", "dst_port")):
        end = _endpoint(values.get(prefix), values.get(port))
        if end:
            words.append(f"{direction} {end}")
    if "dscp" in values:
        words.append(f"with DSCP {values['dscp']}")
    if "vlan" in values:
        words.append(f"in VLAN {values['vlan']}")
    if "overlay" in values:
        key = " key" if values["overlay"] == "gre" else " VNI"
        words.append(f"in {values['overlay']}" + (f"{key} {values['vni']}" if "vni" in values else ""))
    if "gtp" in values:
        teid = f" TEID {values['teid']:#010x}" if "teid" in values else ""
        tunnel = teid + (f" QFI {values['qfi']}" if "qfi" in values else "")
        words.append(f"in GTP-U{tunnel}")
    if "interface" in values:
        ifindex = values["interface"]
        words.append(f"on {interface_names.get(ifindex, f'ifindex {ifindex}')}")
    return " ".join(words)


def _subject(values: Mapping[str, Any]) -> str:
    if not values:
        return "every packet"
    family = values.get("family")
    prefixed = "src" in values or "dst" in values
    words = [f"IPv{family}"] if family and not prefixed else []
    if "protocol" in values:
        number = values["protocol"]
        words.append(PROTOCOL_NAMES.get(number, f"protocol {number}"))
    return " ".join(words + ["packets"])


def _endpoint(prefix: Optional[Network], port: Optional[int]) -> str:
    words = []
    if prefix is not None:
        host = prefix.prefixlen == prefix.max_prefixlen
        words.append(str(prefix.network_address) if host else str(prefix))
    if port is not None:
        words.append(f"port {port}")
    return " ".join(words)
