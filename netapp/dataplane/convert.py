"""Conversions between the compiler's vocabulary (netapp.intents.compiler) and the ABI mirrors."""

from __future__ import annotations

import ipaddress
import sys
import zlib
from ctypes import Structure, c_uint8
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from netapp.dataplane.abi import (
    MAX_ALT_MEMBERS,
    NONE,
    Action,
    AltGroup,
    AltMember,
    FlowKey,
    KeyFlag,
    Overlay,
    Rule,
    RuleFlag,
    Shape,
    U32x4,
)
from netapp.intents.compiler import INSTALLED_ACTIONS, CompiledAltMember, CompiledRule, RuleShape


@dataclass(frozen=True)
class KeyField:
    """Where a compiler key field lives in struct dpp_flow_key and how wide its mask is.

    `bit` set: the field is that single bit of the member (a flag), compared for 0 or 1.
    `prefix`: the field is an address whose mask comes from the shape's prefix length.
    `tunnel`: the field is an address the key holds by its id in dpp_tunnel_ends (TunnelEnds).
    """

    member: str
    width: int
    bit: int = 0
    prefix: bool = False
    tunnel: bool = False

    @property
    def full_mask(self) -> int:
        return self.bit if self.bit else (1 << self.width) - 1


# The one per-field table: compiler field -> key member and mask width.
KEY_FIELDS: Mapping[str, KeyField] = {
    "interface": KeyField("ifindex", 32),
    "vlan": KeyField("vlan", 12),
    "overlay": KeyField("overlay", 8),
    "vni": KeyField("vni", 32),
    "has_vni": KeyField("flags", 1, bit=KeyFlag.VNI),
    "gtp": KeyField("flags", 1, bit=KeyFlag.GTP),
    "gtp_qfi": KeyField("flags", 1, bit=KeyFlag.GTP_QFI),
    "upf": KeyField("flags", 1, bit=KeyFlag.UPF),
    "atsss": KeyField("flags", 1, bit=KeyFlag.ATSSS),
    "teid": KeyField("teid", 32),
    "qfi": KeyField("qfi", 6),
    "family": KeyField("family", 8),
    "protocol": KeyField("proto", 8),
    "fragment": KeyField("flags", 1, bit=KeyFlag.FRAGMENT),
    "src_port": KeyField("sport", 16),
    "dst_port": KeyField("dport", 16),
    "dscp": KeyField("dscp", 6),
    "src": KeyField("src", 128, prefix=True),
    "dst": KeyField("dst", 128, prefix=True),
    "tunnel_src": KeyField("tunnel_src", 8, tunnel=True),
    "tunnel_dst": KeyField("tunnel_dst", 8, tunnel=True),
}

SHAPE_ID_BITS = 16  # struct dpp_flow_key.shape
# An address -> its id in dpp_tunnel_ends (netapp.dataplane.tunnel_ends), given one if it had none.
TunnelIds = Callable[[Union[ipaddress.IPv4Address, ipaddress.IPv6Address]], int]


def address_words(address: Union[ipaddress.IPv4Address, ipaddress.IPv6Address, bytes]) -> list[int]:
    """Four __u32 words holding an address in network order (IPv4 in word 0)."""
    packed = address if isinstance(address, bytes) else address.packed
    packed = packed.ljust(16, b"\0")
    return [int.from_bytes(packed[i : i + 4], sys.byteorder) for i in range(0, 16, 4)]


def words_address(words: Sequence[int], family: int) -> Union[ipaddress.IPv4Address, ipaddress.IPv6Address]:
    packed = b"".join(int(word).to_bytes(4, sys.byteorder) for word in words)
    return ipaddress.IPv4Address(packed[:4]) if family == 4 else ipaddress.IPv6Address(packed)


