"""What the service's domains share: the settings, the store, the data plane, the index of the
installed rules, the lock, the checks /readyz shows, and the transactions (netapp.service.transaction).

Locking: one lock serialises changes. A change costs O(size of its delta) -- an index step, a few map
writes, a commit -- and SQLite admits one writer anyway; the facade's shadow and the index are not
thread-safe, and the GIL would take away what finer locking could win. Reads go to the store (whose
own lock keeps its connection to one thread at a time) and do not wait for the data plane.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import threading
from datetime import datetime
from typing import Any, Callable, ContextManager, Iterator, Mapping, Optional, Protocol, TypeVar

from netapp.core.addresses import Address, node_addresses
from netapp.core.config import Settings
from netapp.core.netns import entered
from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane
from netapp.forwarding.liveness import LivenessMonitor
from netapp.intents.compiler import CompiledRule
from netapp.intents.index import RuleIndex
from netapp.qos.spec import PoliceDefaults
from netapp.service.contract import (
    DataplaneUnavailable,
    Forbidden,
    InvalidInput,
    NotFound,
    Principal,
    Scope,
    ServiceError,
)
from netapp.service.rules import Rules, split_rule_id
from netapp.service.store import Store
from netapp.service.transaction import RuleChange, SiteChange, Transactions, Where
from netapp.tenancy.policy import TenantPolicy

T = TypeVar("T")


class OwnLocked(Protocol):
    """A network function that writes the service's maps or runs the program under locks of its own,
    which a reload takes too: `lock`, before the service's, as its changes take them (ATSSS: its MTS
    sessions' flow rules); `program_lock`, after it, held only around a run of the program by its fd
    with nothing taken inside (the UPF's replays of buffered frames), so neither closes a cycle."""

    lock: Optional[ContextManager[Any]]
    program_lock: Optional[ContextManager[Any]]

    def requeue(self) -> None:
        """Its ports run the reloaded instance's programs (the caller holds its locks)."""

    def heal_status(self) -> str:
        """"ok", or why its maps are unlike the store (a /readyz check, not one readiness needs)."""


class ServiceState:
    """The state of one service, shared by its domains. `dataplane` and `store` may be given (tests
    give a Dataplane over FakeDpp); otherwise the service opens them when it starts."""

    def __init__(
        self,
        settings: Settings,
        dataplane: Optional[Dataplane],
        store: Optional[Store],
        clock: Callable[[], datetime],
    ):
        self.settings = settings
        self.opened_dataplane = dataplane
        self.opened_store = store
        self.clock = clock
        self.lock = threading.RLock()
        self.index = RuleIndex({})
        # Rules network functions install themselves (netapp.service.function_rules), by function, by id:
        # in the index with the intents', put back by the full reconcile.
        self.function_rules: dict[str, dict[str, CompiledRule]] = {}
        # ... and what start() fills them from before its reconcile (NetAppService.load_function_rules)
        self.function_loaders: dict[str, Callable[[Store], Mapping[str, CompiledRule]]] = {}
        self.uncompiled: dict[str, str] = {}  # stored, not in the maps: rule id (or site object) -> why
        self.maps_stale: Optional[str] = None  # why the maps need a full reconcile, when they do
        self.checks: dict[str, str] = {"started": "not yet"}
        self.started = False
        # Bumped by every change of the installed intents: the telemetry table is rebuilt then.
        self.revision = 0
        self.liveness: Optional[LivenessMonitor] = None  # None: probing off, every member alive
        self.reconcile: Callable[[], None] = lambda: None  # set by the service: a full reconcile
        self.rules = Rules(self)
        # Imported here: FRER's service (which protection drives) imports this module.
        from netapp.service.protection import Protection

        self.protection = Protection(lambda: self.store)  # the intents' FRER streams
        self.own_locked: dict[str, OwnLocked] = {}  # by name (NetAppService.serve_function)
        self.transactions = Transactions(self.exclusive, lambda: self.store, self.require_started)

    @property
    def dataplane(self) -> Dataplane:
        if self.opened_dataplane is None:
            raise DataplaneUnavailable("the service is not started")
        return self.opened_dataplane

    @property
    def store(self) -> Store:
        if self.opened_store is None:
            raise ServiceError("the service is not started")
        return self.opened_store

    @property
    def tenancy(self) -> TenantPolicy:
        return TenantPolicy(self.store, lambda: site_addresses(self.settings.netns))

    @property
    def police_defaults(self) -> PoliceDefaults:
        """What a policer is given when its intent or slice does not say (settings qos.*)."""
        qos = self.settings.qos
        return PoliceDefaults.of(qos.default_algorithm, qos.default_burst_ms)

    def now(self) -> datetime:
        return self.clock()

    # --- changes ---------------------------------------------------------------------------------

    def change(self, who: Principal, work: Callable[[RuleChange], T], where: Optional[Where] = None) -> T:
        """A transaction of rules (store writes and index steps); `where`: the position of a rule id
        in a batch, for a collision error to name it."""
        return self.transactions.change(who, self.rule_change, work, where)

    def site_change(self, who: Principal, work: Callable[[SiteChange], T]) -> T:
        """A transaction whose map writes are not rules (`SiteChange.write`)."""
        return self.transactions.change(who, SiteChange, work)

    def rule_change(self) -> RuleChange:
        """A change of the rules, once the maps are reconciled if a failed undo left them stale."""
        if self.maps_stale is not None:
            # In the site's namespace, as start()'s: the reconcile writes ports, whose ifindexes the
            # kernel resolves in the caller's namespace, and a function's rules change outside it.
            try:
                with namespace(self.settings.netns):
                    self.reconcile()
            except DataplaneError as exc:  # the namespace could not be entered: a refusal like the reconcile's
                raise DataplaneUnavailable(f"reconcile: {exc}") from exc
        return RuleChange(
            self.index.track(), self.dataplane, self.rules.reject_collisions, self.mark_stale, self.bump_revision
        )

    def mark_stale(self, why: str) -> None:
        self.maps_stale = why
        self.checks["reconcile"] = why

    def bump_revision(self) -> None:
        self.revision += 1

    # --- who may do what -------------------------------------------------------------------------

    def require_started(self) -> None:
        if not self.started:
            raise DataplaneUnavailable("the service is not started")

    @staticmethod
    def require(who: Principal, scope: Scope) -> None:
        if not who.allows(scope):
            raise Forbidden(f"needs scope {scope.value!r}", required_scope=scope.value)

    @staticmethod
    def owner(who: Principal, name: str, kind: str) -> tuple[str, str]:
        """(tenant, id) of an object `who` names: its own, or for admins `<tenant>/<id>`."""
        if "/" not in name:
            return who.tenant, name
        tenant, local = split_rule_id(name)
        if tenant != who.tenant and not who.is_admin:
            raise NotFound(f"no {kind} {name!r}")
        return tenant, local

    @staticmethod
    def writer_owner(who: Principal, name: str, kind: str, body_name: str) -> str:
        """The tenant of the object `who` names (`owner`) to write it (scope intents:write), whose
        body must repeat the name in the path."""
        ServiceState.require(who, Scope.INTENTS_WRITE)
        owner, local = ServiceState.owner(who, name, kind)
        if body_name != local:
            raise InvalidInput(f"name {body_name!r} differs from the {kind}'s name in the path ({local!r})",
                               field="name")
        return owner

    def read_owned(self, who: Principal, name: str, kind: str, get: Callable[[str, str], Optional[T]]) -> T:
        """The object `who` names (`owner`), read with `get(tenant, id)`; NotFound if there is none."""
        self.require(who, Scope.READ)
        tenant, local = self.owner(who, name, kind)
        found = get(tenant, local)
        if found is None:
            raise NotFound(f"no {kind} {name!r}")
        return found

    # --- where -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """One change (or consistent read) at a time, made inside the site's network namespace:
        the kernel resolves the ifindexes of ports and links in the caller's namespace."""
        with self.lock, namespace(self.settings.netns):
            yield


def site_addresses(netns: Optional[str]) -> frozenset[Address]:
    """The addresses of the site namespace's interfaces: what a tunnel's source may be."""
    with namespace(netns):
        return node_addresses()


def ifindex(name: str, netns: Optional[str]) -> int:
    with namespace(netns):
        return socket.if_nametoindex(name)


@contextlib.contextmanager
def namespace(netns: Optional[str]) -> Iterator[None]:
    """Inside `netns` (only this thread, only for the block), or where we are."""
    with contextlib.ExitStack() as stack:
        if netns is not None:
            try:
                stack.enter_context(entered(netns))
            except OSError as exc:
                raise DataplaneError(exc.errno or errno.ENOENT, f"enter netns {netns}", exc.strerror) from exc
        yield
