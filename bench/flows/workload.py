"""What the flow-mix benchmark installs and sends.

Flow f (0 <= f < N) is the benchmark packet (bench/packets.py: VXLAN / GTP-U with a PDU Session
Container / UE IPv4 UDP) with TEID TEID_BASE + f and UE source address SRC_BASE + f; the harness
rewrites both on every repetition (bench/bpf/harness.bpf.c, harness_walk).

Rules, all dropping, in S shapes (S = 1, 4 or 16):

    searched   teid + UE src /32 (rule f matches flow f; a UPF uplink PDR)   priority 100
    other k    teid + UE dst /(8 + k), never matching a walked flow          priority 100 + k

The searched shape has the lowest priority, so every packet probes every shape: the search's worst
case. With --tunnel-rule one more rule, on a tunnel source no flow has, sits above them all. `rules` counts the searched shape's rules; every other shape holds min(rules, OTHER_RULES)
rules. The first rule of each shape goes through the compiler and Dataplane.apply() (which
publishes the shapes); the rest are copies of its compiled key with the varying words rewritten,
written with one dpp_rules_upsert call, checked against the compiler at both ends of each block.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any

import numpy

from netapp.dataplane.binding import FlowKey, Rule, rule_to_c
from netapp.intents.compiler import compile_intent
from netapp.intents.models import Intent

from bench.harness import Walk
from bench.packets import Flow, nested_packet

VNI = 0x445
QFI = 9
TEID_BASE = 0x10000000
SRC_BASE = int(IPv4Address("10.64.0.0"))  # flows' UE sources: 10.64.0.0 onwards (a /11 for 1M)
UE_DST = "192.0.2.80"
OTHER_TEID_BASE = 0x60000000  # no walked flow has these TEIDs
OTHER_DST = "198.18.0.0"
OTHER_RULES = 4096
TUNNEL_GNB = "203.0.113.7"  # a GTP-U tunnel source no walked flow has
SEARCHED_PRIORITY = 100

KEY_WORDS = 15  # sizeof(struct dpp_flow_key) / 4
RULE_WORDS = 4  # sizeof(struct dpp_rule) / 4
TEID_WORD = FlowKey.teid.offset // 4
SRC_WORD = FlowKey.src.offset // 4
SLOT_WORD = Rule.slot.offset // 4


def packet() -> bytes:
    """Flow 0's packet: what the harness restores before rewriting it to flow f."""
    return nested_packet(Flow(VNI, TEID_BASE, QFI, str(IPv4Address(SRC_BASE)), UE_DST, 40000, 5004))


def walk(flows: int) -> Walk:
    """The walk over `flows` flows, with the offsets of the TEID and the UE source in packet()."""
    data = packet()
    teid_off = data.index(TEID_BASE.to_bytes(4, "big"))
    src_off = data.index(IPv4Address(SRC_BASE).packed)
    return Walk(flows, TEID_BASE, SRC_BASE, teid_off, src_off)


def searched_intent(index: int) -> Intent:
    return Intent.model_validate(
        {
            "id": f"flow-{index}",
            "priority": SEARCHED_PRIORITY,
            "match": {"teid": TEID_BASE + index, "src": f"{IPv4Address(SRC_BASE + index)}/32"},
            "action": {"type": "drop"},
        }
    )


def other_intent(shape: int, index: int) -> Intent:
    """Rule `index` of other shape `shape` (1..15): a TEID no flow has, a prefix of its own length."""
    return Intent.model_validate(
        {
            "id": f"other-{shape}-{index}",
            "priority": SEARCHED_PRIORITY + shape,
            "match": {"teid": OTHER_TEID_BASE + index, "dst": f"{OTHER_DST}/{8 + shape}"},
            "action": {"type": "drop"},
        }
    )


def tunnel_intent() -> Intent:
    """With --tunnel-rule: a rule on a GTP-U tunnel's source that no walked flow comes from, above
    every other shape, so that every packet looks its tunnel's addresses up (dpp_tunnel_ends) and
    probes one more shape (which its filter turns away)."""
    return Intent.model_validate(
        {
            "id": "tunnel-0",
            "priority": SEARCHED_PRIORITY + 16,
            "match": {"tunnel_src": TUNNEL_GNB},
            "action": {"type": "drop"},
        }
    )


