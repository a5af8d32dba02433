"""Intent models, the one schema of the northbound API.

Three shapes of input end up as `Intent`:
- the native format (`Intent`), documented in api/intents.md;
- the paper's "Resources / Action / Params" message (`LegacyMessage`, see `legacy_to_native`);
- an intent document (`--intents FILE`): one intent, a list, or an object with intents, alternative
  node groups, CPUs and site defaults (`parse_document`).

Every rejection names its field (`IntentError`), e.g. `match.vni` or `Resources[0].encapsulationID1`.
"""

from __future__ import annotations

import ipaddress
import re
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import Any, Annotated, Literal, Optional, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    Strict,
    StringConstraints,
    Tag,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from netapp.intents.errors import FieldError, IntentError, join_path

# Limits the data plane imposes on intents (DPP_MAX_CPUS, DPP_MAX_ALT_GROUPS, DPP_MAX_ALT_MEMBERS in
# dpp_consts.h). They are part of the published schema, so they live here; tests/dataplane/test_abi.py
# checks them against the binding's mirror of the header.
MAX_CPUS = 128
MAX_ALT_GROUPS = 64
MAX_ALT_MEMBERS = 8

# A CPU's capacity sets its meter's budget per window, capacity_pps * window / 1 s. The kernel
# counts a window's packets in DPP_METER_TAKEN_BITS (40) bits, and a receiving CPU may take a share
# of up to DPP_METER_SHARE_MAX (64) packets past what is left of the budget
# (dataplane/bpf/nf/steer/meter.h), so the count stays exact for budgets up to 2^40 - 64 packets.
# 2^32 - 1 pps, far above what one CPU can take, keeps that for windows up to 256 s (the service's
# are 1 ms); above 2^64 - 1 the binding's u64 would wrap.
MAX_CAPACITY_PPS = (1 << 32) - 1
# The kernel refuses a CPUMAP queue of more than 16384 frames (cpu_map_update_elem, since Linux
# 4.15); the service also checks the running kernel's limit, which it finds when it starts.
MAX_QUEUE_SIZE = 16384

MAX_PRIORITY = 65535
DEFAULT_PRIORITY = 100
MAX_U24 = (1 << 24) - 1
MAX_U32 = (1 << 32) - 1
MAX_I64 = (1 << 63) - 1  # SQLite's INTEGER: the bound of numbers nothing else bounds (list offsets)

PROTOCOL_NUMBERS = {"icmp": 1, "tcp": 6, "udp": 17, "icmpv6": 58, "sctp": 132}
# Only these carry the 16-bit port pair the data plane compares.
PORT_PROTOCOLS = frozenset({PROTOCOL_NUMBERS["tcp"], PROTOCOL_NUMBERS["udp"], PROTOCOL_NUMBERS["sctp"]})
# The paper's messages give ports without a protocol; its examples are RTP/UDP streams (port 5004).
LEGACY_DEFAULT_PORT_PROTOCOL = "udp"

LEGACY_ID_PREFIX = "legacy-"
LEGACY_MAX_ENCAPSULATIONS = 4

_HEX8 = re.compile(r"^[0-9A-Fa-f]{8}$")
_DECIMAL = re.compile(r"^[0-9]{1,10}$")


# --- Field types -------------------------------------------------------------------------------


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


