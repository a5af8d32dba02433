"""A slice's MBR as the policer all its rules share (netapp.intents.compiler.SharedPolice): one
rate for all the slice's traffic, both directions of its UEs together (the slice states one MBR).
An MBR of 0 polices nothing (as a QER's), nor does one at or above the policers' largest rate
(400 Gb/s: no node here carries more); one under their smallest (8 kbit/s) is refused, naming
mbr_kbps. Burst and algorithm are the settings' (qos.default_burst_ms, qos.default_algorithm).

A rule of the slice goes through its slice's policer only: a slice's rules are made by the slice
(netapp.service.slices), and a slice has no police option of its own per member. An intent with its
own police option is never a slice's; were both ever asked of one rule, its own would come first
(nf/qos/rule.h)."""

from __future__ import annotations

import dataclasses
from typing import Optional

from netapp.intents.compiler import CompiledRule, SharedPolice
from netapp.intents.errors import IntentError
from netapp.qos.abi import RATE_MAX, RATE_MIN
from netapp.qos.rules import SLICE, owner_name
from netapp.qos.spec import PoliceDefaults, PolicerSpec
from netapp.service.contract import SliceSpec


def slice_owner(tenant: str, slice_id: str) -> str:
    """The owner of a slice's policer: the tenant's own, never another's."""
    return owner_name(SLICE, f"{tenant}/{slice_id}")


def slice_police(tenant: str, spec: SliceSpec, defaults: PoliceDefaults) -> Optional[SharedPolice]:
    """The policer the slice's rules share, or None; IntentError at mbr_kbps under 8 kbit/s."""
    rate = spec.mbr_kbps * 1000
    if not rate or rate >= RATE_MAX:
        return None
    if rate < RATE_MIN:
        raise IntentError.at("mbr_kbps", f"{spec.mbr_kbps} kbit/s: the policers take {RATE_MIN // 1000} kbit/s or "
                             "more (0: no limit)")
    return SharedPolice(slice_owner(tenant, spec.id),
                        PolicerSpec(rate=rate, burst=defaults.burst(rate), algo=defaults.algo))


def with_slice_police(rule: CompiledRule, shared: Optional[SharedPolice]) -> CompiledRule:
    """The slice's rule, going through its slice's policer."""
    return dataclasses.replace(rule, shared_police=shared) if shared is not None else rule
