"""The protected streams as a service: tenant-scoped, stored and written to FRER's maps together,
reconciled at start.

Every change compiles the node's whole set of streams (netapp.frer.compiler): a stream the compiler
refuses changes nothing, neither the store nor the maps. The changed stream is compiled last, so
that an identity it shares with a stream already there is its error. Then the store's transaction
and the maps' sync go together: the maps refusing syncs them back to what they held and rolls the
store back. A stored stream the node cannot serve now (an interface gone) stays stored, out of the
maps, and is told in `unserved`, as the routes' service does. Without a data plane the streams are
only stored, and reach the maps when a service with one starts (`reconcile`).

A tenant names its streams (unique per tenant); the node gives each a handle (its slot in the
maps), so that no tenant can aim at another's slot or need to know which are free.

What a change costs per stream already there is kept low: each stored row is parsed once
(netapp.frer.store.StreamCache) and each parsed stream's parts compiled once (StreamParts), so
that a change reads the rows and puts the kept parts together (identities claimed, masks counted,
ports resolved), parsing and compiling only what it changes. The store stays what is read, in the
caller's transaction: a row rolled back is only a row the cache has not seen.
"""

from __future__ import annotations

import logging
import socket
import threading
from datetime import datetime, timezone
from typing import Any, Callable, ContextManager, Optional

from netapp.dataplane.binding import DataplaneError
from netapp.frer import store as stored
from netapp.frer.abi import MAX_STREAMS
from netapp.frer.compiler import FrerTables, StreamParts, compile_streams, stream_parts
from netapp.frer.models import (
    FrerStream,
    FrerStreamSpec,
    PortCounters,
    SequenceRecoveryCounters,
    StreamCounters,
    StreamStatus,
)
from netapp.frer.scope import check_scope
from netapp.frer.table import FrerCalls, FrerMaps, TableOf
from netapp.intents.errors import IntentError
from netapp.service.contract import (
    Conflict,
    DataplaneFull,
    DataplaneUnavailable,
    NotFound,
    Principal,
    QuotaExceeded,
    Scope,
)
from netapp.service.state import ServiceState, namespace
from netapp.service.store import Store
from netapp.tenancy.policy import TenantPolicy

log = logging.getLogger(__name__)

IfIndex = Callable[[str], Optional[int]]


def interface_index(name: str) -> Optional[int]:
    """The ifindex of `name` in the calling thread's namespace, None when there is none."""
    try:
        return socket.if_nametoindex(name)
    except OSError:
        return None


def interface_name(ifindex: int) -> Optional[str]:
    try:
        return socket.if_indextoname(ifindex)
    except OSError:
        return None


