"""The copy groups of the installed DUPLICATE rules in the maps: each group's interfaces as its
entry of dpp_dup_tx (a map of DEVMAP groups, netapp.dataplane.groups), so a packet is copied to its
own group's interfaces only. The rules' writer (netapp.dataplane.rules) places the groups its rules
name before the rules, and settles them after: a group no installed rule names any more is
removed. A port that decapsulates its copies runs the egress program dpp_dup_decap (its entry's
program; read back, a program id). A restart adopts what the map holds, and its full apply settles
it."""

from __future__ import annotations

import errno
from typing import Any, Callable, Iterable, Mapping, Optional

from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.groups import DevmapGroups
from netapp.duplicate.abi import DECAP_PROG, MAX_GROUPS
from netapp.duplicate.compiler import Copy

OP = "duplicate groups"


class CopyGroups:
    """The groups DUPLICATE's map holds, with a shadow of them (read at first use)."""

    def __init__(self, table: Callable[[str], Any], program_fd: Callable[[str], int]):
        """`program_fd(name)`: the fd of the instance's program `name` (the decapsulating ports')."""
        self._tx = DevmapGroups(table("dpp_dup_tx"))
        self._program_fd = program_fd
        self._groups: Optional[dict[int, frozenset[Copy]]] = None

    @property
    def groups(self) -> dict[int, frozenset[Copy]]:
        """group id -> its copies ((ifindex, decapsulated) each), as the map holds them."""
        if self._groups is None:
            self._groups = {group: frozenset((ifindex, program != 0) for ifindex, program in ports.values())
                            for group, ports in self._tx.ports().items()}
        return self._groups

    def place(self, wanted: Mapping[int, Iterable[Copy]]) -> None:
        """The groups `wanted` (id -> copies) in the map, before rules name them; DataplaneError
        (ENOSPC, EEXIST) when they do not fit or an id is another set's, nothing written then."""
        new = {group: frozenset(copies) for group, copies in wanted.items()}
        new = {group: copies for group, copies in new.items() if self.groups.get(group) != copies}
        self._check(new)
        self._write(new)

    def requeue(self) -> None:
        """The decapsulating ports run the instance's egress program again, after a reload replaced it:
        a DEVMAP entry holds the program it was written with."""
        self._write({group: copies for group, copies in self.groups.items() if any(d for _, d in copies)})

    def _write(self, groups: Mapping[int, frozenset[Copy]]) -> None:
        decap = self._program_fd(DECAP_PROG) if any(d for copies in groups.values() for _, d in copies) else None
        for group, copies in sorted(groups.items()):
            self._tx.set_each(group, {position: (ifindex, decap if decapsulated else None)
                                      for position, (ifindex, decapsulated) in enumerate(sorted(copies))})
            self.groups[group] = copies

    def settle(self, used: Iterable[int]) -> None:
        """Only the groups `used` (the ids installed rules name) stay."""
        unused = set(self.groups) - set(used)
        if unused:
            self._tx.delete(unused)
            for group in unused:
                del self.groups[group]

    def _check(self, new: Mapping[int, frozenset[int]]) -> None:
        for group, copies in new.items():
            if group in self.groups:
                raise DataplaneError(errno.EEXIST, OP, f"group {group} of copies {sorted(copies)} has the id of "
                                     f"the group of {sorted(self.groups[group])}, which rules use",
                                     hint="duplicate to these interfaces once the other group's intents are gone")
        if len(self.groups) + len(new) > MAX_GROUPS:
            raise DataplaneError(
                errno.ENOSPC, OP,
                f"{len(self.groups) + len(new)} sets of interfaces to duplicate to, the data plane holds "
                f"{MAX_GROUPS} (DPP_MAX_DUP_GROUPS)",
                hint="intents that duplicate to the same interfaces share one",
            )
