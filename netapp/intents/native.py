"""The native intent (api/intents.md): which packets (`Match`), what to do (`Action`), how much it matters."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    Strict,
    StrictInt,
    StringConstraints,
    model_serializer,
    model_validator,
)

from netapp.intents.errors import FieldError
from netapp.intents.fields import (
    Address,
    TunnelAddress,
    DEFAULT_PRIORITY,
    MAX_U24,
    PORT_PROTOCOLS,
    CpuId,
    Dscp,
    GroupId,
    IntentId,
    InterfaceName,
    OverlayName,
    Port,
    Prefix,
    Priority,
    Protocol,
    Qfi,
    U32,
    Vlan,
    protocol_number,
)
from netapp.duplicate.abi import MAX_COPIES
from netapp.frer.protect import Protect
from netapp.qos.abi import BURST_MAX, RATE_MAX, RATE_MIN


def check_vni(vni: Optional[int], overlay: Optional[str]) -> None:
    """A VNI needs its overlay, and fits it (24 bits; GRE keys 32). Also for tenants' grants."""
    if vni is None:
        return
    if overlay is None:
        raise FieldError("vni", "vni needs overlay (vxlan, geneve or gre)")
    if overlay != "gre" and vni > MAX_U24:
        raise FieldError("vni", f"{overlay} VNI {vni} is above 2^24-1 ({MAX_U24})")


def check_one_family(src: Optional[IPv4Network | IPv6Network], dst: Optional[IPv4Network | IPv6Network]) -> None:
    """A packet's src and dst are of one IP family."""
    if src is not None and dst is not None and src.version != dst.version:
        raise FieldError("dst", f"dst is IPv{dst.version} but src is IPv{src.version}")


def without_nulls(data: Any, names: tuple[str, ...]) -> Any:
    """Serialized model data without the members of `names` that are null: fields added later read as
    the model did before them."""
    if isinstance(data, dict):
        for name in names:
            if data.get(name) is None:
                data.pop(name, None)
    return data


