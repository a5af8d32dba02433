"""dpp_tunnels as the installed TUNNEL rules use it: each entry counted by the rules that name it
(their arg, netapp.mec.tunnels), written before the first and deleted with the last.

The rules' writer (netapp.dataplane.rules) counts the rules it installs and takes out (`hold`,
`drop`), and frees the entries no rule names any more once its change is in the maps (`free`): the
rule goes first, so no packet meets a rule whose entry is gone. A full apply (a start, a reconcile)
counts them again from the rules it installed (`recount`) and frees whatever else the map holds,
so entries left by an earlier run, or by a change the data plane refused after its entries were
written, go too. Without it the map's 4,096 entries would fill with destinations no rule sends to.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Iterable

from netapp.dataplane.errors import DataplaneError
from netapp.mec.tunnels import TunnelEntry

log = logging.getLogger("netapp.dataplane")


class TunnelEntries:
    """The entries of dpp_tunnels, with how many installed rules name each."""

    def __init__(self, table: Any):
        self._table = table
        self._refs: Counter[int] = Counter()
        self._unnamed: set[int] = set()  # written or dropped to 0: freed at the next `free`

    def add(self, entry: TunnelEntry) -> None:
        """A rule's entry, written before the rule. Entries are named by their content, so one held
        already is left as it is; ValueError when its id holds another."""
        value = entry.value()
        held = self._table.get(entry.entry_id)
        if held is None:
            self._table.update([(entry.entry_id, value)])
            if not self._refs[entry.entry_id]:
                self._unnamed.add(entry.entry_id)
        elif bytes(held) != bytes(value):
            raise ValueError(
                f"dpp_tunnels entry {entry.entry_id:#x} holds another tunnel (two tunnels with one digest): "
                "change the rule's destination"
            )

    def hold(self, entry_id: int) -> None:
        """A rule naming the entry is installed."""
        self._refs[entry_id] += 1
        self._unnamed.discard(entry_id)

    def drop(self, entry_id: int) -> None:
        """A rule naming the entry is taken out."""
        self._refs[entry_id] -= 1
        if self._refs[entry_id] <= 0:
            del self._refs[entry_id]
            self._unnamed.add(entry_id)

    def recount(self, named: Iterable[int]) -> None:
        """The counts from every installed rule's entry id; every other entry of the map is unnamed."""
        self._refs = Counter(named)
        self._unnamed = {int(key) for key, _ in self._table.items()} - set(self._refs)

    def free(self) -> None:
        """Delete the entries no installed rule names (after the rules that named them went and the
        shapes were published again). The rules' change is made by then: an entry the map refuses to
        delete stays, to be tried again at the next change."""
        unnamed = sorted(entry_id for entry_id in self._unnamed if not self._refs[entry_id])
        try:
            self._table.delete(unnamed)
        except DataplaneError as exc:
            log.warning("dpp_tunnels: %d entries no rule names stay for now: %s", len(unnamed), exc)
            return
        self._unnamed.clear()

    def references(self, entry_id: int) -> int:
        """How many installed rules name the entry."""
        return self._refs[entry_id]

