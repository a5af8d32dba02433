"""The paper's "Resources / Action / Params" message, and its translation to a native intent."""

from __future__ import annotations

import re
from typing import Any, Annotated, Literal, Optional, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from netapp.intents.errors import FieldError, IntentError
from netapp.intents.fields import (
    DEFAULT_PRIORITY,
    MAX_ALT_GROUPS,
    MAX_CPUS,
    MAX_U24,
    PORT_PROTOCOLS,
    InterfaceName,
    Prefix,
    ProtocolName,
    ProtocolNumber,
    lower_if_str,
    protocol_number,
)
from netapp.intents.native import Intent
from netapp.qos.abi import RATE_MAX, RATE_MIN

# The paper's messages give ports without a protocol; its examples are RTP/UDP streams (port 5004).
LEGACY_DEFAULT_PORT_PROTOCOL = "udp"

LEGACY_ID_PREFIX = "legacy-"
LEGACY_MAX_ENCAPSULATIONS = 4

_HEX8 = re.compile(r"^[0-9A-Fa-f]{8}$")
_DECIMAL = re.compile(r"^[0-9]{1,10}$")


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
    return lower_if_str(value)


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
LegacyMbr = _decimal_string(RATE_MIN // 1000, RATE_MAX // 1000)  # kbit/s, as a slice's and PFCP's MBR
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
    mbr_kbps: Optional[LegacyMbr] = None  # police the flow at this rate first (native action.police)

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
        if self.action_name == "DROP" and self.mbr_kbps is not None:
            raise FieldError("mbr_kbps", "mbr_kbps has no meaning for DROP: every packet is dropped")
        return self

    def native_action(self) -> dict[str, Any]:
        police = {"police": {"rate_bps": self.mbr_kbps * 1000}} if self.mbr_kbps is not None else {}
        if self.action_name == "PRIO_QUEUE":
            return {"type": "steer", "cpu": self.rx_queue, **police}
        if self.action_name == "FORWARD":
            return {"type": "forward", "alternative": self.alt_group, **police}
        return {"type": self.action_name.lower(), **police}


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


def legacy_update(old: Intent, new: Intent) -> Intent:
    """The intent a legacy UPDATE makes of `old`: `new`, the message's translation, keeping what a
    legacy message cannot say: the flow's protection (action.protect), which would otherwise end
    unasked. IntentError naming Action.actionName when the message's action cannot keep it (DROP,
    or replicate on another action than PASS): the protection is changed through the native intent."""
    protect = getattr(old.action, "protect", None)
    if protect is None:
        return new
    body = new.model_dump(mode="json")
    body["action"]["protect"] = protect.model_dump(mode="json")
    try:
        return Intent.model_validate(body)
    except ValidationError:
        raise IntentError.at(
            "Action.actionName",
            f"intent {old.id!r} protects its flow (action.protect, role {protect.role}), which a legacy message "
            f"cannot say and a {new.action.type} action cannot keep (replicate needs pass; drop takes no protect): "
            f"change or remove the protection through PUT /api/v1/intents/{old.id} first",
        ) from None


def is_legacy(data: Any) -> bool:
    """The paper's messages are recognised by their "Resources" key."""
    return isinstance(data, dict) and "Resources" in data