class Frer:
    """The protected streams of every tenant on this node. `netns`: the node's namespace, where
    interfaces are resolved and the maps written (setting netns)."""

    def __init__(self, store: Store, maps: Optional[FrerMaps] = None, ifindex: IfIndex = interface_index,
                 ifname: Callable[[int], Optional[str]] = interface_name, netns: Optional[str] = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
                 lock: Optional[ContextManager[Any]] = None):
        self._store = store
        self._maps = maps
        self._ifindex = ifindex
        self._ifname = ifname
        self._netns = netns
        self._clock = clock
        # One change of the maps at a time. The NetApp service's lock where intents protect their flows
        # (netapp.service.protection): an intent's change holds it, then the store's, as a stream's does.
        self._lock = lock if lock is not None else threading.Lock()
        self.unserved: dict[str, str] = {}  # "<tenant>/<name>" -> why it is stored but not in the maps
        self._rows = stored.StreamCache()
        self._parts = _KeptParts()

    @classmethod
    def start(cls, store: Store, table_of: TableOf, calls: FrerCalls, netns: Optional[str] = None,
              lock: Optional[ContextManager[Any]] = None) -> "Frer":
        """Over a data plane's maps: the stored streams reconciled into them (the intents' too)."""
        frer = cls(store, FrerMaps(table_of, calls), netns=netns, lock=lock)
        frer.reconcile()
        return frer

    # --- reads ---------------------------------------------------------------------------------

    def list_streams(self, who: Principal) -> list[StreamStatus]:
        """The caller's streams; an admin's: every tenant's."""
        ServiceState.require(who, Scope.READ)
        return stored.load_streams(self._store, None if who.is_admin else who.tenant)

    def get_stream(self, who: Principal, name: str) -> StreamStatus:
        """`name`: the caller's own, or for admins `<tenant>/<name>`; another tenant's is not found."""
        ServiceState.require(who, Scope.READ)
        tenant, local = ServiceState.owner(who, name, "stream")
        stream = stored.stored_stream(self._store, tenant, local)
        if stream is None:
            raise NotFound(f"no stream {name!r}")
        return stream

    def stream_counters(self, who: Principal, name: str) -> StreamCounters:
        stream = self.get_stream(who, name)
        counters = StreamCounters(name=stream.name, tenant=stream.tenant, handle=stream.handle, role=stream.role)
        if self._maps is None or f"{stream.tenant}/{stream.name}" in self.unserved:
            return counters
        if stream.recovery is not None:
            [recovery] = self._maps.recovery([stream.handle])
            counters.recovery = SequenceRecoveryCounters.of(recovery.counters())
        else:
            [counters.next_sequence_number] = self._maps.next_sequence_numbers([stream.handle])
        return counters

    def port_counters(self, who: Principal) -> list[PortCounters]:
        """Every port that counted an encode error or a generated frame with no group of ports
        (admin: ports are the node's)."""
        ServiceState.require(who, Scope.ADMIN)
        if self._maps is None:
            return []
        with namespace(self._netns):
            return [PortCounters(interface=self._ifname(ifindex), ifindex=ifindex,
                                 frerCpsSeqEncErroredPackets=counts.encode_errors, ungroupedPackets=counts.ungrouped)
                    for ifindex, counts in sorted(self._maps.port_counts().items())]

    # --- changes -------------------------------------------------------------------------------

    def create_stream(self, who: Principal, name: str, spec: FrerStreamSpec) -> StreamStatus:
        """A new stream, named as get_stream names one (the body's name, for admins maybe under
        another tenant's); Conflict when the tenant has one of that name."""
        status, _ = self._put(who, self._owner(who, name, spec), spec, must_be_new=True)
        return status

    def put_stream(self, who: Principal, name: str, spec: FrerStreamSpec) -> tuple[StreamStatus, bool]:
        """Create or replace the stream `name` names (as get_stream); True when created."""
        return self._put(who, self._owner(who, name, spec), spec, must_be_new=False)

    @staticmethod
    def _owner(who: Principal, name: str, spec: FrerStreamSpec) -> str:
        """The tenant of the stream `name` names, whose name the body must repeat."""
        return ServiceState.writer_owner(who, name, "stream", spec.name)

    def delete_stream(self, who: Principal, name: str) -> None:
        ServiceState.require(who, Scope.INTENTS_WRITE)
        owner, local = ServiceState.owner(who, name, "stream")
        with self._lock, self._store.transaction():
            before = self._stored_streams()
            old = next((stream for stream in before if (stream.tenant, stream.name) == (owner, local)), None)
            if old is None:
                raise NotFound(f"no stream {name!r}")
            _require_direct(old)
            stored.remove_stream(self._store, owner, local)
            self._apply([stream for stream in before if (stream.tenant, stream.name) != (owner, local)], None, before)
        self.unserved.pop(f"{owner}/{local}", None)

    # --- start ---------------------------------------------------------------------------------

    def reconcile(self) -> None:
        """The maps hold the stored streams the node can serve, and no other; the rest are logged
        and told in `unserved`."""
        assert self._maps is not None
        with self._lock:
            tables = self._servable(self._stored_streams(), None)
            with namespace(self._netns):
                self._maps.sync(tables)

    # --- helpers -------------------------------------------------------------------------------

    def _stored_streams(self) -> list[StreamStatus]:
        return self._rows.load(self._store)

    def forget(self) -> None:
        """Every stored stream parsed and compiled again by the next change (what a change cost
        before they were kept, as bench.frer.create measures it)."""
        self._rows.forget()
        self._parts = _KeptParts()

    # --- for the intents that protect their flows (netapp.service.protection) -------------------
    # They run in the NetApp service's transaction, under the lock this service was given.

    def stored_streams(self) -> list[StreamStatus]:
        """Every stored stream, as the caller's store transaction sees them."""
        return self._stored_streams()

    def stored_save(self, stream: StreamStatus) -> None:
        self._rows.keep(stored.save_stream(self._store, stream), stream)
        self.unserved.pop(f"{stream.tenant}/{stream.name}", None)

    def stored_remove(self, tenant: str, name: str) -> None:
        stored.remove_stream(self._store, tenant, name)
        self.unserved.pop(f"{tenant}/{name}", None)

    def now(self) -> datetime:
        return self._clock()

    def tables(self, others: list[StreamStatus], changed: Optional[StreamStatus] = None,
               quiet: bool = False) -> FrerTables:
        """The map entries of `others` and `changed`: IntentError naming `changed`'s fields the node
        cannot serve (`others`' the node cannot serve now are left out, told in `unserved`)."""
        return self._servable(others, changed, quiet)

    def write_maps(self, tables: FrerTables, before: Callable[[], FrerTables]) -> None:
        """The maps made to hold `tables`, only the entries that change written; refused, put back
        (should the entries the change touched not go back, synced whole to `before()`, compiled only
        then) and DataplaneUnavailable. Nothing to do without maps."""
        if self._maps is None:
            return
        with namespace(self._netns):
            try:
                self._maps.change(tables)
            except DataplaneError as exc:
                if self._maps.held is None:
                    self._undo(before())
                raise DataplaneUnavailable(f"the data plane refused the streams: {exc}") from exc

    def put_back(self, before: Callable[[], FrerTables]) -> None:
        """The maps back to `before()`, after a change that wrote them failed later on."""
        if self._maps is not None:
            with namespace(self._netns):
                self._undo(before())

    def _put(self, who: Principal, tenant: str, spec: FrerStreamSpec, must_be_new: bool) -> tuple[StreamStatus, bool]:
        with self._lock, self._store.transaction():
            policy = TenantPolicy(self._store)
            check_scope(spec, policy.grants_for(who, tenant), tenant, policy.interfaces_for(who, tenant))
            before = self._stored_streams()
            old = next((stream for stream in before if (stream.tenant, stream.name) == (tenant, spec.name)), None)
            if old is not None and must_be_new:
                raise Conflict(f"tenant {tenant!r} has a stream {spec.name!r} already: PUT replaces it", field="name")
            if old is not None:
                _require_direct(old)
            if old is None:
                held = sum(stream.tenant == tenant for stream in before)
                quota = TenantPolicy(self._store).quotas_of(tenant).frer_streams
                QuotaExceeded.unless_room(tenant, "frer_streams", held, quota, "delete one first")
            handle = old.handle if old is not None else self._free_handle()
            status = StreamStatus(**dict(spec), tenant=tenant, handle=handle, updated_at=self._clock(),
                                  revision=old.revision + 1 if old is not None else 1)
            others = [stream for stream in before if stream is not old]
            self._rows.keep(stored.save_stream(self._store, status), status)
            self._apply(others, status, before)
        self.unserved.pop(f"{tenant}/{spec.name}", None)
        return status, old is None

    def free_handle(self) -> int:
        """The lowest handle no stream holds (in the caller's store transaction); DataplaneFull if none."""
        return self._free_handle()

    def _free_handle(self) -> int:
        handle = stored.free_handle(self._store)
        if handle is None:
            raise DataplaneFull(f"every one of the node's {MAX_STREAMS - 1} stream handles is taken", field="name")
        return handle

    def _apply(self, others: list[StreamStatus], changed: Optional[StreamStatus], before: list[StreamStatus]) -> None:
        """The maps made to hold `others` and `changed` (in the caller's store transaction): an
        IntentError naming the fields of `changed` the node cannot serve; the maps refusing, synced
        back to the streams of `before`."""
        tables = self._servable(others, changed)
        if self._maps is not None:
            self.write_maps(tables, lambda: self._servable(before, None, quiet=True))

    def _undo(self, before: FrerTables) -> None:
        try:
            self._maps.change(before)  # type: ignore[union-attr]
        except DataplaneError as exc:
            log.error("FRER's maps could not be put back after a refused change (%s): the next change or a "
                      "restart syncs them whole", exc)

    def _servable(self, others: list[StreamStatus], changed: Optional[StreamStatus], quiet: bool = False) -> FrerTables:
        """The tables of `others` and `changed` (compiled last): a stream of `others` the compiler
        refuses is left out (unserved), and the rest compiled again; `changed`'s errors are the
        caller's (IntentError)."""
        streams = others + ([changed] if changed is not None else [])
        left_out: dict[int, str] = {}
        while True:
            kept = [stream for stream in streams if stream.handle not in left_out]
            try:
                compiled, parts = self._parts.of(kept)
                tables = compile_streams(compiled, self._resolve, parts=parts,
                                         describe=lambda handle, where: self._describe(kept, changed, handle, where))
                break
            except IntentError as exc:
                self._blame(exc, kept, changed, left_out)
        if not quiet:
            self._tell_unserved(streams, left_out)
        return tables

    def _blame(self, exc: IntentError, kept: list[StreamStatus], changed: Optional[StreamStatus],
               left_out: dict[int, str]) -> None:
        """Leave out the streams of `kept` that `exc` names; when it names `changed`, or no stream
        (the node's ports in all), it is the caller's: raised, its paths those of the request's body."""
        mine = []
        for path, message in exc.problems:
            position, _, field = path.partition(".")
            index = int(position[len("streams["):-1]) if position.startswith("streams[") else None
            stream = kept[index] if index is not None else changed
            if stream is None or stream is changed:
                mine.append((field if index is not None else "generation.ports", message))
            else:
                left_out[stream.handle] = f"{field}: {message}"
        if mine:
            raise IntentError(mine)

    def _tell_unserved(self, streams: list[StreamStatus], left_out: dict[int, str]) -> None:
        self.unserved = {}
        for stream in streams:
            if stream.handle in left_out:
                key = f"{stream.tenant}/{stream.name}"
                self.unserved[key] = left_out[stream.handle]
                log.warning("FRER stream %s is stored but not in the data path: %s", key, left_out[stream.handle])

    def _resolve(self, name: str) -> Optional[int]:
        with namespace(self._netns):
            return self._ifindex(name)

    @staticmethod
    def _describe(streams: list[StreamStatus], changed: Optional[StreamStatus], handle: int, where: str) -> str:
        """An earlier stream that claimed an identity, as `changed`'s author may be told of it."""
        owner = next(stream for stream in streams if stream.handle == handle)
        if changed is not None and owner.tenant != changed.tenant:
            return "a stream of another tenant"
        return f"stream {owner.name!r} ({where.partition('.')[2]})"


