"""Slices: a slice as intents (pure functions), and the slices' service (`SliceService`).

`slice_intents` says what `SliceSpec` asks for, in the vocabulary the data plane has.

One intent per member, with a deterministic id, so that resizing a slice (replacing its spec) is
the difference between two lists of intents:

| member            | intent id                  | match                          |
|-------------------|----------------------------|--------------------------------|
| VNI v             | `<slice>-vni-<v>`          | overlay vxlan, vni v           |
| TEID t            | `<slice>-teid-<t, 8 hex>`  | teid t                         |
| UE prefix p       | `<slice>-ul-<hash of p>`   | src p (uplink: sent by the UE) |
|                   | `<slice>-dl-<hash of p>`   | dst p (downlink: sent to it)   |
| DSCP d            | `<slice>-dscp-<d>`         | dscp d                         |

A UE prefix becomes two intents because the data plane matches the innermost IP header, whose
source is the UE on the uplink and whose destination is the UE on the downlink; a slice owns
both directions of its UEs' traffic. Its id carries a short hash of the prefix (ids cannot hold
'/' or ':'), the prefix itself is in the label.

Priority: 5QI-style levels, 1 (most important) to 127, become intent priorities
SLICE_PRIORITY_BASE + 128 - level, i.e. 1001 (level 127) to 1127 (level 1): ordered by level, and
above the default priority of intents created directly (100), so a slice's traffic is classified
as the slice's unless an intent deliberately asks for more than 1127.

Action: with dedicated CPUs, steer; member i (in the order vnis, teids, ue_prefixes, dscp, both
directions of a UE prefix together) goes to cpus[i mod len(cpus)], spreading members evenly over
the CPUs in the order the spec lists them. Without CPUs, pass (the CPU that received the packet
handles it). The alternative group takes the overflow: of a steered CPU that is overloaded, or,
without CPUs, of the local CPU (the intents are then best-effort, which is what lets pass traffic
overflow).

Protection: `protect` is every intent's action.protect (netapp.service.protection): each flow of the
slice its own FRER stream, named by its intent's id. Only the members FRER's IP identification can
express are protected: UE prefixes; a slice with VNIs, TEIDs or DSCPs and protect is refused, naming
the member.

Bitrates: the MBR is enforced by one policer that all the slice's rules share (netapp.qos.slices: the
slice's traffic, every member and both directions, together); the GBR is stored, not enforced.
"""

from __future__ import annotations

import hashlib
import ipaddress
from datetime import datetime
from typing import Any, Optional

from pydantic import ValidationError

from netapp.intents.errors import IntentError
from netapp.intents.compiler import SharedPolice
from netapp.intents.models import MAX_CPUS, MAX_U24, MAX_U32, Intent
from netapp.qos.slices import slice_police
from netapp.service.contract import (
    IntentRecord,
    NotFound,
    Page,
    Principal,
    Scope,
    SliceRecord,
    SlicesContract,
    SliceSpec,
)
from netapp.service.rules import rule_id
from netapp.service.state import ServiceState
from netapp.service.transaction import RuleChange, invalid_input

SLICE_PRIORITY_BASE = 1000
MAX_PRIORITY_LEVEL = 127
PREFIX_HASH_DIGITS = 8


def slice_priority(priority_level: int) -> int:
    """Intent priority of a slice's level: lower level, higher priority."""
    return SLICE_PRIORITY_BASE + MAX_PRIORITY_LEVEL + 1 - priority_level


def prefix_tag(prefix: str) -> str:
    """A short, stable tag of a (normalised) prefix, for intent ids."""
    return hashlib.sha256(prefix.encode()).hexdigest()[:PREFIX_HASH_DIGITS]


def slice_intents(spec: SliceSpec) -> list[Intent]:
    """The intents of a slice, in member order. IntentError names the offending spec field."""
    _check_cpus(spec.cpus)
    members = _members(spec)
    intents = []
    for position, (member_ids, matches, what) in enumerate(members):
        action = _action(spec, position)
        for intent_id, match in zip(member_ids, matches, strict=True):
            intents.append(_intent(spec, intent_id, match, action, what))
    return intents


# A member: the ids of its intents, their matches, and what it is (for the label).
_Member = tuple[list[str], list[dict[str, Any]], str]


def _members(spec: SliceSpec) -> list[_Member]:
    members: list[_Member] = []
    members += [_vni_member(spec.id, vni, index) for index, vni in _unique(spec.members.vnis, "members.vnis")]
    members += [
        _teid_member(spec.id, teid, index) for index, teid in _unique(spec.members.teids, "members.teids")
    ]
    prefixes = [(index, _prefix(text, index)) for index, text in enumerate(spec.members.ue_prefixes)]
    members += [_ue_member(spec.id, prefix) for _, prefix in _unique_prefixes(prefixes)]
    members += [
        _dscp_member(spec.id, dscp, index) for index, dscp in _unique(spec.members.dscp, "members.dscp")
    ]
    return members


