"""The changes a read made outside ATSSS's service lock may have missed. The telemetry's poll reads
the served sessions' path slots, and MEC 015's QoS watch the stored MTS sessions, outside the lock
(a read of every session under it would hold every change up). Such a read watches, from a point
where no change is under way, the keys of what changes while it reads, and then, under the lock,
keeps what it read of the keys no change touched and drops the rest."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import ContextManager, Generic, Hashable, Iterable, Iterator, TypeVar

Key = TypeVar("Key", bound=Hashable)


class ChangesSeen(Generic[Key]):
    """The keys changed while each open watch was open."""

    def __init__(self) -> None:
        self._open: list[set[Key]] = []
        self._lock = threading.Lock()  # over the open watches: one opens or closes outside the service's lock

    @contextmanager
    def watching(self, lock: ContextManager) -> Iterator[set[Key]]:
        """The keys changed from here on, until the block ends (read them under `lock`). Opened
        under `lock`, the service's, where no change is under way: one under way would have told
        its keys before the watch opened, and its write could still be read after."""
        seen: set[Key] = set()
        with lock, self._lock:
            self._open.append(seen)
        try:
            yield seen
        finally:
            with self._lock:
                self._open = [each for each in self._open if each is not seen]  # by identity: two may be equal

    def note(self, keys: Iterable[Key]) -> None:
        """`keys` changed (told under the service's lock, before the change is over): told to every
        open watch."""
        keys = set(keys)
        with self._lock:
            for seen in self._open:
                seen.update(keys)
