"""FRER's maps written from compiled streams (netapp.frer.compiler.FrerTables) and read back.

The plain maps (identities, streams, members, the ports' counters) go through the generic tables
(`table_of(name)`, as netapp.routing.table). What needs more than a plain write is the data
plane's (`FrerCalls`, netapp.frer.dataplane): a recovery function's counters and state read as one
snapshot (under its lock, BPF_F_LOCK), dpp_frer_tx, whose slots carry the egress program with the
port, and the gate (dpp_frer_gate: the kinds of identification the pipeline's FRER stage tries,
none on a node without streams).

`FrerMaps.sync` makes the maps hold exactly what the tables say, writing only what differs: an
unchanged stream's recovery slot keeps its state and counters, and a generated stream's next
sequence number goes on while its role stays. What a frame may meet while that runs is always a
stream whole: new slots and members are written before the identities that lead to them (the gate
opened to their kinds first), and identities are deleted before the slots they led to are emptied; the IP masks (which fields the IP
identities compare) are written between the new keys and the pruning of the old.
"""

from __future__ import annotations

from ctypes import c_uint32
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol

from netapp.dataplane.tables import Table
from netapp.frer import abi
from netapp.frer.abi import Gate, MemberKey, Recovery, Role, Stream
from netapp.frer.compiler import FrerTables
from netapp.frer.dataplane import gate_of, ip_mask_slots

TableOf = Callable[[str], Table]

# What the control plane writes into a recovery slot (the rest is the data path's state and counters).
RECOVERY_PARAMETERS = ("algo", "history_len", "flags", "latent_paths", "latent_difference", "reset_ns",
                       "latent_period_ns", "latent_reset_period_ns")


class FrerCalls(Protocol):
    """What FRER needs of the data plane beyond plain tables (netapp.frer.dataplane.FrerDataplane,
    which comes with the pipeline's FRER stage)."""

    def recovery_read(self, handles: list[int]) -> list[Recovery]:
        """The recovery slots of `handles`, each read under its lock (one consistent snapshot)."""

    def ports_set(self, ifindexes: list[int]) -> None:
        """dpp_frer_tx slot by slot: these ports with the egress program, the slots after them emptied."""

    def gate_set(self, kinds: Gate) -> None:
        """The kinds of identification the pipeline's FRER stage tries (none: it never runs)."""

    def gate(self) -> Gate: ...


class TableFrerCalls:
    """FrerCalls over the generic tables, for a data plane with no kernel behind it (the fake): no
    lock to take, no program to give the ports; the ports and the gate are kept in `ports`, `kinds`."""

    def __init__(self, table_of: TableOf):
        self._recovery = table_of("dpp_frer_recovery")
        self.ports: list[int] = []
        self.kinds = Gate(0)

    def recovery_read(self, handles: list[int]) -> list[Recovery]:
        return [value if value is not None else Recovery() for value in self._recovery.lookup(handles)]

    def ports_set(self, ifindexes: list[int]) -> None:
        self.ports = list(ifindexes)

    def gate_set(self, kinds: Gate) -> None:
        self.kinds = kinds

    def gate(self) -> Gate:
        return self.kinds


def _parameters(value: Recovery) -> tuple[int, ...]:
    return tuple(getattr(value, name) for name in RECOVERY_PARAMETERS)


def _placement(value: Stream) -> tuple[int, int]:
    """What the control plane says of a stream slot (next_seq is the data path's)."""
    return value.role, value.deliver_ifindex


