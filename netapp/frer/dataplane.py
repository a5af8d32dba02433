"""FRER's part of a loaded data plane that its map entries alone do not say: the groups of member ports
the generated streams replicate through (dpp_frer_tx, a map of DEVMAP groups, netapp.dataplane.groups;
the ports that name a VLAN id with the egress program that sets it, dpp_frer_egress), the
gate that hands frames to the pipeline's FRER stage (dpp_frer_gate), and the recovery functions
read whole (libdpp reads a map whose values hold a bpf_spin_lock under the lock), with what each CPU
counted for them without the lock (dpp_frer_cpu_counts) added."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from netapp.dataplane.abi import FlowKey
from netapp.dataplane.groups import DevmapGroups
from netapp.frer.abi import MAX_IP_MASKS, VLAN_ANY, Gate, MemberKey, Recovery, Role
from netapp.frer.compiler import FrerTables, Group, assign_groups
from netapp.frer.slots import with_cpu_counts

EGRESS_PROG = "dpp_frer_egress"  # the devmap program of FRER's ports (dpp.bpf.c)


def ip_mask_slots(tables: FrerTables) -> list[FlowKey]:
    """Every slot of dpp_frer_ip_masks: the tables' masks, then empty ones (which end the list)."""
    return tables.ip_masks + [FlowKey() for _ in range(MAX_IP_MASKS - len(tables.ip_masks))]


def gate_of(tables: FrerTables) -> Gate:
    """The identifications `tables` has entries for (none: the stage never runs)."""
    any_vlan = any(key.vlan == VLAN_ANY for key, _ in tables.null.values())
    return ((Gate.NULL if tables.null else Gate(0)) | (Gate.NULL_ANY if any_vlan else Gate(0))
            | (Gate.IP if tables.ip else Gate(0)))


class FrerDataplane:
    """FRER's groups of ports, gate and recovery slots of one instance (a netapp.dataplane.facade.Dataplane)."""

    def __init__(self, dataplane: Any):
        self._dp = dataplane
        self._tx = DevmapGroups(dataplane.table("dpp_frer_tx"))
        self._members = dataplane.table("dpp_frer_members")
        self._streams = dataplane.table("dpp_frer_streams")
        self._gate = dataplane.table("dpp_frer_gate")
        self._recovery = dataplane.table("dpp_frer_recovery")
        self._cpu_counts = dataplane.table("dpp_frer_cpu_counts")

    def install(self, tables: FrerTables) -> None:
        """Every entry of `tables` written (added or replaced, nothing removed), their groups set and
        the gate opened when they hold a stream: the whole of a node's FRER from nothing."""
        groups = assign_groups(tables, {}).assigned  # the streams' tx_group set, the groups first
        self.groups_set({group: dict(key) for key, group in groups.items()})
        entries = {
            "dpp_frer_null": list(tables.null.values()),
            "dpp_frer_ip": list(tables.ip.values()),
            "dpp_frer_ip_masks": list(enumerate(ip_mask_slots(tables))),
            "dpp_frer_streams": list(tables.streams.items()),
            "dpp_frer_recovery": list(tables.recovery.items()),
            "dpp_frer_members": [(MemberKey(*key), member) for key, member in tables.members.items()],
        }
        for name, items in entries.items():
            if items:
                self._dp.table(name).update(items)
        self.gate_set(gate_of(tables))

    def groups_set(self, groups: Mapping[int, Group]) -> None:
        """Each group's ports (entry -> member ifindex -> with the egress program), written whole: a
        frame replicated meanwhile meets the group's old ports or its new."""
        fd = self._dp.program_fd(EGRESS_PROG) if any(any(group.values()) for group in groups.values()) else None
        for index, group in sorted(groups.items()):
            self._tx.set_each(index, {ifindex: (ifindex, fd if program else None)
                                      for ifindex, program in group.items()})

    def groups_clear(self, groups: Iterable[int]) -> None:
        """The entries emptied, those held (a stream still naming one is not replicated)."""
        self._tx.delete(groups)

    def groups_held(self) -> list[int]:
        return self._tx.groups()

    def groups(self) -> dict[int, Group]:
        """The groups dpp_frer_tx holds, read by the member ports of the generated streams that name
        them (tx_group)."""
        candidates: dict[int, set[int]] = {}
        for key, _ in self._members.items():
            stream = self._streams.get(key.stream)
            if stream is not None and stream.role == Role.GENERATE:
                candidates.setdefault(stream.tx_group, set()).add(key.ifindex)
        held = self._tx.ports({group: sorted(ports) for group, ports in candidates.items()})
        return {group: {ifindex: bool(program) for ifindex, program in ports.values()}
                for group, ports in held.items()}

    def ports(self) -> list[int]:
        """The node's FRER ports: those of every group, in ascending order."""
        return sorted({ifindex for group in self.groups().values() for ifindex in group})

    def requeue(self) -> None:
        """The ports that name a VLAN id run the instance's egress program again, after a reload
        replaced it: a DEVMAP entry holds the program it was written with."""
        self.groups_set({index: group for index, group in self.groups().items() if any(group.values())})

    def gate_set(self, kinds: Gate) -> None:
        """The identifications the FRER stage tries; any: the pipeline hands it every frame first."""
        self._gate.update({0: int(kinds)})

    def gate(self) -> Gate:
        return Gate(self._gate.get(0) or 0)

    def recovery_read(self, handles: Sequence[int]) -> list[Recovery]:
        """The recovery slots of `handles`, each read whole under its lock, its CPUs' counts added."""
        handles = list(handles)
        return [with_cpu_counts(slot, cpus)
                for slot, cpus in zip(self._recovery.lookup(handles), self._cpu_counts.lookup(handles))]
