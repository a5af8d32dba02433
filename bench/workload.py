"""What the benchmark installs and sends: four rule shapes, the rules of the measured cases, filler
rules to reach a rule count, and one packet per case.

Rules are spread round-robin over four shapes, searched in this order (highest priority first):

    session    vni + teid + UE src /32 + UDP dst port   priority 300   steer
    qos_flow   vni + qfi                                priority 200   pass
    tunnel     teid                                     priority 150   forward
    ue_subnet  UE dst /24                               priority 100   drop

The measured rules (steer, forward, drop) are ue_subnet rules, the shape searched last, so without
the flow cache every packet, matched or not, costs one hash lookup per shape: the search's worst
case. Case packets share vni, teid and qfi but no filler matches them.

Up to a handful of rules go through the compiler and Dataplane.apply(), which also publishes the
shapes. Compiling a million intents takes about a minute of pure Python, so the bulk of the fillers
is written straight into ctypes arrays: each shape's compiled key and rule (binding.rule_to_c) are
copied n times and the one varying key word and the stat slot are overwritten. `check_bulk_keys`
compares samples of those arrays with what the compiler produces for the same intents.
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network
from typing import Any, Callable, Mapping, Sequence

from netapp.dataplane.binding import FlowKey, Rule, rule_to_c
from netapp.intents.compiler import CompiledAltMember, compile_intent
from netapp.intents.models import Intent

from bench.packets import Flow, nested_packet

# The flow every case packet belongs to (the paper's VXLAN "00000445" and TEID "8894D0D4").
VNI = 0x445
TEID = 0x8894D0D4
QFI = 9
UE_SRC = "10.60.0.1"
UE_SPORT = 40000
UE_DPORT = 5004

STEER_CPU = 0
ALT_GROUP = 1
ALT_MEMBER = CompiledAltMember(mac="02:00:00:00:0a:01", ip4=IPv4Address("203.0.113.7"))  # ifindex 0: XDP_TX

CASES = ("miss", "steer", "forward", "drop")
MATCHED_CASES = ("steer", "forward", "drop")
# One UE /24 per case; fillers' ue_subnet prefixes start far away from these.
CASE_UE_DST = {"miss": "10.200.0.10", "steer": "10.201.0.10", "forward": "10.202.0.10", "drop": "10.203.0.10"}
CASE_ACTIONS: Mapping[str, dict[str, Any]] = {
    "steer": {"type": "steer", "cpu": STEER_CPU},
    "forward": {"type": "forward", "alternative": ALT_GROUP},
    "drop": {"type": "drop"},
}
# XDP verdict (enum xdp_action) and enum dpp_action name each case must end in.
CASE_VERDICTS = {"miss": 2, "steer": 4, "forward": 3, "drop": 1}
CASE_VERDICT_NAMES = {"miss": "PASS", "steer": "REDIRECT", "forward": "TX", "drop": "DROP"}
CASE_PIPELINE_ACTIONS = {"miss": "pass", "steer": "steer", "forward": "forward", "drop": "drop"}

WORD_BYTES = 4
KEY_WORDS = 15  # sizeof(struct dpp_flow_key) / 4, checked in _check_word_layout
RULE_WORDS = 4  # sizeof(struct dpp_rule) / 4
RULE_SLOT_WORD = 0  # struct dpp_rule.slot


SESSION_TEID_BASE = 0x01000000
QOS_VNI_BASE = 0x100000
TUNNEL_TEID_BASE = 0x02000000
SUBNET_BASE = int(IPv4Address("100.64.0.0"))
SUBNET_STRIDE = 256  # one /24 each


@dataclass(frozen=True)
class ShapeSpec:
    """One rule shape: what its index-th filler intent matches, and where that index shows in the
    key: the key member `varied_member` holds varied_base + index * varied_stride."""

    name: str
    priority: int
    action: dict[str, Any]
    match: Callable[[int], dict[str, Any]]
    varied_member: str
    varied_base: int
    varied_stride: int = 1
    network_order: bool = False  # an IPv4 address: the key keeps the wire bytes

    def varied_words(self, indexes: range) -> array:
        """The varied key word of fillers `indexes`, as the key stores it."""
        first = self.varied_base + indexes.start * self.varied_stride
        words = array("I", range(first, first + len(indexes) * self.varied_stride, self.varied_stride))
        if self.network_order and sys.byteorder == "little":
            words.byteswap()
        return words


def _subnet(index: int) -> str:
    return str(IPv4Network((SUBNET_BASE + index * SUBNET_STRIDE, 24)))


SHAPES: Sequence[ShapeSpec] = (
    ShapeSpec(
        name="session",
        priority=300,
        action={"type": "steer", "cpu": STEER_CPU},
        match=lambda i: {
            "overlay": "vxlan",
            "vni": VNI,
            "teid": SESSION_TEID_BASE + i,
            "src": f"{UE_SRC}/32",
            "protocol": "udp",
            "dst_port": UE_DPORT,
        },
        varied_member="teid",
        varied_base=SESSION_TEID_BASE,
    ),
    ShapeSpec(
        name="qos_flow",
        priority=200,
        action={"type": "pass"},
        match=lambda i: {"overlay": "vxlan", "vni": QOS_VNI_BASE + i, "qfi": QFI},
        varied_member="vni",
        varied_base=QOS_VNI_BASE,
    ),
    ShapeSpec(
        name="tunnel",
        priority=150,
        action={"type": "forward", "alternative": ALT_GROUP},
        match=lambda i: {"teid": TUNNEL_TEID_BASE + i},
        varied_member="teid",
        varied_base=TUNNEL_TEID_BASE,
    ),
    ShapeSpec(
        name="ue_subnet",
        priority=100,
        action={"type": "drop"},
        match=lambda i: {"dst": _subnet(i)},
        varied_member="dst",  # an IPv4 address is dst[0], the member's first word
        varied_base=SUBNET_BASE,
        varied_stride=SUBNET_STRIDE,
        network_order=True,
    ),
)
MATCHED_SHAPE = SHAPES[-1]  # the case rules' shape: searched last


# --- intents -----------------------------------------------------------------------------------


def case_intent_id(case: str) -> str:
    return f"case-{case}"


def case_intent(case: str) -> Intent:
    """The rule a matched case's packet hits: its UE /24, in the shape searched last."""
    subnet = IPv4Network((CASE_UE_DST[case], 24), strict=False)
    return Intent.model_validate(
        {
            "id": case_intent_id(case),
            "priority": MATCHED_SHAPE.priority,
            "match": {"dst": str(subnet)},
            "action": CASE_ACTIONS[case],
        }
    )


