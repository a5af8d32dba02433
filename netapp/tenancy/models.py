"""What a tenant may install: the traffic it owns (grants), or the whole site; and its quotas.

An administrator writes a tenant's record (`PUT /api/v1/tenants/{tenant}`). Every intent a
confined tenant installs, directly, in a batch, as a legacy message or as a slice member, is kept
inside its grants (netapp.tenancy.confine), so that no rule of one tenant can ever act on a packet
of another: grants of different tenants never intersect. Where its rules may send that traffic is
its `destinations` (netapp.tenancy.destinations).
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, model_validator

from netapp.intents.errors import FieldError
from netapp.intents.models import InterfaceName, OverlayName, Prefix, U32, Vlan, check_one_family, check_vni
from netapp.service.contract import Snssai

TenantName = str  # the token file's `tenant` (pattern there)
TENANT_PATTERN = r"^[A-Za-z0-9._-]+$"

# Defaults of TenantQuotas: generous for one site, small enough that one tenant cannot take the
# 65,536 rule slots of a default instance from all the others.
DEFAULT_MAX_INTENTS = 10_000
DEFAULT_MAX_SLICES = 100
DEFAULT_MAX_SUBSCRIPTIONS = 100
DEFAULT_MAX_STREAMS = 4
# The node's FRER stream handles (4,095) are shared: one tenant may not take them all by default.
DEFAULT_MAX_FRER_STREAMS = 256
DEFAULT_MAX_ATSSS_SESSIONS = 1024
# MEC 015 flow filters' classifier rules (netapp.atsss.flows): four sessions of 16 filters of 16 port pairs.
DEFAULT_MAX_ATSSS_FLOW_RULES = 1024
MAX_GRANTS = 64


class TeidRange(BaseModel):
    """GTP-U TEIDs first..last, both included."""

    model_config = ConfigDict(extra="forbid")

    first: U32
    last: U32

    @model_validator(mode="after")
    def _ordered(self) -> "TeidRange":
        if self.last < self.first:
            raise FieldError("last", f"last ({self.last}) is below first ({self.first})")
        return self

    def __contains__(self, teid: int) -> bool:
        return self.first <= teid <= self.last

    def __str__(self) -> str:
        if self.first == self.last:
            return f"teid {self.first:#x}"
        return f"teids {self.first:#x}..{self.last:#x}"


class TrafficGrant(BaseModel):
    """Packets a tenant owns: those that match every field given (at least one). The fields are
    the intent match's, compared the same way; `teids` is a range."""

    model_config = ConfigDict(extra="forbid")

    interface: Optional[InterfaceName] = Field(None, description="ingress interface name")
    vlan: Optional[Vlan] = Field(None, description="outermost 802.1Q VLAN id")
    overlay: Optional[OverlayName] = Field(None, description="overlay the packets arrive in")
    vni: Optional[U32] = Field(None, description="VXLAN/GENEVE VNI or GRE key; needs overlay")
    teids: Optional[TeidRange] = Field(None, description="GTP-U TEIDs, a range")
    src: Optional[Prefix] = Field(None, description="source prefix of the innermost IP header (uplink UEs)")
    dst: Optional[Prefix] = Field(None, description="destination prefix of the innermost IP header (downlink UEs)")

    @model_validator(mode="after")
    def _check(self) -> "TrafficGrant":
        if all(getattr(self, name) is None for name in type(self).model_fields):
            raise FieldError("", "a grant needs at least one field: a grant of everything is `site: true`")
        check_vni(self.vni, self.overlay)
        check_one_family(self.src, self.dst)
        return self

    def describe(self) -> str:
        """e.g. "vxlan vni 1093, teids 0x1000..0x1fff" (for errors and the API)."""
        parts = []
        if self.interface is not None:
            parts.append(f"interface {self.interface}")
        if self.vlan is not None:
            parts.append(f"vlan {self.vlan}")
        if self.overlay is not None:
            parts.append(self.overlay if self.vni is None else f"{self.overlay} vni {self.vni}")
        if self.teids is not None:
            parts.append(str(self.teids))
        if self.src is not None:
            parts.append(f"src {self.src}")
        if self.dst is not None:
            parts.append(f"dst {self.dst}")
        return ", ".join(parts)


