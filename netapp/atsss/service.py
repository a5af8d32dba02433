"""The ATSSS sessions as a service: tenant-scoped, stored and written to ATSSS's maps together,
reconciled at start.

A change touches the sessions of one or two UEs (a replace may move a session to another UE): the
store's transaction and the sync of those UEs' entries go together: the maps refusing syncs
them back to what they held and rolls the store back, and the store failing to commit puts the
maps back as they were (with the numbers the data path had taken in what the change deleted). A
stored session the node cannot serve now (an interface gone, a neighbour unknown) stays stored, out
of the maps, and is told in `unserved`.
Without a data plane the sessions are only stored, and reach the maps when a service with one
starts (`reconcile`).

A tenant names its sessions (unique per tenant); the node gives each path a slot of
dpp_atsss_paths, so that no tenant can aim at another's slot or need to know which are free. A
MEC 015 MTS session (netapp.atsss.mts) steering a UE sets the mode its session runs; one with flow
filters sets the mode of the flows they select, through the classifier's rules (netapp.atsss.flows),
written before the session's FLOW_RULES flag and taken out before it is cleared (applied_with_flows); in
round-robin or weighted its flows schedule with a state of their own, whose slot the node gives it
(netapp.atsss.flow_states), as it gives path slots.

REDUNDANT sessions send a copy of each packet out of each path's interface: the sessions naming the
same interfaces by position share a group of ports (dpp_atsss_tx, netapp.atsss.groups), any other
set of interfaces (another session's, maybe another tenant's) has its own, so a session's copies
leave by its own ports only. The groups are planned from the stored redundant sessions whenever one
comes or goes: new ones written before the sessions that name them, unnamed ones emptied after;
their ports once the program is loaded (`program_fd`).
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, ContextManager, Iterator, Mapping, Optional

from pydantic import ValidationError

from netapp.atsss import store as stored
from netapp.atsss.admission import (
    check_interfaces,
    check_low_cost_order,
    check_redundant,
    check_subflows,
    check_ue,
    check_weights,
    runs_in,
    session_to_steer,
    slots_for,
    steered_by,
)
from netapp.atsss.changes_seen import ChangesSeen
from netapp.atsss.flow_states import FlowStates, undone_on_failure
from netapp.atsss.flows import Rules, apply_rules, check_overlaps, check_tenant_room, stored_rules_of, ue_rules, with_state
from netapp.atsss.groups import GroupPlan, PortNames, TxGroups
from netapp.atsss.models import (
    AtsssSession,
    AtsssSessionPatch,
    AtsssSessionSpec,
    SessionCounters,
    SteeringMode,
)
from netapp.atsss.owed import forget_owed, keep_owed, owed_of
from netapp.atsss.readings import (MeasuredLoss, PathKey, PathReading, path_key, path_readings, session_counters,
                                   unchanged)
from netapp.atsss.reclaim import subflow
from netapp.atsss.resolve import interface_index, resolve_macs, resolved_tables
from netapp.atsss.scope import check_scope
from netapp.atsss.table import (
    AtsssMaps,
    AtsssTables,
    Macs,
    Moved,
    ProgramFd,
    TableOf,
    entries_of,
)
from netapp.dataplane.binding import DataplaneError
from netapp.intents.errors import IntentError
from netapp.service.contract import (
    Conflict,
    DataplaneUnavailable,
    InvalidInput,
    NotFound,
    Principal,
    QuotaExceeded,
    Scope,
)
from netapp.service.function_rules import FunctionRules
from netapp.service.state import ServiceState, namespace, site_addresses
from netapp.service.store import Store
from netapp.tenancy.policy import TenantPolicy

log = logging.getLogger(__name__)

PathMacs = Callable[[AtsssSession, int, Optional[int]], Macs]
MtsKey = tuple[str, str]  # (tenant, MTS session)
UNHEALED = "the ATSSS maps could not be put back after a refused change: the next change reconciles them first"


def patched(current: AtsssSession, patch: AtsssSessionPatch) -> AtsssSessionSpec:
    """`current`'s definition with the PATCH's mode and paths' changes; InvalidInput naming a path
    index the session lacks, or what the changed definition breaks."""
    paths = [path.model_copy() for path in current.paths]
    for change in patch.paths:
        if change.index >= len(paths):
            raise InvalidInput(f"paths: the session has {len(paths)} paths, no index {change.index}",
                               field="paths", allowed=f"0..{len(paths) - 1}")
        paths[change.index] = paths[change.index].model_copy(
            update={key: value for key, value in change.model_dump(exclude={"index"}).items() if value is not None})
    body = current.model_dump(include=set(AtsssSessionSpec.model_fields))
    body.update(paths=[path.model_dump() for path in paths], mode=patch.mode or current.mode)
    try:
        return AtsssSessionSpec.model_validate(body)
    except ValidationError as exc:  # e.g. every weight of a weighted session made 0
        raise IntentError.from_validation(exc) from None


def served_after(served: list[AtsssSession], touched: list[AtsssSession], after: list[AtsssSession],
                 unserved: Mapping[str, str]) -> list[AtsssSession]:
    """`served` with the `touched` sessions replaced by what they are `after` the change (those
    `unserved` left out)."""
    names = {(session.tenant, session.name) for session in touched}
    return [session for session in served if (session.tenant, session.name) not in names] + [
        session for session in after if f"{session.tenant}/{session.name}" not in unserved]


@dataclass
class Found:
    """What a change of the maps found, to put back if the maps refuse it or the store its COMMIT:
    the stored sessions of its UEs, the groups of ports, the sessions told unserved; the raw keys of
    its UEs, the path slots they had or have, and what the data path had moved in them."""

    sessions: list[AtsssSession]
    groups: dict[PortNames, int]
    unserved: dict[str, str]
    ues: list[bytes] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    moved: Moved = field(default_factory=Moved)


def applied_with_flows(rules: Optional[FunctionRules], old: Rules, new: Rules,
                       apply_sessions: Callable[[], Callable[[], None]]) -> Callable[[], None]:
    """An MTS session's change: its flow rules `old` replaced by `new` in one write of the
    classifier's maps, then the sessions (their FLOW_RULES flags, `apply_sessions`). Either write
    alone leaves each flow in the mode of an MTS session or the session's own, never another's: a
    frame of a session flagged before its rules are written, or after they are gone, matches none
    and runs the session's mode; one flagged meets the old rules or the new, never half of them. A
    refused write of the sessions takes the rules back. Returns the undo of both (the sessions
    first), for a store transaction that fails after them."""
    undo_rules = apply_rules(rules, old, new)
    try:
        undo_sessions = apply_sessions()
    except BaseException:
        undo_rules()
        raise

    def undo() -> None:
        undo_sessions()
        undo_rules()

    return undo


def carried_into(tables: AtsssTables, moved: Moved) -> Moved:
    """Of `moved` (what a refused put back was to carry), the paths whose slot `tables` fills with
    the same subflow: numbers and counts go to no other subflow's path (another UE's, maybe another
    tenant's); the sessions (by UE) as they are."""
    paths = {slot: path for slot, path in moved.paths.items()
             if slot in tables.paths and subflow(tables.paths[slot]) == subflow(path)}
    return Moved(dict(moved.sessions), paths)