def filler_position(filler: int) -> tuple[ShapeSpec, int]:
    """Fillers go round-robin over the shapes: (shape, index among that shape's fillers)."""
    return SHAPES[filler % len(SHAPES)], filler // len(SHAPES)


def filler_intent(filler: int) -> Intent:
    shape, index = filler_position(filler)
    return Intent.model_validate(
        {
            "id": f"filler-{filler}",
            "priority": shape.priority,
            "match": shape.match(index),
            "action": shape.action,
        }
    )


def case_flow(case: str) -> Flow:
    return Flow(VNI, TEID, QFI, UE_SRC, CASE_UE_DST[case], UE_SPORT, UE_DPORT)


def case_packets() -> dict[str, bytes]:
    packets = {case: nested_packet(case_flow(case)) for case in CASES}
    if len({len(packet) for packet in packets.values()}) != 1:
        raise AssertionError("case packets differ in length: the harness floor would differ per case")
    return packets


# --- bulk fillers --------------------------------------------------------------------------------


@dataclass
class RuleArrays:
    """Keys and rules as contiguous C arrays, ready for one dpp_rules_upsert call."""

    keys: Any  # FlowKey * count, viewing key_words
    rules: Any  # Rule * count, viewing rule_words
    key_words: array
    rule_words: array

    @property
    def count(self) -> int:
        return len(self.keys)


def _check_word_layout() -> None:
    if array("I").itemsize != WORD_BYTES:
        raise RuntimeError("array('I') is not 32 bits on this platform")
    if KEY_WORDS * WORD_BYTES != len(bytes(FlowKey())) or RULE_WORDS * WORD_BYTES != len(bytes(Rule())):
        raise RuntimeError("struct dpp_flow_key / dpp_rule sizes changed: update KEY_WORDS / RULE_WORDS")


def _shape_fillers(fillers: range, position: int) -> range:
    """The filler numbers within `fillers` that go to the shape at `position`."""
    count = len(SHAPES)
    first = fillers.start + (position - fillers.start) % count
    return range(first, max(first, fillers.stop), count)


def _template(shape: ShapeSpec) -> tuple[bytes, bytes]:
    """The compiled key and rule of the shape's first filler: what the bulk copies start from."""
    compiled = compile_intent(filler_intent(SHAPES.index(shape)), {})
    key, rule = rule_to_c(compiled, 0)
    return bytes(key), bytes(rule)


def _shape_block(shape: ShapeSpec, fillers: range, slot_base: int) -> tuple[array, array]:
    key, rule = _template(shape)
    indexes = range(fillers.start // len(SHAPES), fillers.start // len(SHAPES) + len(fillers))
    varied_word = getattr(FlowKey, shape.varied_member).offset // WORD_BYTES
    slots = range(slot_base + fillers.start, slot_base + fillers.stop, len(SHAPES))
    key_words = array("I", key * len(fillers))
    key_words[varied_word::KEY_WORDS] = shape.varied_words(indexes)
    rule_words = array("I", rule * len(fillers))
    rule_words[RULE_SLOT_WORD::RULE_WORDS] = array("I", slots)
    return key_words, rule_words


def bulk_fillers(fillers: range, slot_base: int) -> RuleArrays:
    """Fillers `fillers` (filler n gets stat slot slot_base + n) as C arrays, shape by shape."""
    _check_word_layout()
    key_words, rule_words = array("I"), array("I")
    for position, shape in enumerate(SHAPES):
        block = _shape_fillers(fillers, position)
        if len(block):
            keys, rules = _shape_block(shape, block, slot_base)
            key_words.extend(keys)
            rule_words.extend(rules)
    count = len(rule_words) // RULE_WORDS
    return RuleArrays(
        (FlowKey * count).from_buffer(key_words),
        (Rule * count).from_buffer(rule_words),
        key_words,
        rule_words,
    )


def check_bulk_keys(arrays: RuleArrays, fillers: range, slot_base: int) -> None:
    """The first and last filler of every shape, compiled the slow way, must equal the bulk copy."""
    offset = 0
    for position in range(len(SHAPES)):
        block = _shape_fillers(fillers, position)
        for at, filler in ((0, block[0]), (len(block) - 1, block[-1])) if len(block) else ():
            compiled = compile_intent(filler_intent(filler), {})
            key, rule = rule_to_c(compiled, slot_base + filler)
            bulk_key, bulk_rule = bytes(arrays.keys[offset + at]), bytes(arrays.rules[offset + at])
            if (bulk_key, bulk_rule) != (bytes(key), bytes(rule)):
                raise AssertionError(f"bulk filler {filler} differs from the compiler's key/rule")
        offset += len(block)
