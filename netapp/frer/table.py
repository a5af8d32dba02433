"""FRER's maps written from compiled streams (netapp.frer.compiler.FrerTables) and read back.

The plain maps (identities, streams, members, the ports' counters) go through the generic tables
(`table_of(name)`, as netapp.routing.table). What needs more than a plain write is the data plane's
(`FrerCalls`, netapp.frer.dataplane): a recovery function's counters and state read under its lock
(BPF_F_LOCK), with what its CPUs counted without the lock added (dpp_frer_cpu_counts),
dpp_frer_tx, each generated stream's group of member ports (a map of DEVMAP groups by stream
handle, whose entries carry the egress program), and the gate
(dpp_frer_gate: the kinds of identification the pipeline's FRER stage tries, none on a node without
streams).

`FrerMaps.sync` makes the maps hold exactly what the tables say, reading them whole and writing only
what differs: an unchanged stream's recovery slot keeps its state and counters, and a generated
stream's next sequence number goes on while its role stays. The maps are read whole only there (at
start, and after a change that could not be put back); from then on `FrerMaps.change` knows what they
hold (`held`, the tables last written) and writes only the entries where the new tables differ, so a
change costs what it touches, not the 4,096 slots of each array. What a frame may meet while either
runs is always a stream whole: new slots, members and groups are written before the identities that
lead to them (the gate opened to their kinds first), and identities are deleted before the groups and
slots they led to are emptied; the IP masks (which fields the IP identities compare) are written between the new keys
and the pruning of the old. A refused change puts back the entries it touched, as read back from the
maps, in the same order.
"""

from __future__ import annotations

import errno
import logging
from ctypes import c_uint32
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol

from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.tables import Table
from netapp.frer import abi
from netapp.frer.abi import Gate, MemberKey, PortStats, Recovery, Role, Stream
from netapp.dataplane.groups import GroupPlan, GroupsFull
from netapp.frer.compiler import FrerTables, Group, GroupKey, assign_groups, group_key, groups_of
from netapp.frer.dataplane import gate_of, ip_mask_slots
from netapp.frer.slots import with_cpu_counts

log = logging.getLogger(__name__)

TableOf = Callable[[str], Table]

# What the control plane writes into a recovery slot (the rest is the data path's state and counters).
RECOVERY_PARAMETERS = ("algo", "history_len", "flags", "latent_paths", "latent_difference", "reset_ns",
                       "latent_period_ns", "latent_reset_period_ns")


class FrerCalls(Protocol):
    """What FRER needs of the data plane beyond plain tables (netapp.frer.dataplane.FrerDataplane,
    which comes with the pipeline's FRER stage)."""

    def recovery_read(self, handles: list[int]) -> list[Recovery]:
        """The recovery slots of `handles`, each read under its lock, with what its CPUs counted
        without the lock added (netapp.frer.slots.with_cpu_counts)."""

    def groups_set(self, groups: dict[int, Group]) -> None:
        """dpp_frer_tx: each group's ports (entry -> ifindex -> with the egress program), written whole."""

    def groups_clear(self, groups: list[int]) -> None:
        """dpp_frer_tx: the entries emptied (those held)."""

    def groups_held(self) -> list[int]:
        """dpp_frer_tx: the entries that lead to a group."""

    def gate_set(self, kinds: Gate) -> None:
        """The kinds of identification the pipeline's FRER stage tries (none: it never runs)."""

    def gate(self) -> Gate: ...


class TableFrerCalls:
    """FrerCalls over the generic tables, for a data plane with no kernel behind it (the fake): no
    lock to take, no program to give the ports; the groups and the gate are kept in `groups`, `kinds`."""

    def __init__(self, table_of: TableOf):
        self._recovery = table_of("dpp_frer_recovery")
        self._cpu_counts = table_of("dpp_frer_cpu_counts")
        self.groups: dict[int, Group] = {}
        self.kinds = Gate(0)

    @property
    def ports(self) -> list[int]:
        """The node's FRER ports: those of every group, in ascending order."""
        return sorted(set().union(*self.groups.values())) if self.groups else []

    def recovery_read(self, handles: list[int]) -> list[Recovery]:
        return [with_cpu_counts(slot, cpus)
                for slot, cpus in zip(self._recovery.lookup(handles), self._cpu_counts.lookup(handles))]

    def groups_set(self, groups: dict[int, Group]) -> None:
        self.groups.update({index: dict(group) for index, group in groups.items()})

    def groups_clear(self, groups: list[int]) -> None:
        for index in groups:
            self.groups.pop(index, None)

    def groups_held(self) -> list[int]:
        return sorted(self.groups)

    def gate_set(self, kinds: Gate) -> None:
        self.kinds = kinds

    def gate(self) -> Gate:
        return self.kinds