class Destinations(BaseModel):
    """Where a confined tenant's rules may send its traffic: out of these interfaces, towards these
    addresses. Without it, a confined tenant's rules may send out of the interfaces its grants name,
    and towards no address (netapp.tenancy.destinations)."""

    model_config = ConfigDict(extra="forbid")

    interfaces: list[InterfaceName] = Field(
        default_factory=list,
        max_length=MAX_GRANTS,
        description="interfaces its packets may leave by: redirect, duplicate, a tunnel action's interface, an "
        "alternative member's egress, FRER member ports and delivery, ATSSS paths",
    )
    peers: list[Prefix] = Field(
        default_factory=list,
        max_length=MAX_GRANTS,
        description="addresses its packets may be sent towards: a tunnel action's peer or `towards`, an "
        "alternative member's ip4 or ip6",
    )


class TenantQuotas(BaseModel):
    """Most of each kind of object the tenant may hold at once."""

    model_config = ConfigDict(extra="forbid")

    intents: StrictInt = Field(DEFAULT_MAX_INTENTS, ge=0, le=1 << 24, description="intents, slice members' included")
    slices: StrictInt = Field(DEFAULT_MAX_SLICES, ge=0, le=1 << 20)
    subscriptions: StrictInt = Field(DEFAULT_MAX_SUBSCRIPTIONS, ge=0, le=10_000)
    streams: StrictInt = Field(DEFAULT_MAX_STREAMS, ge=0, le=1024, description="telemetry streams open at once")
    frer_streams: StrictInt = Field(
        DEFAULT_MAX_FRER_STREAMS, ge=0, le=4095, description="FRER protected streams (the node has 4,095 handles)"
    )
    atsss_sessions: StrictInt = Field(
        DEFAULT_MAX_ATSSS_SESSIONS, ge=0, le=16384, description="ATSSS sessions (the node has room for 16,384 UEs)"
    )
    atsss_flow_rules: StrictInt = Field(
        DEFAULT_MAX_ATSSS_FLOW_RULES, ge=0, le=65536,
        description="classifier rules of MEC 015 MTS sessions' flow filters, one a pair of a filter's ports (the "
        "classifier's rule slots are shared with every tenant's intents)",
    )


class TenantSpec(BaseModel):
    """What an administrator grants a tenant (the body of PUT /api/v1/tenants/{tenant})."""

    model_config = ConfigDict(extra="forbid")

    site: StrictBool = Field(
        False,
        description="true: the tenant's rules are site-wide, they may act on any traffic (the operator's own "
        "tenants); false: confined to `traffic`",
    )
    traffic: list[TrafficGrant] = Field(
        default_factory=list,
        max_length=MAX_GRANTS,
        description="the traffic the tenant owns: any of these grants; grants of different tenants never intersect",
    )
    snssais: list[Snssai] = Field(
        default_factory=list, max_length=MAX_GRANTS, description="S-NSSAIs the tenant's slices may use; empty: any"
    )
    destinations: Optional[Destinations] = Field(
        None,
        description="where the tenant's rules may send its traffic; null: out of the interfaces its grants name, "
        "towards no address (a site tenant: anywhere)",
    )
    quotas: TenantQuotas = Field(default_factory=TenantQuotas)

    @model_validator(mode="after")
    def _site_or_traffic(self) -> "TenantSpec":
        if self.site and self.traffic:
            raise FieldError("traffic", "a site tenant owns all traffic: leave traffic empty, or set site false")
        if self.site and self.destinations is not None:
            raise FieldError("destinations", "a site tenant may send anywhere: leave destinations out, or set site false")
        return self


class TenantUsage(BaseModel):
    intents: int
    slices: int
    subscriptions: int = 0
    streams: int = 0
    frer_streams: int = 0
    atsss_sessions: int = 0


class TenantRecord(BaseModel):
    """A tenant as stored, and as the API shows it (with its usage)."""

    tenant: str
    spec: TenantSpec
    updated_at: datetime
    revision: int = 1
    usage: Optional[TenantUsage] = None