def _require_direct(stream: StreamStatus) -> None:
    """Conflict for a stream an intent owns: it is changed through the intent."""
    if stream.intent is not None:
        raise Conflict(f"stream {stream.name!r} is the protection of intent {stream.intent!r}: change or delete "
                       "the intent's action.protect instead", field="name")


class _KeptParts:
    """Each stream as the compiler takes it, with its StreamParts, kept for as long as the stream's
    object is given again (StreamCache gives the same object while its row stays): made once per
    stored row, not once per change."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[StreamStatus, FrerStream, StreamParts]] = {}

    def of(self, streams: list[StreamStatus]) -> tuple[list[FrerStream], list[StreamParts]]:
        """`streams` compiled and their parts, in order; what is kept is `streams`' (the objects held
        keep their ids from being reused)."""
        kept, compiled, parts = {}, [], []
        for stream in streams:
            entry = self._kept.get(id(stream))
            if entry is None or entry[0] is not stream:
                entry = _entry(stream)
            kept[id(stream)] = entry
            compiled.append(entry[1])
            parts.append(entry[2])
        self._kept = kept
        return compiled, parts


def _entry(stream: StreamStatus) -> tuple[StreamStatus, FrerStream, StreamParts]:
    compiled = _compiled(stream)
    return stream, compiled, stream_parts(compiled)


def _compiled(stream: StreamStatus) -> FrerStream:
    """The stream as the compiler takes it: its parts, validated with the stored stream, are taken as
    they are (not dumped and validated again: every change compiles every stream)."""
    return FrerStream(handle=stream.handle, identification=stream.identification, generation=stream.generation,
                      recovery=stream.recovery)

