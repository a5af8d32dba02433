"""The data plane as the control plane sees it: verb-object methods over a userspace shadow.

Shaped like katran's KatranLb: `Dataplane` drives an injected low-level adapter (binding.DppHandle,
or fake.FakeDpp without a kernel), keeps a shadow of what it installed, allocates rule stat slots,
and maps slots back to intent ids (the data plane keys rules by match; intent ids are ours).
"""

from __future__ import annotations

import errno
import heapq
import socket
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Protocol, Sequence, Union

from netapp.dataplane.binding import (
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
    rule_to_c,
    shape_to_c,
    struct_bytes,
)
from netapp.intents.compiler import (
    CompiledAltMember,
    CompiledDocument,
    CompiledRuleset,
    Conflict,
    compile_document,
)
from netapp.intents.models import IntentDocument

_ATTACH_HINTS = {
    errno.EOPNOTSUPP: "native XDP is not supported by this driver: try mode generic",
    errno.EEXIST: "the interface already has an XDP program: detach it first",
    errno.EPERM: "attaching XDP needs root (or CAP_NET_ADMIN and CAP_BPF)",
}


class Adapter(Protocol):
    """What Dataplane needs from the layer below (binding.DppHandle, fake.FakeDpp)."""

    def close(self) -> None: ...
    def reused(self) -> bool: ...
    def attach(self, ifindex: int, mode: XdpMode) -> None: ...
    def detach(self, ifindex: int) -> None: ...
    def attached(self) -> list[int]: ...
    def unpin(self) -> None: ...
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
    def port_add(self, ifindex: int) -> None: ...
    def port_remove(self, ifindex: int) -> None: ...
    def alt_group_set(self, group: int, value: Any) -> None: ...
    def alt_group_clear(self, group: int) -> None: ...
    def stats_rules(self, first: int, count: int) -> list[tuple[int, int]]: ...
    def stats_rules_clear(self, first: int, count: int) -> None: ...
    def stats_verdicts(self) -> list[tuple[int, int]]: ...
    def stats_actions(self) -> list[tuple[int, int]]: ...
    def stats_reasons(self) -> list[tuple[int, int]]: ...
    def test_run(self, packet: bytes, ingress_ifindex: int = 0) -> tuple[TestResult, bytes]: ...


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
    """The difference between the shadow and a ruleset, and the slots it takes and gives back."""

    desired: dict[bytes, InstalledRule]
    upserts: list[InstalledRule]
    deletes: list[InstalledRule]
    shapes: list[Shape]
    shapes_changed: bool
    intent_slots: dict[str, int]
    new_slots: list[int] = field(default_factory=list)
    freed_slots: list[int] = field(default_factory=list)


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
        self._published_shapes: list[bytes] = []
        self._ports: set[int] = set()
        self._alt_groups: set[int] = set()
        self._cpus: set[int] = set()

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
            exc.hint = exc.hint or _ATTACH_HINTS.get(exc.errno, "")
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

    def adopt_installed_rules(self) -> None:
        """Take over the rules of a reused (pinned) instance; the next apply() reconciles them.

        Their owners are unknown until then: an intent whose rule has the same key keeps the slot
        (and so its counters); the others are deleted.
        """
        for key, rule in self._dpp.rules_dump():
            entry = InstalledRule(key, rule, None)
            self._installed[entry.key_bytes] = entry
            self._slots.reserve(rule.slot)
        shape_set = self._dpp.shapes_get()
        self._published_shapes = [struct_bytes(shape_set.shapes[i]) for i in range(shape_set.count)]

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
        """
        plan = self._plan(ruleset)
        try:
            self._clear_counters(plan.new_slots)
        except DataplaneError:
            self._release(plan.new_slots)
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
        published = bool(plan.shapes_changed or plan.upserts or plan.deletes)
        return ApplyReport(
            len(plan.upserts), len(plan.deletes), len(plan.shapes), published, ruleset.conflicts
        )

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
        shapes = [shape_to_c(shape, top) for shape, top in zip(ruleset.shapes, ruleset.max_priorities, strict=True)]
        freed = self._slots_given_back(intent_slots, desired)
        return _Plan(
            desired,
            upserts,
            deletes,
            shapes,
            [struct_bytes(shape) for shape in shapes] != self._published_shapes,
            intent_slots,
            new_slots,
            freed,
        )

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

    def _upsert_or_roll_back(self, plan: _Plan) -> None:
        try:
            self._dpp.rules_upsert(
                [entry.key for entry in plan.upserts], [entry.rule for entry in plan.upserts]
            )
        except DataplaneError as exc:
            self._roll_back_upserts(plan, getattr(exc, "done", len(plan.upserts)))
            raise

    def _publish_or_roll_back(self, plan: _Plan) -> None:
        try:
            self._dpp.shapes_publish(plan.shapes)
        except DataplaneError:
            self._roll_back_upserts(plan, len(plan.upserts))
            raise

    def _roll_back_upserts(self, plan: _Plan, done: int) -> None:
        """Put back what the old shapes expect: remove added rules, restore changed ones."""
        applied = plan.upserts[:done]
        added = [entry.key for entry in applied if entry.key_bytes not in self._installed]
        changed = [
            self._installed[entry.key_bytes] for entry in applied if entry.key_bytes in self._installed
        ]
        self._dpp.rules_delete(added)
        self._dpp.rules_upsert([entry.key for entry in changed], [entry.rule for entry in changed])
        self._release(plan.new_slots)

    def _publish_after_deletes(self, plan: _Plan) -> None:
        """Publish again so flows cached from the deleted rules are classified afresh. The maps
        already hold the new state; if this fails, the next apply publishes in its place."""
        try:
            self._dpp.shapes_publish(plan.shapes)
        except DataplaneError:
            self._published_shapes = []
            raise

    def _delete_removed(self, plan: _Plan) -> None:
        try:
            self._dpp.rules_delete([entry.key for entry in plan.deletes])
        except DataplaneError as exc:
            # The new rules are live; keep the leftovers in the shadow (owner unknown) for the next apply.
            done = getattr(exc, "done", 0)
            self._commit(plan, leftovers=plan.deletes[done:])
            raise

    def _commit(self, plan: _Plan, leftovers: Sequence[InstalledRule] = ()) -> None:
        self._installed = dict(plan.desired)
        for entry in leftovers:
            self._installed[entry.key_bytes] = InstalledRule(entry.key, entry.rule, None)
        leftover_slots = {entry.rule.slot for entry in leftovers}
        for slot in plan.freed_slots:
            if slot not in leftover_slots:
                self._slots.release(slot)
        self._intent_slots = plan.intent_slots
        self._slot_intents = {slot: intent for intent, slot in plan.intent_slots.items()}
        self._published_shapes = [struct_bytes(shape) for shape in plan.shapes]

    def intent_of_slot(self, slot: int) -> Optional[str]:
        return self._slot_intents.get(slot)

    @property
    def installed_intents(self) -> dict[str, int]:
        """Intent id -> its stat slot."""
        return dict(self._intent_slots)

    # --- alternatives, CPUs, ports, config ---------------------------------------------------

    def set_alternative(self, group_id: int, members: Sequence[CompiledAltMember]) -> None:
        """Publish an alternative group; member egress interfaces become ports first."""
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

    def cpu_state(self, cpu: int) -> dict[str, int]:
        state = self._dpp.cpu_get(cpu)
        return {name: getattr(state, name) for name, _ in Cpu._fields_}

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

    # --- statistics --------------------------------------------------------------------------

    def rule_stats(self) -> dict[str, tuple[int, int]]:
        """Intent id -> (packets, bytes) summed over CPUs."""
        counters = self._dpp.stats_rules(0, self._slots.high_water)
        return {intent: counters[slot] for intent, slot in sorted(self._intent_slots.items())}

    def verdict_stats(self) -> dict[str, tuple[int, int]]:
        return _named(Verdict, self._dpp.stats_verdicts(), upper=True)

    def action_stats(self) -> dict[str, tuple[int, int]]:
        return _named(Action, self._dpp.stats_actions())

    def reason_stats(self) -> dict[str, tuple[int, int]]:
        return _named(Reason, self._dpp.stats_reasons())

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
