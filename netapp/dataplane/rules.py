"""Applying rules to the maps: Dataplane's writing half (a mixin), with its write order, rollback and
the shadow of what is installed.

Two ways to change the rules, with the same write order and rollback: `apply(ruleset)` diffs a whole
ruleset against the shadow (starts and reconciles, O(n)); `apply_changes(delta)` applies the delta
of an incremental index change (netapp.intents.index), O(size of the delta).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional, Sequence

from netapp.dataplane.binding import Action, DataplaneError, RuleFlag, struct_bytes
from netapp.dataplane.plan import Plan, RulePlanner
from netapp.dataplane.slots import InstalledRule, SlotAllocator, contiguous_runs
from netapp.intents.compiler import CompiledRuleset, Conflict
from netapp.intents.index import RuleDelta

if TYPE_CHECKING:
    from netapp.dataplane.facade import Adapter
    from netapp.dataplane.tables import Table
    from netapp.duplicate.groups import CopyGroups
    from netapp.dataplane.tunnel_ends import TunnelEnds
    from netapp.mec.tunnel_entries import TunnelEntries
    from netapp.qos.rules import RulePolicers


@dataclass(frozen=True)
class ApplyReport:
    """What apply() changed, and the collisions the ruleset reported."""

    upserted: int
    deleted: int
    shapes: int
    published: bool
    conflicts: tuple[Conflict, ...] = ()


class RuleWriter(RulePlanner):
    """Rules from compiled intents: apply, undo, and what the shadow says is installed."""

    _dpp: Adapter
    _counter_epoch: int
    _slot_epochs: dict[int, int]
    _rule_policers: Optional[RulePolicers] = None
    _copy_groups: Optional[CopyGroups] = None
    tunnel_entries: TunnelEntries
    tunnel_ends: TunnelEnds

    def table(self, name: str) -> Table: ...

    @property
    def rule_policers(self) -> RulePolicers:
        """The policers of the rules (netapp.qos.rules), opened at first use."""
        if self._rule_policers is None:
            from netapp.qos.rules import RulePolicers  # it imports the data plane's tables

            self._rule_policers = RulePolicers(self.table)
        return self._rule_policers

    @property
    def copy_groups(self) -> CopyGroups:
        """The copy groups of the DUPLICATE rules (netapp.duplicate.groups), opened at first use."""
        if self._copy_groups is None:
            from netapp.duplicate.groups import CopyGroups  # it imports the data plane's tables

            self._copy_groups = CopyGroups(self.table, self.program_fd)
        return self._copy_groups

    def program_fd(self, name: str) -> int: ...

    def adopt_installed_rules(self) -> None:
        """Take over the rules of a reused (pinned) instance; the next apply() reconciles them.

        Their owners are unknown until then: an intent whose rule has the same key keeps the slot
        (and so its counters); the others are deleted.
        """
        for key, rule in self._dpp.rules_dump():
            entry = InstalledRule(key, rule, None)
            self._installed[entry.key_bytes] = entry
        self.tunnel_entries.recount(_tunnel_ids(self._installed.values()))
        self.tunnel_ends.adopt()
        self.tunnel_ends.recount(_end_ids(self._installed.values()))
        self._slots.reserve_many(entry.rule.slot for entry in self._installed.values())
        shape_set = self._dpp.shapes_get()
        self._published_shapes = [struct_bytes(shape_set.shapes[i]) for i in range(shape_set.count)]

    def resync(self) -> None:
        """Forget the shadow and read the rules from the maps again, as after a restart.

        For when the shadow may be wrong: another handle wrote the maps, or undoing a failed change
        failed too. The next apply() then reconciles the maps, keeping the slots of unchanged keys.
        """
        self._installed = {}
        self._intent_slots = {}
        self._slot_intents = {}
        self._intent_keys = {}
        self._slots = SlotAllocator(self._slots.capacity)
        self.adopt_installed_rules()

    def apply(self, ruleset: CompiledRuleset) -> ApplyReport:
        """Make the data plane hold exactly `ruleset`, without a packet seeing a half state.

        Order: zero the counters of new slots; upsert new and changed rules; publish the shapes
        (which bumps the generation, so cached flows are classified again); delete the rules no
        published shape needs any more; publish again so flows cached from the deleted rules in the
        meantime are classified again too.

        A new rule's key carries its shape's id, which only that shape's mask produces, so no
        packet meets a rule before the shape set that holds its shape is published. A changed rule
        whose key stays is replaced atomically per key.

        A DataplaneError carries `rolled_back`: True when the maps and the shadow are as before the
        call; False when the new rules are live but deleting the old ones, or the last publish,
        failed (applying again converges).
        """
        plan = self._planned_and_executed(lambda: self._plan(ruleset))
        return ApplyReport(
            len(plan.upserts), len(plan.deletes), len(plan.shapes), plan.writes, ruleset.conflicts
        )

    def apply_changes(
        self, delta: RuleDelta, restore_slots: Optional[Mapping[str, int]] = None
    ) -> ApplyReport:
        """Apply a delta (netapp.intents.index) with apply()'s order and rollback guarantees.

        Costs O(size of the delta) plus the shape publish, whatever the number of installed rules:
        an upserted intent keeps its slot (or takes a new one), a key no rule of the delta takes
        over is deleted, and a removed intent that is not upserted gives back its slot. Rules left
        over from an earlier run (owner unknown) stay until the next apply().

        restore_slots: intent -> the slot it had, for undoing a change: an intent coming back takes
        its old slot, if still free, with its counters as they were (see `slots_of`).
        """
        plan = self._planned_and_executed(lambda: self._plan_changes(delta, restore_slots or {}))
        return ApplyReport(len(plan.upserts), len(plan.deletes), len(plan.shapes), plan.writes)

    def _planned_and_executed(self, make_plan: Callable[[], Plan]) -> Plan:
        """The plan, executed. A change refused with the maps as before (planning failed, or the
        maps refused it and it was rolled back) frees the tunnel entries written for it before its
        error is raised: none of its rules names them. When the maps are not as before
        (`rolled_back` False: the new rules are live, or undoing them failed and rules the shadow
        does not know may name them), they stay for the undo or the reconcile that follows."""
        try:
            plan = make_plan()
            self._execute(plan)
        except (DataplaneError, ValueError) as exc:
            if getattr(exc, "rolled_back", True):
                self.tunnel_entries.free()
            raise
        return plan

    def _execute(self, plan: Plan) -> None:
        duplicates = self._touches_duplicates(plan)
        try:
            self._clear_counters(plan.new_slots)
            if duplicates:
                self._groups_before(plan)
        except DataplaneError as exc:
            self._release(plan.new_slots + plan.restored_slots)
            exc.rolled_back = True  # type: ignore[attr-defined]
            raise
        try:
            self._police_before(plan)
        except DataplaneError as exc:
            self._release(plan.new_slots + plan.restored_slots)
            exc.rolled_back = True  # type: ignore[attr-defined]
            raise
        self._upsert_or_roll_back(plan)
        if plan.shapes_changed or plan.upserts:
            self._publish_or_roll_back(plan)
        if plan.deletes:
            self._delete_removed(plan)
            self._commit(plan)
            self._publish_after_deletes(plan)
        else:
            self._commit(plan)
        if plan.desired is None and self._rule_policers is not None:
            self._rule_policers.leave(plan.leaving)
            self._rule_policers.settle()
        if duplicates:
            self.copy_groups.settle(
                entry.rule.arg for entry in self._installed.values() if entry.rule.action == Action.DUPLICATE
            )
        self.tunnel_entries.free()
        self.tunnel_ends.free()

    def _touches_duplicates(self, plan: Plan) -> bool:
        """Whether the plan writes, replaces or deletes a DUPLICATE rule (a full plan always may: it
        settles the groups a restart found). Only then are the groups placed and settled, which
        reads every installed rule."""
        if plan.desired is not None:
            return True
        changed = [*plan.upserts, *plan.deletes, *plan.placed]
        changed += [self._installed[entry.key_bytes] for entry in plan.upserts if entry.key_bytes in self._installed]
        return any(entry.rule.action == Action.DUPLICATE for entry in changed)

    def _groups_before(self, plan: Plan) -> None:
        """The copy groups the plan's DUPLICATE rules name, in the maps before the rules."""
        entries = plan.desired.values() if plan.desired is not None else plan.placed
        self.copy_groups.place(
            {entry.rule.arg: entry.copies for entry in entries if entry.rule.action == Action.DUPLICATE}
        )

    def _police_before(self, plan: Plan) -> None:
        """The policers the rules name, and their slots' ids, before the rules (netapp.qos.rules): a
        full plan reconciles the rules' whole range; a delta writes only what its rules ask for."""
        if plan.desired is not None:
            self.rule_policers.reconcile(
                (entry.intent_id, entry.rule.slot, entry.policing) for entry in plan.desired.values() if entry.intent_id
            )
            return
        if self._rule_policers is None and not any(entry.rule.flags & RuleFlag.POLICED for entry in plan.placed):
            return  # nothing was ever policed by this handle, nor is now
        plan.undo_police = self.rule_policers.place(
            (entry.intent_id, entry.rule.slot, entry.policing) for entry in plan.placed if entry.intent_id
        )

    def _clear_counters(self, slots: Sequence[int]) -> None:
        for first, count in contiguous_runs(slots):
            self._dpp.stats_rules_clear(first, count)
        self._counter_epoch += 1
        for slot in slots:
            self._slot_epochs[slot] = self._counter_epoch

    def slot_epoch(self, slot: int) -> int:
        """When this handle last zeroed the slot's counters (0: not since it opened): a slot whose
        epoch changed counts from zero again, whatever its counters say (telemetry rates)."""
        return self._slot_epochs.get(slot, 0)

    def _upsert_or_roll_back(self, plan: Plan) -> None:
        try:
            self._dpp.rules_upsert(
                [entry.key for entry in plan.upserts], [entry.rule for entry in plan.upserts]
            )
        except DataplaneError as exc:
            self._roll_back_or_say_so(plan, exc, getattr(exc, "done", len(plan.upserts)))
            raise

    def _publish_or_roll_back(self, plan: Plan) -> None:
        try:
            self._dpp.shapes_publish(plan.shapes)
        except DataplaneError as exc:
            self._roll_back_or_say_so(plan, exc, len(plan.upserts))
            raise

    def _roll_back_or_say_so(self, plan: Plan, exc: DataplaneError, done: int) -> None:
        """Undo the upserts; mark on `exc` whether that worked (and why not when it did not)."""
        try:
            self._roll_back_upserts(plan, done)
        except DataplaneError as undo_failure:
            exc.rolled_back = False  # type: ignore[attr-defined]
            exc.hint = "; ".join(filter(None, [exc.hint, f"undoing it failed too ({undo_failure})"]))
            return
        exc.rolled_back = True  # type: ignore[attr-defined]

    def _roll_back_upserts(self, plan: Plan, done: int) -> None:
        """Put back what the old shapes expect: remove added rules, restore changed ones."""
        applied = plan.upserts[:done]
        added = [entry.key for entry in applied if entry.key_bytes not in self._installed]
        changed = [
            self._installed[entry.key_bytes] for entry in applied if entry.key_bytes in self._installed
        ]
        plan.undo_police()  # first: whatever of the rules' undo fails, the policers are as before
        self._dpp.rules_delete(added)
        self._dpp.rules_upsert([entry.key for entry in changed], [entry.rule for entry in changed])
        self._release(plan.new_slots + plan.restored_slots)

    def _publish_after_deletes(self, plan: Plan) -> None:
        """Publish again so flows cached from the deleted rules are classified afresh. The maps
        already hold the new state; if this fails, the next apply publishes in its place."""
        try:
            self._dpp.shapes_publish(plan.shapes)
        except DataplaneError as exc:
            self._published_shapes = []
            exc.rolled_back = False  # type: ignore[attr-defined]
            raise

    def _delete_removed(self, plan: Plan) -> None:
        try:
            self._dpp.rules_delete([entry.key for entry in plan.deletes])
        except DataplaneError as exc:
            # The new rules are live; keep the leftovers in the shadow (owner unknown) for the next apply.
            done = getattr(exc, "done", 0)
            self._commit(plan, leftovers=plan.deletes[done:])
            exc.rolled_back = False  # type: ignore[attr-defined]
            raise

    def _commit(self, plan: Plan, leftovers: Sequence[InstalledRule] = ()) -> None:
        if plan.desired is not None:
            self._commit_full(plan)
        else:
            self._commit_changes(plan)
        for entry in leftovers:
            self._install(InstalledRule(entry.key, entry.rule, None))
        leftover_slots = {entry.rule.slot for entry in leftovers}
        for slot in plan.freed_slots:
            if slot not in leftover_slots:
                self._slots.release(slot)
        self._published_shapes = [struct_bytes(shape) for shape in plan.shapes]

    def _commit_full(self, plan: Plan) -> None:
        assert plan.desired is not None and plan.intent_slots is not None
        self._installed = dict(plan.desired)
        self.tunnel_entries.recount(_tunnel_ids(self._installed.values()))
        self.tunnel_ends.recount(_end_ids(self._installed.values()))
        self._intent_slots = plan.intent_slots
        self._slot_intents = {slot: intent for intent, slot in plan.intent_slots.items()}
        self._intent_keys = {entry.intent_id: key for key, entry in plan.desired.items() if entry.intent_id}

    def _commit_changes(self, plan: Plan) -> None:
        for entry in plan.deletes:
            self._uninstall(entry.key_bytes)
        for intent in plan.leaving:
            slot = self._intent_slots.pop(intent)
            self._intent_keys.pop(intent, None)
            if self._slot_intents.get(slot) == intent:
                del self._slot_intents[slot]
        for entry in plan.placed:
            assert entry.intent_id is not None
            self._install(entry)
            self._intent_slots[entry.intent_id] = entry.rule.slot
            self._slot_intents[entry.rule.slot] = entry.intent_id
            self._intent_keys[entry.intent_id] = entry.key_bytes

    def _install(self, entry: InstalledRule) -> None:
        """The entry in the shadow, in place of the one at its key; its tunnel entry counted."""
        self._uninstall(entry.key_bytes)
        self._installed[entry.key_bytes] = entry
        if entry.rule.action == Action.TUNNEL:
            self.tunnel_entries.hold(entry.rule.arg)
        for end_id in _end_ids([entry]):
            self.tunnel_ends.hold(end_id)

    def _uninstall(self, key: bytes) -> None:
        """The entry at `key` out of the shadow; its tunnel entry no longer counted."""
        entry = self._installed.pop(key, None)
        if entry is None:
            return
        if entry.rule.action == Action.TUNNEL:
            self.tunnel_entries.drop(entry.rule.arg)
        for end_id in _end_ids([entry]):
            self.tunnel_ends.drop(end_id)

    def intent_of_slot(self, slot: int) -> Optional[str]:
        return self._slot_intents.get(slot)

    def slots_of(self, intents: Iterable[str]) -> dict[str, int]:
        """The slots of these intents (those installed): what an undo gives them back."""
        return {intent: self._intent_slots[intent] for intent in intents if intent in self._intent_slots}

    @property
    def installed_intents(self) -> dict[str, int]:
        """Intent id -> its stat slot."""
        return dict(self._intent_slots)

    @property
    def installed_count(self) -> int:
        """Entries in dpp_rules, as the shadow knows them (owned or left over)."""
        return len(self._installed)

    def installed_keys(self) -> dict[bytes, Optional[str]]:
        """Key bytes -> owning intent id (None: left over, owner unknown), as the shadow knows them."""
        return {key: entry.intent_id for key, entry in self._installed.items()}

    def installed_args(self, action: Action) -> list[int]:
        """The args of the rules of `action` in dpp_rules, as the shadow knows them (at start, before
        the first reconcile: the pinned maps')."""
        return [entry.rule.arg for entry in self._installed.values() if entry.rule.action == action]

    def dump_rules(self) -> dict[bytes, bytes]:
        """Key bytes -> rule bytes, read from the map itself (not the shadow): for checks."""
        return {struct_bytes(key): struct_bytes(rule) for key, rule in self._dpp.rules_dump()}


def _tunnel_ids(entries: Iterable[InstalledRule]) -> list[int]:
    """The dpp_tunnels entry each TUNNEL rule names (its arg), once per rule."""
    return [entry.rule.arg for entry in entries if entry.rule.action == Action.TUNNEL]


def _end_ids(entries: Iterable[InstalledRule]) -> list[int]:
    """The dpp_tunnel_ends ids the rules' keys hold (0: none), once per key and field."""
    return [end_id for entry in entries for end_id in (entry.key.tunnel_src, entry.key.tunnel_dst) if end_id]