class FrerMaps:
    """FRER's maps of one loaded data plane."""

    def __init__(self, table_of: TableOf, calls: FrerCalls):
        self._null = table_of("dpp_frer_null")
        self._ip = table_of("dpp_frer_ip")
        self._streams = table_of("dpp_frer_streams")
        self._recovery = table_of("dpp_frer_recovery")
        self._members = table_of("dpp_frer_members")
        self._port_stats = table_of("dpp_frer_port_stats")
        self._masks = table_of("dpp_frer_ip_masks")
        self._calls = calls

    # --- writes --------------------------------------------------------------------------------

    def sync(self, tables: FrerTables) -> None:
        """The maps hold the entries of `tables` and no other (DataplaneError when they refuse: the
        caller syncs the tables it had before, to undo)."""
        slots = self._slots()
        members = {bytes(MemberKey(*key)): (MemberKey(*key), value) for key, value in tables.members.items()}
        self._write_slots(tables, slots)
        _upsert(self._members, members)
        self._calls.ports_set(list(tables.tx_ports))
        self._calls.gate_set(self._calls.gate() | gate_of(tables))  # the stage tries the new kinds too
        _upsert(self._null, tables.null)
        _upsert(self._ip, tables.ip)
        # Changed masks renumber the keys under them: a frame between the two writes may miss its stream.
        self._masks.update(list(enumerate(ip_mask_slots(tables))))
        _prune(self._null, tables.null)
        _prune(self._ip, tables.ip)
        self._calls.gate_set(gate_of(tables))  # and no longer the kinds of no identity
        _prune(self._members, members)
        self._empty_slots(set(slots) - set(tables.streams))

    def _slots(self) -> dict[int, tuple[Stream, Recovery]]:
        """The handles whose stream slot holds a role, with both their slots."""
        used = [handle for handle, value in self._streams.items() if value.role != Role.NONE]
        used += [handle for handle, value in self._recovery.items() if value.history_len and handle not in used]
        streams = self._streams.lookup(used)
        recovery = self._recovery.lookup(used)
        return {handle: (stream or Stream(), rec or Recovery()) for handle, stream, rec in zip(used, streams, recovery)}

    def _write_slots(self, tables: FrerTables, slots: dict[int, tuple[Stream, Recovery]]) -> None:
        """The slots of new and changed streams; an unchanged one keeps its state (next_seq, the
        recovery function's state and counters)."""
        streams, recovery = [], []
        for handle, value in tables.streams.items():
            stream_now, recovery_now = slots.get(handle, (Stream(), Recovery()))
            wanted = tables.recovery.get(handle, Recovery())
            if _parameters(recovery_now) != _parameters(wanted):
                recovery.append((c_uint32(handle), wanted))
            if _placement(stream_now) != _placement(value):
                streams.append((c_uint32(handle), value))
        self._recovery.update(recovery)
        self._streams.update(streams)

    def _empty_slots(self, handles: Iterable[int]) -> None:
        """An array's entries cannot be deleted: zeroed, they mean no stream."""
        handles = sorted(handles)
        self._streams.update([(c_uint32(handle), Stream()) for handle in handles])
        self._recovery.update([(c_uint32(handle), Recovery()) for handle in handles])

    # --- reads ---------------------------------------------------------------------------------

    def recovery(self, handles: list[int]) -> list[Recovery]:
        return self._calls.recovery_read(handles)

    def next_sequence_numbers(self, handles: list[int]) -> list[Optional[int]]:
        """GenSeqNum of each handle's stream slot (the low 16 bits of next_seq)."""
        return [None if value is None else value.next_seq % abi.SEQ_SPACE for value in self._streams.lookup(handles)]

    def encode_errors(self) -> dict[int, int]:
        """Ingress ifindex -> frames whose R-tag could not be read there, summed over the CPUs."""
        return {ifindex: sum(cpu.encode_errors for cpu in per_cpu) for ifindex, per_cpu in self._port_stats.items()}


def _upsert(table: Table, wanted: Mapping[bytes, tuple[Any, Any]]) -> None:
    """The entries of `wanted` (raw key -> key, value) that the map lacks or holds otherwise, written."""
    held = {bytes(key): bytes(_c(value)) for key, value in table.items()}
    table.update([(key, value) for raw, (key, value) in wanted.items() if held.get(raw) != bytes(_c(value))])


def _prune(table: Table, wanted: Mapping[bytes, tuple[Any, Any]]) -> None:
    """The map's entries that `wanted` has no key of, deleted."""
    table.delete([key for key, _ in table.items() if bytes(key) not in wanted])


def _c(value: Any) -> Any:
    """A value as the map holds it (a stream handle is a __u32)."""
    return c_uint32(value) if isinstance(value, int) else value
