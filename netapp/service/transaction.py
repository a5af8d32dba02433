"""One transaction: the store and the BPF maps change together or not at all.

    BEGIN IMMEDIATE -> store writes and map steps (parts) -> map delta -> COMMIT

A change is given as its parts' work -- store writes, and steps recorded on a `MapChange` -- and the
`MapChange` that turns those steps into map writes and back. If anything fails before COMMIT, the
steps are rolled back, the store transaction too, and the maps were either not written or were put
back (by the facade, or by the change's inverse); if COMMIT itself fails, the map writes are undone.
Should undoing a map write fail as well, the change says so (`RuleChange`: the maps are marked for a
full reconcile, which the next change runs before anything else).

Parts: the group commit (netapp.service.group_commit) makes the single creates that queued up the
parts of one transaction. A part that fails is undone alone (a savepoint in the store, a mark in the
map steps) and keeps its error; the parts after it see the ones before, so rivals are decided in
arrival order.

Two kinds of change exist: `RuleChange` (rules, through the incremental index: its delta is pushed
once all parts are in, its inverse undoes it) and `SiteChange` (site objects -- CPUs, alternative
groups, attachments -- written to the maps as the work goes, each with its undo). A new kind of table
brings its own `MapChange`; the transaction stays as it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
from typing import Any, Callable, ContextManager, Generic, Optional, Protocol, TypeVar

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.duplicate.groups import OP as DUPLICATE_GROUPS
from netapp.intents.compiler import CompiledRule, redirect_ports, rule_tunnels
from netapp.intents.errors import IntentError
from netapp.intents.index import IndexChange, RuleDelta
from netapp.service.contract import DataplaneFull, DataplaneUnavailable, InvalidInput, Principal, ServiceError
from netapp.service.store import Store, StoreError

T = TypeVar("T")
C = TypeVar("C", bound="MapChange")

# Where a rule id is in a batch (its position), for an error to name it; None: not in the batch.
Where = Callable[[str], Optional[int]]


def invalid_input(exc: IntentError) -> InvalidInput:
    """An intent error as the 400 the caller gets."""
    return InvalidInput(exc.line(), field=exc.field or None, reason=exc.message)


class MapChange(Protocol):
    """The maps' side of one transaction: the steps its parts record, and their map writes."""

    def mark(self) -> int:
        """Where the steps are now, for `check` and `roll_back` to mean the steps after it."""

    def check(self, part: "Part[Any]", mark: int) -> None:
        """Refuse (raise a ServiceError) what the part's steps after `mark` would do wrong."""

    def roll_back(self, to: int = 0) -> None:
        """Forget the steps after mark `to` (by default all), and undo their map writes if made."""

    def apply_to_maps(self) -> None:
        """Write the steps to the maps; a ServiceError, with the maps as before, if they refuse."""

    def undo_maps(self, cause: Exception) -> None:
        """Put the maps back as before the change (the store could not commit: `cause`)."""

    def committed(self) -> None:
        """The store committed: the change is made."""


@dataclasses.dataclass
class Part(Generic[T]):
    """One caller's part of a transaction: its work (store writes and map steps), and what came of it."""

    who: Principal
    work: Callable[[Any], T]  # given the transaction's MapChange
    where: Optional[Where] = None
    result: Optional[T] = None
    error: Optional[Exception] = None
    # False: the work refuses only before it writes to the store (its writes never need undoing
    # alone), so it runs without a savepoint of its own (two statements fewer)
    savepoint: bool = True