def _vni_member(slice_id: str, vni: int, index: int) -> _Member:
    _check_range(vni, 0, MAX_U24, f"members.vnis[{index}]", "a VXLAN VNI")
    return [f"{slice_id}-vni-{vni}"], [{"overlay": "vxlan", "vni": vni}], f"VNI {vni}"


def _teid_member(slice_id: str, teid: int, index: int) -> _Member:
    _check_range(teid, 0, MAX_U32, f"members.teids[{index}]", "a GTP-U TEID")
    return [f"{slice_id}-teid-{teid:08x}"], [{"teid": teid}], f"TEID 0x{teid:08X}"


def _ue_member(slice_id: str, prefix: str) -> _Member:
    tag = prefix_tag(prefix)
    ids = [f"{slice_id}-ul-{tag}", f"{slice_id}-dl-{tag}"]
    return ids, [{"src": prefix}, {"dst": prefix}], f"UE {prefix}"


def _dscp_member(slice_id: str, dscp: int, index: int) -> _Member:
    _check_range(dscp, 0, 63, f"members.dscp[{index}]", "a DSCP")
    return [f"{slice_id}-dscp-{dscp}"], [{"dscp": dscp}], f"DSCP {dscp}"


def _unique(values: list[int], field: str) -> list[tuple[int, int]]:
    seen: dict[int, int] = {}
    for index, value in enumerate(values):
        if value in seen:
            raise IntentError.at(f"{field}[{index}]", f"{value} is already listed at {field}[{seen[value]}]")
        seen[value] = index
    return [(index, value) for value, index in seen.items()]


def _unique_prefixes(prefixes: list[tuple[int, str]]) -> list[tuple[int, str]]:
    seen: dict[str, int] = {}
    for index, prefix in prefixes:
        if prefix in seen:
            raise IntentError.at(
                f"members.ue_prefixes[{index}]",
                f"{prefix} is already listed at members.ue_prefixes[{seen[prefix]}]",
            )
        seen[prefix] = index
    return [(index, prefix) for prefix, index in seen.items()]


def _prefix(text: str, index: int) -> str:
    try:
        return str(ipaddress.ip_network(text.strip(), strict=False))
    except ValueError:
        raise IntentError.at(
            f"members.ue_prefixes[{index}]", f"{text!r} is not an IPv4 or IPv6 prefix"
        ) from None


def _check_range(value: int, low: int, high: int, field: str, what: str) -> None:
    if isinstance(value, bool) or not low <= value <= high:
        raise IntentError.at(field, f"{value} is not {what} ({low} to {high})")


def _check_cpus(cpus: list[int]) -> None:
    seen: dict[int, int] = {}
    for index, cpu in enumerate(cpus):
        _check_range(cpu, 0, MAX_CPUS - 1, f"cpus[{index}]", "a CPU")
        if cpu in seen:
            raise IntentError.at(f"cpus[{index}]", f"CPU {cpu} is already listed at cpus[{seen[cpu]}]")
        seen[cpu] = index


def _action(spec: SliceSpec, position: int) -> dict[str, Any]:
    protect = {} if spec.protect is None else {"protect": spec.protect.model_dump()}
    if not spec.cpus:
        return {"type": "pass", **protect}
    if spec.protect is not None and spec.protect.role == "replicate":
        raise IntentError.at("protect.role", "replicate sends the flows' copies out of the member ports before any "
                                             "action: a slice with cpus would never steer them (leave cpus empty)")
    return {"type": "steer", "cpu": spec.cpus[position % len(spec.cpus)], **protect}


def _intent(
    spec: SliceSpec, intent_id: str, match: dict[str, Any], action: dict[str, Any], what: str
) -> Intent:
    overflow_locally = spec.alternative is not None and not spec.cpus
    body = {
        "id": intent_id,
        "priority": slice_priority(spec.priority_level),
        "traffic_class": "best-effort" if overflow_locally else "priority",
        "match": match,
        "action": action,
        "alternative": spec.alternative,
        "label": f"slice {spec.id} ({_snssai_text(spec)}): {what}",
    }
    try:
        return Intent.model_validate(body)
    except ValidationError as exc:
        raise IntentError.from_validation(exc, f"intent {intent_id}") from None


def _snssai_text(spec: SliceSpec) -> str:
    sd: Optional[str] = spec.snssai.sd
    return f"SST {spec.snssai.sst}" + (f", SD {sd.upper()}" if sd else "")


SLICE_SOURCE = "slice"


