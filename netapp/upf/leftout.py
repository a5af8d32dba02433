"""The stored sessions the data path's maps do not hold (netapp.upf.applier): those a reconcile left
out -- they no longer compile, their tunnels go outside upf.peer_networks, or an entry of theirs is
another session's -- until a change puts them in.

What the maps hold of such a session is nothing, whatever it would compile to: its deletion deletes
no entry (the entries it would name may be another session's), and a modification writes all of
its new entries, as an establishment does. A change that puts one in and is then undone (the
transaction failed after the maps took it) leaves it out again, as it was, until the transaction
is committed.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

from netapp.upf.compiler import Entries
from netapp.upf.models import RuleError, Session

Compile = Callable[[Optional[Session]], Entries]
Pair = tuple[Optional[Session], Optional[Session]]


class LeftOut:
    """The SEIDs of the stored sessions the maps do not hold."""

    def __init__(self) -> None:
        self.seids: set[int] = set()
        self._back: dict[int, Session] = {}  # put in by a change not yet committed: SEID -> as it was

    def reconciled(self, refused: Iterable[int]) -> None:
        """A reconcile left these out (and put every other in)."""
        self.seids, self._back = set(refused), {}

    def before(self, session: Optional[Session], compile: Compile) -> Entries:
        """What the maps hold of `session` (None: no session)."""
        if session is None or session.seid in self.seids:
            return Entries()
        return compile(session)

    def after(self, session: Optional[Session], compile: Compile) -> tuple[Entries, bool]:
        """What the maps are to hold of `session`, and whether it is left out again: a change that
        put it in undone, back to the session as it was, which does not compile (RuleError
        otherwise)."""
        try:
            return compile(session), False
        except RuleError:
            if session is None or self._back.get(session.seid) != session:
                raise
            return Entries(), True

    def applied(self, pairs: list[Pair], out_again: list[bool]) -> None:
        """The maps hold the pairs' new sessions (those `out_again` nothing)."""
        for (old, new), again in zip(pairs, out_again):
            seid = (new or old).seid  # type: ignore[union-attr]
            if again:
                self.seids.add(seid)
                self._back.pop(seid, None)
            elif seid in self.seids:
                self.seids.discard(seid)
                if new is not None:
                    self._back[seid] = old  # type: ignore[assignment]
            elif new is None:
                self._back.pop(seid, None)

    def committed(self) -> None:
        """The changes applied stand: none is undone any more."""
        self._back.clear()
