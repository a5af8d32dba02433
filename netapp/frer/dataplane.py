"""FRER's part of a loaded data plane that its map entries alone do not say: each generated stream's
group of member ports (dpp_frer_tx, a map of DEVMAP groups by stream handle, netapp.dataplane.groups;
the ports that name a VLAN id with the egress program that sets it, dpp_frer_egress), the
gate that hands frames to the pipeline's FRER stage (dpp_frer_gate), and the recovery functions
read whole (libdpp reads a map whose values hold a bpf_spin_lock under the lock: counters and state
are one snapshot)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from netapp.dataplane.abi import FlowKey
from netapp.dataplane.groups import DevmapGroups
from netapp.frer.abi import MAX_IP_MASKS, VLAN_ANY, Gate, MemberKey, Recovery
from netapp.frer.compiler import FrerTables, Group, groups_of

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
        self._gate = dataplane.table("dpp_frer_gate")
        self._recovery = dataplane.table("dpp_frer_recovery")

    def install(self, tables: FrerTables) -> None:
        """Every entry of `tables` written (added or replaced, nothing removed), their groups set and
        the gate opened when they hold a stream: the whole of a node's FRER from nothing."""
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
        self.groups_set(groups_of(tables))
        self.gate_set(gate_of(tables))

    def groups_set(self, groups: Mapping[int, Group]) -> None:
        """Each stream's group (handle -> member ifindex -> with the egress program), written whole:
        a frame replicated meanwhile meets the group's old ports or its new."""
        fd = self._dp.program_fd(EGRESS_PROG) if any(any(group.values()) for group in groups.values()) else None
        for handle, group in sorted(groups.items()):
            self._tx.set_each(handle, {ifindex: (ifindex, fd if program else None)
                                       for ifindex, program in group.items()})

    def groups_clear(self, handles: Iterable[int]) -> None:
        """The streams' groups emptied, those held (a frame of such a stream is not replicated)."""
        self._tx.delete(handles)

    def groups(self) -> dict[int, Group]:
        """The groups dpp_frer_tx holds, read by the members their streams list."""
        candidates: dict[int, list[int]] = {}
        for key, _ in self._members.items():
            candidates.setdefault(key.stream, []).append(key.ifindex)
        held = self._tx.ports({handle: sorted(ports) for handle, ports in candidates.items()})
        return {handle: {ifindex: bool(program) for ifindex, program in ports.values()}
                for handle, ports in held.items()}

    def ports(self) -> list[int]:
        """The node's FRER ports: those of every group, in ascending order."""
        return sorted({ifindex for group in self.groups().values() for ifindex in group})

    def requeue(self) -> None:
        """The ports that name a VLAN id run the instance's egress program again, after a reload
        replaced it: a DEVMAP entry holds the program it was written with."""
        self.groups_set({handle: group for handle, group in self.groups().items() if any(group.values())})

    def gate_set(self, kinds: Gate) -> None:
        """The identifications the FRER stage tries; any: the pipeline hands it every frame first."""
        self._gate.update({0: int(kinds)})

    def gate(self) -> Gate:
        return Gate(self._gate.get(0) or 0)

    def recovery_read(self, handles: Sequence[int]) -> list[Recovery]:
        """The recovery slots of `handles`, each read whole under its lock."""
        return [value if value is not None else Recovery() for value in self._recovery.lookup(list(handles))]
