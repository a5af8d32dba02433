"""The data plane as the control plane sees it: verb-object methods over a userspace shadow.

Shaped like katran's KatranLb: `Dataplane` drives an injected low-level adapter (binding.DppHandle,
or fake.FakeDpp without a kernel), keeps a shadow of what it installed, allocates rule stat slots,
and maps slots back to intent ids (the data plane keys rules by match; intent ids are ours).

Two ways to change the rules, with the same write order and rollback: `apply(ruleset)` diffs a whole
ruleset against the shadow (starts and reconciles, O(n)); `apply_changes(delta)` applies the delta
of an incremental index change (netapp.intents.index), O(size of the delta).
"""

from __future__ import annotations

import errno
import heapq
import socket
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Protocol, Sequence, Union

from netapp.dataplane.binding import (
    MAPS,
    MAX_ALT_GROUPS,
    MAX_CPUS,
    MAX_RULES,
    NONE,
    Action,
    Config,
    Cpu,
    DataplaneError,
    DppHandle,
    FlowKey,
    Reason,
    Rule,
    Shape,
    ShapeSet,
    TestResult,
    Verdict,
    XdpMode,
    alt_group_to_c,
    key_from_c,
    load_libdpp,
    possible_cpus,
    rule_key,
    rule_to_c,
    rule_value,
    shape_to_c,
    struct_bytes,
)
from netapp.intents.compiler import (
    CompiledAltMember,
    CompiledDocument,
    CompiledRule,
    CompiledRuleset,
    Conflict,
    compile_document,
)
from netapp.intents.index import RuleDelta
from netapp.intents.models import IntentDocument

_ATTACH_HINTS = {
    errno.EEXIST: "the interface already has an XDP program: detach it first",
    errno.EPERM: "attaching XDP needs root (or CAP_NET_ADMIN and CAP_BPF)",
}


def mode_refused(code: int, mode: str) -> bool:
    """An attach failed for the mode asked, not for the interface: the driver does not run XDP in
    that mode (EOPNOTSUPP), or does not offload it (veth answers EINVAL)."""
    return code == errno.EOPNOTSUPP or (code == errno.EINVAL and mode == XdpMode.OFFLOAD.name.lower())


def _attach_hint(code: int, mode: str) -> str:
    if mode_refused(code, mode):
        return f"the driver does not run XDP in {mode} mode: try mode generic"
    return _ATTACH_HINTS.get(code, "")


class Adapter(Protocol):
    """What Dataplane needs from the layer below (binding.DppHandle, fake.FakeDpp)."""

    def close(self) -> None: ...
    def reused(self) -> bool: ...
    def attach(self, ifindex: int, mode: XdpMode) -> None: ...
    def detach(self, ifindex: int) -> None: ...
    def attached(self) -> list[int]: ...
    def unpin(self) -> None: ...
    def upgrade(self, *, flow_cache: bool = True, trace: bool = False) -> None: ...
    def rules_upsert(self, keys: Sequence[FlowKey], rules: Sequence[Rule]) -> None: ...
    def rules_delete(self, keys: Sequence[FlowKey]) -> None: ...
    def rules_dump(self) -> list[tuple[FlowKey, Rule]]: ...
    def shapes_publish(self, shapes: Sequence[Shape]) -> None: ...
    def shapes_get(self) -> ShapeSet: ...
    def config_get(self) -> Config: ...
    def config_set(self, config: Config) -> None: ...
    def cpu_enable(self, cpu: int, queue_size: int = 0, capacity_pps: int = 0) -> None: ...
    def cpu_disable(self, cpu: int) -> None: ...
    def cpu_set_overloaded(self, cpu: int, overloaded: bool) -> None: ...
    def cpu_get(self, cpu: int) -> Cpu: ...
    def cpumap_qsize_max(self) -> int: ...
    def port_add(self, ifindex: int) -> None: ...
    def port_remove(self, ifindex: int) -> None: ...
    def alt_group_set(self, group: int, value: Any) -> None: ...
    def alt_group_clear(self, group: int) -> None: ...
    def stats_rules(self, first: int, count: int) -> list[tuple[int, int]]: ...
    def stats_rules_array(self, first: int, count: int) -> Any: ...
    def stats_rules_clear(self, first: int, count: int) -> None: ...
    def stats_verdicts(self) -> list[tuple[int, int]]: ...
    def stats_actions(self) -> list[tuple[int, int]]: ...
    def stats_reasons(self) -> list[tuple[int, int]]: ...
    def stats_cpus(self, count: int = MAX_CPUS) -> list[tuple[int, int]]: ...
    def test_run(self, packet: bytes, ingress_ifindex: int = 0) -> tuple[TestResult, bytes]: ...
    def prog_id(self) -> int: ...
    def programs(self) -> list[dict[str, Any]]: ...
    def map_info(self, name: str) -> dict[str, int]: ...


