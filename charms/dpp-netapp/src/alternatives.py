"""The `dpp-alternatives` relation's data and the alternative node group built from it (no ops import).

Each unit publishes where its peers forward to it (interfaces/dpp-alternatives.md has the schema);
each unit turns what its peers published into one group for `PUT /api/v1/alternatives/{id}`.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Iterable, Mapping, Optional

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from netapp_workload import InterfaceAddress

# Members a group can have (netapp/intents/models.py MAX_ALT_MEMBERS; tests/charm checks it).
MAX_ALT_MEMBERS = 8

MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")


class PeerAddress(BaseModel):
    """One unit's databag: where the others forward packets to reach it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    mac: str
    ip4: Optional[str] = None
    ip6: Optional[str] = None

    @field_validator("mac", mode="before")
    @classmethod
    def _check_mac(cls, value: object) -> object:
        mac = str(value).strip().lower()
        if not MAC.match(mac):
            raise ValueError(f"{value!r} is not a MAC address like 02:00:00:00:00:01")
        # A group or all-zero address would flood or be dropped, never reach the one peer.
        if int(mac[:2], 16) & 1 or mac == "00:00:00:00:00:00":
            raise ValueError(f"{mac} is not a unicast MAC address")
        return mac

    @field_validator("ip4", "ip6", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        # Juju drops empty keys, but a peer may still write "" for "none".
        return value or None

    @field_validator("ip4")
    @classmethod
    def _check_ip4(cls, value: Optional[str]) -> Optional[str]:
        return None if value is None else _unicast(ipaddress.IPv4Address, value)

    @field_validator("ip6")
    @classmethod
    def _check_ip6(cls, value: Optional[str]) -> Optional[str]:
        return None if value is None else _unicast(ipaddress.IPv6Address, value)

    @model_validator(mode="after")
    def _needs_an_address(self) -> "PeerAddress":
        # The data plane rewrites the outer destination IP; with none the peer would not accept the packet.
        if self.ip4 is None and self.ip6 is None:
            raise ValueError("ip4 or ip6 is required")
        return self


def _unicast(kind: type, value: str) -> str:
    try:
        address = kind(value.strip())
    except ValueError:
        raise ValueError(f"{value!r} is not an {kind.__name__[:4]} address") from None
    if address.is_unspecified or address.is_multicast or address.is_loopback:
        raise ValueError(f"{address} is not a unicast address of another machine")
    return str(address)


def databag(own: Optional[InterfaceAddress]) -> dict[str, str]:
    """What this unit publishes; every key present, "" for absent (Juju removes empty keys)."""
    if own is None:
        return {"mac": "", "ip4": "", "ip6": ""}
    return {"mac": own.mac, "ip4": own.ip4 or "", "ip6": own.ip6 or ""}


def parse_peers(
    seen: Iterable[tuple[str, Mapping[str, str]]],
) -> tuple[dict[str, PeerAddress], dict[str, str]]:
    """Valid peers by unit name (the first valid databag of a unit wins) and why others were skipped."""
    peers: dict[str, PeerAddress] = {}
    rejected: dict[str, str] = {}
    for unit, data in seen:
        if unit in peers:
            continue
        try:
            peers[unit] = PeerAddress.model_validate(dict(data))
        except ValidationError as exc:
            rejected[unit] = _reason(exc)
            continue
        rejected.pop(unit, None)
    return peers, rejected


def unit_order(unit: str) -> tuple[str, int]:
    """Sort key of a unit name: application, then unit number as a number (app/10 after app/9)."""
    app, _, number = unit.rpartition("/")
    return (app, int(number)) if number.isdigit() else (unit, -1)


def build_group(
    group_id: int, interface: str, source_mac: str, peers: Mapping[str, PeerAddress]
) -> tuple[Optional[dict[str, Any]], list[str]]:
    """The group of `peers` in unit order (stable members, stable flow hashing), and the units left out.

    Packets leave through our own `interface` with its MAC as source: a VIM's port security drops
    frames whose source is not the port's own MAC.
    """
    ordered = sorted(peers, key=unit_order)
    kept, left_out = ordered[:MAX_ALT_MEMBERS], ordered[MAX_ALT_MEMBERS:]
    if not kept:
        return None, left_out
    members = [_member(peers[unit], interface, source_mac) for unit in kept]
    return {"id": group_id, "members": members}, left_out


def _member(peer: PeerAddress, interface: str, source_mac: str) -> dict[str, Any]:
    # Every peer is a NetApp, which answers GTP-U echo: probe it, and forward only while it answers.
    return {
        "mac": peer.mac,
        "ip4": peer.ip4,
        "ip6": peer.ip6,
        "interface": interface,
        "source_mac": source_mac,
        "probe": True,
    }


def _reason(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{field}: {message}" if field else message)
    return "; ".join(parts)
