"""The routes of the private routing tables as the API and the store see them."""

from __future__ import annotations

import ipaddress
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

IFNAMSIZ = 16  # linux/if.h: an interface name is at most 15 characters


def normal_prefix(prefix: str) -> str:
    """A prefix as routes hold it (e.g. 2001:DB8::/32 as 2001:db8::/32); unchanged if it is none."""
    try:
        return str(ipaddress.ip_network(prefix, strict=True))
    except ValueError:
        return prefix


class Route(BaseModel):
    """A route of a network instance's private table: a prefix, and its next hop (a gateway on a
    device, or no gateway: the destinations of the prefix are on the device's link)."""

    model_config = ConfigDict(extra="forbid")

    instance: str = Field(
        min_length=1, max_length=255, description="the network instance (one upf.routing sets to private)"
    )
    prefix: str = Field(description="the destinations, an IPv4 or IPv6 prefix (e.g. 10.0.0.0/8); host bits zero")
    gateway: Optional[str] = Field(
        None, description="the next hop, an address of the prefix's family; none: on-link (the destination itself)"
    )
    device: str = Field(min_length=1, max_length=IFNAMSIZ - 1, description="the egress interface")

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, prefix: str) -> str:
        try:
            return str(ipaddress.ip_network(prefix, strict=True))
        except ValueError as exc:
            raise PydanticCustomError("prefix", "not an IP prefix with its host bits zero (e.g. 10.0.0.0/8): {why}",
                                      {"why": str(exc)}) from None

    @field_validator("gateway")
    @classmethod
    def _gateway(cls, gateway: Optional[str], info: ValidationInfo) -> Optional[str]:
        if gateway is None:
            return None
        try:
            address = ipaddress.ip_address(gateway)
        except ValueError:
            raise PydanticCustomError("gateway", "not an IP address: {gateway!r}", {"gateway": gateway}) from None
        prefix = info.data.get("prefix")
        if prefix is not None and ipaddress.ip_network(prefix).version != address.version:
            raise PydanticCustomError(
                "gateway", "an IPv{version} gateway for an IPv{family} prefix: the gateway must be of the prefix's "
                "family", {"version": address.version, "family": ipaddress.ip_network(prefix).version},
            )
        return str(address)

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network(self.prefix)

    @property
    def next_hop(self) -> Optional[ipaddress.IPv4Address | ipaddress.IPv6Address]:
        """The gateway; None on-link."""
        return None if self.gateway is None else ipaddress.ip_address(self.gateway)


class RouteStatus(Route):
    """A stored route and whether the data path can use it now."""

    resolved: Optional[bool] = Field(
        None,
        description="its next hop (the gateway) has a neighbour entry in the data path; false: its packets go to "
        "the kernel until it has (on-link routes: per destination, not told); null: no data path",
    )