class Transactions:
    """Runs changes as transactions of the store and the maps, one at a time (`exclusive`)."""

    def __init__(
        self,
        exclusive: Callable[[], ContextManager[None]],
        store: Callable[[], Store],
        require_started: Callable[[], None],
    ):
        self._exclusive = exclusive
        self._store = store
        self._require_started = require_started

    def change(
        self, who: Principal, open_change: Callable[[], C], work: Callable[[C], T], where: Optional[Where] = None
    ) -> T:
        """Run `work` as one transaction with the maps; raise its error if it fails."""
        (part,) = self.run([Part(who, work, where)], open_change)
        if part.error is not None:
            raise part.error
        return part.result  # type: ignore[return-value]

    def run(self, parts: list[Part[Any]], open_change: Callable[[], MapChange]) -> list[Part[Any]]:
        """Run the parts' work, in order, as one transaction: one store transaction, one map change
        (`open_change()`, opened under the lock), one commit. A part that fails is undone alone and
        keeps its error. Raises, with nothing changed, when the whole fails (the maps refuse the
        change, the commit fails)."""
        with self._exclusive():
            self._require_started()
            change = open_change()
            store = self._store()
            try:
                with store.transaction() as transaction:
                    try:
                        for part in parts:
                            self._run_part(store, change, part)
                        change.apply_to_maps()
                    except BaseException:
                        change.roll_back()
                        raise
                    if all(part.error is not None for part in parts):
                        transaction.roll_back()  # nothing of it stays: nothing to commit
                        return parts
                    self._commit_or_undo(transaction, change)
                    change.committed()
                    return parts
            except StoreError as exc:
                raise ServiceError(f"store: {exc}") from exc

    @staticmethod
    def _run_part(store: Store, change: MapChange, part: Part[Any]) -> None:
        mark = change.mark()
        try:
            if part.savepoint:
                with store.savepoint():
                    part.result = part.work(change)
                    change.check(part, mark)
            else:  # no context entered (a nullcontext was three calls a part: the UPF's, a part a request)
                part.result = part.work(change)
                change.check(part, mark)
        except (ServiceError, IntentError) as exc:
            change.roll_back(mark)
            if isinstance(exc, IntentError):
                part.error = invalid_input(exc)
                part.error.__cause__ = exc
            else:
                part.error = exc

    @staticmethod
    def _commit_or_undo(transaction: Any, change: MapChange) -> None:
        try:
            transaction.commit()
        except StoreError as exc:
            change.undo_maps(exc)
            change.roll_back()
            raise ServiceError(f"the store could not commit ({exc}); the data plane change was undone") from exc


class Follower(Protocol):
    """Another function's tables that follow a change of rules (an intent's protected stream,
    netapp.service.protection): written from the store's state of the change before the rules'
    delta, put back when the change fails after that."""

    def apply(self) -> None:
        """Write the tables; a ServiceError, with them as before, if they are refused."""

    def undo(self) -> None:
        """Put the tables back as they were before the change."""


