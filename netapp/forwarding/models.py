"""Alternative node groups: where forward actions and overflow send packets, and how they are
rewritten; and each member's liveness, as the service reports it."""

from __future__ import annotations

from datetime import datetime
from ipaddress import IPv4Address, IPv6Address
from typing import Any, Annotated, Literal, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict, model_validator

from netapp.intents.errors import FieldError
from netapp.intents.fields import MAX_ALT_MEMBERS, GroupId, InterfaceName, MacAddress


def _address_text(value: Any) -> Any:
    """pydantic would read 167772161 or true as an address; JSON gives addresses as strings."""
    if isinstance(value, (bool, int)):
        raise ValueError("an address is a string, e.g. 10.0.0.1 or 2001:db8::1")
    return value


class AlternativeMember(BaseModel):
    """An alternative node: where forwarded packets are rewritten to go."""

    model_config = ConfigDict(extra="forbid")

    mac: MacAddress = Field(description="destination MAC of the node")
    source_mac: Optional[MacAddress] = Field(
        None, description="source MAC to write; null: the packet's old destination MAC"
    )
    ip4: Optional[Annotated[IPv4Address, BeforeValidator(_address_text)]] = Field(
        None, description="rewrite an IPv4 outer destination to this"
    )
    ip6: Optional[Annotated[IPv6Address, BeforeValidator(_address_text)]] = Field(
        None, description="rewrite an IPv6 outer destination to this"
    )
    interface: Optional[InterfaceName] = Field(
        None, description="egress interface; null: back out of the ingress interface (XDP_TX)"
    )
    probe: Annotated[bool, Strict()] = Field(
        False,
        description="probe the node with GTP-U echo at ip4 (else ip6) and forward to it only while "
        "it answers; false: always forwarded to",
    )

    @model_validator(mode="after")
    def _probe_needs_an_address(self) -> "AlternativeMember":
        if self.probe and self.ip4 is None and self.ip6 is None:
            raise FieldError("probe", "probe needs ip4 or ip6: the echo goes to the node's address")
        return self


class AlternativeGroup(BaseModel):
    """A group of alternative nodes; a flow hash picks the member."""

    model_config = ConfigDict(extra="forbid")

    id: GroupId
    members: list[AlternativeMember] = Field(min_length=1, max_length=MAX_ALT_MEMBERS)


class AlternativeMemberStatus(AlternativeMember):
    """A member as configured, and what the liveness probe found (read-only fields)."""

    state: Literal["unprobed", "init", "up", "down"] = Field(
        description="unprobed: probe false (or probing off), always forwarded to; init: probed, no "
        "answer yet; up: answers GTP-U echo; down: no answer for interval x detect_multiplier"
    )
    alive: bool = Field(description="in the group's active set: the data plane forwards to it")
    since: Optional[datetime] = Field(description="when the state last changed; null: never")
    changes: int = Field(description="state changes since the service started")
    last_answer: Optional[datetime] = Field(description="the last GTP-U Echo Response from the node")


class AlternativeGroupStatus(BaseModel):
    """An alternative node group with each member's liveness."""

    id: int
    members: list[AlternativeMemberStatus]
    active: int = Field(description="members forwarded to; 0: overflow takes the default verdict")
