"""ETSI GS MEC 011 v2.1.1 data types (MecAppSupportApi: TrafficRule and what it holds, DnsRule), and
the application instance an administrator declares.

The ETSI types keep ETSI's names, enums and required fields (clause 7.1.2; the OpenAPI document
MecAppSupportApi.json), so that the API's answers are what a MEC application expects. Their fields are
as loose as ETSI's (addresses and ports are strings, lists are lists): what the data plane cannot do
with a value is said by the compiler (netapp.mec.compiler), naming the field, not by a schema of ours.
"""

from __future__ import annotations

import ipaddress
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from netapp.intents.fields import MAX_I64

# int32, as ETSI's document says of its integers ("contentEncoding": "int32").
Int32 = Annotated[int, Field(ge=-(1 << 31), le=(1 << 31) - 1)]
# Ids of an application instance and of a traffic rule: ETSI says "string"; ours are bounded and
# made of what a path segment holds as it is (RFC 3986 unreserved, sub-delims, ':' and '@'), as
# they appear in paths.
MEC_ID_PATTERN = r"^[A-Za-z0-9._~!$&'()*+,;=:@-]+$"
MEC_ID_MAX = 128
MecId = Annotated[str, StringConstraints(min_length=1, max_length=MEC_ID_MAX, pattern=MEC_ID_PATTERN)]
_FAMILIES = {"IP_V4": 4, "IP_V6": 6}  # DnsRule.IpAddressType
MEC_APP_SUPPORT = "/mec_app_support/v1"  # where MEC 011's MecAppSupportApi is served (ETSI's server URL)


class FilterType(str, Enum):
    """TrafficRule.FilterType: FLOW matches UE->EPC packets and their reverse; PACKET the packets as written."""

    FLOW = "FLOW"
    PACKET = "PACKET"


class RuleAction(str, Enum):
    """TrafficRule.Action: what the MEC host's data plane does with a matching packet."""

    DROP = "DROP"
    FORWARD_DECAPSULATED = "FORWARD_DECAPSULATED"
    FORWARD_ENCAPSULATED = "FORWARD_ENCAPSULATED"
    PASSTHROUGH = "PASSTHROUGH"
    DUPLICATE_DECAPSULATED = "DUPLICATE_DECAPSULATED"
    DUPLICATE_ENCAPSULATED = "DUPLICATE_ENCAPSULATED"


class RuleState(str, Enum):
    """TrafficRule.State: an INACTIVE rule is kept, not installed."""

    ACTIVE = "ACTIVE"
    INACTIVE = "INACTIVE"


class InterfaceType(str, Enum):
    """DestinationInterface.InterfaceType."""

    TUNNEL = "TUNNEL"
    MAC = "MAC"
    IP = "IP"


class TunnelType(str, Enum):
    """TunnelInfo.TunnelType."""

    GTP_U = "GTP_U"
    GRE = "GRE"


class _Etsi(BaseModel):
    # ETSI's types do not forbid other members; a member we do not know is kept out of the answer.
    model_config = ConfigDict(extra="ignore", use_enum_values=True)


class TunnelInfo(_Etsi):
    """The tunnel a packet is forwarded in."""

    tunnelType: TunnelType
    tunnelDstAddress: Optional[str] = Field(None, description="Destination address of the tunnel")
    tunnelSrcAddress: Optional[str] = Field(None, description="Source address of the tunnel")
    tunnelSpecificData: Optional[Any] = Field(
        None, description="MEC 010-2's TunnelInfo member (v2.1.1's MEC 011 document has none, and allows it): "
        "for GRE the key, 0 to 4294967295 (netapp.mec.compiler)",
    )


class DestinationInterface(_Etsi):
    """Where matching packets go: one for FORWARD_* and PASSTHROUGH, two for DUPLICATE_*, none for DROP."""

    interfaceType: InterfaceType
    tunnelInfo: Optional[TunnelInfo] = None
    srcMacAddress: Optional[str] = Field(None, description="MAC address of the interface")
    dstMacAddress: Optional[str] = Field(None, description="MAC address of the destination")
    dstIpAddress: Optional[str] = Field(None, description="IP address of the remote destination")


class TrafficFilter(_Etsi):
    """Which packets a rule is about (every member optional)."""

    srcAddress: Optional[list[str]] = None
    dstAddress: Optional[list[str]] = None
    srcPort: Optional[list[str]] = None
    dstPort: Optional[list[str]] = None
    protocol: Optional[list[str]] = None
    token: Optional[list[str]] = None
    srcTunnelAddress: Optional[list[str]] = None
    tgtTunnelAddress: Optional[list[str]] = None
    srcTunnelPort: Optional[list[str]] = None
    dstTunnelPort: Optional[list[str]] = None
    qCI: Optional[Int32] = None
    dSCP: Optional[Int32] = None
    tC: Optional[Int32] = None