@dataclass(frozen=True)
class PacketOutcome:
    """What one packet got from test_run. Names are lower-case except the verdict (XDP_* style)."""

    verdict: str
    action: str
    intent: Optional[str]
    cpu: Optional[int]
    reason: Optional[str]
    len: int
    data: bytes
    key: dict[str, Any]
    alt_group: Optional[int] = None
    alt_member: Optional[int] = None
    egress_ifindex: Optional[int] = None
    duration_ns: int = 0
    fast_path: Optional[bool] = None  # traced only: the N3 fast path parsed it (else the staged parser)


@dataclass(frozen=True)
class ApplyReport:
    """What apply() changed, and the collisions the ruleset reported."""

    upserted: int
    deleted: int
    shapes: int
    published: bool
    conflicts: tuple[Conflict, ...] = ()


@dataclass
class InstalledRule:
    """A rule in the kernel map, as the shadow remembers it (intent_id None: found, owner unknown)."""

    key: FlowKey
    rule: Rule
    intent_id: Optional[str]

    @property
    def key_bytes(self) -> bytes:
        return struct_bytes(self.key)

    def same_value(self, other: "InstalledRule") -> bool:
        return struct_bytes(self.rule) == struct_bytes(other.rule)


class SlotAllocator:
    """Rule stat slots: lowest free slot first, so slots stay dense and stat reads stay short."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._free: list[int] = []
        self._next = 0

    @property
    def high_water(self) -> int:
        """Every slot ever handed out is below this."""
        return self._next

    def allocate(self) -> int:
        if self._free:
            return heapq.heappop(self._free)
        if self._next >= self.capacity:
            raise DataplaneError(
                errno.ENOSPC, "allocate rule slot", f"all {self.capacity} rule slots are in use"
            )
        self._next += 1
        return self._next - 1

    def release(self, slot: int) -> None:
        heapq.heappush(self._free, slot)

    def reserve_many(self, slots: Iterable[int]) -> None:
        """Mark found slots as taken, all at once: O(n), where one reserve() each is O(n) apiece."""
        taken = set(slots)
        if not taken:
            return
        new_next = max(self._next, max(taken) + 1)
        free = (set(self._free) | set(range(self._next, new_next))) - taken
        self._next = new_next
        self._free = sorted(free)  # a sorted list is a heap

    def take(self, slot: int) -> bool:
        """Take this very slot if it is free (to give an intent back the slot it had)."""
        if slot >= self.capacity:
            return False
        if slot >= self._next or slot in self._free:
            self.reserve(slot)
            return True
        return False

    def reserve(self, slot: int) -> None:
        """Mark a slot found in a reused instance as taken."""
        if slot in self._free:
            self._free.remove(slot)
            heapq.heapify(self._free)
            return
        for unused in range(self._next, slot):
            heapq.heappush(self._free, unused)
        self._next = max(self._next, slot + 1)


@dataclass
class _Plan:
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

    @property
    def writes(self) -> bool:
        return bool(self.shapes_changed or self.upserts or self.deletes)


def host_interfaces() -> dict[str, int]:
    """Interface name -> ifindex of this host's network namespace."""
    return {name: index for index, name in socket.if_nameindex()}