def _parameters(value: Recovery) -> tuple[int, ...]:
    return tuple(getattr(value, name) for name in RECOVERY_PARAMETERS)


def _same_parameters(held: Recovery, wanted: Recovery) -> bool:
    """Whether a recovery slot has the parameters wanted (its state aside). Two compiled slots are
    equal byte for byte when their parameters are: the quick test, as a change compares them."""
    return bytes(held) == bytes(wanted) or _parameters(held) == _parameters(wanted)


def _placement(value: Stream) -> tuple[int, int, int]:
    """What the control plane says of a stream slot (next_seq is the data path's)."""
    return value.role, value.deliver_ifindex, value.tx_group


def _adopted(now: FrerTables) -> dict[GroupKey, int]:
    """The groups the maps' generated streams name, by their sets of ports (the first stream's, if
    two sets name one group)."""
    adopted: dict[GroupKey, int] = {}
    for handle, group in groups_of(now).items():
        stream = now.streams.get(handle)
        if stream is not None and stream.role == Role.GENERATE and stream.tx_group not in adopted.values():
            adopted.setdefault(group_key(group), stream.tx_group)
    return adopted


Entries = dict[bytes, tuple[Any, Any]]  # a hash map's entries by raw key: (key, value)


def _members(tables: FrerTables) -> Entries:
    return {bytes(MemberKey(*key)): (MemberKey(*key), value) for key, value in tables.members.items()}


def _same(held: Optional[tuple[Any, Any]], wanted: tuple[Any, Any]) -> bool:
    return held is not None and bytes(_c(held[1])) == bytes(_c(wanted[1]))


