"""FRER's part of a loaded data plane that its map entries alone do not say: the node's FRER ports
(dpp_frer_tx, each with the egress program that keeps a stream's members, dpp_frer_egress), the
gate that hands frames to the pipeline's FRER stage (dpp_frer_gate), and the recovery functions
read whole (libdpp reads a map whose values hold a bpf_spin_lock under the lock: counters and state
are one snapshot)."""

from __future__ import annotations

from typing import Any, Sequence

from netapp.dataplane.abi import DevmapVal, FlowKey
from netapp.frer.abi import MAX_IP_MASKS, MAX_PORTS, VLAN_ANY, Gate, MemberKey, Recovery
from netapp.frer.compiler import FrerTables

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
    """FRER's ports, gate and recovery slots of one instance (a netapp.dataplane.facade.Dataplane)."""

    def __init__(self, dataplane: Any):
        self._dp = dataplane
        self._tx = dataplane.table("dpp_frer_tx")
        self._gate = dataplane.table("dpp_frer_gate")
        self._recovery = dataplane.table("dpp_frer_recovery")

    def install(self, tables: FrerTables) -> None:
        """Every entry of `tables` written (added or replaced, nothing removed), their ports set and
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
        self.ports_set(tables.tx_ports)
        self.gate_set(gate_of(tables))

    def ports_set(self, ifindexes: Sequence[int]) -> None:
        """Replicated frames go to these ports (dpp_frer_tx keyed by ifindex); the others are removed."""
        if len(ifindexes) > MAX_PORTS:
            raise ValueError(f"{len(ifindexes)} FRER ports: at most {MAX_PORTS}")
        if ifindexes:
            fd = self._dp.program_fd(EGRESS_PROG)
            self._tx.update({i: DevmapVal(ifindex=i, bpf_prog=fd) for i in ifindexes})
        stale = [ifindex for ifindex, _ in self._tx.items() if ifindex not in ifindexes]
        if stale:
            self._tx.delete(stale)

    def ports(self) -> list[int]:
        """The ifindexes of dpp_frer_tx, in ascending order."""
        return sorted(ifindex for ifindex, _ in self._tx.items())

    def requeue(self) -> None:
        """The ports run the instance's egress program again, after a reload replaced it: a DEVMAP
        entry holds the program it was written with."""
        self.ports_set(self.ports())

    def gate_set(self, kinds: Gate) -> None:
        """The identifications the FRER stage tries; any: the pipeline hands it every frame first."""
        self._gate.update({0: int(kinds)})

    def gate(self) -> Gate:
        return Gate(self._gate.get(0) or 0)

    def recovery_read(self, handles: Sequence[int]) -> list[Recovery]:
        """The recovery slots of `handles`, each read whole under its lock."""
        return [value if value is not None else Recovery() for value in self._recovery.lookup(list(handles))]