def interface_index(ifname: str) -> int:
    try:
        return socket.if_nametoindex(ifname)
    except OSError:
        raise DataplaneError(
            errno.ENODEV, f"resolve interface {ifname}", f"no interface named {ifname!r}"
        ) from None


class Dataplane:
    """One DPP instance: rules from compiled intents, alternatives, CPUs, ports, stats, test runs."""

    def __init__(self, adapter: Adapter, *, trace: bool = False, max_rules: int = MAX_RULES):
        self._dpp = adapter
        self._trace = trace
        self._slots = SlotAllocator(max_rules)
        self._installed: dict[bytes, InstalledRule] = {}
        self._intent_slots: dict[str, int] = {}
        self._slot_intents: dict[int, str] = {}
        self._intent_keys: dict[str, bytes] = {}
        self._published_shapes: list[bytes] = []
        self._ports: set[int] = set()
        self._alt_groups: set[int] = set()
        self._cpus: set[int] = set()
        self._counter_epoch = 0
        self._slot_epochs: dict[int, int] = {}

    @classmethod
    def open(
        cls,
        instance: Optional[str] = None,
        trace: bool = False,
        flow_cache: bool = True,
        max_rules: int = MAX_RULES,
        default_verdict: Union[Verdict, str] = Verdict.PASS,
        *,
        max_flows: int = 0,
        meter_window_ns: int = 0,
        libdpp_path: Optional[str] = None,
    ) -> "Dataplane":
        """Open (or, when `instance` is pinned, reopen) an instance; instance None: anonymous."""
        handle = DppHandle.open(
            load_libdpp(libdpp_path),
            instance,
            max_rules=max_rules,
            max_flows=max_flows,
            flow_cache=flow_cache,
            trace=trace,
            default_verdict=_verdict(default_verdict),
            meter_window_ns=meter_window_ns,
        )
        dataplane = cls(handle, trace=trace, max_rules=max_rules)
        if handle.reused():
            dataplane.adopt_installed_rules()
        return dataplane

    # --- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        self._dpp.close()

    def __enter__(self) -> "Dataplane":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def attach(self, ifname: str, mode: Union[XdpMode, str] = XdpMode.NATIVE) -> int:
        """Attach the program to an interface; returns its ifindex."""
        ifindex = interface_index(ifname)
        mode = XdpMode[mode.upper()] if isinstance(mode, str) else mode
        try:
            self._dpp.attach(ifindex, mode)
        except DataplaneError as exc:
            exc.hint = exc.hint or _attach_hint(exc.errno, mode.name.lower())
            exc.op = f"attach {ifname} ({mode.name.lower()})"
            raise
        return ifindex

    def detach(self, ifname: str) -> None:
        self._dpp.detach(interface_index(ifname))

    def attached(self) -> list[int]:
        """Ifindexes this instance is attached to."""
        return self._dpp.attached()

    def unpin(self) -> None:
        """Remove the instance's pins (and so detach it); the handle stays usable until close()."""
        self._dpp.unpin()

    def reload(self, flow_cache: bool = True) -> tuple[int, int]:
        """Replace the running program with the one this build carries, under traffic.

        The maps stay, so rules, counters, CPUs and alternatives carry over and the facade's view
        of them stays true; every attached interface switches program in one step. Returns the
        program ids before and after. On failure the previous program keeps running.
        """
        before = self._dpp.prog_id()
        self._dpp.upgrade(flow_cache=flow_cache, trace=self._trace)
        return before, self._dpp.prog_id()

    def adopt_installed_rules(self) -> None:
        """Take over the rules of a reused (pinned) instance; the next apply() reconciles them.

        Their owners are unknown until then: an intent whose rule has the same key keeps the slot
        (and so its counters); the others are deleted.
        """
        for key, rule in self._dpp.rules_dump():
            entry = InstalledRule(key, rule, None)
            self._installed[entry.key_bytes] = entry
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

    # --- rules ------------------------------------------------------------------------------

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
        plan = self._plan(ruleset)
        self._execute(plan)
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
        plan = self._plan_changes(delta, restore_slots or {})
        self._execute(plan)
        return ApplyReport(len(plan.upserts), len(plan.deletes), len(plan.shapes), plan.writes)

    def _execute(self, plan: _Plan) -> None:
        try:
            self._clear_counters(plan.new_slots)
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

    def _release(self, slots: Sequence[int]) -> None:
        for slot in slots:
            self._slots.release(slot)

    def _plan(self, ruleset: CompiledRuleset) -> _Plan:
        intent_slots, new_slots = self._assign_slots(ruleset)
        desired: dict[bytes, InstalledRule] = {}
        for rule in ruleset.rules:
            key, value = rule_to_c(rule, intent_slots[rule.intent_id])
            entry = InstalledRule(key, value, rule.intent_id)
            desired[entry.key_bytes] = entry
        upserts = [
            entry
            for key, entry in desired.items()
            if key not in self._installed or not self._installed[key].same_value(entry)
        ]
        deletes = [entry for key, entry in self._installed.items() if key not in desired]
        shapes = self._shapes_to_c(ruleset.shapes, ruleset.max_priorities)
        freed = self._slots_given_back(intent_slots, desired)
        return _Plan(
            upserts,
            deletes,
            shapes,
            self._shapes_differ(shapes),
            new_slots,
            freed,
            desired=desired,
            intent_slots=intent_slots,
        )

    def _plan_changes(self, delta: RuleDelta, restore_slots: Mapping[str, int]) -> _Plan:
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
        return _Plan(
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
                key = rule_key(rule)
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
                placed.append(InstalledRule(key, rule_value(rule, slot), rule.intent_id))
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
        return [shape_to_c(shape, top) for shape, top in zip(shapes, max_priorities, strict=True)]

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
                found = adoptable.pop(struct_bytes(rule_to_c(rule)[0]), None)
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

    def _upsert_or_roll_back(self, plan: _Plan) -> None:
        try:
            self._dpp.rules_upsert(
                [entry.key for entry in plan.upserts], [entry.rule for entry in plan.upserts]
            )
        except DataplaneError as exc:
            self._roll_back_or_say_so(plan, exc, getattr(exc, "done", len(plan.upserts)))
            raise

    def _publish_or_roll_back(self, plan: _Plan) -> None:
        try:
            self._dpp.shapes_publish(plan.shapes)
        except DataplaneError as exc:
            self._roll_back_or_say_so(plan, exc, len(plan.upserts))
            raise

    def _roll_back_or_say_so(self, plan: _Plan, exc: DataplaneError, done: int) -> None:
        """Undo the upserts; mark on `exc` whether that worked (and why not when it did not)."""
        try:
            self._roll_back_upserts(plan, done)
        except DataplaneError as undo_failure:
            exc.rolled_back = False  # type: ignore[attr-defined]
            exc.hint = "; ".join(filter(None, [exc.hint, f"undoing it failed too ({undo_failure})"]))
            return
        exc.rolled_back = True  # type: ignore[attr-defined]

    def _roll_back_upserts(self, plan: _Plan, done: int) -> None:
        """Put back what the old shapes expect: remove added rules, restore changed ones."""
        applied = plan.upserts[:done]
        added = [entry.key for entry in applied if entry.key_bytes not in self._installed]
        changed = [
            self._installed[entry.key_bytes] for entry in applied if entry.key_bytes in self._installed
        ]
        self._dpp.rules_delete(added)
        self._dpp.rules_upsert([entry.key for entry in changed], [entry.rule for entry in changed])
        self._release(plan.new_slots + plan.restored_slots)

    def _publish_after_deletes(self, plan: _Plan) -> None:
        """Publish again so flows cached from the deleted rules are classified afresh. The maps
        already hold the new state; if this fails, the next apply publishes in its place."""
        try:
            self._dpp.shapes_publish(plan.shapes)
        except DataplaneError as exc:
            self._published_shapes = []
            exc.rolled_back = False  # type: ignore[attr-defined]
            raise

    def _delete_removed(self, plan: _Plan) -> None:
        try:
            self._dpp.rules_delete([entry.key for entry in plan.deletes])
        except DataplaneError as exc:
            # The new rules are live; keep the leftovers in the shadow (owner unknown) for the next apply.
            done = getattr(exc, "done", 0)
            self._commit(plan, leftovers=plan.deletes[done:])
            exc.rolled_back = False  # type: ignore[attr-defined]
            raise

    def _commit(self, plan: _Plan, leftovers: Sequence[InstalledRule] = ()) -> None:
        if plan.desired is not None:
            self._commit_full(plan)
        else:
            self._commit_changes(plan)
        for entry in leftovers:
            self._installed[entry.key_bytes] = InstalledRule(entry.key, entry.rule, None)
        leftover_slots = {entry.rule.slot for entry in leftovers}
        for slot in plan.freed_slots:
            if slot not in leftover_slots:
                self._slots.release(slot)
        self._published_shapes = [struct_bytes(shape) for shape in plan.shapes]

    def _commit_full(self, plan: _Plan) -> None:
        assert plan.desired is not None and plan.intent_slots is not None
        self._installed = dict(plan.desired)
        self._intent_slots = plan.intent_slots
        self._slot_intents = {slot: intent for intent, slot in plan.intent_slots.items()}
        self._intent_keys = {entry.intent_id: key for key, entry in plan.desired.items() if entry.intent_id}

    def _commit_changes(self, plan: _Plan) -> None:
        for entry in plan.deletes:
            self._installed.pop(entry.key_bytes, None)
        for intent in plan.leaving:
            slot = self._intent_slots.pop(intent)
            self._intent_keys.pop(intent, None)
            if self._slot_intents.get(slot) == intent:
                del self._slot_intents[slot]
        for entry in plan.placed:
            assert entry.intent_id is not None
            self._installed[entry.key_bytes] = entry
            self._intent_slots[entry.intent_id] = entry.rule.slot
            self._slot_intents[entry.rule.slot] = entry.intent_id
            self._intent_keys[entry.intent_id] = entry.key_bytes

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

    def dump_rules(self) -> dict[bytes, bytes]:
        """Key bytes -> rule bytes, read from the map itself (not the shadow): for checks."""
        return {struct_bytes(key): struct_bytes(rule) for key, rule in self._dpp.rules_dump()}

    # --- alternatives, CPUs, ports, config ---------------------------------------------------

    def set_alternative(self, group_id: int, members: Sequence[CompiledAltMember]) -> None:
        """Publish an alternative group; member egress interfaces become ports first. No members
        (none alive): the group's entry is cleared, so its overflow takes the default verdict."""
        if not members:
            self.clear_alternative(group_id)
            return
        value = alt_group_to_c(members)
        for member in members:
            if member.ifindex:
                self.add_port(member.ifindex)
        self._dpp.alt_group_set(group_id, value)
        self._alt_groups.add(group_id)

    def clear_alternative(self, group_id: int) -> None:
        self._dpp.alt_group_clear(group_id)
        self._alt_groups.discard(group_id)

    def enable_cpu(self, cpu: int, capacity_pps: int = 0, queue_size: int = 0) -> None:
        self._dpp.cpu_enable(cpu, queue_size, capacity_pps)
        self._cpus.add(cpu)

    def disable_cpu(self, cpu: int) -> None:
        self._dpp.cpu_disable(cpu)
        self._cpus.discard(cpu)

    def set_cpu_overloaded(self, cpu: int, overloaded: bool = True) -> None:
        self._dpp.cpu_set_overloaded(cpu, overloaded)

    def cpu_queue_limit(self) -> int:
        """The largest CPUMAP queue_size the running kernel takes."""
        return self._dpp.cpumap_qsize_max()

    def cpu_state(self, cpu: int) -> dict[str, int]:
        state = self._dpp.cpu_get(cpu)
        return {name: getattr(state, name) for name, _ in Cpu._fields_}

    def adopt_site_state(self) -> None:
        """After a restart: take every alternative group as possibly set and read which CPUs are
        enabled, so that the next apply_compiled() clears what the desired state no longer has.
        (Ports cannot be listed; stale ones stay, which only allows redirects to them.)"""
        self._alt_groups = set(range(MAX_ALT_GROUPS))
        self._cpus = set(self.enabled_cpus())

    def enabled_cpus(self) -> list[int]:
        """CPUs of the CPU set that are enabled in the map."""
        candidates = range(min(MAX_CPUS, possible_cpus()))
        return [cpu for cpu in candidates if self._dpp.cpu_get(cpu).enabled]

    def add_port(self, ifindex: int) -> None:
        if ifindex not in self._ports:
            self._dpp.port_add(ifindex)
            self._ports.add(ifindex)

    def remove_port(self, ifindex: int) -> None:
        self._dpp.port_remove(ifindex)
        self._ports.discard(ifindex)

    def set_default_verdict(self, verdict: Union[Verdict, str]) -> None:
        config = self._dpp.config_get()
        config.default_verdict = _verdict(verdict)
        self._dpp.config_set(config)

    def set_default_alternative(self, group_id: Optional[int]) -> None:
        config = self._dpp.config_get()
        config.default_alt_group = NONE if group_id is None else group_id
        self._dpp.config_set(config)

    def set_meter_window(self, window_ns: int) -> None:
        """Meter every CPU's capacity over windows of `window_ns`; a change recomputes each CPU's
        budget and restarts its meter (libdpp's dpp_config_set)."""
        config = self._dpp.config_get()
        if config.meter_window_ns != window_ns:
            config.meter_window_ns = window_ns
            self._dpp.config_set(config)

    def config(self) -> dict[str, int]:
        current = self._dpp.config_get()
        return {name: getattr(current, name) for name, _ in Config._fields_}

    # --- documents ---------------------------------------------------------------------------

    def apply_document(self, document: IntentDocument, interfaces: Mapping[str, int]) -> ApplyReport:
        """Compile a document and apply all of it; everything rules refer to is in place first."""
        return self.apply_compiled(compile_document(document, interfaces))

    def apply_compiled(self, compiled: CompiledDocument) -> ApplyReport:
        """Ports, alternative groups, CPUs and defaults first, then the rules that use them."""
        self._apply_site(compiled)
        return self.apply(compiled.ruleset)

    def _apply_site(self, compiled: CompiledDocument) -> None:
        for ifindex in sorted(compiled.redirect_ifindexes):
            self.add_port(ifindex)
        for group in compiled.alternatives:
            self.set_alternative(group.group_id, group.members)
        for group_id in sorted(self._alt_groups - {group.group_id for group in compiled.alternatives}):
            self.clear_alternative(group_id)
        for spec in compiled.cpus:
            self.enable_cpu(spec.cpu, spec.capacity_pps, spec.queue_size)
            self.set_cpu_overloaded(spec.cpu, spec.overloaded)
        for cpu in sorted(self._cpus - {spec.cpu for spec in compiled.cpus}):
            self.disable_cpu(cpu)
        self.set_default_verdict(compiled.default_verdict)
        self.set_default_alternative(compiled.default_alternative)

    # --- status ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """Program ids (the entry's, every program's), each map's id and size, and the fill of the
        maps the facade tracks (None where it does not: arrays by CPU or slot are always full)."""
        entries = {
            "dpp_rules": len(self._installed),
            "dpp_alt_groups": len(self._alt_groups),
            "dpp_cpu_map": len(self._cpus),
            "dpp_ports": len(self._ports),
        }
        maps = {name: {**self._dpp.map_info(name), "entries": entries.get(name)} for name in MAPS}
        return {
            "program_id": self._dpp.prog_id(),
            "programs": self._dpp.programs(),
            "maps": maps,
            "shapes": len(self._published_shapes),
            "rules": len(self._installed),
            "intents": len(self._intent_slots),
        }

    # --- statistics --------------------------------------------------------------------------

    def rule_stats(self) -> dict[str, tuple[int, int]]:
        """Intent id -> (packets, bytes) summed over CPUs."""
        counters = self._dpp.stats_rules(0, self._slots.high_water)
        return {intent: counters[slot] for intent, slot in sorted(self._intent_slots.items())}

    def program_id(self) -> int:
        """The kernel's id of the loaded program: a new one means a reload (counters restart)."""
        return self._dpp.prog_id()

    def map_id(self, name: str) -> int:
        return self._dpp.map_info(name)["id"]

    def rule_counter_array(self) -> Any:
        """A (slots, 2) uint64 array of [packets, bytes] indexed by stat slot (installed_intents
        says whose): the bulk form of rule_stats, for the telemetry collector."""
        return self._dpp.stats_rules_array(0, self._slots.high_water)

    def verdict_stats(self) -> dict[str, tuple[int, int]]:
        return _named(Verdict, self._dpp.stats_verdicts(), upper=True)

    def action_stats(self) -> dict[str, tuple[int, int]]:
        return _named(Action, self._dpp.stats_actions())

    def reason_stats(self) -> dict[str, tuple[int, int]]:
        return _named(Reason, self._dpp.stats_reasons())

    def cpu_stats(self) -> dict[int, tuple[int, int]]:
        """CPU id -> (packets, bytes) STEER handed to that CPU, summed over the receiving CPUs.
        Every CPU of the set, and any other that was steered to before it left the set."""
        counters = self._dpp.stats_cpus(MAX_CPUS)
        return {
            cpu: tuple(counter)  # type: ignore[misc]
            for cpu, counter in enumerate(counters)
            if cpu in self._cpus or any(counter)
        }

    # --- test runs ---------------------------------------------------------------------------

    def test_run(self, packet: bytes, ingress_ifindex: int = 0) -> PacketOutcome:
        """Run one packet through the program (BPF_PROG_TEST_RUN); needs an instance opened with trace
        for action/intent/cpu/reason/key (else action is "untraced")."""
        result, data = self._dpp.test_run(bytes(packet), ingress_ifindex)
        verdict = _enum_name(Verdict, result.verdict, upper=True)
        if not self._trace:
            return PacketOutcome(
                verdict, "untraced", None, None, None, len(data), data, {}, duration_ns=result.duration_ns
            )
        return self._traced_outcome(verdict, result, data)

    def _traced_outcome(self, verdict: str, result: TestResult, data: bytes) -> PacketOutcome:
        trace = result.trace
        return PacketOutcome(
            verdict=verdict,
            action=_enum_name(Action, trace.action),
            intent=self.intent_of_slot(trace.slot),
            cpu=_optional(trace.cpu),
            reason=None if trace.reason == Reason.NONE else _enum_name(Reason, trace.reason),
            len=len(data),
            data=data,
            key=key_from_c(trace.key),
            alt_group=_optional(trace.alt_group),
            alt_member=_optional(trace.alt_member) if trace.alt_group != NONE else None,
            egress_ifindex=trace.egress_ifindex or None,
            duration_ns=result.duration_ns,
            fast_path=bool(trace.fast_path),
        )


def contiguous_runs(slots: Sequence[int]) -> list[tuple[int, int]]:
    """[3, 4, 5, 9] -> [(3, 3), (9, 1)]: (first, count) runs, so counters clear in few calls."""
    runs: list[tuple[int, int]] = []
    for slot in sorted(set(slots)):
        if runs and runs[-1][0] + runs[-1][1] == slot:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((slot, 1))
    return runs


def _verdict(verdict: Union[Verdict, str, int]) -> Verdict:
    if isinstance(verdict, str):
        return Verdict[verdict.upper()]
    return Verdict(verdict)


def _optional(value: int) -> Optional[int]:
    return None if value == NONE else value


def _enum_name(enum_type: Any, value: int, upper: bool = False) -> str:
    try:
        name = enum_type(value).name
    except ValueError:
        name = f"unknown({value})"
    return name if upper else name.lower()


def _named(
    enum_type: Any, counters: Sequence[tuple[int, int]], upper: bool = False
) -> dict[str, tuple[int, int]]:
    return {_enum_name(enum_type, index, upper): tuple(counter) for index, counter in enumerate(counters)}  # type: ignore[misc]
