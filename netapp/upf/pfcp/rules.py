"""The rules of a session request, read from its IEs: Create/Update/Remove PDR, FAR, QER, URR.

Each reader returns the model's fields the IE gives (an update gives only those it changes); a
mandatory IE missing, a value out of range or a flow description that does not parse becomes a
`RuleError` naming the rule and the IE."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, TypeVar

from pydantic import BaseModel, ValidationError

from netapp.upf.flows import FlowError, parse_flow
from netapp.upf.models import (
    APPLY_ACTIONS,
    MEASUREMENT_METHODS,
    REPORTING_TRIGGERS,
    Far,
    OuterHeaderCreation,
    Pdr,
    Qer,
    RuleError,
    UeIpAddress,
    Urr,
)
from netapp.upf.pfcp.codec import IE, Recent
from netapp.upf.pfcp.ies import Cause, IEType, RuleType

M = TypeVar("M", bound=BaseModel)
RuleId = tuple[RuleType, int]
IE_NAMES = ("{}_ID", "CREATE_{}", "UPDATE_{}", "REMOVE_{}")  # a rule's ID IE, its Create, Update and Remove


@dataclasses.dataclass
class RulePlan:
    """What a request asks of one kind of rule: models to create, fields to change, ids to remove."""

    creates: list[BaseModel] = dataclasses.field(default_factory=list)
    updates: list[tuple[int, dict[str, Any]]] = dataclasses.field(default_factory=list)
    removes: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Kind:
    rule_type: RuleType
    model: type[BaseModel]
    table: str  # the Session field holding them
    id_ie: IEType
    create_ie: IEType
    update_ie: IEType
    remove_ie: IEType
    fields: Callable[[IE, RuleId, bool], dict[str, Any]]


def mandatory(parent: IE, ie_type: IEType, rule: Optional[RuleId] = None) -> IE:
    child = parent.one(ie_type)
    if child is None:
        raise RuleError(Cause.MANDATORY_IE_MISSING, f"{ie_type.name} is missing", ie_type, rule)
    return child


def labels_or_text(raw: bytes) -> str:
    """A network instance or FQDN: DNS labels (length-prefixed) when they fill the body exactly,
    else the body as text (peers send both)."""
    labels, offset = [], 0
    while offset < len(raw):
        length = raw[offset]
        if length == 0 or offset + 1 + length > len(raw):
            return raw.decode("utf-8", "replace")
        labels.append(raw[offset + 1 : offset + 1 + length].decode("utf-8", "replace"))
        offset += 1 + length
    return ".".join(labels)


def build(model: type[M], fields: dict[str, Any], ie_type: IEType, rule: RuleId) -> M:
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise RuleError(
            Cause.RULE_CREATION_MODIFICATION_FAILURE, f"{where}: {error['msg']}", ie_type, rule
        ) from None


def rule_id(ie: IE, kind: Kind) -> RuleId:
    return (kind.rule_type, mandatory(ie, kind.id_ie)["id"])


# --- PDR -----------------------------------------------------------------------------------------


def _pdr_fields(ie: IE, rule: RuleId, create: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if create:
        mandatory(ie, IEType.PRECEDENCE, rule)
        mandatory(ie, IEType.PDI, rule)
    if (precedence := ie.one(IEType.PRECEDENCE)) is not None:
        fields["precedence"] = precedence["precedence"]
    if (pdi := ie.one(IEType.PDI)) is not None:
        fields["pdi"] = _pdi(pdi, rule)
    if (removal := ie.one(IEType.OUTER_HEADER_REMOVAL)) is not None:
        fields["outer_header_removal"] = removal["header"]
    if (far := ie.one(IEType.FAR_ID)) is not None:
        fields["far_id"] = far["id"]
    for name, ie_type in (("qer_ids", IEType.QER_ID), ("urr_ids", IEType.URR_ID)):
        if ie.all(ie_type) or create:
            fields[name] = tuple(child["id"] for child in ie.all(ie_type))
    return fields


def _pdi(pdi: IE, rule: RuleId) -> dict[str, Any]:
    fields: dict[str, Any] = {"source_interface": mandatory(pdi, IEType.SOURCE_INTERFACE, rule)["interface"]}
    if (fteid := pdi.one(IEType.F_TEID)) is not None:
        fields["local_fteid"] = _fteid(fteid)
    if (ue := pdi.one(IEType.UE_IP_ADDRESS)) is not None:
        fields["ue_ip"] = _ue_ip(ue, rule)
    if (instance := pdi.one(IEType.NETWORK_INSTANCE)) is not None:
        fields["network_instance"] = labels_or_text(instance.raw)
    fields["qfis"] = tuple(qfi["qfi"] for qfi in pdi.all(IEType.QFI))
    filters = []
    for sdf in pdi.all(IEType.SDF_FILTER):
        if not sdf["fd"]:
            raise RuleError(
                Cause.RULE_CREATION_MODIFICATION_FAILURE,
                "SDF filters without a flow description are not supported",
                IEType.SDF_FILTER,
                rule,
            )
        try:
            filters.append(parse_flow(bytes(sdf["flow_description"]).decode("ascii")))
        except (FlowError, UnicodeDecodeError) as exc:
            raise RuleError(
                Cause.RULE_CREATION_MODIFICATION_FAILURE, f"flow description: {exc}", IEType.SDF_FILTER, rule
            ) from None
    fields["sdf_filters"] = tuple(filters)
    return fields


def _ue_ip(ue: IE, rule: RuleId) -> dict[str, Any]:
    # CHV4, CHV6 (29.244 8.2.62: the UP function assigns the address), from the flags octet: the
    # library's fields do not have them
    flags = ue.raw[0] if ue.raw else 0
    chv4, chv6 = bool(flags & 0x10), bool(flags & 0x20)
    if chv6:
        raise RuleError(
            Cause.RULE_CREATION_MODIFICATION_FAILURE,
            "UE IP Address: CHV6 (the UPF choosing an IPv6 prefix) is not supported",
            IEType.UE_IP_ADDRESS,
            rule,
        )
    return {
        "choose_ipv4": chv4,
        "ipv4": str(ue["ipv4"]) if ue["v4"] and not chv4 else None,
        "ipv6": str(ue["ipv6"]) if ue["v6"] else None,
        "destination": bool(ue["sd"]),
    }


def _fteid(ie: IE) -> dict[str, Any]:
    if ie["ch"]:
        return {
            "choose": True,
            "choose_id": ie["choose_id"] if ie["chid"] else None,
            "want_ipv4": bool(ie["v4"]),
            "want_ipv6": bool(ie["v6"]),
        }
    return {
        "teid": ie["teid"],
        "ipv4": str(ie["ipv4"]) if ie["v4"] else None,
        "ipv6": str(ie["ipv6"]) if ie["v6"] else None,
    }


# --- FAR -----------------------------------------------------------------------------------------

_OUTER_HEADERS = (
    ("gtpuudpipv4", "gtpu-ipv4", "ipv4"),
    ("gtpuudpipv6", "gtpu-ipv6", "ipv6"),
    ("udpipv4", "udp-ipv4", "ipv4"),
    ("udpipv6", "udp-ipv6", "ipv6"),
)


def _far_fields(ie: IE, rule: RuleId, create: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    action = mandatory(ie, IEType.APPLY_ACTION, rule) if create else ie.one(IEType.APPLY_ACTION)
    if action is not None:
        fields["apply_action"] = frozenset(name for name in APPLY_ACTIONS if action[name.lower()])
    parameters = ie.one(IEType.FORWARDING_PARAMETERS if create else IEType.UPDATE_FORWARDING_PARAMETERS)
    if parameters is not None:
        fields["forwarding"] = _forwarding(parameters, rule, create)
        flags = parameters.one(IEType.PFCPSM_REQ_FLAGS)
        fields["send_end_marker"] = bool(flags is not None and flags["sndem"])
    duplicating = ie.all(IEType.DUPLICATING_PARAMETERS if create else IEType.UPDATE_DUPLICATING_PARAMETERS)
    if duplicating:  # an update gives them all again: they replace the FAR's
        fields["duplicating"] = tuple(_duplicating(each, rule, create) for each in duplicating)
    return fields


def _duplicating(ie: IE, rule: RuleId, create: bool) -> dict[str, Any]:
    """Duplicating Parameters (29.244 7.5.2.3-3): those of forwarding parameters, the ToS/Traffic
    Class octet of a Transport Level Marking and a Forwarding Policy."""
    fields = _forwarding(ie, rule, create=True)
    fields.pop("network_instance", None)
    if (marking := ie.one(IEType.TRANSPORT_LEVEL_MARKING)) is not None:
        fields["transport_level_marking"] = marking["tos"]
    if (policy := ie.one(IEType.FORWARDING_POLICY)) is not None:
        fields["forwarding_policy"] = labels_or_text(policy.get("policy_identifier", b"") or b"")
    return fields


def _forwarding(ie: IE, rule: RuleId, create: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    destination = mandatory(ie, IEType.DESTINATION_INTERFACE, rule) if create else ie.one(IEType.DESTINATION_INTERFACE)
    if destination is not None:
        fields["destination_interface"] = destination["interface"]
    if (instance := ie.one(IEType.NETWORK_INSTANCE)) is not None:
        fields["network_instance"] = labels_or_text(instance.raw)
    if (outer := ie.one(IEType.OUTER_HEADER_CREATION)) is not None:
        fields["outer_header_creation"] = _outer_header(outer, rule)
    return fields


def _outer_header(outer: IE, rule: RuleId) -> dict[str, Any]:
    chosen = next(((kind, family) for flag, kind, family in _OUTER_HEADERS if outer[flag]), None)
    if chosen is None:
        raise RuleError(
            Cause.RULE_CREATION_MODIFICATION_FAILURE,
            "outer header creation: only GTP-U/UDP/IP and UDP/IP are supported",
            IEType.OUTER_HEADER_CREATION,
            rule,
        )
    kind, family = chosen
    return {
        "kind": kind,
        "teid": outer["teid"] if kind.startswith("gtpu") else None,
        "address": str(outer[family]),
        "port": outer["port"] if kind.startswith("udp") else None,
    }


# --- QER, URR ------------------------------------------------------------------------------------


def _qer_fields(ie: IE, rule: RuleId, create: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    gate = mandatory(ie, IEType.GATE_STATUS, rule) if create else ie.one(IEType.GATE_STATUS)
    if gate is not None:
        fields["gate_ul_open"], fields["gate_dl_open"] = gate["ul"] == 0, gate["dl"] == 0
    if (mbr := ie.one(IEType.MBR)) is not None:
        fields["mbr_ul_kbps"], fields["mbr_dl_kbps"] = mbr["ul"], mbr["dl"]
    if (qfi := ie.one(IEType.QFI)) is not None:
        fields["qfi"] = qfi["qfi"]
    return fields


def _volume(ie: IE) -> dict[str, Optional[int]]:
    return {
        "total": ie["total"] if ie["tovol"] else None,
        "uplink": ie["uplink"] if ie["ulvol"] else None,
        "downlink": ie["downlink"] if ie["dlvol"] else None,
    }


def _urr_fields(ie: IE, rule: RuleId, create: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    method = mandatory(ie, IEType.MEASUREMENT_METHOD, rule) if create else ie.one(IEType.MEASUREMENT_METHOD)
    if method is not None:
        fields["measurement_method"] = frozenset(name for name in MEASUREMENT_METHODS if method[name.lower()])
    triggers = mandatory(ie, IEType.REPORTING_TRIGGERS, rule) if create else ie.one(IEType.REPORTING_TRIGGERS)
    if triggers is not None:
        fields["reporting_triggers"] = frozenset(name for name in REPORTING_TRIGGERS if triggers.get(name))
    for name, ie_type, reader in (
        ("measurement_period_s", IEType.MEASUREMENT_PERIOD, lambda child: child["period"]),
        ("volume_threshold", IEType.VOLUME_THRESHOLD, _volume),
        ("volume_quota", IEType.VOLUME_QUOTA, _volume),
        ("time_threshold_s", IEType.TIME_THRESHOLD, lambda child: child["threshold"]),
        ("time_quota_s", IEType.TIME_QUOTA, lambda child: child["quota"]),
    ):
        if (child := ie.one(ie_type)) is not None:
            fields[name] = reader(child)
    return fields


def _ie_types(rule_type: RuleType) -> tuple[IEType, ...]:
    return tuple(IEType[name.format(rule_type.name)] for name in IE_NAMES)


KINDS = tuple(
    Kind(rule_type, model, f"{rule_type.name.lower()}s", *_ie_types(rule_type), fields)
    for rule_type, model, fields in (
        (RuleType.PDR, Pdr, _pdr_fields),
        (RuleType.FAR, Far, _far_fields),
        (RuleType.QER, Qer, _qer_fields),
        (RuleType.URR, Urr, _urr_fields),
    )
)


# The rules created lately, by their Create IE's type and bytes: a rule is a function of them, and a
# model is not changed once made, so the Create IEs an SMF repeats (netapp.upf.pfcp.codec) are read
# and checked once. Only rules made whole are kept.
_CREATED: Recent[tuple[int, bytes], BaseModel] = Recent()


@dataclasses.dataclass(frozen=True)
class Varying:
    """The IE of a Create IE that an SMF gives each session its own value of, while the rest stays
    the same bytes from one session to the next (a profile): where it is (its group in the Create
    IE, and its type), the model field it makes (`path`: its group's field, then its own) and how."""

    group: IEType
    ie_type: IEType
    path: tuple[str, str]
    model: type[BaseModel]
    fields: Callable[[IE, RuleId], dict[str, Any]]


# A PDR's UE IP address; a FAR's outer header creation (the gNB's TEID and address).
VARYING = {
    RuleType.PDR: Varying(IEType.PDI, IEType.UE_IP_ADDRESS, ("pdi", "ue_ip"), UeIpAddress, _ue_ip),
    RuleType.FAR: Varying(IEType.FORWARDING_PARAMETERS, IEType.OUTER_HEADER_CREATION,
                          ("forwarding", "outer_header_creation"), OuterHeaderCreation, _outer_header),
}
# The rules made lately by their Create IE but for the varying IE (`_shape`), and the varying IEs'
# own models by their bytes: a rule whose shape is known is that rule with its own varying value
# read and checked alone (the models' checks do not look across the two), not read whole again.
_SHAPES: Recent[tuple, BaseModel] = Recent()
_PARTS: Recent[tuple[int, bytes], BaseModel] = Recent()


def read_rules(ies: IE) -> dict[str, RulePlan]:
    """Session field name ("pdrs", ...) -> what the request's IEs ask of those rules."""
    plans = {}
    for kind in KINDS:
        plan = plans[kind.table] = RulePlan()
        for ie in ies.all(kind.create_ie):
            plan.creates.append(_create_rule(ie, kind))
        for ie in ies.all(kind.update_ie):
            rule = rule_id(ie, kind)
            plan.updates.append((rule[1], kind.fields(ie, rule, False)))
        plan.removes.extend(rule_id(ie, kind)[1] for ie in ies.all(kind.remove_ie))
    return plans


def _create_rule(ie: IE, kind: Kind) -> BaseModel:
    """The rule a Create IE makes (RuleError if none)."""
    if not ie.raw:
        rule = rule_id(ie, kind)
        return build(kind.model, {"id": rule[1], **kind.fields(ie, rule, True)}, kind.create_ie, rule)
    key = (kind.create_ie, ie.raw)
    model = _CREATED.get(key)
    if model is not None:
        return model
    varying = VARYING.get(kind.rule_type)
    shape = _shape(ie, varying) if varying is not None else None
    model = _reshaped(ie, kind, varying, shape) if shape is not None else None  # type: ignore[arg-type]
    if model is not None:
        return model  # not kept by its bytes: they are a session's own, not likely to come again
    rule = rule_id(ie, kind)  # read whole: a refusal, with its cause, comes from here
    model = build(kind.model, {"id": rule[1], **kind.fields(ie, rule, True)}, kind.create_ie, rule)
    if shape is not None:
        _SHAPES.put(shape, model)
    _CREATED.put(key, model)
    return model


def _shape(ie: IE, varying: Varying) -> Optional[tuple]:
    """The Create IE's children by type and bytes, its varying IE's left out (None in its place);
    None if it has no varying IE (or is not one received)."""
    parts: list[Any] = []
    found = False
    for child in ie.children:
        if child.type == varying.group and child.children:
            inner = tuple(None if each.type == varying.ie_type else (each.type, each.raw) for each in child.children)
            found = found or None in inner
            parts.append((child.type, inner))
        else:
            parts.append((child.type, child.raw))
    return (ie.type, *parts) if found and all(child.raw for child in ie.children) else None


def _reshaped(ie: IE, kind: Kind, varying: Varying, shape: tuple) -> Optional[BaseModel]:
    """The rule of a known shape with this Create IE's varying value; None if the shape is not
    known or the value does not make a model (the rule is then read whole)."""
    model = _SHAPES.get(shape)
    if model is None:
        return None
    group = ie.one(varying.group)
    value = group.one(varying.ie_type) if group is not None else None
    if value is None:
        return None
    part = _PARTS.get((value.type, value.raw))
    if part is None:
        rule = (kind.rule_type, model.id)  # type: ignore[attr-defined]
        try:
            part = varying.model.model_validate(varying.fields(value, rule))
        except (RuleError, ValidationError, KeyError, TypeError, ValueError):
            return None
        _PARTS.put((value.type, value.raw), part)
    outer_name, name = varying.path
    outer = getattr(model, outer_name)
    return model.model_copy(update={outer_name: outer.model_copy(update={name: part})})
