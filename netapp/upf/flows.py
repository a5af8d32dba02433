"""SDF filters' flow descriptions: the IPFilterRule of RFC 6733 4.3, as TS 29.244 5.2.1A.2 narrows it.

    permit out <proto> from <src> [<ports>] to <dst> [<ports>]

<proto> is `ip` (any) or a protocol number 0..255; <src>, <dst> are `any`, `assigned` (the UE's
address) or an IPv4/IPv6 address with an optional prefix length; <ports> is a comma-separated list
of ports and ranges (`80`, `1000-2000`). The direction is always `out` (29.244 5.2.1A.2: written for
the downlink, from the remote end to the UE; the uplink swaps source and destination); options
(`frag`, `established`, ...) are refused, as is negation (`!`).
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

MAX_FLOW_DESCRIPTION = 1024


class FlowError(ValueError):
    """A flow description that is not one this UPF takes; the message says which word and why."""


class FlowEnd(BaseModel):
    model_config = ConfigDict(frozen=True)

    network: Optional[str] = Field(None, description="an address or prefix; None: any, or the UE's if assigned")
    assigned: bool = False
    ports: tuple[tuple[int, int], ...] = Field((), description="(first, last) ranges; empty: any port")


class FlowDescription(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    protocol: Optional[int] = Field(None, ge=0, le=255, description="None: any (ip)")
    source: FlowEnd
    destination: FlowEnd


@functools.lru_cache(maxsize=4096)  # the same few descriptions come in session after session
def parse_flow(text: str) -> FlowDescription:
    """The flow description `text`, parsed; FlowError naming the offending word."""
    if len(text) > MAX_FLOW_DESCRIPTION:
        raise FlowError(f"longer than {MAX_FLOW_DESCRIPTION} characters")
    words = text.split()
    if words[:2] != ["permit", "out"]:
        raise FlowError("must begin with 'permit out'")
    if len(words) < 3:
        raise FlowError("the protocol is missing")
    protocol = _protocol(words[2])
    rest = words[3:]
    if not rest or rest[0] != "from":
        raise FlowError("'from' expected after the protocol")
    source, rest = _end(rest[1:], "to")
    if not rest or rest[0] != "to":
        raise FlowError("'to' expected after the source")
    destination, rest = _end(rest[1:], None)
    if rest:
        raise FlowError(f"options are not supported: {' '.join(rest)!r}")
    if (source.ports or destination.ports) and protocol not in (6, 17, 132):
        raise FlowError("ports need protocol 6 (TCP), 17 (UDP) or 132 (SCTP)")
    return FlowDescription(text=text, protocol=protocol, source=source, destination=destination)


def _protocol(word: str) -> Optional[int]:
    if word == "ip":
        return None
    if not word.isdigit() or int(word) > 255:
        raise FlowError(f"protocol {word!r}: 'ip' or a number 0..255")
    return int(word)


def _end(words: list[str], stop: Optional[str]) -> tuple[FlowEnd, list[str]]:
    if not words or words[0] == stop:
        raise FlowError("an address ('any', 'assigned' or an IP address/prefix) is missing")
    word, rest = words[0], words[1:]
    if word.startswith("!"):
        raise FlowError(f"{word!r}: negation is not supported")
    if word == "any":
        end = {"network": None}
    elif word == "assigned":
        end = {"network": None, "assigned": True}
    else:
        try:
            end = {"network": str(ipaddress.ip_network(word, strict=False))}
        except ValueError:
            raise FlowError(f"address {word!r}: 'any', 'assigned' or an IP address/prefix") from None
    if rest and rest[0] != stop and rest[0][:1].isdigit():
        end["ports"] = _ports(rest[0])
        rest = rest[1:]
    return FlowEnd(**end), rest


def _ports(word: str) -> tuple[tuple[int, int], ...]:
    ranges = []
    for part in word.split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            raise FlowError(f"ports {word!r}: ports and ranges (80, 1000-2000) separated by commas")
        low, high = int(first), int(last or first)
        if high > 65535 or low > high:
            raise FlowError(f"ports {part!r}: 0..65535, first not above last")
        ranges.append((low, high))
    return tuple(ranges)
