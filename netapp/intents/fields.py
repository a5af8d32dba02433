"""Limits and field types every intent model shares: ids, numbers in range, prefixes, names.

Each network function's models (`native`, `cpus`, `alternatives`, `legacy`) build on these; the
data plane's limits live here because the published schema carries them.
"""

from __future__ import annotations

import ipaddress
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import Any, Annotated, Literal, Optional, Union

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    Strict,
    StringConstraints,
    WithJsonSchema,
)

# Limits the data plane imposes on intents (DPP_MAX_CPUS, DPP_MAX_ALT_GROUPS, DPP_MAX_ALT_MEMBERS in
# dpp_consts.h). They are part of the published schema, so they live here; tests/dataplane/test_abi.py
# checks them against the binding's mirror of the header.
MAX_CPUS = 128
MAX_ALT_GROUPS = 64
MAX_ALT_MEMBERS = 8

MAX_PRIORITY = 65535
DEFAULT_PRIORITY = 100
MAX_U24 = (1 << 24) - 1
MAX_U32 = (1 << 32) - 1
MAX_I64 = (1 << 63) - 1  # SQLite's INTEGER: the bound of numbers nothing else bounds (list offsets)

PROTOCOL_NUMBERS = {"icmp": 1, "tcp": 6, "udp": 17, "icmpv6": 58, "sctp": 132}
# Only these carry the 16-bit port pair the data plane compares.
PORT_PROTOCOLS = frozenset({PROTOCOL_NUMBERS["tcp"], PROTOCOL_NUMBERS["udp"], PROTOCOL_NUMBERS["sctp"]})


def _ranged(low: int, high: int) -> Any:
    """A strict integer in [low, high]: JSON numbers only, no "5" strings, no booleans."""
    return Annotated[int, Strict(), Field(ge=low, le=high)]


Priority = _ranged(0, MAX_PRIORITY)
Vlan = _ranged(1, 4094)
U32 = _ranged(0, MAX_U32)
Qfi = _ranged(0, 63)
Dscp = _ranged(0, 63)
Port = _ranged(0, 65535)
CpuId = _ranged(0, MAX_CPUS - 1)
GroupId = _ranged(0, MAX_ALT_GROUPS - 1)
ProtocolNumber = _ranged(0, 255)

IntentId = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]
# Linux accepts up to IFNAMSIZ - 1 characters, none of them '/', ':' or whitespace (dev_valid_name),
# and a C string ends at NUL: a name holding one could never be looked up.
InterfaceName = Annotated[str, StringConstraints(min_length=1, max_length=15, pattern=r"^[^\s/:\x00]+$")]
ProtocolName = Literal["tcp", "udp", "icmp", "icmpv6", "sctp"]
OverlayName = Literal["vxlan", "geneve", "gre"]


def lower_if_str(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


Protocol = Annotated[Union[ProtocolName, ProtocolNumber], BeforeValidator(lower_if_str)]


def _parse_prefix(value: Any) -> Any:
    """Accept an address or a prefix; clear host bits so equal matches compare equal."""
    if isinstance(value, (IPv4Network, IPv6Network)):
        return value
    if isinstance(value, (IPv4Address, IPv6Address)):
        return ipaddress.ip_network(value)
    if not isinstance(value, str):
        raise ValueError("must be an IPv4 or IPv6 address or prefix, as a string")
    try:
        return ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 or IPv6 address or prefix") from None


Prefix = Annotated[
    Union[IPv4Network, IPv6Network],
    BeforeValidator(_parse_prefix),
    PlainSerializer(str, return_type=str, when_used="json"),
    WithJsonSchema(
        {
            "type": "string",
            "description": "IPv4 or IPv6 address or prefix; host bits are cleared (10.1.2.3/8 -> 10.0.0.0/8)",
            "examples": ["10.0.0.0/8", "2001:db8::/32", "192.168.0.140"],
        }
    ),
]


def _parse_address(value: Any) -> Any:
    """One host's address, given as a string (pydantic would read 167772161 as one)."""
    if isinstance(value, (IPv4Address, IPv6Address)):
        return value
    if not isinstance(value, str):
        raise ValueError("must be an IPv4 or IPv6 address, as a string")
    try:
        return ipaddress.ip_address(value.strip())
    except ValueError:
        raise ValueError(f"{value!r} is not an IPv4 or IPv6 address") from None


Address = Annotated[
    Union[IPv4Address, IPv6Address],
    BeforeValidator(_parse_address),
    PlainSerializer(str, return_type=str, when_used="json"),
    WithJsonSchema(
        {"type": "string", "description": "IPv4 or IPv6 address", "examples": ["198.51.100.7", "2001:db8::7"]}
    ),
]


def _parse_tunnel_address(value: Any) -> Any:
    """A tunnel endpoint's address: one host, as the data plane looks addresses up exactly."""
    if isinstance(value, str) and "/" in value:
        raise ValueError(
            f"{value!r} is a prefix: tunnel endpoints are matched exactly, give one IPv4 or IPv6 address"
        )
    return _parse_address(value)


TunnelAddress = Annotated[
    Union[IPv4Address, IPv6Address],
    BeforeValidator(_parse_tunnel_address),
    PlainSerializer(str, return_type=str, when_used="json"),
    WithJsonSchema(
        {
            "type": "string",
            "description": "IPv4 or IPv6 address of a GTP-U tunnel's endpoint (one host, not a prefix)",
            "examples": ["198.51.100.7", "2001:db8::7"],
        }
    ),
]

MacAddress = Annotated[
    str,
    StringConstraints(pattern=r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$"),
    AfterValidator(str.lower),
]


def protocol_number(protocol: Union[str, int, None]) -> Optional[int]:
    """IANA protocol number of a protocol name or number (None stays None)."""
    if protocol is None or isinstance(protocol, int):
        return protocol
    return PROTOCOL_NUMBERS[protocol]