class FrerMaps:
    """FRER's maps of one loaded data plane."""

    def __init__(self, table_of: TableOf, calls: FrerCalls):
        self._null = table_of("dpp_frer_null")
        self._ip = table_of("dpp_frer_ip")
        self._streams = table_of("dpp_frer_streams")
        self._recovery = table_of("dpp_frer_recovery")
        self._cpu_counts = table_of("dpp_frer_cpu_counts")
        self._members = table_of("dpp_frer_members")
        self._port_stats = table_of("dpp_frer_port_stats")
        self._masks = table_of("dpp_frer_ip_masks")
        self._calls = calls
        # The tables the maps hold, as last written here; None when not known (before the first sync,
        # after a refused change that could not be put back): the next change then syncs whole.
        self.held: Optional[FrerTables] = None
        # The entries of dpp_frer_tx the held tables' sets of ports have (netapp.frer.compiler.assign_groups).
        self.groups: dict[GroupKey, int] = {}

    # --- writes --------------------------------------------------------------------------------

    def sync(self, tables: FrerTables) -> None:
        """The maps, read whole, made to hold the entries of `tables` and no other (DataplaneError
        when they refuse: the caller syncs the tables it had before, to undo)."""
        self.held = None
        now = self._read()
        self.groups = self._write(now, tables, self._calls.gate(), _adopted(now), known=False)
        self.held = tables

    def change(self, tables: FrerTables) -> None:
        """The maps made to hold `tables`, writing only the entries where they differ from `held` (a
        sync when it is not known). DataplaneError when the maps refuse: the entries the change
        touched are put back, and `held` is right again; should that be refused too, `held` is None
        and the caller syncs the tables it had before."""
        before = self.held
        if before is None:
            self.sync(tables)
            return
        self.held = None
        try:
            groups = self._write(before, tables, gate_of(before), self.groups, known=True)
        except DataplaneError:
            self._put_back(before, tables)
            raise
        self.held, self.groups = tables, groups

    def _put_back(self, before: FrerTables, after: FrerTables) -> None:
        """After a refused change from `before` to `after`: every entry where they differ, as the maps
        hold it now (read back), made `before`'s again."""
        try:
            self._write(self._touched(before, after), before, self._calls.gate(), self.groups, known=False)
        except DataplaneError as exc:
            log.error("FRER's maps could not be put back after a refused change (%s): they are synced whole next", exc)
            return
        self.held = before

    def _write(self, now: FrerTables, wanted: FrerTables, gate: Gate, groups: Mapping[GroupKey, int],
               known: bool) -> dict[GroupKey, int]:
        """The maps, holding `now` (the gate `gate`, the groups `groups`; `known`: those and no other,
        else what the map holds is read and every group written again), made to hold `wanted`, writing
        what differs in the order the module's docstring gives; the groups `wanted` has then."""
        members_now, members = _members(now), _members(wanted)
        plan = self._plan(wanted, groups, known)
        written = plan.new if known else {group: key for key, group in plan.assigned.items()}
        if written:
            self._calls.groups_set({group: dict(key) for group, key in sorted(written.items())})
        _upsert(self._members, members_now, members)
        self._write_slots(now, wanted)
        opened = gate | gate_of(wanted)  # the stage tries the new kinds too
        if opened != gate:
            self._calls.gate_set(opened)
        _upsert(self._null, now.null, wanted.null)
        _upsert(self._ip, now.ip, wanted.ip)
        masks = ip_mask_slots(wanted)
        if [bytes(mask) for mask in ip_mask_slots(now)] != [bytes(mask) for mask in masks]:
            # Changed masks renumber the keys under them: a frame between the two writes may miss its stream.
            self._masks.update(list(enumerate(masks)))
        _prune(self._null, now.null, wanted.null)
        _prune(self._ip, now.ip, wanted.ip)
        if gate_of(wanted) != opened:
            self._calls.gate_set(gate_of(wanted))  # and no longer the kinds of no identity
        if plan.stale:
            self._calls.groups_clear(plan.stale)
        _prune(self._members, members_now, members)
        self._empty_slots(set(now.streams) - set(wanted.streams))
        return plan.assigned

    def _plan(self, wanted: FrerTables, groups: Mapping[GroupKey, int], known: bool) -> GroupPlan[GroupKey]:
        """The groups of `wanted` from `groups` (the streams' tx_group set); DataplaneError (ENOSPC)
        when dpp_frer_tx has no entry left for a new set of ports."""
        try:
            return assign_groups(wanted, groups, () if known else self._calls.groups_held())
        except GroupsFull as exc:
            raise DataplaneError(errno.ENOSPC, "FRER groups", f"no entry of dpp_frer_tx is free for member ports "
                                 f"{[ifindex for ifindex, _ in exc.args[0]]}: it holds {abi.MAX_STREAMS} sets of ports "
                                 f"(DPP_MAX_FRER_STREAMS), the old sets until the change is written",
                                 hint="streams that replicate to the same ports share one set") from exc

    def _read(self) -> FrerTables:
        """Every entry of the maps (the arrays' slots that hold a stream), as tables."""
        now = FrerTables(null=_entries(self._null), ip=_entries(self._ip),
                         ip_masks=[mask for _, mask in sorted(self._masks.items(), key=lambda item: item[0])])
        now.members = {(key.stream, key.ifindex): value for key, value in self._members.items()}
        used = [handle for handle, value in self._streams.items() if value.role != Role.NONE]
        used += [handle for handle, value in self._recovery.items() if value.history_len and handle not in used]
        self._read_slots(now, used)
        return now

    def _touched(self, before: FrerTables, after: FrerTables) -> FrerTables:
        """`before`, but for the entries where `after` differs from it: those as the maps hold them
        now. The masks are taken as `after`'s (writing `before`'s again is harmless); the groups are
        written whole again."""
        now = FrerTables(null=dict(before.null), ip=dict(before.ip), ip_masks=after.ip_masks,
                         streams=dict(before.streams), recovery=dict(before.recovery),
                         members=dict(before.members), tx_ports=after.tx_ports)
        for table, held, wanted in ((self._null, now.null, after.null), (self._ip, now.ip, after.ip)):
            _read_back(table, held, _differing(held, wanted))
        members = _differing(_members(before), _members(after))
        for (key, _), value in zip(members.values(), self._members.lookup([key for key, _ in members.values()])):
            if value is None:
                now.members.pop((key.stream, key.ifindex), None)
            else:
                now.members[(key.stream, key.ifindex)] = value
        handles = [handle for handle in set(before.streams) | set(after.streams)
                   if not _same_slot(before, after, handle)]
        for handle in handles:
            now.streams.pop(handle, None)
            now.recovery.pop(handle, None)
        self._read_slots(now, sorted(handles))
        return now

    def _read_slots(self, tables: FrerTables, handles: list[int]) -> None:
        """The slots of `handles` into `tables`, those that hold a stream."""
        for handle, stream, recovery in zip(handles, self._streams.lookup(handles), self._recovery.lookup(handles)):
            if (stream is not None and stream.role != Role.NONE) or (recovery is not None and recovery.history_len):
                tables.streams[handle] = stream or Stream()
                tables.recovery[handle] = recovery or Recovery()

    def _write_slots(self, now: FrerTables, wanted: FrerTables) -> None:
        """The slots of new and changed streams; an unchanged one keeps its state (next_seq, the
        recovery function's state and counters)."""
        streams, recovery = [], []
        for handle, value in wanted.streams.items():
            parameters = wanted.recovery.get(handle, Recovery())
            if not _same_parameters(now.recovery.get(handle, Recovery()), parameters):
                recovery.append((c_uint32(handle), parameters))
            if _placement(now.streams.get(handle, Stream())) != _placement(value):
                streams.append((c_uint32(handle), value))
        # The CPUs' counts zeroed before the slot is written: a frame counted between the two writes
        # was decided under the old parameters and is counted with the new ones (a handle given to
        # a new stream was emptied before and counted nothing since)
        self._cpu_counts.fill([key for key, _ in recovery])
        self._recovery.update(recovery)
        self._streams.update(streams)

    def _empty_slots(self, handles: Iterable[int]) -> None:
        """An array's entries cannot be deleted: zeroed, they mean no stream."""
        handles = sorted(handles)
        self._streams.update([(c_uint32(handle), Stream()) for handle in handles])
        self._recovery.update([(c_uint32(handle), Recovery()) for handle in handles])
        self._cpu_counts.fill([c_uint32(handle) for handle in handles])

    # --- reads ---------------------------------------------------------------------------------

    def recovery(self, handles: list[int]) -> list[Recovery]:
        return self._calls.recovery_read(handles)

    def next_sequence_numbers(self, handles: list[int]) -> list[Optional[int]]:
        """GenSeqNum of each handle's stream slot (the low 16 bits of next_seq)."""
        return [None if value is None else value.next_seq % abi.SEQ_SPACE for value in self._streams.lookup(handles)]

    def port_counts(self) -> dict[int, PortStats]:
        """Ingress ifindex -> its counters (frames whose R-tag could not be read there, generated
        frames with no group of ports), summed over the CPUs."""
        return {ifindex: _summed(per_cpu) for ifindex, per_cpu in self._port_stats.items()}