class Match(BaseModel):
    """Which packets an intent is about. Every field is optional; an empty match is a catch-all."""

    model_config = ConfigDict(extra="forbid")

    interface: Optional[InterfaceName] = Field(None, description="ingress interface name")
    vlan: Optional[Vlan] = Field(None, description="outermost 802.1Q VLAN id")
    overlay: Optional[OverlayName] = Field(None, description="overlay the packet arrived in")
    vni: Optional[U32] = Field(
        None, description="VXLAN/GENEVE VNI (24 bits) or GRE key (32 bits); needs overlay"
    )
    teid: Optional[U32] = Field(None, description="GTP-U tunnel endpoint id")
    qfi: Optional[Qfi] = Field(None, description="GTP-U PDU Session Container QoS flow id")
    src: Optional[Prefix] = Field(None, description="source prefix of the innermost IP header")
    dst: Optional[Prefix] = Field(None, description="destination prefix of the innermost IP header")
    protocol: Optional[Protocol] = Field(None, description="L4 protocol name or number")
    src_port: Optional[Port] = Field(None, description="L4 source port; needs protocol tcp, udp or sctp")
    dst_port: Optional[Port] = Field(None, description="L4 destination port; needs protocol tcp, udp or sctp")
    dscp: Optional[Dscp] = Field(None, description="DSCP of the innermost IP header")
    tunnel_src: Optional[TunnelAddress] = Field(
        None,
        description="GTP-U only: source address of the IP header carrying the GTP-U header (exact; "
        "inside VXLAN, GENEVE or GRE the inner header's); a packet without GTP-U never matches",
    )
    tunnel_dst: Optional[TunnelAddress] = Field(
        None, description="GTP-U only: destination address of the IP header carrying the GTP-U header (exact)"
    )

    @model_serializer(mode="wrap")
    def _without_unset_tunnel(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A match without tunnel addresses reads as it did before they existed (no null)."""
        return without_nulls(handler(self), ("tunnel_src", "tunnel_dst"))

    @model_validator(mode="after")
    def _check_dependencies(self) -> "Match":
        self._check_vni()
        self._check_families()
        self._check_ports()
        return self

    def _check_vni(self) -> None:
        check_vni(self.vni, self.overlay)

    def _check_families(self) -> None:
        check_one_family(self.src, self.dst)
        family = self.family
        if family == 6 and self.protocol == "icmp":
            raise FieldError("protocol", "icmp with an IPv6 prefix: use icmpv6")
        if family == 4 and self.protocol == "icmpv6":
            raise FieldError("protocol", "icmpv6 with an IPv4 prefix: use icmp")

    def _check_ports(self) -> None:
        for name in ("src_port", "dst_port"):
            if getattr(self, name) is not None and self.protocol_number not in PORT_PROTOCOLS:
                got = "no protocol" if self.protocol is None else f"protocol {self.protocol}"
                raise FieldError(name, f"{name} needs protocol tcp, udp or sctp (got {got})")

    @property
    def family(self) -> Optional[int]:
        """4 or 6 when a prefix fixes the IP family, else None."""
        prefix = self.src if self.src is not None else self.dst
        return None if prefix is None else prefix.version

    @property
    def protocol_number(self) -> Optional[int]:
        return protocol_number(self.protocol)


PoliceAlgorithm = Literal["token_bucket", "fixed_window", "sliding_window", "gcra"]


class Police(BaseModel):
    """Police the intent's packets before its action: those above the rate are dropped (counted by
    the intent's policer and as reason qos_policed). An intent matches one direction of traffic: one
    rate. Unset burst and algorithm are the settings' (qos.default_burst_ms, qos.default_algorithm),
    filled in when the intent is stored."""

    model_config = ConfigDict(extra="forbid")

    rate_bps: StrictInt = Field(ge=RATE_MIN, le=RATE_MAX, description="the most it lets through, bit/s (frames)")
    burst_bytes: Optional[StrictInt] = Field(
        None, ge=1, le=BURST_MAX, description="token bucket: its size; windows: the most a window lets through"
    )
    algorithm: Optional[PoliceAlgorithm] = None


class ActionOptions(BaseModel):
    """What an action may do to the matched packets besides: police them first, protect their flow
    with FRER (netapp.frer.protect)."""

    police: Optional[Police] = Field(None, description="police the matched packets before the action")
    protect: Optional[Protect] = Field(
        None, description="protect the flow with FRER (IEEE 802.1CB): replicate it here or eliminate its duplicates"
    )

    @model_serializer(mode="wrap")
    def _without_unset_options(self, handler: SerializerFunctionWrapHandler) -> Any:
        """An action without an option reads as it did before the option existed (no null)."""
        return without_nulls(handler(self), ("police", "protect"))


Policed = ActionOptions  # the name it had when police was its one option


class PassAction(ActionOptions):
    """Hand the packet to the kernel stack on the CPU that received it."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["pass"]


class DropAction(BaseModel):
    """Drop the packet."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["drop"]


class SteerAction(ActionOptions):
    """Steer the packet to a CPU (CPUMAP); overflow goes to the intent's alternative group."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["steer"]
    cpu: CpuId


class ForwardAction(ActionOptions):
    """Forward the packet to a member of an alternative node group (MAC/IP rewrite, XDP_TX)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["forward"]
    alternative: GroupId


class RedirectAction(ActionOptions):
    """Redirect the packet out of another interface (DEVMAP)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["redirect"]
    interface: InterfaceName


class OuterTunnel(BaseModel):
    """The tunnel a packet is moved into: GTP-U, where the packet keeps its TEID and its PDU Session
    Container (QFI) if it had one; or GRE, carrying the IP packet (a GTP-U packet's UE packet)."""

    model_config = ConfigDict(extra="forbid")

    protocol: Literal["gtpu", "gre"] = Field("gtpu", description="the tunnel's kind: GTP-U/UDP/IP or GRE/IP")
    peer: Address = Field(description="the tunnel's far end: the outer destination, reached through the router")
    source: Optional[Address] = Field(
        None,
        description="the outer source, of the peer's family; null: the address the packet's own GTP-U tunnel was "
        "sent to (a packet without GTP-U then gets the default verdict)",
    )
    key: Optional[U32] = Field(None, description="gre: the key every packet carries (RFC 2890); null: no key")

    @model_validator(mode="after")
    def _one_family(self) -> "OuterTunnel":
        if self.source is not None and self.source.version != self.peer.version:
            raise FieldError("source", f"source is IPv{self.source.version} but peer is IPv{self.peer.version}")
        if self.key is not None and self.protocol != "gre":
            raise FieldError("key", "a GTP-U tunnel keeps the packet's own TEID: a key is for protocol gre")
        return self


class TunnelAction(ActionOptions):
    """Take a GTP-U packet out of its tunnel (decapsulate), or move it into another one (encapsulate:
    GTP-U or GRE), then send it out of an interface or towards an address (MEC 011's
    FORWARD_DECAPSULATED and FORWARD_ENCAPSULATED, netapp.mec.tunnels). A packet that arrived without
    GTP-U is sent as it came when decapsulating, carried as it is into GRE, and gets the default
    verdict when moved into GTP-U."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["tunnel"]
    decapsulate: Annotated[bool, Strict()] = Field(
        False, description="remove the headers up to and including GTP-U (overlay and extension headers too)"
    )
    encapsulate: Optional[OuterTunnel] = Field(
        None, description="replace the packet's tunnel with this one; the packet then goes towards its peer"
    )
    interface: Optional[InterfaceName] = Field(None, description="out of this interface, the frame's MACs kept")
    towards: Optional[Address] = Field(None, description="towards this address, its next hop from the host's FIB")

    @model_validator(mode="after")
    def _one_way_out(self) -> "TunnelAction":
        if self.encapsulate is not None:
            if self.decapsulate:
                raise FieldError("decapsulate", "encapsulate replaces the packet's tunnel already: leave decapsulate false")
            for name in ("interface", "towards"):
                if getattr(self, name) is not None:
                    raise FieldError(name, "an encapsulated packet goes towards its tunnel's peer: leave it unset")
            return self
        if (self.interface is None) == (self.towards is None):
            raise FieldError("interface", "give one way out: interface or towards")
        return self


class DuplicateAction(ActionOptions):
    """Send a copy of the packet out of each of several interfaces, as it came, or decapsulated out of
    those `decapsulate` names (a DEVMAP broadcast, FRER's replication: netapp.duplicate)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["duplicate"]
    interfaces: list[InterfaceName] = Field(
        min_length=2, max_length=MAX_COPIES,
        description=f"the interfaces a copy leaves by, each at most once (2 to {MAX_COPIES}; one: use redirect)",
    )
    decapsulate: list[InterfaceName] = Field(
        default_factory=list, max_length=MAX_COPIES,
        description="those of `interfaces` whose copy of a GTP-U packet leaves decapsulated: its UE packet behind "
                    "the outermost Ethernet header's addresses (a copy whose GTP-U payload is not IP is dropped, "
                    "counted as tunnel_copy_failed); a packet without GTP-U leaves as it came",
    )

    @model_validator(mode="after")
    def _each_once(self) -> "DuplicateAction":
        for n, name in enumerate(self.interfaces):
            if name in self.interfaces[:n]:
                raise FieldError(f"interfaces[{n}]", f"{name!r} is already interfaces[{self.interfaces.index(name)}]: "
                                                     "each interface gets one copy")
        for n, name in enumerate(self.decapsulate):
            if name not in self.interfaces:
                raise FieldError(f"decapsulate[{n}]", f"{name!r} is not one of interfaces "
                                                      f"({', '.join(self.interfaces)}): only a copy's interface decapsulates")
            if name in self.decapsulate[:n]:
                raise FieldError(f"decapsulate[{n}]", f"{name!r} is already decapsulate[{self.decapsulate.index(name)}]")
        return self


Action = Annotated[
    Union[PassAction, DropAction, SteerAction, ForwardAction, RedirectAction, TunnelAction, DuplicateAction],
    Field(discriminator="type"),
]


class Intent(BaseModel):
    """One native intent: which packets (match), what to do (action), and how much it matters."""

    model_config = ConfigDict(extra="forbid")

    id: IntentId
    priority: Priority = Field(DEFAULT_PRIORITY, description="higher wins when several intents match")
    traffic_class: Literal["priority", "best-effort"] = Field(
        "priority",
        description="best-effort traffic is passed locally and forwarded to alternatives when the CPU is overloaded",
    )
    match: Match
    action: Action
    alternative: Optional[GroupId] = Field(
        None,
        description="overflow alternative group for steer or best-effort; null: the site default",
    )
    label: Optional[Annotated[str, StringConstraints(max_length=256)]] = None

    @model_validator(mode="after")
    def _check_protect(self) -> "Intent":
        protect = getattr(self.action, "protect", None)
        if protect is not None and protect.role == "replicate" and not isinstance(self.action, PassAction):
            raise FieldError(
                "action.protect.role",
                f"replicate sends the flow's copies out of its member ports before any action: "
                f"a {self.action.type} action would never see them (use pass)",
            )
        return self

    @model_validator(mode="after")
    def _check_alternative(self) -> "Intent":
        if self.alternative is None:
            return self
        if isinstance(self.action, ForwardAction):
            if self.alternative != self.action.alternative:
                raise FieldError(
                    "alternative",
                    f"differs from action.alternative ({self.action.alternative}); a forward intent has one group",
                )
        elif not isinstance(self.action, SteerAction) and self.traffic_class != "best-effort":
            raise FieldError(
                "alternative",
                f"has no effect on a {self.action.type} intent: only steer or best-effort traffic overflows",
            )
        return self

    @property
    def best_effort(self) -> bool:
        return self.traffic_class == "best-effort"