class RuleChange:
    """Rules: steps on the incremental index (`add`, `remove`), whose delta goes to the maps in one
    write once every part is in; undone by the inverse delta, the removed rules' slots (and so
    their counters) given back. Followers (`follow`) write their tables first and are undone with it."""

    def __init__(
        self,
        index_change: IndexChange,
        dataplane: Dataplane,
        reject: Callable[[Principal, list[CompiledRule], Optional[Where]], None],
        on_stale: Callable[[str], None],
        on_commit: Callable[[], None],
    ):
        self.index_change = index_change
        self._dataplane = dataplane
        self._reject = reject
        self._on_stale = on_stale
        self._on_commit = on_commit
        self._slots: dict[str, int] = {}
        self._followers: dict[str, Follower] = {}
        self._followed: list[Follower] = []  # those whose tables are written

    def follow(self, name: str, make: Callable[[], Follower]) -> None:
        """Have follower `name` (made by `make` the first time: before the part's store writes) write
        its tables with this change."""
        if name not in self._followers:
            self._followers[name] = make()

    def add(self, rule: CompiledRule) -> None:
        self.index_change.add(rule)

    def remove(self, rule_id: str) -> CompiledRule:
        return self.index_change.remove(rule_id)

    def mark(self) -> int:
        return self.index_change.mark()

    def check(self, part: Part[Any], mark: int) -> None:
        """Collisions of the rules the part added with installed ones or those of earlier parts."""
        self._reject(part.who, self.index_change.added(mark), part.where)

    def roll_back(self, to: int = 0) -> None:
        self.index_change.roll_back(to)

    def apply_to_maps(self) -> None:
        """The followers' tables, then the delta; DataplaneFull or DataplaneUnavailable (maps as
        before) if refused."""
        try:
            for follower in self._followers.values():
                follower.apply()
                self._followed.append(follower)
            self._apply_rules()
        except ServiceError:
            self._undo_followers()
            raise

    def _undo_followers(self) -> None:
        followed, self._followed = self._followed, []
        for follower in reversed(followed):
            follower.undo()

    def _apply_rules(self) -> None:
        delta = self.index_change.delta()
        if delta.empty:
            return
        self._add_ports(delta)
        slots = self._dataplane.slots_of(rule.intent_id for rule in delta.removes)
        try:
            self._dataplane.apply_changes(delta)
        except DataplaneError as exc:
            if not getattr(exc, "rolled_back", False):
                self._undo(slots, exc)
            if exc.errno == errno.ENOSPC:
                raise DataplaneFull(
                    f"the data plane has no room for the change: {exc.message} ({_room_hint(exc)}); "
                    "nothing was changed"
                ) from exc
            raise DataplaneUnavailable(f"the data plane refused the change: {exc}") from exc
        self._slots = slots

    def _add_ports(self, delta: RuleDelta) -> None:
        """The ports the delta's redirects send out of, and its tunnel rules' entries, in their maps
        before the rules that use them (the full reconcile adds them too; a port left there by a rule
        that went is harmless, an entry goes with the last rule that names it, or with its refused
        change: netapp.mec.tunnel_entries)."""
        try:
            for ifindex in sorted(redirect_ports(delta.upserts)):
                self._dataplane.add_port(ifindex)
        except DataplaneError as exc:
            raise DataplaneUnavailable(f"the data plane refused a redirect's port: {exc}") from exc
        try:
            self._dataplane.add_tunnels(rule_tunnels(delta.upserts).values())
        except (DataplaneError, ValueError) as exc:
            raise DataplaneUnavailable(f"the data plane refused a tunnel rule's entry: {exc}") from exc

    def undo_maps(self, cause: Exception) -> None:
        """Put the maps back as they were before the change (before rolling the index back)."""
        self._undo(self._slots, cause)
        self._undo_followers()

    def committed(self) -> None:
        self._on_commit()

    def _undo(self, slots: dict[str, int], cause: Exception) -> None:
        try:
            self._dataplane.apply_changes(self.index_change.inverse(), restore_slots=slots)
        except (DataplaneError, ValueError) as exc:
            self._on_stale(f"undoing a failed change ({cause}) failed: {exc}")


def _room_hint(exc: DataplaneError) -> str:
    """What makes room: fewer copy groups for DUPLICATE's (netapp.duplicate.groups), else more rules."""
    return exc.hint if exc.op == DUPLICATE_GROUPS else "setting max_rules"


class SiteChange:
    """Site objects (CPUs, alternative groups, attachments): each map write is made as the work goes
    (`write`), and remembered with its undo for a commit that fails."""

    def __init__(self) -> None:
        self._undos: list[Callable[[], None]] = []

    def write(
        self,
        write: Callable[[], None],
        undo: Callable[[], None],
        undo_refused: Optional[Callable[[], None]] = None,
    ) -> None:
        """Make one map write of the site; DataplaneUnavailable if refused (after `undo_refused`,
        which puts back what a refused write may have half done). `undo` reverses it."""
        site_write(write, undo_refused)
        self._undos.append(undo)

    def mark(self) -> int:
        return len(self._undos)

    def check(self, part: Part[Any], mark: int) -> None:
        pass

    def roll_back(self, to: int = 0) -> None:
        """Forget the writes after mark `to`; those made by a part that failed are undone."""
        undos, self._undos = self._undos[to:], self._undos[:to]
        for undo in reversed(undos):
            with contextlib.suppress(DataplaneError):
                undo()

    def apply_to_maps(self) -> None:
        pass  # written as the work went

    def undo_maps(self, cause: Exception) -> None:
        undos, self._undos = self._undos, []
        for undo in reversed(undos):
            site_write(undo)

    def committed(self) -> None:
        pass


def site_write(write: Callable[[], None], undo: Optional[Callable[[], None]] = None) -> None:
    """One map write of the site; DataplaneUnavailable if refused (after `undo`, if given)."""
    try:
        write()
    except DataplaneError as exc:
        if undo is not None:
            with contextlib.suppress(DataplaneError):
                undo()
        raise DataplaneUnavailable(f"the data plane refused the change: {exc}") from exc