def prefix_mask_words(length: int, family: int) -> list[int]:
    """Mask words of a prefix length: the first `length` bits of the family's address."""
    total = 32 if family == 4 else 128
    mask = ((1 << length) - 1) << (total - length)
    return address_words(mask.to_bytes(total // 8, "big"))


def _numeric_value(field: str, value: Any) -> int:
    if field == "overlay":
        return Overlay[str(value).upper()]
    return int(value)


def shape_id(shape: RuleShape) -> int:
    """The stable id of a shape: what its rules' keys and its mask carry in .shape.

    Derived from the mask alone, so a shape keeps its id wherever it sits in the shape set and
    across restarts: a rule key written for a new set can never meet a packet masked by an
    unrelated shape of the old one. Never 0, which is what a packet's own key holds. 16 bits (the
    key's other two bytes hold the tunnel ids): the CRC-32 folded, so that every bit of the mask
    counts; two shapes of one set with one id are refused when the set is published
    (netapp.dataplane.plan).
    """
    crc = zlib.crc32(bytes(_compared_bits(shape)))
    return ((crc ^ (crc >> SHAPE_ID_BITS)) & ((1 << SHAPE_ID_BITS) - 1)) or 1


def _compared_bits(shape: RuleShape) -> FlowKey:
    """Every shape compares the UPF bit and the ATSSS bit, each set only in its function's rules
    (netapp.upf.compiler, netapp.atsss.flows) and in the packets that function sends to the
    classifier: intents never meet them, they never meet intents, nor each other."""
    mask = FlowKey(flags=KeyFlag.UPF | KeyFlag.ATSSS)
    for field in shape.fields:
        spec = KEY_FIELDS[field]
        if spec.prefix:
            length = shape.src_len if field == "src" else shape.dst_len
            setattr(mask, spec.member, U32x4(*prefix_mask_words(length, shape.family)))
        else:
            setattr(mask, spec.member, getattr(mask, spec.member) | spec.full_mask)
    return mask


def shape_mask(shape: RuleShape) -> FlowKey:
    """The key mask of a shape: all ones over every compared field (prefix bits for src/dst), and
    the shape's id in .shape, which the classifier copies into the masked key."""
    mask = _compared_bits(shape)
    mask.shape = shape_id(shape)
    return mask


def shape_to_c(shape: RuleShape, max_priority: int) -> Shape:
    return Shape(mask=shape_mask(shape), max_priority=max_priority)


def _no_tunnel_ids(address: Any) -> int:
    raise ValueError(f"tunnel address {address} needs an id: the rule's key is made by the data plane's writer")


def rule_key(rule: CompiledRule, tunnel_ids: TunnelIds = _no_tunnel_ids) -> FlowKey:
    """The masked key a matching packet has, with .shape set; tunnel addresses by their ids."""
    key = FlowKey()
    for field, value in rule.values.items():
        spec = KEY_FIELDS[field]
        if spec.tunnel:
            setattr(key, spec.member, tunnel_ids(value))
        elif spec.prefix:
            setattr(key, spec.member, U32x4(*address_words(value.network_address)))
        elif spec.bit:
            if value:
                setattr(key, spec.member, getattr(key, spec.member) | spec.bit)
        else:
            setattr(key, spec.member, _numeric_value(field, value) & spec.full_mask)
    key.shape = shape_id(rule.shape)
    return key


def _or_none(index: Optional[int]) -> int:
    return NONE if index is None else index


def rule_value(rule: CompiledRule, slot: int = 0) -> Rule:
    return Rule(
        slot=slot,
        priority=rule.priority,
        action=Action[INSTALLED_ACTIONS[rule.action].c_action],
        flags=(RuleFlag.BEST_EFFORT if rule.best_effort else 0) | (RuleFlag.POLICED if rule.policed else 0),
        arg=_or_none(rule.arg),
        overflow_group=_or_none(rule.overflow_group),
    )


def rule_to_c(rule: CompiledRule, slot: int = 0, tunnel_ids: TunnelIds = _no_tunnel_ids) -> tuple[FlowKey, Rule]:
    """A compiled rule as the (key, value) of dpp_rules."""
    return rule_key(rule, tunnel_ids), rule_value(rule, slot)


def _mac_bytes(mac: Optional[str]) -> Any:
    raw = bytes.fromhex(mac.replace(":", "")) if mac else bytes(6)
    return (c_uint8 * 6)(*raw)


def alt_member_to_c(member: CompiledAltMember) -> AltMember:
    return AltMember(
        dmac=_mac_bytes(member.mac),
        smac=_mac_bytes(member.source_mac),
        ifindex=member.ifindex,
        has_ip4=1 if member.ip4 is not None else 0,
        addr4=address_words(member.ip4)[0] if member.ip4 is not None else 0,
        has_ip6=1 if member.ip6 is not None else 0,
        addr6=U32x4(*address_words(member.ip6)) if member.ip6 is not None else U32x4(),
    )


def alt_group_to_c(members: Sequence[CompiledAltMember]) -> AltGroup:
    if not 0 < len(members) <= MAX_ALT_MEMBERS:
        raise ValueError(f"an alternative group has 1..{MAX_ALT_MEMBERS} members, got {len(members)}")
    group = AltGroup(count=len(members))
    for index, member in enumerate(members):
        group.members[index] = alt_member_to_c(member)
    return group


def key_flags(flags: int) -> list[str]:
    return [flag.name.lower() for flag in KeyFlag if flags & flag]


def key_from_c(key: FlowKey) -> dict[str, Any]:
    """A packet's (or a rule's) key, readable: addresses as ipaddress objects, names for enums."""
    family = key.family
    has_ip = family in (4, 6)
    return {
        "ifindex": key.ifindex,
        "vlan": key.vlan,
        "overlay": _enum_name(Overlay, key.overlay) if key.overlay else None,
        "vni": key.vni,
        "teid": key.teid,
        "qfi": key.qfi,
        "flags": key_flags(key.flags),
        "family": family,
        "protocol": key.proto,
        "dscp": key.dscp,
        "src_port": key.sport,
        "dst_port": key.dport,
        "src": words_address(key.src, family) if has_ip else None,
        "dst": words_address(key.dst, family) if has_ip else None,
        "shape": key.shape,
        "tunnel_src": key.tunnel_src,
        "tunnel_dst": key.tunnel_dst,
    }


def _enum_name(enum_type: Any, value: int) -> str:
    try:
        return enum_type(value).name.lower()
    except ValueError:
        return f"unknown({value})"


def struct_bytes(value: Structure) -> bytes:
    """The exact bytes of a struct (what the kernel hashes a key by)."""
    return bytes(value)