class TrafficRule(_Etsi):
    """MEC 011 TrafficRule: a filter, an action, where matching packets go, and whether it is on.

    dstInterface: MEC 011's text asks for two values for DUPLICATE_* (one for FORWARD_* and
    PASSTHROUGH), and its later documents (v2.2.1 on) type the member as a list of up to two, but
    ETSI's v2.1.1 document, the one served, types it as one object. A rule is taken either way: a
    list in dstInterface, or v2.1.1's object with every destination in dstInterfaces, a member that
    document does not list and allows. It is answered in v2.1.1's shape: dstInterface the first
    destination, and dstInterfaces all of them when there are more than one, so that an answer
    validates against ETSI's document and, put back, is the same rule."""

    trafficRuleId: MecId
    filterType: FilterType
    priority: Int32 = Field(description="0 (highest) to 255 (lowest), MEC 011 clause 7.1.2.2")
    trafficFilter: list[TrafficFilter]
    action: RuleAction
    dstInterface: Optional[Union[DestinationInterface, list[DestinationInterface]]] = Field(
        None, description="one (ETSI's v2.1.1 document; answered so), or a list: two values for DUPLICATE_*"
    )
    dstInterfaces: Optional[list[DestinationInterface]] = Field(
        None, description="every destination interface, when there are more than one (DUPLICATE_*'s two); "
        "dstInterface is then the first"
    )
    state: RuleState

    @model_validator(mode="after")
    def _answered_as_v2_1_1(self) -> "TrafficRule":
        destinations = self.dstInterface if isinstance(self.dstInterface, list) else None
        if self.dstInterfaces is not None:
            if destinations is not None and destinations != self.dstInterfaces:
                raise ValueError("dstInterface is a list other than dstInterfaces: give the destinations once")
            if destinations is None and self.dstInterface not in (None, *self.dstInterfaces[:1]):
                raise ValueError("dstInterface is not dstInterfaces[0]: dstInterface names the first destination")
            destinations = self.dstInterfaces
        if destinations is not None:
            self.dstInterface = destinations[0] if destinations else None
            self.dstInterfaces = destinations if len(destinations) > 1 else None
        return self

    def destinations(self) -> list[DestinationInterface]:
        """Every destination interface the rule names, in order."""
        if self.dstInterfaces is not None:
            return self.dstInterfaces
        return [] if self.dstInterface is None else [self.dstInterface]  # type: ignore[list-item]


class DnsRule(_Etsi):
    """MEC 011 DnsRule: a name the MEC platform's DNS answers with the application's address."""

    dnsRuleId: MecId
    domainName: str = Field(min_length=1, max_length=253)
    ipAddressType: Literal["IP_V6", "IP_V4"]
    ipAddress: str
    ttl: Optional[Int32] = None
    state: RuleState

    def problem(self) -> Optional[tuple[str, str]]:
        """(field, why) of what makes the rule unusable, None if nothing does."""
        try:
            address = ipaddress.ip_address(self.ipAddress.strip())
        except ValueError:
            return "ipAddress", f"{self.ipAddress!r} is not an IP address"
        if address.version != _FAMILIES[self.ipAddressType]:
            return "ipAddress", f"{self.ipAddress!r} is not an address of ipAddressType {self.ipAddressType}"
        if self.ttl is not None and self.ttl < 0:
            return "ttl", f"{self.ttl}: a time to live is 0 or more seconds"
        return None


class MecApplicationSpec(BaseModel):
    """An application instance as an administrator declares it (or its AppD's onboarding makes it,
    netapp.mec.onboarding): its id, the tenant that owns it, and its traffic rules."""

    model_config = ConfigDict(extra="forbid")

    appInstanceId: MecId
    tenant: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")] = Field(
        description="the tenant whose traffic the application's rules act on"
    )
    appName: Optional[Annotated[str, StringConstraints(max_length=256)]] = None
    trafficRules: list[TrafficRule] = Field(default_factory=list, max_length=64)
    dnsRules: list[DnsRule] = Field(default_factory=list, max_length=64, description="the AppD's appDNSRule")


class MecApplication(MecApplicationSpec):
    """An application instance as stored, with where it is in its life (READY once it said
    confirm_ready, MEC 011) and the termination asked of it and not yet confirmed, if any."""

    revision: Annotated[int, Field(ge=1, le=MAX_I64)] = 1
    state: Literal["INSTANTIATED", "READY"] = "INSTANTIATED"
    termination: Optional[Literal["STOPPING", "TERMINATING"]] = None
    terminationDeadline: Optional[datetime] = Field(
        None, description="when the termination's maxGracefulTimeout passes: the operation is done then unless "
        "the application confirmed it first (kept over a restart of the NetApp)",
    )
