"""The copy groups of the installed DUPLICATE rules in the maps: each group's interfaces in
dpp_dup_members, every interface of a group in dpp_dup_tx (with the egress program that keeps a
group's copies). The rules' writer (netapp.dataplane.rules) places the groups its rules name before
the rules, and settles them after: a group no installed rule names any more is removed, and so is
an interface no group has. A restart adopts what the maps hold, and its full apply settles it."""

from __future__ import annotations

import errno
from typing import Any, Callable, Iterable, Mapping, Optional

from netapp.dataplane.abi import DevmapVal
from netapp.dataplane.errors import DataplaneError
from netapp.duplicate.abi import MAX_GROUPS, Member, MemberKey

EGRESS_PROG = "dpp_dup_egress"  # the devmap program of DUPLICATE's interfaces (dpp.bpf.c)
OP = "duplicate groups"


class CopyGroups:
    """The groups and interfaces DUPLICATE's maps hold, with a shadow of them (read at first use)."""

    def __init__(self, table: Callable[[str], Any], program_fd: Callable[[str], int]):
        self._members = table("dpp_dup_members")
        self._tx = table("dpp_dup_tx")
        self._program_fd = program_fd
        self._groups: Optional[dict[int, frozenset[int]]] = None

    @property
    def groups(self) -> dict[int, frozenset[int]]:
        """group id -> its interfaces (ifindexes), as the maps hold them."""
        if self._groups is None:
            self._groups = {}
            for key, _ in self._members.items():
                self._groups.setdefault(key.group, frozenset())
                self._groups[key.group] |= {key.ifindex}
        return self._groups

    def place(self, wanted: Mapping[int, Iterable[int]]) -> None:
        """The groups `wanted` (id -> interfaces) in the maps, before rules name them; DataplaneError
        (ENOSPC, EEXIST) when they do not fit or an id is another set's, nothing written then."""
        new = {group: frozenset(copies) for group, copies in wanted.items()}
        new = {group: copies for group, copies in new.items() if self.groups.get(group) != copies}
        self._check(new)
        if not new:
            return
        ports = set().union(*new.values()) - self._ports()
        if ports:
            fd = self._program_fd(EGRESS_PROG)
            self._tx.update({ifindex: DevmapVal(ifindex=ifindex, bpf_prog=fd) for ifindex in sorted(ports)})
        self._members.update([(MemberKey(group, ifindex), Member()) for group, copies in new.items()
                              for ifindex in sorted(copies)])
        self.groups.update(new)

    def settle(self, used: Iterable[int]) -> None:
        """Only the groups `used` (the ids installed rules name) stay, and only their interfaces."""
        unused = set(self.groups) - set(used)
        if unused:
            self._members.delete([MemberKey(group, ifindex) for group in sorted(unused)
                                  for ifindex in sorted(self.groups[group])])
            for group in unused:
                del self.groups[group]
        stale = [ifindex for ifindex, _ in self._tx.items() if ifindex not in self._ports()]
        if stale:
            self._tx.delete(stale)

    def requeue(self) -> None:
        """The interfaces run the instance's egress program again, after a reload replaced it."""
        ports = self._ports()
        if ports:
            fd = self._program_fd(EGRESS_PROG)
            self._tx.update({ifindex: DevmapVal(ifindex=ifindex, bpf_prog=fd) for ifindex in sorted(ports)})

    def _ports(self) -> set[int]:
        return set().union(*self.groups.values()) if self.groups else set()

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