def paths_read(maps: AtsssMaps, sessions: list[AtsssSession]) -> list[PathReading]:
    """Each path of `sessions` as the maps hold it (its value, counters and loss estimate), in one
    batch read of each map, in the caller's namespace."""
    slots = [slot for session in sessions for slot in session.slots]
    values, counts, losses = maps.paths(slots), maps.stats(slots), maps.losses(slots)
    readings, start = [], 0
    for session in sessions:
        end = start + len(session.slots)
        readings += path_readings(session, values[start:end], counts[start:end], losses[start:end])
        start = end
    return readings


def retired_slots(maps: Optional[AtsssMaps]) -> frozenset[int]:
    """The path slots the maps hold emptied with no wait since (AtsssMaps.retired_slots), which new
    paths pass over (admission.slots_for)."""
    return maps.retired_slots() if maps is not None else frozenset()


class Atsss:
    """The ATSSS sessions of every tenant on this node. `netns`: the node's namespace, where
    interfaces and neighbours are looked up and the maps written (setting netns)."""

    def __init__(self, store: Store, maps: Optional[AtsssMaps] = None, netns: Optional[str] = None,
                 macs: PathMacs = resolve_macs, ifindex: Callable[[str], Optional[int]] = interface_index,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
                 program_fd: Optional[ProgramFd] = None, rules: Optional[FunctionRules] = None):
        self.store = store
        self.rules = rules  # the classifier's rules of MTS sessions' flow filters (netapp.atsss.flows)
        self._program_fd = program_fd
        self._maps = maps
        self._netns = netns
        self._macs = macs
        self._ifindex = ifindex
        self._clock = clock
        self._lock = self.lock = threading.Lock()  # one change of the maps at a time; a reload's too
        self.program_lock = None  # (NetAppService.serve_function) it runs no program itself
        self._owed: Optional[Moved] = None  # the maps not the store's (a put back refused): what to carry back
        self.unserved: dict[str, str] = {}  # "<tenant>/<name>" -> why it is stored but not in the maps
        self._groups = TxGroups(ifindex)  # the redundant sessions' groups of ports
        # The sessions in the maps, for the telemetry's polls: loaded from the store once, then kept
        # up to date by each change (loading 10,000 takes far longer than reading their counters).
        self._served: Optional[list[AtsssSession]] = None
        self._measured = MeasuredLoss()  # each path's, from the polls' windows: what MEC 015's QoS check reads
        # Each MEC 015 QoS session's requirements' statuses as last told, by (tenant, MTS session),
        # then by qosD field: each requirement's own hysteresis (netapp.atsss.mts.qos_check's
        # `held`), kept by netapp.atsss.qos_watch.QosWatch.
        self.qos_held: dict[MtsKey, dict[str, str]] = {}
        # What changed while a read outside the lock was under way (netapp.atsss.changes_seen): the
        # sessions (tenant, name), for the polls' readings; the MTS sessions, for QosWatch's statuses.
        self._session_changes: ChangesSeen[tuple[str, str]] = ChangesSeen()
        self._mts_changes: ChangesSeen[MtsKey] = ChangesSeen()
        self._states = FlowStates(store, maps if rules is not None else None)  # slots of MTS sessions' flow states

    @classmethod
    def start(cls, store: Store, table_of: TableOf, netns: Optional[str] = None,
              program_fd: Optional[ProgramFd] = None, rules: Optional[FunctionRules] = None) -> "Atsss":
        """Over a data plane's maps (and its programs, for redundant sessions' copies; `rules`, the
        service's, for MTS sessions' flow filters, which its start reconciled): the stored sessions
        reconciled into them."""
        atsss = cls(store, AtsssMaps(table_of), netns=netns, program_fd=program_fd, rules=rules)
        atsss._owed = owed_of(store)  # a refused put back's numbers, kept over a restart
        atsss.reconcile()
        return atsss

    # --- reads ---------------------------------------------------------------------------------

    def list_sessions(self, who: Principal) -> list[AtsssSession]:
        """The caller's sessions; an admin's: every tenant's."""
        ServiceState.require(who, Scope.READ)
        return stored.load_sessions(self.store, None if who.is_admin else who.tenant)

    def get_session(self, who: Principal, name: str) -> AtsssSession:
        """`name`: the caller's own, or for admins `<tenant>/<name>`; another tenant's is not found."""
        ServiceState.require(who, Scope.READ)
        tenant, local = ServiceState.owner(who, name, "session")
        session = stored.stored_session(self.store, tenant, local)
        if session is None:
            raise NotFound(f"no ATSSS session {name!r}")
        return session

    def session_counters(self, who: Principal, name: str) -> SessionCounters:
        """Each path's packets and bytes, its state in the data path and its share of the packets.
        The session and its slots read under the lock: deleted between the two reads, its slots
        could be another session's (maybe another tenant's), whose counters it would answer. A
        session has at most 4 paths: the lock is held for one short read of each map."""
        with self._lock:
            session = self.get_session(who, name)
            if self._maps is None or f"{session.tenant}/{session.name}" in self.unserved:
                return SessionCounters(name=session.name, tenant=session.tenant, ue=session.ue, paths=[])
            return session_counters(session, self._readings([session]))

    def readings(self) -> list[PathReading]:
        """Every path of every tenant's sessions in the data path, read in one batch per map (the
        telemetry's poll: netapp.atsss.telemetry); none without a data plane. The slots are read
        outside the lock: the readings of a session changed meanwhile are dropped, the others kept
        (readings.unchanged)."""
        if self._maps is None:
            return []
        with self._session_changes.watching(self._lock) as changed:
            readings = self._readings(self._served_sessions())
            with self._lock:
                return unchanged(readings, changed, self.unserved)

    def measured_losses(self, session: AtsssSession) -> list[Optional[float]]:
        """Each path's loss as last measured (note_losses), by position; None: never measured."""
        return self._measured.of(session)

    def note_losses(self, windows: Mapping[PathKey, Optional[float]], weight: float = 1.0) -> set[tuple[str, str]]:
        """A poll's window loss of every path in the data path into each path's average, the paths
        no longer served forgotten (readings.MeasuredLoss.note). Returns (tenant, name) of the
        sessions whose measured loss changed."""
        return self._measured.note(windows, weight, self.served_paths)

    def watching_mts(self) -> ContextManager[set[MtsKey]]:
        """The MTS sessions written or deleted from here on, until the block ends (hold_qos)."""
        return self._mts_changes.watching(self._lock)

    def hold_qos(self, statuses: Mapping[MtsKey, dict[str, str]], stored_ones: set[MtsKey],
                 changed: set[MtsKey]) -> set[MtsKey]:
        """The QoS statuses a check made of the MTS sessions as it read them (`stored_ones`), kept
        in qos_held for the next, under the lock: none of a session written or deleted since the
        read (`changed`, watching_mts), whose write forgot its statuses (steer) and whose new qosD
        a later check sets anew. The sessions gone before the read are forgotten. Returns those kept."""
        with self._lock:
            for key in [key for key in self.qos_held if key not in stored_ones and key not in changed]:
                del self.qos_held[key]
            kept = {key: value for key, value in statuses.items() if key not in changed}
            self.qos_held.update(kept)
            return set(kept)

    def served_paths(self, names: set[tuple[str, str]]) -> set[PathKey]:
        """The path keys of the sessions `names` the data path serves (readings.still_served: the
        measured losses and the telemetry's rates of the paths a poll did not read)."""
        return {path_key(session, index) for session in self._served_sessions()
                if (session.tenant, session.name) in names for index in range(len(session.slots))}

    def _served_sessions(self) -> list[AtsssSession]:
        with self._lock:  # not while a change is under way: its transaction is not over
            if self._served is None:
                self._served = [session for session in stored.load_sessions(self.store)
                                if f"{session.tenant}/{session.name}" not in self.unserved]
            return self._served

    def _readings(self, sessions: list[AtsssSession]) -> list[PathReading]:
        assert self._maps is not None
        with namespace(self._netns):
            return paths_read(self._maps, sessions)

    # --- changes -------------------------------------------------------------------------------

    def create_session(self, who: Principal, name: str, spec: AtsssSessionSpec) -> AtsssSession:
        """A new session, named as get_session names one; Conflict when the tenant has one of that name."""
        session, _ = self._put(who, ServiceState.writer_owner(who, name, "session", spec.name), spec, must_be_new=True)
        return session

    def put_session(self, who: Principal, name: str, spec: AtsssSessionSpec) -> tuple[AtsssSession, bool]:
        """Create or replace the session `name` names; True when created. Paths keep their slots
        (their DCCP numbers and counters) while the same subflow and access, wherever the body puts
        them; a new path takes the slot of the one it replaces (admission.slots_for)."""
        return self._put(who, ServiceState.writer_owner(who, name, "session", spec.name), spec, must_be_new=False)

    def patch_session(self, who: Principal, name: str, patch: AtsssSessionPatch) -> AtsssSession:
        """The session's mode and paths' state (up, RTT, weight) changed, the rest kept: read,
        changed and written under the lock, so that a change made meanwhile (another PATCH, of
        another path) is kept, not written over with what was read before it."""
        with self._changing() as undos:
            current = self.get_session(who, name)
            spec = patched(current, patch)
            ServiceState.require(who, Scope.INTENTS_WRITE)
            session, _ = self._write(undos, who, current.tenant, spec, must_be_new=False)
        return session

    def delete_session(self, who: Principal, name: str) -> None:
        ServiceState.require(who, Scope.INTENTS_WRITE)
        owner, local = ServiceState.owner(who, name, "session")
        with self._changing() as undos:
            old = stored.stored_session(self.store, owner, local)
            if old is None:
                raise NotFound(f"no ATSSS session {name!r}")
            steering = steered_by(old)
            if steering is not None:
                raise Conflict(f"MTS session {steering!r} steers this session's UE: delete it first "
                               f"(/mts/v1/mts_sessions/{steering})", field="name")
            stored.remove_session(self.store, owner, local)
            undos.append(self._apply([old], [], None))
            self.unserved.pop(f"{owner}/{local}", None)  # under the lock: an undo puts back its snapshot

    def steer(self, tenant: str, mts_id: str, ue: str, mode: SteeringMode, body: dict, field: str,
              mode_field: str = "mode", flows: Optional[Rules] = None,
              check: Callable[[AtsssSession], None] = lambda session: None, replacing: bool = False) -> AtsssSession:
        """The MTS session `mts_id` of `tenant` (stored with `body`) steers the session of `ue` in
        `mode`, replacing what it steered before; `field` names the UE in the caller's terms,
        `mode_field` the mode (refused when the session's paths cannot run it). `flows`: the rules of
        its flow filters (netapp.atsss.flows), which then run `mode`; None: the UE's whole downlink.
        `check`: what else the mode needs of the session; `replacing`: NotFound unless the MTS session
        is stored (a PUT's); both under the lock, with the write, as is forgetting its QoS statuses
        (qos_held), which a check after the write sets anew. Returns the session as checked."""
        with self._changing(rules=True) as undos:
            earlier = stored.stored_mts(self.store, tenant, mts_id)
            if replacing and earlier is None:
                raise NotFound(f"no MTS session {mts_id!r}")
            session = session_to_steer(self.store, tenant, ue, field)
            check(session)
            if mode is SteeringMode.REDUNDANT:
                check_redundant(session, mode_field)
            check_weights(session.paths, {mode}, mode_field, f"ATSSS session {session.name!r}'s paths: ")
            steering = stored.mts_of_ue(self.store, ue) if flows is None else None
            if steering is not None and steering != (tenant, mts_id):
                # 400, not 409: MEC 015 rejects a session whose filter another one matches as a bad request.
                raise InvalidInput(f"{field}: MTS session {steering[1]!r} steers UE {ue} already", field=field)
            if flows is not None:
                check_overlaps(mts_id, flows, ue_rules(self.store, ue))
                quota = TenantPolicy(self.store).quotas_of(tenant).atsss_flow_rules
                check_tenant_room(self.store, tenant, mts_id, flows, quota)
            earlier_state = stored.state_slot(self.store, tenant, mts_id)
            ues = [ue] + ([earlier[0]] if earlier is not None else [])
            before = stored.sessions_of_ues(self.store, ues)
            stored.save_mts(self.store, tenant, mts_id, ue, {**body, "mode": mode.value}, self._clock(),
                            filtered=flows is not None)
            state = self._states.give(tenant, mts_id, mode if flows is not None else None, mode_field)
            undos.append(lambda: self._states.retire(state))  # its rules may have been read
            after = stored.sessions_of_ues(self.store, ues)
            undos.append(applied_with_flows(self.rules, stored_rules_of(mts_id, earlier, earlier_state),
                                            with_state(flows or {}, state), lambda: self._apply(before, after, None)))
            self.qos_held.pop((tenant, mts_id), None)  # a new qosD, or a new UE: its first check sets it again
            self._mts_changes.note([(tenant, mts_id)])
        return session

    def unsteer(self, tenant: str, mts_id: str) -> bool:
        """The MTS session gone: its UE's session runs its own mode again. False: there was none."""
        with self._changing(rules=True) as undos:
            earlier = stored.stored_mts(self.store, tenant, mts_id)
            if earlier is None:
                return False
            before = stored.sessions_of_ues(self.store, [earlier[0]])
            earlier_state = self._states.free(tenant, mts_id)
            stored.remove_mts(self.store, tenant, mts_id)
            self.qos_held.pop((tenant, mts_id), None)  # with it: a check under way keeps none (hold_qos)
            self._mts_changes.note([(tenant, mts_id)])
            after = stored.sessions_of_ues(self.store, [earlier[0]])
            undos.append(applied_with_flows(self.rules, stored_rules_of(mts_id, earlier, earlier_state), {},
                                            lambda: self._apply(before, after, None)))
        return True

    # --- start and reload ----------------------------------------------------------------------

    def requeue(self) -> None:
        """The groups of ports run the instance's copy programs again (a DEVMAP entry holds the one it
        was written with), after a reload replaced them: the reload holds `lock` through both, so no
        change writes a group between them, nor with a program's fd the reload closes."""
        if self._maps is not None and self._program_fd is not None:
            with namespace(self._netns):
                self._maps.requeue(self._program_fd)

    def heal_status(self) -> str:
        """"ok", or that the maps are unlike the store until the next change heals them (readiness)."""
        return "ok" if self._owed is None else UNHEALED

    def reconcile(self) -> None:
        """The maps hold the stored sessions the node can serve, and no other; the rest are logged
        and told in `unserved`."""
        with self._lock:
            self._reconcile(self._owed)

    def _reconcile(self, carried: Optional[Moved] = None) -> None:
        """`reconcile`, under the lock; `carried`: what a refused put back was to carry (`_owed`)."""
        assert self._maps is not None
        self.unserved, self._served = {}, None
        sessions = stored.load_sessions(self.store)
        with namespace(self._netns):
            plan = self._groups.adopt(self._maps, sessions)
            self._groups.write(plan, self._maps, self._program_fd)
            tables = self._tables(sessions, None)
            tables.carry(carried_into(tables, carried or Moved()))
            self._maps.sync(tables)
            self._groups.clear(plan, self._maps)
        self._owed = None
        if carried is not None:
            forget_owed(self.store, self._clock())

    # --- helpers -------------------------------------------------------------------------------

    def _put(self, who: Principal, tenant: str, spec: AtsssSessionSpec, must_be_new: bool) -> tuple[AtsssSession, bool]:
        with self._changing() as undos:
            return self._write(undos, who, tenant, spec, must_be_new)

    def _write(self, undos: list[Callable[[], None]], who: Principal, tenant: str, spec: AtsssSessionSpec,
               must_be_new: bool) -> tuple[AtsssSession, bool]:
        """`spec` stored as the tenant's session and written to the maps, in the caller's store
        transaction (`undos`: its undos, undone_on_failure) under the caller's lock; the scope
        checked before anything is written. True when it was created."""
        policy = TenantPolicy(self.store)
        check_scope(spec, policy.grants_for(who, tenant), tenant, policy.interfaces_for(who, tenant),
                    lambda: site_addresses(self._netns))
        old = stored.stored_session(self.store, tenant, spec.name)
        if old is not None and must_be_new:
            raise Conflict(f"tenant {tenant!r} has an ATSSS session {spec.name!r} already: PUT replaces it",
                           field="name")
        if old is None:
            QuotaExceeded.unless_room(tenant, "atsss_sessions", stored.count_sessions(self.store, tenant),
                                      policy.quotas_of(tenant).atsss_sessions, "delete one first")
        check_ue(self.store, tenant, spec, old)
        check_subflows(self.store, tenant, spec, old)
        check_low_cost_order(spec, old)
        if SteeringMode.REDUNDANT in runs_in(spec, old):
            check_interfaces(spec.paths)
        check_weights(spec.paths, runs_in(spec, old), "paths", "an MTS session runs the session's UE weighted: ")
        ues = [str(spec.ue)] + ([str(old.ue)] if old is not None else [])
        before = stored.sessions_of_ues(self.store, ues)
        session = AtsssSession(
            **dict(spec), tenant=tenant, slots=slots_for(self.store, spec, old, retired_slots(self._maps)),
            effective_mode=spec.mode, updated_at=self._clock(),
            revision=old.revision + 1 if old is not None else 1)  # fmt: skip
        stored.save_session(self.store, session)
        session = stored.stored_session(self.store, tenant, spec.name)
        assert session is not None
        undos.append(self._apply(before, stored.sessions_of_ues(self.store, ues), session))
        self.unserved.pop(f"{tenant}/{spec.name}", None)  # under the lock: an undo puts back its snapshot
        return session, old is None

    @contextmanager
    def _changing(self, rules: bool = False) -> Iterator[list[Callable[[], None]]]:
        """A change's locks (`rules`: the classifier's too, between ours and the store's as every change
        of the classifier takes it: one order, no deadlock with the intents') and its store transaction
        (undone_on_failure); the maps reconciled first where an earlier change's put back was refused
        (`_owed`, whose MP_SEQ and DCCP numbers it carries, kept in the store till then: netapp.atsss.owed).
        One refused refuses the change, as the UPF's do: none is made over maps unlike the store."""
        with self._lock, (self.rules.lock if rules and self.rules is not None else nullcontext()):
            if self._owed is not None and self._maps is not None:
                try:
                    self._reconcile(self._owed)
                except DataplaneError as exc:  # the next change tries again
                    raise DataplaneUnavailable(f"the data plane refused the ATSSS maps' reconcile, owed since "
                                               f"a refused change: {exc}") from exc
            try:
                with undone_on_failure(self.store) as undos:
                    yield undos
            finally:
                if self._owed is not None:  # this change's put back refused: its store transaction is over
                    keep_owed(self.store, self._owed, self._clock())

    def _apply(self, before: list[AtsssSession], after: list[AtsssSession],
               changed: Optional[AtsssSession]) -> Callable[[], None]:
        """The maps' entries of the UEs of `before` and `after` made those of `after` (in the caller's store
        transaction): InvalidInput naming the path of `changed` whose addresses cannot be found; the maps
        refusing, put back as they were (`_put_back`, with the old paths as its reclaim read them last).
        Returns the undo of its writes, for a transaction that fails after them (its COMMIT)."""
        served, self._served = self._served, None  # loaded again if this fails
        self._session_changes.note((session.tenant, session.name) for session in before + after)
        found = Found(before, dict(self._groups.assigned), dict(self.unserved))
        redundant = any(session.sends_copies for session in before + after)
        try:
            plan = self._groups.plan(stored.load_sessions(self.store)) if redundant else None
            if plan is not None and self._maps is None:
                self._groups.write(plan, None, None)
            tables = self._tables(after, changed, groups=plan.assigned if plan is not None else None)
        except BaseException:
            self._groups.assigned, self.unserved = found.groups, found.unserved
            raise
        if self._maps is None:
            return lambda: self._put_back(found)
        found.ues, found.slots = entries_of(before + after)
        with namespace(self._netns):
            found.moved = self._maps.moved(found.ues, found.slots)
            try:
                if plan is not None:
                    self._groups.write(plan, self._maps, self._program_fd)
                found.moved.paths.update(self._maps.sync(tables, found.ues, found.slots))
            except DataplaneError as exc:
                found.moved.paths.update(self._maps.read_by_reclaim())
                self._put_back(found)
                raise DataplaneUnavailable(f"the data plane refused the ATSSS sessions: {exc}") from exc
            if plan is not None:
                self._groups.clear_stale(plan, self._maps)
        if served is not None:
            self._served = served_after(served, before + after, after, self.unserved)
        return lambda: self._put_back(found)

    def _put_back(self, found: Found) -> None:
        """The maps as a change `found` them, once they refused it or the store its COMMIT: its UEs'
        sessions and paths (those it deleted or emptied with the numbers and counts the data path
        had moved in them), its groups of ports (those it emptied written again before the
        sessions, those it wrote emptied after), the sessions told unserved; the served ones loaded
        again. The maps refusing now is logged, and the next change reconciles them first (`_changing`)."""
        self._served = None
        self.unserved = dict(found.unserved)
        gone = set(self._groups.assigned.values()) - set(found.groups.values())
        plan = GroupPlan(dict(found.groups), stale=sorted(gone))
        if self._maps is None:
            self._groups.write(plan, None, None)
            return
        with namespace(self._netns):
            try:
                tables = self._tables(found.sessions, None, quiet=True, groups=found.groups)
                tables.carry(found.moved)
                self._groups.write(plan, self._maps, self._program_fd)
                self._maps.sync(tables, found.ues, found.slots)
                self._groups.clear(plan, self._maps)
            except DataplaneError as exc:
                self._owed = found.moved  # none owed before: a change runs only once the maps are healed
                log.error("ATSSS's maps could not be put back after a failed change (%s): the next change "
                          "reconciles them first", exc)

    def _tables(self, sessions: list[AtsssSession], changed: Optional[AtsssSession], quiet: bool = False,
                groups: Optional[dict[PortNames, int]] = None) -> AtsssTables:
        """The entries of `sessions` whose paths' MACs are found, naming their groups of ports
        (`groups`, else the current ones); `changed`'s not found are the caller's error, any other's
        leave it out (unserved; `quiet`: told nowhere, as a put back's)."""
        return resolved_tables(sessions, changed, self._session_macs,
                               lambda session: self._groups.group_of(session, groups),
                               None if quiet else self.unserved)

    def _session_macs(self, session: AtsssSession) -> list[Macs]:
        if self._maps is None:
            return [("00:00:00:00:00:00", "00:00:00:00:00:00")] * len(session.paths)  # stored only
        with namespace(self._netns):
            return [self._macs(session, index, self._ifindex(path.interface) if path.interface else None)
                    for index, path in enumerate(session.paths)]