def _summed(per_cpu: Iterable[PortStats]) -> PortStats:
    total = PortStats()
    for cpu in per_cpu:
        total.encode_errors += cpu.encode_errors
        total.ungrouped += cpu.ungrouped
    return total


def _entries(table: Table) -> Entries:
    return {bytes(key): (key, value) for key, value in table.items()}


def _upsert(table: Table, held: Entries, wanted: Entries) -> None:
    """The entries of `wanted` that the map (holding `held`) lacks or holds otherwise, written."""
    table.update([entry for raw, entry in wanted.items() if not _same(held.get(raw), entry)])


def _prune(table: Table, held: Entries, wanted: Entries) -> None:
    """The entries of `held` that `wanted` has no key of, deleted."""
    table.delete([key for raw, (key, _) in held.items() if raw not in wanted])


def _differing(before: Entries, after: Entries) -> Entries:
    """The entries, of either, whose key the other lacks or holds with another value."""
    return {raw: before.get(raw) or after[raw] for raw in set(before) | set(after)
            if raw not in before or raw not in after or not _same(before[raw], after[raw])}


def _read_back(table: Table, held: Entries, keys: Entries) -> None:
    """`held` made to say what the map holds for `keys`."""
    entries = list(keys.items())
    for (raw, (key, _)), value in zip(entries, table.lookup([key for _, (key, _) in entries])):
        if value is None:
            held.pop(raw, None)
        else:
            held[raw] = (key, value)


def _same_slot(before: FrerTables, after: FrerTables, handle: int) -> bool:
    """Whether both say the same of the handle's slots (a stream in each)."""
    if handle not in before.streams or handle not in after.streams:
        return False
    recovery_before, recovery_after = (tables.recovery.get(handle, Recovery()) for tables in (before, after))
    return (_placement(before.streams[handle]) == _placement(after.streams[handle])
            and _same_parameters(recovery_before, recovery_after))


def _c(value: Any) -> Any:
    """A value as the map holds it (a stream handle is a __u32)."""
    return c_uint32(value) if isinstance(value, int) else value
