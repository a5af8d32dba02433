"""The facade's bookkeeping of rules: what the shadow remembers of an installed rule, and the
allocation of rule stat slots."""

from __future__ import annotations

import errno
import heapq
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

from netapp.dataplane.binding import DataplaneError, FlowKey, Rule, struct_bytes


@dataclass
class InstalledRule:
    """A rule in the kernel map, as the shadow remembers it (intent_id None: found, owner unknown)."""

    key: FlowKey
    rule: Rule
    intent_id: Optional[str]
    policing: Any = (None, None)  # what the rule asks of its policers (netapp.qos.rules.Policing)
    copies: tuple[tuple[int, bool], ...] = ()  # DUPLICATE: its group, (ifindex, decapsulated) each

    @property
    def key_bytes(self) -> bytes:
        return struct_bytes(self.key)

    def same_value(self, other: "InstalledRule") -> bool:
        return struct_bytes(self.rule) == struct_bytes(other.rule)


class SlotAllocator:
    """Rule stat slots: lowest free slot first, so slots stay dense and stat reads stay short."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._free: list[int] = []
        self._next = 0

    @property
    def high_water(self) -> int:
        """Every slot ever handed out is below this."""
        return self._next

    def allocate(self) -> int:
        if self._free:
            return heapq.heappop(self._free)
        if self._next >= self.capacity:
            raise DataplaneError(
                errno.ENOSPC, "allocate rule slot", f"all {self.capacity} rule slots are in use"
            )
        self._next += 1
        return self._next - 1

    def release(self, slot: int) -> None:
        heapq.heappush(self._free, slot)

    def reserve_many(self, slots: Iterable[int]) -> None:
        """Mark found slots as taken, all at once: O(n), where one reserve() each is O(n) apiece."""
        taken = set(slots)
        if not taken:
            return
        new_next = max(self._next, max(taken) + 1)
        free = (set(self._free) | set(range(self._next, new_next))) - taken
        self._next = new_next
        self._free = sorted(free)  # a sorted list is a heap

    def take(self, slot: int) -> bool:
        """Take this very slot if it is free (to give an intent back the slot it had)."""
        if slot >= self.capacity:
            return False
        if slot >= self._next or slot in self._free:
            self.reserve(slot)
            return True
        return False

    def reserve(self, slot: int) -> None:
        """Mark a slot found in a reused instance as taken."""
        if slot in self._free:
            self._free.remove(slot)
            heapq.heapify(self._free)
            return
        for unused in range(self._next, slot):
            heapq.heappush(self._free, unused)
        self._next = max(self._next, slot + 1)


def contiguous_runs(slots: Sequence[int]) -> list[tuple[int, int]]:
    """[3, 4, 5, 9] -> [(3, 3), (9, 1)]: (first, count) runs, so counters clear in few calls."""
    runs: list[tuple[int, int]] = []
    for slot in sorted(set(slots)):
        if runs and runs[-1][0] + runs[-1][1] == slot:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((slot, 1))
    return runs
