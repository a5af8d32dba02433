"""Groups of ports in a map of DEVMAP groups (core/replicate.h): each entry of the outer map leads to
an inner DEVMAP (by position) or DEVMAP_HASH (by ifindex) whose entries are the ports a frame
broadcast to that group is copied to, each maybe with the devmap program its copies run. A group is
written whole, as a new inner map put in with one write (a frame broadcast meanwhile meets the old
ports or the new), and read back by key. Shared by the functions that replicate: FRER's groups of
member ports (netapp.frer.dataplane), DUPLICATE's copy groups (netapp.duplicate.groups) and ATSSS's
groups of redundant ports (netapp.atsss.table).

Which entry a set of ports gets is planned here too (plan_groups), for the functions whose rules name
their group by index (FRER's streams, ATSSS's sessions): a set keeps its entry while it is named,
rules naming the same set share it, and a new set never gets an entry another set held in the same
change (a rule not yet rewritten may still lead to it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Iterable, Mapping, Optional, Sequence, TypeVar

from netapp.dataplane.abi import DevmapVal
from netapp.dataplane.tables import MapOfMaps

Port = tuple[int, int]  # (ifindex, the id of the program its copies run; 0: none) as read back
Ports = TypeVar("Ports")  # what names a set of ports: a function's own (sortable, hashable) key


class GroupsFull(LookupError):
    """Every entry of the map of groups holds another set of ports (args: the set)."""


@dataclass
class GroupPlan(Generic[Ports]):
    assigned: dict[Ports, int]  # every set of ports named, its group
    new: dict[int, Ports] = field(default_factory=dict)  # written before the rules naming them
    stale: list[int] = field(default_factory=list)  # emptied once no rule names them


def plan_groups(current: Mapping[Ports, int], wanted: set[Ports], size: int,
                held: Iterable[int] = ()) -> GroupPlan[Ports]:
    """The groups of `wanted` after a change from `current`; `held`: entries the maps hold besides
    (not to be given to a new set). GroupsFull naming a set no entry is free for."""
    assigned = {names: group for names, group in current.items() if names in wanted}
    unnamed = {group for names, group in current.items() if names not in wanted}
    stale = sorted(unnamed | (set(held) - set(assigned.values())))
    busy = set(current.values()) | set(held)
    free = (index for index in range(size) if index not in busy)
    new = {}
    for names in sorted(wanted - assigned.keys()):  # type: ignore[type-var]
        group = next(free, None)
        if group is None:
            raise GroupsFull(names)
        assigned[names] = group
        new[group] = names
    return GroupPlan(assigned, new, stale)


class DevmapGroups:
    """The groups of one map of DEVMAP groups (a MapOfMaps whose inner maps are DEVMAPs)."""

    def __init__(self, table: MapOfMaps):
        self._table = table
        self.positions = int(table.inner_spec.max_entries)  # type: ignore[arg-type]

    def set(self, group: int, ports: Mapping[int, int], program_fd: Optional[int] = None) -> None:
        """Entry `group`: key (a DEVMAP's position, a DEVMAP_HASH's ifindex) -> ifindex, every port
        with `program_fd` (None: no program)."""
        self.set_each(group, {position: (ifindex, program_fd) for position, ifindex in ports.items()})

    def set_each(self, group: int, ports: Mapping[int, tuple[int, Optional[int]]]) -> None:
        """Entry `group`: key -> (ifindex, the fd of the program its copies run, None: none)."""
        self._table.set(group, {position: DevmapVal(ifindex=ifindex, bpf_prog=fd if fd is not None else 0)
                                for position, (ifindex, fd) in sorted(ports.items())})

    def delete(self, groups: Iterable[int]) -> None:
        """The entries `groups` emptied, those the map holds (a frame still naming one is not copied)."""
        held = set(self.groups())
        self._table.delete([group for group in sorted(set(groups)) if group in held])

    def groups(self) -> list[int]:
        """The entries that lead to a group of ports."""
        return [group for group, _ in self._table.items()]

    def ports(self, keys: Optional[Mapping[int, Sequence[int]]] = None) -> dict[int, dict[int, Port]]:
        """group -> key -> (ifindex, the id of the program its copies run), as the map holds them: the
        keys are positions (a DEVMAP's, all read), or for a DEVMAP_HASH the ifindexes `keys` gives
        each group to look up (a group it gives none is read as holding none)."""
        found = {}
        for group in self.groups():
            wanted = list(range(self.positions)) if keys is None else list(keys.get(group, ()))
            values = self._table.inner(group, wanted) if wanted else []
            found[group] = {key: (value.ifindex, value.bpf_prog)
                            for key, value in zip(wanted, values) if value is not None}
        return found
