"""Planning a rules change: the writes that take the maps from the facade's shadow to a target
(a whole ruleset, or an incremental delta), and the slots they take and give back."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from netapp.dataplane.binding import (
    DataplaneError,
    Shape,
    rule_key,
    rule_to_c,
    rule_value,
    shape_to_c,
    struct_bytes,
)
from netapp.dataplane.slots import InstalledRule, SlotAllocator
from netapp.dataplane.tunnel_ends import TunnelEnds
from netapp.intents.compiler import CompiledRule, CompiledRuleset
from netapp.intents.index import RuleDelta


@dataclass
class Plan:
    """The writes that take the maps from the shadow to a target, and the slots they take and give.

    A full plan (apply) names every rule of the target in `desired` and every intent's slot in
    `intent_slots`, and replaces the shadow with them. An incremental plan (apply_changes) names
    only what changes: the rules it places (`placed`) and the intents that leave (`leaving`).
    """

    upserts: list[InstalledRule]
    deletes: list[InstalledRule]
    shapes: list[Shape]
    shapes_changed: bool
    new_slots: list[int] = field(default_factory=list)  # taken from the allocator, counters zeroed first
    freed_slots: list[int] = field(default_factory=list)
    restored_slots: list[int] = field(default_factory=list)  # given back to their intent, counters kept
    desired: Optional[dict[bytes, InstalledRule]] = None
    intent_slots: Optional[dict[str, int]] = None
    placed: list[InstalledRule] = field(default_factory=list)
    leaving: list[str] = field(default_factory=list)
    undo_police: Callable[[], None] = lambda: None  # puts the rules' policers back (netapp.qos.rules)

    @property
    def writes(self) -> bool:
        return bool(self.shapes_changed or self.upserts or self.deletes)


class RulePlanner:
    """Dataplane's planning half (a mixin): reads the shadow, writes nothing."""

    _slots: SlotAllocator
    _installed: dict[bytes, InstalledRule]
    _intent_slots: dict[str, int]
    _slot_intents: dict[int, str]
    _intent_keys: dict[str, bytes]
    _published_shapes: list[bytes]
    tunnel_ends: TunnelEnds

    def _release(self, slots: Sequence[int]) -> None:
        for slot in slots:
            self._slots.release(slot)

    def _plan(self, ruleset: CompiledRuleset) -> Plan:
        intent_slots, new_slots = self._assign_slots(ruleset)
        desired: dict[bytes, InstalledRule] = {}
        for rule in ruleset.rules:
            key, value = rule_to_c(rule, intent_slots[rule.intent_id], self.tunnel_ends.id_of)
            entry = InstalledRule(key, value, rule.intent_id, (rule.police, rule.shared_police), rule.copies)
            desired[entry.key_bytes] = entry
        upserts = [
            entry
            for key, entry in desired.items()
            if key not in self._installed or not self._installed[key].same_value(entry)
        ]
        deletes = [entry for key, entry in self._installed.items() if key not in desired]
        shapes = self._shapes_to_c(ruleset.shapes, ruleset.max_priorities)
        freed = self._slots_given_back(intent_slots, desired)
        return Plan(
            upserts,
            deletes,
            shapes,
            self._shapes_differ(shapes),
            new_slots,
            freed,
            desired=desired,
            intent_slots=intent_slots,
        )

    def _plan_changes(self, delta: RuleDelta, restore_slots: Mapping[str, int]) -> Plan:
        upserted = {rule.intent_id for rule in delta.upserts}
        if len(upserted) != len(delta.upserts):
            raise ValueError("a delta upserts each intent at most once")
        releasing = {rule.intent_id for rule in delta.removes}
        leaving = [
            rule.intent_id
            for rule in delta.removes
            if rule.intent_id not in upserted and rule.intent_id in self._intent_slots
        ]
        placed, new_slots, restored = self._place(delta.upserts, releasing, restore_slots)
        upserts = [entry for entry in placed if not self._holds(entry)]
        moved = [entry.intent_id for entry in placed if self._moves(entry)]
        stale_keys = {self._intent_keys[intent] for intent in leaving + moved if intent in self._intent_keys}
        stale_keys -= {entry.key_bytes for entry in placed}
        deletes = [self._installed[key] for key in sorted(stale_keys) if key in self._installed]
        shapes = self._shapes_to_c(delta.shapes, delta.max_priorities)
        return Plan(
            upserts,
            deletes,
            shapes,
            self._shapes_differ(shapes),
            new_slots,
            [self._intent_slots[intent] for intent in leaving],
            restored_slots=restored,
            placed=placed,
            leaving=leaving,
        )

    def _place(
        self, rules: Sequence[CompiledRule], releasing: set[str], restore_slots: Mapping[str, int]
    ) -> tuple[list[InstalledRule], list[int], list[int]]:
        """Each rule as the entry it becomes, and the slots that took: its intent's slot, a found
        rule's, the one it is to get back, or a new one."""
        placed: list[InstalledRule] = []
        new_slots: list[int] = []
        restored: list[int] = []
        try:
            for rule in rules:
                key = rule_key(rule, self.tunnel_ends.id_of)
                current = self._installed.get(struct_bytes(key))
                self._check_takeover(rule, current, releasing)
                slot = self._intent_slots.get(rule.intent_id)
                if slot is None and self._is_unowned(current):
                    assert current is not None
                    slot = current.rule.slot
                if slot is None and rule.intent_id in restore_slots:
                    if self._slots.take(restore_slots[rule.intent_id]):
                        slot = restore_slots[rule.intent_id]
                        restored.append(slot)
                if slot is None:
                    slot = self._slots.allocate()
                    new_slots.append(slot)
                placed.append(InstalledRule(key, rule_value(rule, slot), rule.intent_id,
                                            (rule.police, rule.shared_police), rule.copies))
        except (DataplaneError, ValueError):
            self._release(new_slots + restored)
            raise
        return placed, new_slots, restored

    @staticmethod
    def _check_takeover(rule: CompiledRule, current: Optional[InstalledRule], releasing: set[str]) -> None:
        """A key held by another intent may only be taken over when the delta removes its rule."""
        owner = current.intent_id if current is not None else None
        if owner is not None and owner != rule.intent_id and owner not in releasing:
            raise ValueError(f"{rule.intent_id!r} would take over the key of {owner!r}, which stays")

    def _is_unowned(self, entry: Optional[InstalledRule]) -> bool:
        """A rule found in the maps (or left over) whose slot no intent uses: a new rule at its key
        may take the slot over, counters and all."""
        return entry is not None and entry.intent_id is None and entry.rule.slot not in self._slot_intents

    def _moves(self, entry: InstalledRule) -> bool:
        """The entry's intent is installed under another key, which it leaves."""
        assert entry.intent_id is not None
        return self._intent_keys.get(entry.intent_id, entry.key_bytes) != entry.key_bytes

    def _holds(self, entry: InstalledRule) -> bool:
        """The map already holds this entry (same key, same value, same owner)."""
        current = self._installed.get(entry.key_bytes)
        return current is not None and current.intent_id == entry.intent_id and current.same_value(entry)

    @staticmethod
    def _shapes_to_c(shapes: Sequence[Any], max_priorities: Sequence[int]) -> list[Shape]:
        converted = [shape_to_c(shape, top) for shape, top in zip(shapes, max_priorities, strict=True)]
        _check_shape_ids(shapes, converted)
        return converted

    def _shapes_differ(self, shapes: list[Shape]) -> bool:
        return [struct_bytes(shape) for shape in shapes] != self._published_shapes

    def _assign_slots(self, ruleset: CompiledRuleset) -> tuple[dict[str, int], list[int]]:
        """An intent keeps its slot across applies; a new one takes a found rule's slot or a free one."""
        adoptable = {
            key: entry.rule.slot for key, entry in self._installed.items() if entry.intent_id is None
        }
        intent_slots: dict[str, int] = {}
        new_slots: list[int] = []
        try:
            for rule in ruleset.rules:
                if rule.intent_id in self._intent_slots:
                    intent_slots[rule.intent_id] = self._intent_slots[rule.intent_id]
                    continue
                found = adoptable.pop(struct_bytes(rule_key(rule, self.tunnel_ends.id_of)), None)
                if found is not None:
                    intent_slots[rule.intent_id] = found
                else:
                    intent_slots[rule.intent_id] = self._slots.allocate()
                    new_slots.append(intent_slots[rule.intent_id])
        except DataplaneError:
            for slot in new_slots:
                self._slots.release(slot)
            raise
        return intent_slots, new_slots

    def _slots_given_back(
        self, intent_slots: dict[str, int], desired: dict[bytes, InstalledRule]
    ) -> list[int]:
        kept = set(intent_slots.values())
        owned = set(self._intent_slots.values())
        found = {entry.rule.slot for entry in self._installed.values() if entry.intent_id is None}
        return sorted((owned | found) - kept)


def _check_shape_ids(shapes: Sequence[Any], converted: Sequence[Shape]) -> None:
    """Two shapes of a set never share an id (16 bits of a digest: netapp.dataplane.convert.shape_id),
    or a packet masked by one could meet the other's rules; DataplaneError naming both."""
    seen: dict[int, Any] = {}
    for shape, c_shape in zip(shapes, converted):
        other = seen.setdefault(c_shape.mask.shape, shape)
        if other is not shape:
            raise DataplaneError(
                errno.EEXIST, "publish the rule shapes",
                f"shapes {other.describe()} and {shape.describe()} have one id ({c_shape.mask.shape:#06x})",
                hint="give one of them another field or prefix length",
            )
