"""dpp_tunnels as the installed TUNNEL rules use it: each entry counted by the rules that name it
(their arg, netapp.mec.tunnels), written before the first and deleted with the last.

The rules' writer (netapp.dataplane.rules) counts the rules it installs and takes out (`hold`,
`drop`), and frees the entries no rule names any more once its change is in the maps (`free`). The
rule goes first, and then the kernel is waited for (`Table.wait_readers`, an RCU grace period):
a program run that found the rule before it went may still be about to read its entry, and must
find it. A full apply (a start, a reconcile) counts them again from the rules it installed
(`recount`) and frees whatever else the map holds, so entries left by an earlier run, or by a
change the data plane refused after its entries were written, go too. Without it the map's 4,096
entries would fill with destinations no rule sends to.

The wait is some milliseconds, so it is made once per change, not once per entry: at the end of a
change that left entries no rule names (its rules took out the last reference to them, or it was
refused after its entries were written), every such entry goes after one wait, and nothing is left
behind for a later change. A change that removes no reference waits for nothing. A refused change
frees its entries before its error is raised: one of its entries refused (`add_all`), or its rules
refused by the maps and rolled back (netapp.dataplane.rules). Should the wait or the deletion fail,
the entries stay unnamed and go at the end of the next change, or first thing when an entry is to be
written and the map is full.
"""

from __future__ import annotations

import errno
import logging
from collections import Counter
from typing import Any, Iterable

from netapp.dataplane.errors import DataplaneError
from netapp.mec.tunnels import TunnelEntry

log = logging.getLogger("netapp.dataplane")

MAP_FULL = (errno.E2BIG, errno.ENOSPC)  # what a full hash map's update fails with


class TunnelEntries:
    """The entries of dpp_tunnels, with how many installed rules name each."""

    def __init__(self, table: Any):
        self._table = table
        self._refs: Counter[int] = Counter()
        self._unnamed: set[int] = set()  # dropped to 0, or found so: freed at the end of the change
        self._fresh: set[int] = set()  # written for a change, not yet named: unnamed after that change

    def add(self, entry: TunnelEntry) -> None:
        """A rule's entry, written before the rule. Entries are named by their content, so one held
        already is left as it is; ValueError when its id holds another."""
        value = entry.value()
        held = self._table.get(entry.entry_id)
        if held is None:
            self._write(entry.entry_id, value)
            if not self._refs[entry.entry_id]:
                self._fresh.add(entry.entry_id)
        elif bytes(held) != bytes(value):
            raise ValueError(
                f"dpp_tunnels entry {entry.entry_id:#x} holds another tunnel (two tunnels with one digest): "
                "change the rule's destination"
            )

    def add_all(self, entries: Iterable[TunnelEntry]) -> None:
        """A change's entries, written before its rules (`add` each). When one is refused (ValueError,
        DataplaneError), the change is: those written for it go (`free`: after one wait) before the
        error is raised, not at the end of the next change."""
        try:
            for entry in entries:
                self.add(entry)
        except (DataplaneError, ValueError):
            self.free()
            raise

    def _write(self, entry_id: int, value: Any) -> None:
        """Write the entry; a full map is first rid of the entries no rule names (not those written
        for the change at hand: its rules are yet to come), then written again."""
        try:
            self._table.update([(entry_id, value)])
        except DataplaneError as exc:
            if exc.errno not in MAP_FULL or not self._free_unnamed():
                raise
            self._table.update([(entry_id, value)])

    def hold(self, entry_id: int) -> None:
        """A rule naming the entry is installed."""
        self._refs[entry_id] += 1
        self._unnamed.discard(entry_id)
        self._fresh.discard(entry_id)

    def drop(self, entry_id: int) -> None:
        """A rule naming the entry is taken out."""
        self._refs[entry_id] -= 1
        if self._refs[entry_id] <= 0:
            del self._refs[entry_id]
            self._unnamed.add(entry_id)

    def recount(self, named: Iterable[int]) -> None:
        """The counts from every installed rule's entry id; every other entry of the map is unnamed,
        and freed at the end of the apply."""
        self._refs = Counter(named)
        self._unnamed = {int(key) for key, _ in self._table.items()} - set(self._refs)
        self._fresh.clear()

    def free(self) -> None:
        """At the end of a change to the rules (after the rules that named them went and the shapes
        were published again): free every entry no installed rule names, after one wait, when there
        is any. Entries written for a change that named none of them (it was refused) are unnamed
        from now on, and go with them."""
        self._unnamed |= self._fresh
        self._fresh.clear()
        self._free_unnamed()  # a failure: they stay unnamed, tried again at the next change

    def pending(self) -> int:
        """Entries no installed rule names that the map still holds (after a change: only those a
        failed free left, or those written for the change at hand)."""
        return len(self._unnamed | self._fresh)

    def _free_unnamed(self) -> bool:
        """Wait for every program run that began before (one that found a rule now gone may still
        read its entry), then delete the entries no installed rule names; False when nothing went.
        The rules' change is made by then: an entry the map refuses to delete, or that a failed wait
        leaves, stays to be tried again."""
        unnamed = sorted(entry_id for entry_id in self._unnamed if not self._refs[entry_id])
        if not unnamed:
            return False
        try:
            self._table.wait_readers()
            self._table.delete(unnamed)
        except DataplaneError as exc:
            log.warning("dpp_tunnels: %d entries no rule names stay for now: %s", len(unnamed), exc)
            return False
        self._unnamed.clear()
        return True

    def references(self, entry_id: int) -> int:
        """How many installed rules name the entry."""
        return self._refs[entry_id]

