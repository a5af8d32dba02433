"""What a UPF transaction holds besides the store: the map part of the change (`SessionChange`, the
transaction's `MapChange`: the (old, new) session pairs for the data-path applier, with undo) and the
sessions held in memory (`SessionTable`). Used by netapp.upf.sessions."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, TypeVar

from netapp.upf.models import RuleError, Session
from netapp.upf.pfcp.ies import Cause

if TYPE_CHECKING:
    from netapp.upf.sessions import Applier, Pair

log = logging.getLogger("netapp.upf")
T = TypeVar("T")


class SessionChange:
    """The `MapChange` of a UPF transaction: the (old, new) pairs its changes made, given to the
    applier in order once all are in; undone (the applier given the inverse pairs, the tables in
    memory put back) if a later pair, or the commit, fails."""

    def __init__(self, applier: Applier):
        self._applier = applier
        self._pairs: list[Pair] = []
        self._undo_tables: list[Callable[[], None]] = []
        self._applied: list[Pair] = []
        self._standing: Optional[list[Pair]] = None  # once committed: the pairs that stand

    def add(self, pairs: list[Pair], undo_tables: Callable[[], None]) -> None:
        """Pairs a change made, and how to put the tables in memory back from it."""
        self._pairs.extend(pairs)
        self._undo_tables.append(undo_tables)

    def mark(self) -> int:
        return 0

    def check(self, part: Any, mark: int) -> None:
        pass

    def roll_back(self, to: int = 0) -> None:
        self._undo_maps()
        undo, self._undo_tables = self._undo_tables, []
        for step in reversed(undo):
            step()

    def apply_to_maps(self) -> None:
        """The pairs to the applier: all at once where it can (its `apply_group`: one write per
        table for the group), else one by one."""
        group = getattr(self._applier, "apply_group", None)
        if group is not None and len(self._pairs) > 1 and self._applying(lambda: group(self._pairs)):
            self._applied.extend(self._pairs)
            return
        for old, new in self._pairs:
            self._applying(lambda: self._applier.apply(old, new))  # noqa: B023 - called at once
            self._applied.append((old, new))

    def _applying(self, apply: Callable[[], T]) -> T:
        """`apply()`; if it fails, every pair applied so far undone and a RuleError raised."""
        try:
            return apply()
        except RuleError:
            self._undo_maps()
            raise
        except Exception as exc:
            self._undo_maps()
            raise RuleError(Cause.SYSTEM_FAILURE, f"the data path refused the change: {exc}") from exc

    def undo_maps(self, cause: Exception) -> None:
        self._undo_maps()

    def committed(self) -> None:
        """The change is committed: the applier's bookkeeping of it, under the transaction's locks."""
        done = getattr(self._applier, "committed", None)
        if done is not None:
            done()
        self._standing = list(self._applied)

    def settle(self) -> None:
        """Once the transaction is over, if it was committed: what the applier sends out for the
        pairs that stand (End Markers, replays of buffered frames: netapp.upf.around), under the
        UPF's lock only, so that the service's and the store's are not held for its sends."""
        standing, self._standing = self._standing, None
        done = getattr(self._applier, "settled", None)
        if standing is not None and done is not None:
            done(standing)

    def _undo_maps(self) -> None:
        """Every pair applied, undone in reverse, past those whose undo fails (logged: the applier
        marks what it left wrong for a reconcile)."""
        applied, self._applied = self._applied, []
        for old, new in reversed(applied):
            try:
                self._applier.apply(new, old)
            except Exception:  # noqa: BLE001 - the other pairs are undone all the same
                seid = (old or new).seid  # type: ignore[union-attr]
                log.exception("undoing the data path's change of session %#x failed", seid)


class SessionTable(Mapping[int, Session]):
    """The sessions by SEID, each held as its row's JSON (and its association's node id): a mapping
    of Sessions, each read back from its JSON when asked for (a new object every time). The JSON
    and the node id are held apart, not as a pair: a session held outlives many young collections
    of the garbage collector, and a pair would be one more container for the next to walk."""

    def __init__(self) -> None:
        self._bodies: dict[int, str] = {}  # SEID -> JSON
        self._owners: dict[int, str] = {}  # SEID -> node id

    def __getitem__(self, seid: int) -> Session:
        return Session.model_validate_json(self._bodies[seid])

    def __iter__(self) -> Iterator[int]:
        return iter(self._bodies)

    def __len__(self) -> int:
        return len(self._bodies)

    def __contains__(self, seid: object) -> bool:
        return seid in self._bodies

    def put(self, session: Session, body: Optional[str] = None) -> None:
        """Hold `session`; `body`: its JSON, when the caller has it already."""
        seid = session.seid
        self._bodies[seid] = session.stored_json() if body is None else body
        self._owners[seid] = session.node_id

    def body(self, seid: int) -> str:
        """The session's JSON, as held (KeyError: none)."""
        return self._bodies[seid]

    def remove(self, seid: int) -> None:
        self._bodies.pop(seid, None)
        self._owners.pop(seid, None)

    def of(self, node_id: str) -> list[Session]:
        """The sessions of an association."""
        bodies = self._bodies
        return [Session.model_validate_json(bodies[seid]) for seid, owner in self._owners.items() if owner == node_id]