def shape_rule_counts(rules: int, shapes: int) -> list[int]:
    """Rules of each shape, the searched one first."""
    return [rules] + [min(rules, OTHER_RULES)] * (shapes - 1)


def first_intents(shapes: int) -> list[Intent]:
    """One rule of every shape: what goes through the compiler and apply()."""
    return [searched_intent(0)] + [other_intent(shape, 0) for shape in range(1, shapes)]


@dataclass
class RuleArrays:
    """Keys and rules as contiguous C arrays for one dpp_rules_upsert call."""

    keys: Any
    rules: Any
    key_words: numpy.ndarray
    rule_words: numpy.ndarray

    @property
    def count(self) -> int:
        return len(self.rule_words)


def _network_order(values: numpy.ndarray) -> numpy.ndarray:
    """IPv4 addresses as the key stores them: wire bytes read as a host-order word."""
    return values.astype(">u4").view("<u4" if sys.byteorder == "little" else ">u4").astype(numpy.uint32)


def _block(intent: Intent, indexes: range, first_slot: int, vary_src: bool) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Copies of intent's compiled key and rule for rule numbers `indexes` (the TEID, and for the
    searched shape the UE source, advance with the number), stat slots from first_slot."""
    key, rule = rule_to_c(compile_intent(intent, {}), 0)
    count = len(indexes)
    keys = numpy.tile(numpy.frombuffer(bytes(key), dtype=numpy.uint32), (count, 1))
    values = numpy.tile(numpy.frombuffer(bytes(rule), dtype=numpy.uint32), (count, 1))
    offsets = numpy.arange(indexes.start, indexes.stop, dtype=numpy.uint32)
    keys[:, TEID_WORD] = keys[0, TEID_WORD] + offsets - indexes.start
    if vary_src:
        keys[:, SRC_WORD] = _network_order(numpy.uint32(SRC_BASE) + offsets)
    values[:, SLOT_WORD] = numpy.arange(first_slot, first_slot + count, dtype=numpy.uint32)
    return keys, values


def bulk_rules(rules: int, shapes: int, first_slot: int) -> RuleArrays:
    """Every rule but each shape's first (installed through apply()), stat slots from first_slot."""
    key_blocks, rule_blocks, slot = [], [], first_slot
    for shape, count in enumerate(shape_rule_counts(rules, shapes)):
        if count < 2:
            continue
        intent = searched_intent(1) if shape == 0 else other_intent(shape, 1)
        keys, values = _block(intent, range(1, count), slot, vary_src=shape == 0)
        _check_ends(keys, values, shape, range(1, count), slot)
        key_blocks.append(keys)
        rule_blocks.append(values)
        slot += count - 1
    key_words = numpy.ascontiguousarray(numpy.concatenate(key_blocks or [numpy.zeros((0, KEY_WORDS), numpy.uint32)]))
    rule_words = numpy.ascontiguousarray(
        numpy.concatenate(rule_blocks or [numpy.zeros((0, RULE_WORDS), numpy.uint32)])
    )
    total = len(rule_words)
    return RuleArrays(
        (FlowKey * total).from_buffer(key_words),
        (Rule * total).from_buffer(rule_words),
        key_words,
        rule_words,
    )


def _check_ends(keys: numpy.ndarray, values: numpy.ndarray, shape: int, indexes: range, slot: int) -> None:
    """The first and last copy must equal what the compiler makes of the same intent."""
    for row, index in ((0, indexes.start), (len(indexes) - 1, indexes.stop - 1)):
        intent = searched_intent(index) if shape == 0 else other_intent(shape, index)
        key, rule = rule_to_c(compile_intent(intent, {}), slot + row)
        if keys[row].tobytes() != bytes(key) or values[row].tobytes() != bytes(rule):
            raise AssertionError(f"bulk rule {index} of shape {shape} differs from the compiler's")
