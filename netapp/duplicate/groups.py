"""The copy groups of the installed DUPLICATE rules in the maps: each group's interfaces as its
entry of dpp_dup_tx (a map of DEVMAP groups, netapp.dataplane.groups), so a packet is copied to its
own group's interfaces only. The rules' writer (netapp.dataplane.rules) places the groups its rules
name before the rules, and settles them after: a group no installed rule names any more is
removed. A restart adopts what the map holds, and its full apply settles it."""

from __future__ import annotations

import errno
from typing import Any, Callable, Iterable, Mapping, Optional

from netapp.dataplane.errors import DataplaneError
from netapp.dataplane.groups import DevmapGroups
from netapp.duplicate.abi import MAX_GROUPS

OP = "duplicate groups"


class CopyGroups:
    """The groups DUPLICATE's map holds, with a shadow of them (read at first use)."""

    def __init__(self, table: Callable[[str], Any]):
        self._tx = DevmapGroups(table("dpp_dup_tx"))
        self._groups: Optional[dict[int, frozenset[int]]] = None

    @property
    def groups(self) -> dict[int, frozenset[int]]:
        """group id -> its interfaces (ifindexes), as the map holds them."""
        if self._groups is None:
            self._groups = {group: frozenset(ifindex for ifindex, _ in ports.values())
                            for group, ports in self._tx.ports().items()}
        return self._groups

    def place(self, wanted: Mapping[int, Iterable[int]]) -> None:
        """The groups `wanted` (id -> interfaces) in the map, before rules name them; DataplaneError
        (ENOSPC, EEXIST) when they do not fit or an id is another set's, nothing written then."""
        new = {group: frozenset(copies) for group, copies in wanted.items()}
        new = {group: copies for group, copies in new.items() if self.groups.get(group) != copies}
        self._check(new)
        for group, copies in sorted(new.items()):
            self._tx.set(group, dict(enumerate(sorted(copies))))
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
                raise DataplaneError(errno.EEXIST, OP, f"group {group} of interfaces {sorted(copies)} has the id of "
                                     f"the group of {sorted(self.groups[group])}, which rules use",
                                     hint="duplicate to these interfaces once the other group's intents are gone")
        if len(self.groups) + len(new) > MAX_GROUPS:
            raise DataplaneError(
                errno.ENOSPC, OP,
                f"{len(self.groups) + len(new)} sets of interfaces to duplicate to, the data plane holds "
                f"{MAX_GROUPS} (DPP_MAX_DUP_GROUPS)",
                hint="intents that duplicate to the same interfaces share one",
            )
