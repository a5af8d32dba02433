"""The UPF's tables: PFCP associations and sessions, changed all or nothing.

A change is built whole before anything moves: the new session from the old one and the request
(rules removed, created, updated; TEIDs chosen), then checked (every id unique, every id a PDR names
exists, every TEID ours alone). Only then is it made, in a transaction of the store (netapp.service
.transaction): rows written and the tables here changed with them, the data-path `Applier` given
(old session, new session), COMMIT. If the applier refuses or COMMIT fails, the store is rolled
back, the applier given the inverse of what it took and the tables here put back as they were.

Changes in groups (`run_group`, what the PFCP endpoint does with the requests that queued up while
a transaction was in flight, netapp.service.group_commit): the changes of the group are the parts of
one transaction, one COMMIT (one sync of the disk) for all, each change seeing those before it. A
request refused (a RuleError) changes nothing and does not fail the others; should the transaction
fail as a whole, each change is made again alone, so that it gets the answer it would have got alone.

TEIDs the UPF chooses (CHOOSE) lie below the applier's `teid_slots` while fewer TEIDs are held:
the data path looks those up in an array (dpp_upf_teids), the others in a hash map.

URR slots: each URR of a session is given a slot of the data path's usage counters when it is
created (the applier's `urr_slots` say how many there are; 0: none), like a TEID, and each distinct
set of URRs a PDR names (several URRs) one when a PDR first names it (models.UrrSet: a URR's usage is
its slot's plus its sets'); the slots are stored with the session, so that a restart gives out no
slot in use. The applier zeroes a slot's counters when it is given and when it is freed (after
reading its final counts).

Sessions in memory (`SessionTable`) are kept as the JSON of their row, not as models: a Session is
some 130 objects, which Python's cyclic garbage collector would walk on every full collection (a
pause that grows with the number of sessions, and the bulk of a request's cost); a string is not
walked. A session is read back into its models when a change or a reader asks for it.

TS 29.244 on restarts: our Recovery Time Stamp is kept in the store with the sessions, since they
survive a restart of the service. A peer whose Recovery Time Stamp changes (Association Setup
again, or a Heartbeat) has restarted and lost its sessions: we delete ours of that association.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from contextlib import contextmanager
from typing import Any, Callable, ContextManager, Iterable, Iterator, Optional, Protocol, TypeVar, Union

from netapp.service.contract import Principal
from netapp.service.store import Store
from netapp.service.transaction import Part, Transactions
from netapp.upf import policing, store as rows
from netapp.upf.held import SessionChange, SessionTable
from netapp.upf.models import FSeid, FTeid, RuleError, Session, UeIpAddress, check_session
from netapp.upf.peers import Destinations
from netapp.upf.pools import Pools
from netapp.upf.prepared import PreparedSession, SessionStencil
from netapp.upf.pfcp.ies import Cause, IEType, RuleType
from netapp.upf.pfcp.rules import KINDS, RulePlan, build
from netapp.upf.slots import Slots, Teids
from netapp.upf.store import Association, ntp_now

log = logging.getLogger("netapp.upf")

Pair = tuple[Optional[Session], Optional[Session]]
T = TypeVar("T")
PFCP = Principal(tenant="", scopes=frozenset(), name="pfcp")
# What a change raises when it refuses a request, before it writes anything.
REFUSALS = (RuleError, KeyError, TypeError, ValueError)
# Our SEIDs are below this: a PDR's entry names its session in 32 bits (struct dpp_upf_pdr.seid).
SEID_SPACE = 1 << 32
QUOTAS = frozenset({"volume_quota", "time_quota_s"})  # what an Update URR gives to end an exhausted quota


@contextmanager
def both(first: ContextManager[Any], second: ContextManager[Any]) -> Iterator[None]:
    """`first` entered, then `second`: one lock order, as a transaction's `exclusive` needs one."""
    with first, second:
        yield