def _lower_if_str(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


Protocol = Annotated[Union[ProtocolName, ProtocolNumber], BeforeValidator(_lower_if_str)]


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


# --- Native intent -----------------------------------------------------------------------------


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


class PassAction(BaseModel):
    """Hand the packet to the kernel stack on the CPU that received it."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["pass"]


class DropAction(BaseModel):
    """Drop the packet."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["drop"]


class SteerAction(BaseModel):
    """Steer the packet to a CPU (CPUMAP); overflow goes to the intent's alternative group."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["steer"]
    cpu: CpuId


class ForwardAction(BaseModel):
    """Forward the packet to a member of an alternative node group (MAC/IP rewrite, XDP_TX)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["forward"]
    alternative: GroupId


class RedirectAction(BaseModel):
    """Redirect the packet out of another interface (DEVMAP)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["redirect"]
    interface: InterfaceName


Action = Annotated[
    Union[PassAction, DropAction, SteerAction, ForwardAction, RedirectAction],
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


# --- Legacy message of the paper ---------------------------------------------------------------


def _hex8(value: Any) -> Any:
    if not isinstance(value, str) or not _HEX8.match(value):
        raise ValueError(f'must be 8 hexadecimal digits, e.g. "00000445" (got {value!r})')
    return value


def _decimal(value: Any) -> Any:
    """The paper sends numbers as decimal strings; accept those (and plain JSON integers)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _DECIMAL.match(value.strip()):
        return int(value.strip())
    raise ValueError(f'must be a decimal number, e.g. "5004" (got {value!r})')


def _legacy_protocol(value: Any) -> Any:
    if isinstance(value, str) and _DECIMAL.match(value.strip()):
        return int(value.strip())
    return _lower_if_str(value)


HexId = Annotated[
    str,
    BeforeValidator(_hex8),
    WithJsonSchema({"type": "string", "pattern": "^[0-9A-Fa-f]{8}$", "description": "8 hex digits"}),
]


def _decimal_string(low: int, high: int) -> Any:
    return Annotated[
        int,
        Field(ge=low, le=high),
        BeforeValidator(_decimal),
        WithJsonSchema({"type": "string", "pattern": "^[0-9]+$", "description": f"decimal {low}..{high}"}),
    ]


LegacyPort = _decimal_string(0, 65535)
LegacyCpu = _decimal_string(0, MAX_CPUS - 1)
LegacyGroup = _decimal_string(0, MAX_ALT_GROUPS - 1)
LegacyProtocol = Annotated[Union[ProtocolName, ProtocolNumber], BeforeValidator(_legacy_protocol)]
EncapsulationType = Literal["vxlan", "geneve", "gre", "gtp"]

_LEGACY_CONFIG = ConfigDict(extra="forbid", populate_by_name=True)


class LegacyResource(BaseModel):
    """One entry of "Resources": a match criterion, or a level of encapsulation (N = depth, 1 = outer)."""

    model_config = _LEGACY_CONFIG

    resource_id: HexId = Field(alias="resourceId")
    src_ip: Optional[Prefix] = Field(None, alias="srcIP")
    dst_ip: Optional[Prefix] = Field(None, alias="dstIP")
    src_port: Optional[LegacyPort] = Field(None, alias="srcPort")
    dst_port: Optional[LegacyPort] = Field(None, alias="dstPort")
    protocol: Optional[LegacyProtocol] = None
    encapsulation_id1: Optional[HexId] = Field(None, alias="encapsulationID1")
    encapsulation_type1: Optional[EncapsulationType] = Field(None, alias="encapsulationType1")
    encapsulation_id2: Optional[HexId] = Field(None, alias="encapsulationID2")
    encapsulation_type2: Optional[EncapsulationType] = Field(None, alias="encapsulationType2")
    encapsulation_id3: Optional[HexId] = Field(None, alias="encapsulationID3")
    encapsulation_type3: Optional[EncapsulationType] = Field(None, alias="encapsulationType3")
    encapsulation_id4: Optional[HexId] = Field(None, alias="encapsulationID4")
    encapsulation_type4: Optional[EncapsulationType] = Field(None, alias="encapsulationType4")

    @model_validator(mode="after")
    def _check_encapsulations(self) -> "LegacyResource":
        for level in range(1, LEGACY_MAX_ENCAPSULATIONS + 1):
            self._check_encapsulation(level)
        if not self.fields_set_besides_id():
            raise FieldError("resourceId", "resource has no match criterion")
        return self

    def _check_encapsulation(self, level: int) -> None:
        kind = getattr(self, f"encapsulation_type{level}")
        hex_id = getattr(self, f"encapsulation_id{level}")
        if (kind is None) != (hex_id is None):
            missing = f"encapsulationType{level}" if kind is None else f"encapsulationID{level}"
            raise FieldError(missing, f"encapsulationID{level} and encapsulationType{level} go together")
        if kind in ("vxlan", "geneve") and int(hex_id, 16) > MAX_U24:
            raise FieldError(
                f"encapsulationID{level}",
                f"{kind} VNI 0x{hex_id} is above 2^24-1 (0x{MAX_U24:06X})",
            )

    def fields_set_besides_id(self) -> set[str]:
        return {
            name
            for name in type(self).model_fields
            if name != "resource_id" and getattr(self, name) is not None
        }

    def encapsulations(self) -> list[tuple[int, str, int]]:
        """(level, type, numeric id) of every encapsulation this resource describes."""
        found = []
        for level in range(1, LEGACY_MAX_ENCAPSULATIONS + 1):
            kind = getattr(self, f"encapsulation_type{level}")
            if kind is not None:
                found.append((level, kind, int(getattr(self, f"encapsulation_id{level}"), 16)))
        return found


class LegacyAction(BaseModel):
    """ "Action": what to do with the flow (PRIO_QUEUE steers it to the CPU of rx_queue)."""

    model_config = _LEGACY_CONFIG

    action_type: Literal["INSERT", "UPDATE", "DELETE"] = Field(alias="actionType")
    action_name: Literal["PRIO_QUEUE", "DROP", "PASS", "FORWARD"] = Field(alias="actionName")
    flow_hash: HexId
    rx_queue: Optional[LegacyCpu] = None
    alt_group: Optional[LegacyGroup] = None

    @model_validator(mode="after")
    def _check_arguments(self) -> "LegacyAction":
        if self.action_name == "PRIO_QUEUE" and self.rx_queue is None:
            raise FieldError("rx_queue", "PRIO_QUEUE needs rx_queue (the CPU to steer to)")
        if self.action_name == "FORWARD" and self.alt_group is None:
            raise FieldError("alt_group", "FORWARD needs alt_group (the alternative node group)")
        if self.action_name != "PRIO_QUEUE" and self.rx_queue is not None:
            raise FieldError("rx_queue", f"rx_queue has no meaning for {self.action_name}")
        if self.action_name in ("DROP", "PASS") and self.alt_group is not None:
            raise FieldError("alt_group", f"alt_group has no meaning for {self.action_name}")
        return self

    def native_action(self) -> dict[str, Any]:
        if self.action_name == "PRIO_QUEUE":
            return {"type": "steer", "cpu": self.rx_queue}
        if self.action_name == "FORWARD":
            return {"type": "forward", "alternative": self.alt_group}
        return {"type": self.action_name.lower()}


class LegacyParam(BaseModel):
    """One entry of "Params"."""

    model_config = _LEGACY_CONFIG

    param_name: Literal["interfaceName"] = Field(alias="paramName")
    param_value: InterfaceName = Field(alias="paramValue")


class LegacyMessage(BaseModel):
    """The paper's intent message: {"Resources": [...], "Action": {...}, "Params": [...]}."""

    model_config = _LEGACY_CONFIG

    resources: list[LegacyResource] = Field(alias="Resources")
    action: LegacyAction = Field(alias="Action")
    params: list[LegacyParam] = Field(default_factory=list, alias="Params")

    @model_validator(mode="after")
    def _check_combination(self) -> "LegacyMessage":
        self.native_match()
        return self

    def native_match(self) -> dict[str, Any]:
        """The native match these resources and params describe (FieldError on contradictions)."""
        collector = _LegacyMatchCollector()
        for index, resource in enumerate(self.resources):
            collector.add_resource(f"Resources[{index}]", resource)
        for index, param in enumerate(self.params):
            collector.set("interface", param.param_value, f"Params[{index}].paramName")
        return collector.finish()

    def to_intent(self) -> Intent:
        flow_hash = self.action.flow_hash
        alternative = self.action.alt_group if self.action.action_name == "PRIO_QUEUE" else None
        return Intent.model_validate(
            {
                "id": LEGACY_ID_PREFIX + flow_hash.lower(),
                "priority": DEFAULT_PRIORITY,
                "match": self.native_match(),
                "action": self.action.native_action(),
                "alternative": alternative,
                "label": flow_hash,
            }
        )


class _LegacyMatchCollector:
    """Folds the resources of a legacy message into one native match, remembering who set what."""

    _RESOURCE_FIELDS = (
        ("src_ip", "srcIP", "src"),
        ("dst_ip", "dstIP", "dst"),
        ("src_port", "srcPort", "src_port"),
        ("dst_port", "dstPort", "dst_port"),
        ("protocol", "protocol", "protocol"),
    )

    def __init__(self) -> None:
        self.match: dict[str, Any] = {}
        self.origin: dict[str, str] = {}

    def set(self, field: str, value: Any, path: str) -> None:
        if field in self.match:
            raise FieldError(path, f"{field} is already given by {self.origin[field]}")
        self.match[field] = value
        self.origin[field] = path

    def add_resource(self, prefix: str, resource: LegacyResource) -> None:
        for attr, alias, field in self._RESOURCE_FIELDS:
            value = getattr(resource, attr)
            if value is not None:
                self.set(field, value, f"{prefix}.{alias}")
        for level, kind, number in resource.encapsulations():
            self._add_encapsulation(f"{prefix}.encapsulationType{level}", kind, number)

    def _add_encapsulation(self, path: str, kind: str, number: int) -> None:
        if kind == "gtp":
            self.set("teid", number, path)
            return
        # The data plane classifies on one overlay (the outermost VXLAN/GENEVE/GRE) per packet.
        self.set("overlay", kind, path)
        self.set("vni", number, path)

    def finish(self) -> dict[str, Any]:
        self._default_port_protocol()
        self._check_port_protocol()
        self._check_families()
        return self.match

    def _default_port_protocol(self) -> None:
        has_port = "src_port" in self.match or "dst_port" in self.match
        if has_port and "protocol" not in self.match:
            self.match["protocol"] = LEGACY_DEFAULT_PORT_PROTOCOL

    def _check_port_protocol(self) -> None:
        if protocol_number(self.match.get("protocol")) in PORT_PROTOCOLS:
            return
        for field in ("src_port", "dst_port"):
            if field in self.match:
                raise FieldError(
                    self.origin[field],
                    f"a port needs protocol tcp, udp or sctp (protocol is {self.match['protocol']})",
                )

    def _check_families(self) -> None:
        src, dst = self.match.get("src"), self.match.get("dst")
        if src is not None and dst is not None and src.version != dst.version:
            raise FieldError(self.origin["dst"], f"dstIP is IPv{dst.version} but srcIP is IPv{src.version}")


def legacy_to_native(message: Union[LegacyMessage, dict[str, Any]]) -> tuple[str, Intent]:
    """(actionType, Intent) of a legacy message; IntentError names the offending legacy field."""
    if not isinstance(message, LegacyMessage):
        try:
            message = LegacyMessage.model_validate(message)
        except ValidationError as exc:
            raise IntentError.from_validation(exc) from None
    try:
        return message.action.action_type, message.to_intent()
    except ValidationError as exc:
        raise IntentError.from_validation(exc) from None


def is_legacy(data: Any) -> bool:
    """The paper's messages are recognised by their "Resources" key."""
    return isinstance(data, dict) and "Resources" in data


def parse_intent(data: Any) -> Intent:
    """One intent in either format (a legacy message must be an INSERT or UPDATE)."""
    if is_legacy(data):
        action_type, intent = legacy_to_native(data)
        if action_type == "DELETE":
            raise IntentError.at("Action.actionType", "a DELETE message does not describe an intent")
        return intent
    try:
        return Intent.model_validate(data)
    except ValidationError as exc:
        raise IntentError.from_validation(exc) from None


# --- Intent documents --------------------------------------------------------------------------


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


class CpuSpec(BaseModel):
    """A CPU the NetApp may steer to."""

    model_config = ConfigDict(extra="forbid")

    cpu: CpuId
    capacity_pps: Annotated[int, Strict(), Field(ge=0, le=MAX_CAPACITY_PPS)] = Field(
        0,
        description="packets per second the meter lets through to this CPU; 0: unmetered. At most "
        "2^32 - 1: the kernel's meter counts a window's packets in 40 bits, exact up to 2^40 - 64, "
        "which this capacity keeps for meter windows up to 256 s",
    )
    queue_size: Annotated[int, Strict(), Field(ge=0, le=MAX_QUEUE_SIZE)] = Field(
        0,
        description="CPUMAP queue size in frames; 0: the library default (2048). At most 16384, "
        "the kernel's limit (a running kernel with a lower one is checked when the service starts)",
    )
    overloaded: Annotated[bool, Strict()] = False


class IntentDocumentBase(BaseModel):
    """Site configuration that comes with a set of intents."""

    model_config = ConfigDict(extra="forbid")

    alternatives: list[AlternativeGroup] = Field(default_factory=list)
    cpus: list[CpuSpec] = Field(default_factory=list)
    default_verdict: Literal["pass", "drop"] = Field(
        "pass", description="verdict of malformed packets and of fallbacks with nothing better to do"
    )
    default_alternative: Optional[GroupId] = Field(
        None, description="alternative group for overflow when an intent names none"
    )

    @model_validator(mode="after")
    def _check_unique_ids(self) -> "IntentDocumentBase":
        _reject_duplicates("alternatives", [group.id for group in self.alternatives], "id")
        _reject_duplicates("cpus", [spec.cpu for spec in self.cpus], "cpu")
        return self


def _reject_duplicates(field: str, keys: list[int], key_name: str) -> None:
    seen: dict[int, int] = {}
    for index, key in enumerate(keys):
        if key in seen:
            raise FieldError(f"{field}[{index}].{key_name}", f"{key} is already used by {field}[{seen[key]}]")
        seen[key] = index


def _entry_kind(value: Any) -> str:
    if isinstance(value, LegacyMessage) or is_legacy(value):
        return "legacy"
    return "native"


IntentEntry = Annotated[
    Union[Annotated[Intent, Tag("native")], Annotated[LegacyMessage, Tag("legacy")]],
    Discriminator(_entry_kind),
]


class IntentDocumentIn(IntentDocumentBase):
    """A document as written: intents in either format, legacy ones applied in order."""

    intents: list[IntentEntry] = Field(default_factory=list)


class IntentDocument(IntentDocumentBase):
    """A document resolved to native intents (see `parse_document`)."""

    intents: list[Intent] = Field(default_factory=list)


def parse_document(data: Any) -> IntentDocument:
    """Validate what an intents file holds: an intent, a list of intents, or a document object.

    Legacy messages are applied in order: INSERT adds, UPDATE replaces, DELETE removes.
    """
    wrapped, single = _as_document_object(data)
    try:
        raw = IntentDocumentIn.model_validate(wrapped)
        resolved = _resolve_entries(raw.intents)
    except ValidationError as exc:
        raise _relocate(IntentError.from_validation(exc), single) from None
    except IntentError as exc:
        raise _relocate(exc, single) from None
    fields = {name: getattr(raw, name) for name in IntentDocumentBase.model_fields}
    return IntentDocument(intents=resolved, **fields)


def _as_document_object(data: Any) -> tuple[Any, bool]:
    """Wrap a list or a lone intent into a document object; say whether it was a lone intent."""
    if isinstance(data, list):
        return {"intents": data}, False
    if isinstance(data, dict) and data and not set(data) & set(IntentDocumentIn.model_fields):
        return {"intents": [data]}, True
    return data, False


def _relocate(error: IntentError, single: bool) -> IntentError:
    """A lone intent's problems are reported relative to the intent, not to the wrapper we made."""
    if not single:
        return error
    problems = []
    for path, message in error.problems:
        if path == "intents[0]":
            path = ""
        elif path.startswith("intents[0]."):
            path = path[len("intents[0].") :]
        problems.append((path, message))
    return IntentError(problems)


def _resolve_entries(entries: list[Union[Intent, LegacyMessage]]) -> list[Intent]:
    by_id: dict[str, Intent] = {}
    origin: dict[str, int] = {}
    for index, entry in enumerate(entries):
        where = f"intents[{index}]"
        if isinstance(entry, Intent):
            _insert(by_id, origin, entry, index, join_path(where, "id"))
            continue
        try:
            action_type, intent = legacy_to_native(entry)
        except IntentError as exc:
            raise exc.prefixed(where) from None
        _apply_legacy(by_id, origin, action_type, intent, index, where)
    return list(by_id.values())


def _insert(by_id: dict[str, Intent], origin: dict[str, int], intent: Intent, index: int, path: str) -> None:
    if intent.id in by_id:
        raise IntentError.at(
            path, f"duplicate intent id {intent.id!r} (first at intents[{origin[intent.id]}])"
        )
    by_id[intent.id] = intent
    origin[intent.id] = index


def _apply_legacy(
    by_id: dict[str, Intent], origin: dict[str, int], action_type: str, intent: Intent, index: int, where: str
) -> None:
    if action_type == "INSERT":
        _insert(by_id, origin, intent, index, join_path(where, "Action.flow_hash"))
        return
    if intent.id not in by_id:
        raise IntentError.at(
            join_path(where, "Action.actionType"),
            f"{action_type} of {intent.id!r}, which no earlier entry inserted",
        )
    if action_type == "DELETE":
        del by_id[intent.id]
        del origin[intent.id]
    else:
        by_id[intent.id] = intent