class SliceService(SlicesContract):
    """Slices and their intents: a resize is the difference between the old and new intents."""

    def __init__(self, state: ServiceState):
        self._state = state
        self._rules = state.rules

    def list_slices(self, who: Principal, offset: int = 0, limit: int = 100) -> Page[SliceRecord]:
        self._state.require(who, Scope.READ)
        return self._state.store.list_slices(None if who.is_admin else who.tenant, offset, limit)

    def get_slice(self, who: Principal, slice_id: str) -> SliceRecord:
        return self._state.read_owned(
            who, slice_id, "slice", lambda tenant, local: self._state.store.get_slice(tenant, local)
        )

    def put_slice(self, who: Principal, spec: SliceSpec) -> tuple[SliceRecord, bool]:
        """Create or resize: the difference between the old and new intents, in one transaction."""
        self._state.require(who, Scope.SLICES_WRITE)
        tenant = who.tenant
        try:
            asked = {intent.id: intent for intent in slice_intents(spec)}
            shared = slice_police(tenant, spec, self._state.police_defaults)
        except IntentError as exc:
            raise invalid_input(exc) from exc

        def work(change: RuleChange) -> tuple[SliceRecord, bool]:
            store, now = self._state.store, self._state.now()
            self._state.tenancy.check_slice(who, tenant, spec)
            wanted = {
                intent_id: self._rules.confined_member(who, tenant, intent) for intent_id, intent in asked.items()
            }
            old = store.get_slice(tenant, spec.id)
            current = {record.intent.id: record for record in store.slice_intents(tenant, spec.id)}
            for intent_id in wanted.keys() - current.keys():
                self._rules.require_free_intent_id(tenant, intent_id)
            repolice = old is not None and self.shared_police(tenant, old.spec) != shared
            self._resize(change, who, tenant, spec.id, current, wanted, now, shared, repolice)
            created_at = old.created_at if old else now
            revision = old.revision + 1 if old else 1
            store.put_slice(
                SliceRecord(
                    spec=spec,
                    tenant=tenant,
                    intent_ids=[],
                    created_at=created_at,
                    updated_at=now,
                    revision=revision,
                )
            )
            self._state.tenancy.check_quotas(tenant)
            record = store.get_slice(tenant, spec.id)
            assert record is not None
            return record, old is None

        return self._state.change(who, work)

    def shared_police(self, tenant: str, spec: SliceSpec) -> Optional[SharedPolice]:
        """The policer the stored slice's rules share (None for a slice stored before its MBR was
        enforced with one the policers refuse: it then polices nothing, as before)."""
        try:
            return slice_police(tenant, spec, self._state.police_defaults)
        except IntentError:
            return None

    def delete_slice(self, who: Principal, slice_id: str) -> None:
        self._state.require(who, Scope.SLICES_WRITE)
        tenant, local = self._state.owner(who, slice_id, "slice")

        def work(change: RuleChange) -> None:
            store = self._state.store
            if store.get_slice(tenant, local) is None:
                raise NotFound(f"no slice {slice_id!r}")
            current = {record.intent.id: record for record in store.slice_intents(tenant, local)}
            self._resize(change, who, tenant, local, current, {}, self._state.now())
            store.delete_slice(tenant, local)

        self._state.change(who, work)

    def _resize(
        self,
        change: RuleChange,
        who: Principal,
        tenant: str,
        slice_id: str,
        current: dict[str, IntentRecord],
        wanted: dict[str, Intent],
        now: datetime,
        shared: Optional[SharedPolice] = None,
        repolice: bool = False,
    ) -> None:
        """Store and index steps from the slice's current intents to the wanted ones: removals
        first, so that an intent that moves does not collide with its old self. `shared`: the
        slice's policer; `repolice`: it changed, so every rule of the slice is rewritten."""
        store = self._state.store
        changed = [i for i in wanted if i in current and (repolice or current[i].intent != wanted[i])]
        removed = [i for i in current if i not in wanted]
        added = [i for i in wanted if i not in current]
        for intent_id in removed + changed:
            qualified = rule_id(tenant, intent_id)
            if qualified in self._state.index:
                change.remove(qualified)
        for intent_id in removed:
            store.delete_intent(tenant, intent_id)
        for intent_id in changed:
            old = current[intent_id]
            if old.intent == wanted[intent_id]:
                continue  # only its slice's policer changed
            store.update_intent(
                old.model_copy(
                    update={"intent": wanted[intent_id], "updated_at": now, "revision": old.revision + 1}
                )
            )
        for intent_id in added:
            store.insert_intent(
                IntentRecord(
                    intent=wanted[intent_id],
                    tenant=tenant,
                    slice_id=slice_id,
                    source=SLICE_SOURCE,
                    created_at=now,
                    updated_at=now,
                )
            )
        for intent_id in removed:
            self._state.protection.follow(change, who, tenant, current[intent_id].intent, None)
        for intent_id in changed + added:
            before = current[intent_id].intent if intent_id in current else None
            self._protect(change, who, tenant, before, wanted[intent_id])
            change.add(self._rules.compile(tenant, wanted[intent_id], shared))

    def _protect(self, change: RuleChange, who: Principal, tenant: str, before: Optional[Intent],
                 intent: Intent) -> None:
        """The member's stream (the slice's protect), an error naming the slice's field and the member."""
        try:
            self._state.protection.follow(change, who, tenant, before, intent)
        except IntentError as exc:
            raise IntentError.at("protect", f"{intent.label}: {exc.line()}") from exc