class Applier(Protocol):
    """The data path's side of a change: make the maps hold `new` instead of `old` (None: no session),
    or raise with the maps as before. `urr_slots`: how many usage slots it counts on (slot 0 is
    never given; an applier without the attribute has none). One may also take a transaction's
    pairs at once (`apply_group`, netapp.upf.held.SessionChange)."""

    urr_slots: int

    def apply(self, old: Optional[Session], new: Optional[Session]) -> None: ...

    def reconcile(self, sessions: Iterable[Session]) -> dict[int, RuleError]:
        """Make the maps hold exactly the sessions (at start); those it cannot hold, with why."""


class NoApplier:
    """No data path (the endpoint alone): every change is accepted, no URR gets a slot."""

    urr_slots = 0

    def apply(self, old: Optional[Session], new: Optional[Session]) -> None:
        pass

    def reconcile(self, sessions: Iterable[Session]) -> dict[int, RuleError]:
        return {}


@dataclasses.dataclass(frozen=True)
class Outcome:
    session: Session
    created: tuple[tuple[int, FTeid], ...] = ()  # (PDR id, the F-TEID the UPF chose) for Created PDR
    ue_created: tuple[tuple[int, UeIpAddress], ...] = ()  # (PDR id, the UE address the UPF chose (CHV4))


def new_seid(next_seid: int, sessions: SessionTable) -> int:
    """The SEID of a new session: `next_seid`, else the first one below SEID_SPACE after it that
    `sessions` does not hold."""
    seid = next_seid
    if 0 < seid < SEID_SPACE and seid not in sessions:  # the usual: given in turn, not yet wrapped
        return seid
    for _ in range(len(sessions) + 1):
        seid = seid if 0 < seid < SEID_SPACE else 1
        if seid not in sessions:  # not `get`: that reads a held session's JSON into models
            return seid
        seid += 1
    raise RuleError(Cause.NO_RESOURCES_AVAILABLE, "no SEID is free")


class Upf:
    """Associations and sessions: in memory for reading, in the store for restarts."""

    def __init__(
        self,
        store: Store,
        applier: Optional[Applier] = None,
        *,
        n3_ipv4: Optional[str] = None,
        n3_ipv6: Optional[str] = None,
        destinations: Optional[Destinations] = None,
        ue_pools: Optional[Pools] = None,
        rules_lock: Optional[ContextManager[Any]] = None,
    ):
        self._store = store
        self.destinations = destinations  # upf.peer_networks (netapp.upf.peers); None: not checked
        self._applier = applier or NoApplier()
        self.n3_ipv4, self.n3_ipv6 = n3_ipv4, n3_ipv6
        self.pools = ue_pools or Pools()  # upf.ue_pools: the UE addresses the UPF assigns (CHV4)
        self._lock = threading.RLock()
        # `rules_lock`: the service's, which FunctionRules.change takes for PDRs' SDF filters: taken before
        # the store's, as the intents' transactions take them, not inside it (two orders: a deadlock);
        # by every transaction, as which of them writes rules is known only once its parts have run
        locks = (lambda: self._lock) if rules_lock is None else (lambda: both(self._lock, rules_lock))
        self._transactions = Transactions(locks, lambda: store, lambda: None)
        self.associations: dict[str, Association] = {}
        self.sessions = SessionTable()
        self._teids = Teids(getattr(self._applier, "teid_slots", 0), n3_ipv4, n3_ipv6)
        self._change: Optional[SessionChange] = None  # the transaction in progress, under the lock
        self._rows = rows.SessionRows({})  # its session rows
        self._slots = Slots(getattr(self._applier, "urr_slots", 0), getattr(self._applier, "sdf_slots", 0),
                            getattr(self._applier, "policer_slots", 0))
        self._load()

    def _load(self) -> None:
        store = self._store
        with store.transaction():
            self.recovery_time_stamp = rows.get_counter(store, "recovery_time_stamp")
            if self.recovery_time_stamp is None:
                self.recovery_time_stamp = ntp_now()
                rows.put_counter(store, "recovery_time_stamp", self.recovery_time_stamp)
            self._next_seid = rows.get_counter(store, "next_seid") or 1
            self._teids.cursor = rows.get_counter(store, "teid_cursor") or 0
            self.associations = {item.node_id: item for item in rows.load_associations(store)}
            for session, body in rows.load_sessions(store):
                self.sessions.put(session, body)
                self._teids.hold(session)
                self.pools.hold(session)
                self._slots.hold(session)
            self._give_stored_urrs_slots()

    def _give_stored_urrs_slots(self) -> None:
        """Sessions stored without a data path (or before URRs had slots, QERs policers, or a PDR's
        second QER a policer of its own: its session's AMBR): their URRs get slots now, their QERs
        policers."""
        if not self._slots.urr_count and not self._slots.policer_count:
            return
        for seid, session in list(self.sessions.items()):
            several = any(len(set(pdr.urr_ids)) > 1 for pdr in session.pdrs.values())
            held = {(qer_id, way) for qer_id, pair in session.qer_policers.items() for way, policer_id in enumerate(pair)
                    if policer_id}
            policed = self._slots.policer_count and policing.wanted(session) - held
            if not several and not set(session.urrs) - set(session.urr_slots) and not policed:
                continue
            urr_slots = self._slots.choose_urr_slots(session, session.urrs)
            urr_sets = self._slots.choose_urr_sets(session, session.pdrs, session.urrs, urr_slots)
            qer_policers = self._slots.choose_policers(session, session)
            if (urr_slots, urr_sets, qer_policers) != (session.urr_slots, session.urr_sets, session.qer_policers):
                session = session.model_copy(update={"urr_slots": urr_slots, "urr_sets": urr_sets,
                                                     "qer_policers": qer_policers})
                rows.put_session(self._store, session)
                self.sessions.put(session)
                self._slots.hold(session)
        self._slots.settle()

    @property
    def applier(self) -> Applier:
        """The data path's side of every change (the fast path of establishments compiles for it)."""
        return self._applier

    @property
    def store(self) -> Store:
        """Where the UPF's rows are (the URR logic keeps its UR-SEQNs there too)."""
        return self._store

    # --- associations ----------------------------------------------------------------------------

    def association_of(self, address: str) -> Optional[Association]:
        return next((item for item in self.associations.values() if item.address == address), None)

    def setup_association(self, association: Association) -> None:
        """Set up (or replace) the association; a changed Recovery Time Stamp deletes its sessions."""
        with self._lock:
            old = self.associations.get(association.node_id)
            doomed = [] if old is None or old.recovery_time_stamp == association.recovery_time_stamp else self._of(
                association.node_id
            )
            self._change_association(association, doomed)

    def update_association(self, node_id: str, address: str, port: int) -> Association:
        with self._lock:
            old = self.require_association(node_id)
            new = old.model_copy(update={"address": address, "port": port})
            self._change_association(new, [])
            return new

    def release_association(self, node_id: str) -> None:
        """Release it: its sessions are deleted with it (29.244 6.2.8)."""
        with self._lock:
            self.require_association(node_id)
            self._change_association(None, self._of(node_id), node_id)

    def peer_heartbeat(self, address: str, recovery_time_stamp: int) -> None:
        """A peer's heartbeat: if its Recovery Time Stamp changed, it restarted; its sessions go."""
        with self._lock:
            old = self.association_of(address)
            if old is None or old.recovery_time_stamp == recovery_time_stamp:
                return
            new = old.model_copy(update={"recovery_time_stamp": recovery_time_stamp})
            self._change_association(new, self._of(old.node_id))

    def require_association(self, node_id: str) -> Association:
        association = self.associations.get(node_id)
        if association is None:
            raise RuleError(Cause.NO_ESTABLISHED_ASSOCIATION, f"no PFCP association with {node_id}", IEType.NODE_ID)
        return association

    def _of(self, node_id: str) -> list[Session]:
        return self.sessions.of(node_id)

    def _change_association(
        self, association: Optional[Association], doomed: list[Session], node_id: Optional[str] = None
    ) -> None:
        node_id = node_id or association.node_id  # type: ignore[union-attr]

        def write() -> None:
            if association is None:
                rows.delete_association(self._store, node_id)
            else:
                rows.put_association(self._store, association)
            for session in doomed:
                self._rows.delete(session.seid)

        def commit() -> None:
            if association is None:
                self.associations.pop(node_id, None)
            else:
                self.associations[node_id] = association
            self._commit_sessions([(session, None) for session in doomed])

        self._run([(session, None) for session in doomed], write, commit)

    # --- sessions --------------------------------------------------------------------------------

    def establish(self, node_id: str, remote: FSeid, plans: dict[str, RulePlan]) -> Outcome:
        with self._lock:
            self.require_association(node_id)
            seid = new_seid(self._next_seid, self.sessions)
            empty = Session(seid=seid, node_id=node_id, remote=remote)
            outcome = self._build(empty, plans)
            self._save(None, outcome.session, next_seid=seid + 1, cursor=self._teids.pending)
            return outcome

    def establish_prepared(self, stencil: SessionStencil, request: list[Any]) -> Optional[PreparedSession]:
        """`establish` of a request of a known shape (netapp.upf.pfcp.templates): the session its
        stencil makes of the request's values and of the SEID, TEIDs and URR slots chosen as
        `establish` chooses them, after the checks `establish` makes of them; None, nothing changed,
        where one does not pass: the request then goes the full way, which refuses it."""
        with self._lock:
            if stencil.node_id not in self.associations:
                return None
            try:
                seid = new_seid(self._next_seid, self.sessions)
            except RuleError:
                return None
            try:
                teids = self._teids.choose_new(seid, stencil.teids)
                self._slots.begin()
                slots = self._slots.choose_new_urr_slots(seid, stencil.urr_ids)
                slots += self._slots.choose_new_policers(seid, stencil.policers)
                session = stencil.session(request, seid, teids, slots)
                self.pools.check(session)  # type: ignore[arg-type]
                if self.destinations is not None:
                    self.destinations.check_session(session)  # type: ignore[arg-type]
            except RuleError:
                return None
            self._save(None, session, next_seid=seid + 1, cursor=self._teids.pending)  # type: ignore[arg-type]
            return session

    def modify(self, seid: int, plans: dict[str, RulePlan], remote: Optional[FSeid] = None) -> Outcome:
        with self._lock:
            old = self.require_session(seid)
            base = old if remote is None else old.model_copy(update={"remote": remote})
            outcome = self._build(base, plans)
            self._save(old, outcome.session, cursor=self._teids.pending)
            return outcome

    def delete(self, seid: int) -> Session:
        with self._lock:
            old = self.require_session(seid)
            self._save(old, None)
            return old

    def final_usage(self, seid: int) -> dict[int, Any]:
        """The final counts (netapp.upf.abi.Usage) of the session's URRs freed since last asked --
        deleted with it, or removed from it -- by URR id, for their usage reports; {} without a
        data path that counts."""
        final = getattr(self._applier, "final_usage", None)
        return final(seid) if final is not None else {}

    def usage(self, slots: Iterable[int]) -> dict[int, Any]:
        """The counts (netapp.upf.abi.Usage) of the URR slots now, by slot; {} without a data path
        that counts."""
        read = getattr(self._applier, "usage", None)
        return read(slots) if read is not None else {}

    def exhaust(self, seid: int, urr_ids: Iterable[int]) -> None:
        """The URRs' quotas are used up: their PDRs stop forwarding (29.244 5.2.2.2), in the store and
        the data path, until an Update URR brings a new quota."""
        with self._lock:
            old = self.require_session(seid)
            used_up = {urr_id: old.urrs[urr_id].model_copy(update={"quota_exhausted": True}) for urr_id in urr_ids}
            self._save(old, old.model_copy(update={"urrs": {**old.urrs, **used_up}}))

    def require_session(self, seid: int) -> Session:
        session = self.sessions.get(seid)
        if session is None:
            raise RuleError(Cause.SESSION_CONTEXT_NOT_FOUND, f"no session with SEID {seid:#x}")
        return session

    def _save(
        self,
        old: Optional[Session],
        new: Optional[Session],
        next_seid: Optional[int] = None,
        cursor: Optional[int] = None,
    ) -> None:
        seid = (new or old).seid  # type: ignore[union-attr]
        cursor = self._teids.cursor if cursor is None else cursor
        body = None if new is None else new.stored_json()  # the row's, and the table's in memory

        def write() -> None:
            if new is None:
                self._rows.delete(seid)
            else:
                self._rows.put(new, body)  # type: ignore[arg-type]

        def commit() -> None:
            self._teids.cursor = cursor
            if next_seid is not None:
                self._next_seid = next_seid
            if new is not None:
                self._slots.settle()
            self._commit_sessions([(old, new)], body)

        self._run([(old, new)], write, commit)

    # --- transactions ----------------------------------------------------------------------------

    def run_group(self, changes: list[Callable[[], T]]) -> list[Union[T, Exception]]:
        """Run the changes (callables of this UPF's methods) as the parts of one transaction; the
        result of each, or the refusal it raised (RuleError; KeyError, TypeError, ValueError: a request
        without the fields its flags promise). Should the transaction fail as a whole, each change
        is run alone; an error then is its outcome."""
        with self._lock:
            outcomes: list[Union[T, Exception]] = []
            try:
                self._transaction([self._part(change, outcomes) for change in changes])
            except Exception as exc:  # noqa: BLE001 - an outcome for each change, whatever it was
                if len(changes) == 1:
                    return [exc]
                log.warning("a group of %d PFCP changes failed as a whole (%s): making each alone", len(changes), exc)
                return [self._alone(change) for change in changes]
            return outcomes

    def _alone(self, change: Callable[[], T]) -> Union[T, Exception]:
        outcomes: list[Union[T, Exception]] = []
        try:
            self._transaction([self._part(change, outcomes)])
        except Exception as exc:  # noqa: BLE001 - the change's outcome
            return exc
        return outcomes[0]

    @staticmethod
    def _part(change: Callable[[], T], outcomes: list[Union[T, Exception]]) -> Part[None]:
        def work(_: SessionChange) -> None:
            try:
                outcomes.append(change())
            except REFUSALS as exc:  # raised before any row is written: nothing of it to undo
                outcomes.append(exc)

        return Part(PFCP, work, savepoint=False)  # a change refuses before it writes (REFUSALS, caught)

    def _transaction(self, parts: list[Part[Any]]) -> None:
        """The parts in one transaction of the store and the maps; the session rows they change
        written once they are all made (`rows.SessionRows`)."""
        if getattr(self._applier, "stale", None):  # an undo left entries wrong: the maps are put right first
            self._applier.reconcile(self.sessions.values())
        self._rows = rows.SessionRows(self._counters())
        written = Part(PFCP, lambda _: self._rows.write(self._store, self._counters()), savepoint=False)
        try:
            self._transactions.run([*parts, written], self._open_change)
            change = self._change
        finally:
            self._change = None
        try:
            change.settle()  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - the change stands: run_group must not make it again
            log.exception("UPF: what a committed change sends out (End Markers, replays) failed")

    def _counters(self) -> dict[str, int]:
        """The allocators' counters the store keeps."""
        return {"next_seid": self._next_seid, "teid_cursor": self._teids.cursor}

    def _open_change(self) -> SessionChange:
        self._change = SessionChange(self._applier)
        return self._change

    def _run(self, pairs: list[Pair], write: Callable[[], None], commit: Callable[[], None]) -> None:
        """Write the rows and change the tables in memory, in the transaction in progress (a group's)
        or in one of their own; the pairs go to the applier before COMMIT."""
        if self._change is None:
            self._transaction([Part(PFCP, lambda _: self._run(pairs, write, commit))])
            return
        write()
        counters = (self._next_seid, self._teids.cursor, self._slots.cursor)
        associations = dict(self.associations)
        commit()

        def undo() -> None:
            (self._next_seid, self._teids.cursor, self._slots.cursor), self.associations = counters, associations
            self._commit_sessions([(new, old) for old, new in reversed(pairs)])

        self._change.add(pairs, undo)

    def _commit_sessions(self, pairs: Iterable[Pair], body: Optional[str] = None) -> None:
        """The tables in memory: each `old` out, each `new` in (`body`: the JSON of a single new)."""
        for old, new in pairs:
            if old is not None:
                self.sessions.remove(old.seid)
                self._teids.release(old)
                self.pools.release(old)
                self._slots.release(old)
            if new is not None:
                self.sessions.put(new, body)
                self._teids.hold(new)
                self.pools.hold(new)
                self._slots.hold(new)

    # --- building a session from a request -------------------------------------------------------

    def _build(self, base: Session, plans: dict[str, RulePlan]) -> Outcome:
        """The session `base` becomes with the request's rules, checked; nothing is changed yet."""
        tables: dict[str, dict[int, Any]] = {kind.table: dict(getattr(base, kind.table)) for kind in KINDS}
        for far_id, far in tables["fars"].items():
            if far.send_end_marker:  # asked of the modification that set it, not of this one
                tables["fars"][far_id] = far.model_copy(update={"send_end_marker": False})
        for kind in KINDS:
            plan, table = plans.get(kind.table, RulePlan()), tables[kind.table]
            for rule_id in plan.removes:
                if table.pop(rule_id, None) is None:
                    raise _failure(kind.rule_type, rule_id, "does not exist", kind.remove_ie)
            for rule in plan.creates:
                created_id: int = rule.id  # type: ignore[attr-defined]
                if created_id in table:
                    raise _failure(kind.rule_type, created_id, "exists already", kind.create_ie)
                table[created_id] = rule
            for rule_id, changes in plan.updates:
                old = table.get(rule_id)
                if old is None:
                    raise _failure(kind.rule_type, rule_id, "does not exist", kind.update_ie)
                merged = {**old.model_dump(), **changes}
                if kind.rule_type == RuleType.URR and QUOTAS & changes.keys():  # a new quota: forwarding again
                    merged["quota_exhausted"] = False
                if "forwarding" in changes and old.forwarding is not None:
                    merged["forwarding"] = {**old.forwarding.model_dump(), **changes["forwarding"]}
                table[rule_id] = build(kind.model, merged, kind.update_ie, (kind.rule_type, rule_id))
        created = self._teids.choose(base, tables["pdrs"])
        ue_created = self.pools.choose_for(base, tables["pdrs"])
        self._slots.begin()
        urr_slots = self._slots.choose_urr_slots(base, tables["urrs"])
        # Of parts each checked already (models, the UPF's own numbers): put together, not checked
        # again (Session() would run every rule's model validators once more).
        session = Session.model_construct(
            seid=base.seid,
            node_id=base.node_id,
            remote=base.remote,
            urr_slots=urr_slots,
            urr_sets=self._slots.choose_urr_sets(base, tables["pdrs"], tables["urrs"], urr_slots),
            sdf_slots=self._slots.choose_sdf_slots(base, tables["pdrs"]),
            **tables,  # type: ignore[arg-type]
        )
        check_session(session)
        qer_policers = self._slots.choose_policers(base, session)
        if qer_policers:
            session = session.model_copy(update={"qer_policers": qer_policers})
        self.pools.check(session)
        if self.destinations is not None:  # where its tunnels go: the operator's allow-list
            self.destinations.check_session(session)
        return Outcome(session, tuple(created), tuple(ue_created))


def _failure(rule_type: RuleType, rule_id: int, what: str, ie_type: IEType) -> RuleError:
    return RuleError(
        Cause.RULE_CREATION_MODIFICATION_FAILURE, f"{rule_type.name} {rule_id} {what}", ie_type, (rule_type, rule_id)
    )
