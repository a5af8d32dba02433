"""The NetApp service: the desired state in the store, and the BPF maps kept equal to it.

Every change is one transaction:

    BEGIN IMMEDIATE -> store writes -> index steps (compile, collisions) -> map delta -> COMMIT

If anything fails before COMMIT, the index change is rolled back, the store transaction too, and the
maps were either not written or were put back (by the facade, or here with the inverse delta); if
COMMIT itself fails, the map delta is undone. So the store and the maps change together or not at all.
Should undoing a map write fail as well, the maps are marked for a full reconcile, which the next
change runs before anything else.

The store is the truth: `start()` compiles every stored intent and makes the maps hold exactly that
(`Dataplane.apply`, a full diff against what the pinned maps hold), so stale entries of an earlier
run go and missing ones come. Maps and XDP links are pinned: the process may die (kill -9 included)
and restart without traffic noticing.

Tenancy: intent and slice ids are unique per tenant. In the data plane an intent is known as
`<tenant>/<intent id>` (see `rule_id`): intent ids cannot contain '/', so two tenants may use the same
id and the last '/' always separates them. Admins may name another tenant's object the same way.

Locking: one lock serialises changes. A change costs O(size of its delta) -- an index step, a few
map writes, a commit -- but its commit syncs the disk, and one sync per change would cap single
creates at the disk's syncs per second. So single creates go through a writer thread
(netapp.service.group_commit) that makes those queued while a transaction was in flight the parts
of the next one (`_change_parts`): one store transaction, one map delta, one fsync, and still an
answer of its own for each, sent only once its change is in the maps and durable. A part that fails
is undone alone (a savepoint in the store, a mark in the index) and the parts after it see the ones
before, so rivals are decided in arrival order; should the transaction fail as a whole, each create
is made alone. SQLite admits one writer anyway, the facade's shadow and the index are not
thread-safe, and the GIL would take away what finer locking could win. Reads go to the store (whose
own lock keeps its connection to one thread at a time) and do not wait for the data plane.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import logging
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from concurrent.futures import Future
from typing import Any, Callable, Generic, Iterator, Optional, TypeVar, Union

import numpy

from netapp.core.config import Settings
from netapp.core.netns import entered
from netapp.dataplane import cpumap_threads
from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import Dataplane, host_interfaces, mode_refused
from netapp.intents.compiler import (
    CompiledAltGroup,
    CompiledAltMember,
    CompiledDocument,
    CompiledRule,
    CompileError,
    Conflict as RuleConflict,
    compile_alternatives,
)
from netapp.intents.errors import IntentError
from netapp.intents.index import IndexChange, RuleIndex
from netapp.intents.models import (
    MAX_QUEUE_SIZE,
    AlternativeGroup,
    CpuSpec,
    Intent,
    LegacyMessage,
    legacy_to_native,
)
from netapp.service.contract import (
    MAX_BATCH_INTENTS,
    AlternativeGroupStatus,
    AlternativeMemberStatus,
    BatchCreateResult,
    CompiledRuleView,
    Conflict,
    ConflictView,
    CreateResult,
    DataplaneFull,
    DataplaneUnavailable,
    DryRunReport,
    Forbidden,
    Health,
    IntentFilter,
    IntentRecord,
    IntentResult,
    IntentService,
    IntentWarning,
    InvalidInput,
    NotFound,
    Page,
    Principal,
    Scope,
    ServiceError,
    SliceRecord,
    SliceSpec,
    batch_field,
)
from netapp.service.group_commit import GroupWriter, WriterClosed
from netapp.service.liveness import GTPU_PORT, UNPROBED, LivenessMonitor, MemberLiveness, Target
from netapp.service.overlaps import overlap_warnings
from netapp.service.slices import slice_intents
from netapp.service.store import Attachment, Store, StoreError
from netapp.telemetry.interfaces import read_interfaces
from netapp.tenancy.policy import TenantPolicy
from netapp.telemetry.sample import Counters, CpuCounters, IntentTable, rule_rows

log = logging.getLogger("netapp.service")

T = TypeVar("T")

IDEMPOTENCY_TTL = timedelta(hours=24)
OTHER_TENANT = "an intent of another tenant"
# What a confined tenant is told of a rule it collides with: grants of different tenants never
# meet, so only a site-wide rule can have its match, and which tenant holds it stays unsaid.
SITE_RULE = "a site-wide rule"
ANONYMOUS_OWNERS = (OTHER_TENANT, SITE_RULE)
LEGACY_SOURCE, NATIVE_SOURCE, SLICE_SOURCE = "legacy", "native", "slice"


def rule_id(tenant: str, intent_id: str) -> str:
    """The data plane's id of a tenant's intent."""
    return f"{tenant}/{intent_id}"


def split_rule_id(qualified: str) -> tuple[str, str]:
    """(tenant, intent id) of a data plane id; the last '/' separates them."""
    tenant, _, intent_id = qualified.rpartition("/")
    return tenant, intent_id


def request_hash(intent: Intent) -> str:
    """What an idempotent retry must repeat: the intent as validated (defaults filled in)."""
    return batch_hash([intent])


def batch_hash(intents: list[Intent]) -> str:
    """The same for a batch, in order; a batch of one hashes like that one intent."""
    digest = hashlib.sha256()
    for n, intent in enumerate(intents):
        digest.update((b"\n" if n else b"") + intent.model_dump_json().encode())
    return digest.hexdigest()


def _invalid_input(exc: IntentError) -> InvalidInput:
    return InvalidInput(exc.line(), field=exc.field or None, reason=exc.message)


@dataclasses.dataclass
class _Part(Generic[T]):
    """One caller's part of a transaction (`_change_parts`): its work, and what came of it."""

    who: Principal
    work: Callable[[IndexChange], T]
    where: Optional[Callable[[str], Optional[int]]] = None
    result: Optional[T] = None
    error: Optional[Exception] = None


@dataclasses.dataclass(frozen=True)
class _CreateRequest:
    """A single create waiting for its group (`NetAppService._create_group`)."""

    who: Principal
    intent: Intent
    source: str
    key: Optional[str]


class NetAppService(IntentService):
    """The one implementation of the contract: store + incremental index + data plane.

    `dataplane` and `store` may be given (tests give a Dataplane over FakeDpp); otherwise `start()`
    opens the pinned instance named by the settings and the store under their state_dir. The
    service owns both from then on and closes them in `close()`.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        dataplane: Optional[Dataplane] = None,
        store: Optional[Store] = None,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        echo_port: int = GTPU_PORT,
        peer_echo_port: Optional[int] = None,
    ):
        self.settings = settings
        self._dataplane = dataplane
        self._store = store
        self._clock = clock
        self._lock = threading.RLock()
        self._index = RuleIndex({})
        self._thread_problems: dict[int, str] = {}  # CPU -> why its CPUMAP thread lacks the priority
        self._uncompiled: dict[str, str] = {}  # stored, not in the maps: rule id (or site object) -> why
        self._maps_stale: Optional[str] = None  # why the maps need a full reconcile, when they do
        self._checks: dict[str, str] = {"started": "not yet"}
        self._started = False
        self._queue_limit = MAX_QUEUE_SIZE  # the running kernel's CPUMAP limit, once probed
        # Bumped by every change of the installed intents: the telemetry table is rebuilt then.
        self._revision = 0
        self._intent_table = IntentTable.empty()
        self._creates: Optional[GroupWriter[_CreateRequest, CreateResult]] = None  # while started
        # GTP-U echo (liveness): our port and the peers' (None: the same); tests take free ports.
        self._echo_port, self._peer_echo_port = echo_port, peer_echo_port
        self._liveness: Optional[LivenessMonitor] = None  # None: probing off, every member alive

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Open the store and the (pinned) instance, reconcile the maps, attach the interfaces."""
        with self._exclusive():
            self._open_store()
            self._open_dataplane()
            self._probe_queue_limit()
            self._refresh_interfaces()
            self._open_liveness()
            self._reconcile()
            self._attach_interfaces()
            self._started = True
            if self._liveness is not None:
                self._liveness.start()
            self._checks.pop("started", None)
            self._creates = GroupWriter(
                self._create_group, name="intent-creates", max_group=MAX_BATCH_INTENTS
            )

    def close(self) -> None:
        """Release the handles; pinned maps and links stay, and so does forwarding. Creates already
        queued are made first."""
        if self._creates is not None:
            self._creates.close()
        if self._liveness is not None:  # before the lock: its thread takes the lock to write maps
            self._liveness.close()
            self._liveness = None
        with self._exclusive():
            self._started = False
            self._checks["started"] = "closed"
            if self._dataplane is not None:
                self._dataplane.close()
            if self._store is not None:
                self._store.close()

    def health(self) -> Health:
        """Ready when the store is open and the maps are reconciled; the other checks inform."""
        checks = dict(self._checks)
        essential = ("store", "dataplane", "reconcile")
        ready = self._started and all(checks.get(name) == "ok" for name in essential)
        return Health(ready=ready, checks=checks)

    def _open_store(self) -> None:
        if self._store is None:
            try:
                self._store = Store.open(self.settings.db_path)
            except StoreError as exc:
                self._checks["store"] = str(exc)
                raise ServiceError(f"store: {exc}") from exc
        self._checks["store"] = "ok"
        with self._store.transaction():
            self._store.put_setting("snapshot", self._settings_snapshot(), self._clock())

    def _settings_snapshot(self) -> dict[str, Any]:
        """The settings that shape the data plane, as this start used them (no secrets among them)."""
        return self.settings.model_dump(
            mode="json",
            include={
                "instance",
                "interfaces",
                "default_verdict",
                "default_alternative",
                "cpumap_priority",
                "flow_cache",
                "max_rules",
                "meter_window_ms",
            },
        )

    def _open_dataplane(self) -> None:
        if self._dataplane is None:
            try:
                self._dataplane = Dataplane.open(
                    instance=self.settings.instance,
                    flow_cache=self.settings.flow_cache,
                    max_rules=self.settings.max_rules,
                    default_verdict=self.settings.default_verdict,
                )
                if self.settings.meter_window_ms is not None:  # also on an instance pinned before
                    self._dataplane.set_meter_window(self.settings.meter_window_ms * 1_000_000)
            except DataplaneError as exc:
                self._checks["dataplane"] = str(exc)
                raise DataplaneUnavailable(f"open instance {self.settings.instance!r}: {exc}") from exc
        self._checks["dataplane"] = "ok"

    def _probe_queue_limit(self) -> None:
        """Learn the largest CPUMAP queue the running kernel takes, which put_cpu holds queue_size
        to (the schema's MAX_QUEUE_SIZE is the limit of kernels since 4.15; another may differ)."""
        try:
            limit = self.dataplane.cpu_queue_limit()
        except DataplaneError as exc:
            log.warning("CPUMAP queue limit not probed (%s): taking %d, the usual one", exc, MAX_QUEUE_SIZE)
            return
        if limit != MAX_QUEUE_SIZE:
            log.warning("this kernel takes CPUMAP queues of up to %d frames, not %d", limit, MAX_QUEUE_SIZE)
        self._queue_limit = min(limit, MAX_QUEUE_SIZE)

    @property
    def dataplane(self) -> Dataplane:
        if self._dataplane is None:
            raise DataplaneUnavailable("the service is not started")
        return self._dataplane

    @property
    def store(self) -> Store:
        if self._store is None:
            raise ServiceError("the service is not started")
        return self._store

    # --- reconciling -----------------------------------------------------------------------------

    def _reconcile(self) -> None:
        """Make the maps hold exactly what the store compiles to (O(n): on start and after a
        failed undo, never per change)."""
        index, uncompiled = self._compile_store()
        document = self._site_document(index, uncompiled)
        try:
            self.dataplane.resync()
            self.dataplane.adopt_site_state()
            report = self.dataplane.apply_compiled(document)
        except DataplaneError as exc:
            self._checks["reconcile"] = f"the maps could not be reconciled: {exc}"
            self._maps_stale = str(exc)
            raise DataplaneUnavailable(f"reconcile: {exc}") from exc
        self._index, self._uncompiled, self._maps_stale = index, uncompiled, None
        for spec in document.cpus:
            self._prioritise_cpumap_thread(spec.cpu)
        self._revision += 1
        self._checks["reconcile"] = "ok"
        self._checks["stored state"] = self._describe_left_out()
        log.info(
            "reconciled: %d intents, %d rules upserted, %d deleted",
            len(index),
            report.upserted,
            report.deleted,
        )

    def _compile_store(self) -> tuple[RuleIndex, dict[str, str]]:
        """An index of every stored intent; those that do not compile (an interface that went
        away) are left out and reported, the others installed."""
        index = RuleIndex(self._index.interfaces)
        uncompiled: dict[str, str] = {}
        for record in self.store.all_intents():
            qualified = rule_id(record.tenant, record.intent.id)
            try:
                index.add(index.compile(record.intent, qualified))
            except CompileError as exc:
                uncompiled[qualified] = exc.line()
        return index, uncompiled

    def _site_document(self, index: RuleIndex, uncompiled: dict[str, str]) -> CompiledDocument:
        groups = []
        for group in self.store.list_alternatives():
            try:
                groups.extend(map(self._live, compile_alternatives([group], index.interfaces)))
            except CompileError as exc:
                uncompiled[f"alternative group {group.id}"] = exc.line()
        ruleset = index.ruleset()
        return CompiledDocument(
            ruleset=ruleset,
            alternatives=tuple(groups),
            cpus=tuple(self._usable_cpus(uncompiled)),
            default_verdict=self.settings.default_verdict,
            default_alternative=self.settings.default_alternative,
            redirect_ifindexes=frozenset(r.redirect_ifindex for r in ruleset.rules if r.redirect_ifindex),
        )

    def _usable_cpus(self, uncompiled: dict[str, str]) -> list[CpuSpec]:
        usable = []
        for spec in self.store.list_cpus():
            try:
                self.dataplane.cpu_state(spec.cpu)
            except DataplaneError as exc:
                uncompiled[f"cpu {spec.cpu}"] = str(exc)
                continue
            usable.append(spec)
        return usable

    def _left_out(self) -> dict[str, str]:
        """What the store holds and the maps do not, and why: objects that did not compile at the
        last reconcile, and intents that collide with an installed one."""
        left_out = dict(self._uncompiled)
        for conflict in self._index.conflicts():
            left_out[conflict.intent_b] = conflict.reason
        return left_out

    def _describe_left_out(self) -> str:
        """For /readyz, which anyone may read: counts, no names."""
        count = len(self._left_out())
        return (
            "ok" if not count else f"{count} stored objects are not in the maps (see the data plane status)"
        )

    def _ensure_maps_reconciled(self) -> None:
        if self._maps_stale is None:
            return
        log.warning("reconciling the maps before the next change: %s", self._maps_stale)
        self._reconcile()

    # --- interfaces ------------------------------------------------------------------------------

    def _refresh_interfaces(self) -> None:
        """Interface names the compiler resolves: the site namespace's, then those of interfaces
        configured in another namespace."""
        with self._namespace(self.settings.netns):
            table = host_interfaces()
        for name, netns in self._wanted_attachments().items():
            if netns is None or netns == self.settings.netns:
                continue
            try:
                table[name] = self._ifindex(name, netns)
            except OSError as exc:
                self._checks[f"interface {name}"] = f"not found in netns {netns}: {exc}"
        self._index.interfaces = table

    def _wanted_attachments(self) -> dict[str, Optional[str]]:
        """Interface -> its namespace, for the configured interfaces and those attached through us."""
        wanted = {setting.name: setting.netns for setting in self.settings.interfaces}
        for attachment in self.store.list_attachments():
            wanted.setdefault(attachment.interface, attachment.netns)
        return wanted

    def _attach_interfaces(self) -> None:
        modes = {setting.name: setting.mode for setting in self.settings.interfaces}
        modes.update({a.interface: a.mode for a in self.store.list_attachments()})
        for name, netns in self._wanted_attachments().items():
            try:
                self._attach_if_needed(name, modes[name], netns)
            except (DataplaneError, OSError) as exc:
                self._checks[f"interface {name}"] = str(exc)
                log.error("attach %s: %s", name, exc)
                continue
            self._checks[f"interface {name}"] = "ok"

    def _attach_if_needed(self, name: str, mode: str, netns: Optional[str]) -> int:
        """Attach unless a pinned link already holds the interface (a restart: traffic flows on)."""
        with self._namespace(netns):
            ifindex = socket.if_nametoindex(name)
            if ifindex not in self.dataplane.attached():
                self.dataplane.attach(name, mode)
        return ifindex

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One change (or consistent read) at a time, made inside the site's network namespace:
        the kernel resolves the ifindexes of ports and links in the caller's namespace."""
        with self._lock, self._namespace(self.settings.netns):
            yield

    @staticmethod
    def _ifindex(name: str, netns: Optional[str]) -> int:
        with NetAppService._namespace(netns):
            return socket.if_nametoindex(name)

    @staticmethod
    @contextlib.contextmanager
    def _namespace(netns: Optional[str]) -> Iterator[None]:
        """Inside `netns` (only this thread, only for the block), or where we are."""
        with contextlib.ExitStack() as stack:
            if netns is not None:
                try:
                    stack.enter_context(entered(netns))
                except OSError as exc:
                    raise DataplaneError(
                        exc.errno or errno.ENOENT, f"enter netns {netns}", exc.strerror
                    ) from exc
            yield

    def _netns_of(self, interface: str) -> Optional[str]:
        for setting in self.settings.interfaces:
            if setting.name == interface:
                return setting.netns
        return None

    # --- the transaction -------------------------------------------------------------------------

    def _change(
        self,
        who: Principal,
        work: Callable[[IndexChange], T],
        where: Optional[Callable[[str], Optional[int]]] = None,
    ) -> T:
        """Run `work` (store writes and index steps) as one transaction with the maps. `where`: the
        position of a rule id in a batch, for a collision error to name it."""
        (part,) = self._change_parts([_Part(who, work, where)])
        if part.error is not None:
            raise part.error
        return part.result

    def _change_parts(self, parts: list["_Part[Any]"]) -> list["_Part[Any]"]:
        """Run the parts' work, in order, as one transaction with the maps: one store transaction,
        one map delta, one commit. A part that fails is undone alone -- its store writes (a
        savepoint) and its index steps (back to a mark) -- and keeps its error; the others go on and
        see the parts before them, so two parts that collide are decided in their order. Raises,
        with nothing changed, when the whole fails (the maps refuse the delta, the commit fails)."""
        with self._exclusive():
            self._require_started()
            self._ensure_maps_reconciled()
            try:
                with self.store.transaction() as transaction:
                    change = self._index.track()
                    try:
                        for part in parts:
                            self._run_part(change, part)
                        slots = self._push(change)
                    except BaseException:
                        change.roll_back()
                        raise
                    if all(part.error is not None for part in parts):
                        transaction.roll_back()  # nothing of it stays: nothing to commit
                        return parts
                    self._commit_or_undo(transaction, change, slots)
                    self._revision += 1
                    return parts
            except StoreError as exc:
                raise ServiceError(f"store: {exc}") from exc

    def _run_part(self, change: IndexChange, part: "_Part[Any]") -> None:
        mark = change.mark()
        try:
            with self.store.savepoint():
                part.result = part.work(change)
                self._reject_collisions(part.who, change.added(mark), part.where)
        except (ServiceError, IntentError) as exc:
            change.roll_back(mark)
            if isinstance(exc, IntentError):
                part.error = _invalid_input(exc)
                part.error.__cause__ = exc
            else:
                part.error = exc

    def _push(self, change: IndexChange) -> dict[str, int]:
        """Apply the change's delta to the maps; DataplaneUnavailable (maps as before) if refused.
        Returns the slots of the rules it removed, which an undo gives back (with their counters)."""
        delta = change.delta()
        if delta.empty:
            return {}
        slots = self.dataplane.slots_of(rule.intent_id for rule in delta.removes)
        try:
            self.dataplane.apply_changes(delta)
        except DataplaneError as exc:
            if not getattr(exc, "rolled_back", False):
                self._undo_maps(change, slots, exc)
            if exc.errno == errno.ENOSPC:
                raise DataplaneFull(
                    f"the data plane has no room for the change: {exc.message} (setting max_rules); "
                    "nothing was changed"
                ) from exc
            raise DataplaneUnavailable(f"the data plane refused the change: {exc}") from exc
        return slots

    def _commit_or_undo(self, transaction: Any, change: IndexChange, slots: dict[str, int]) -> None:
        try:
            transaction.commit()
        except StoreError as exc:
            self._undo_maps(change, slots, exc)
            change.roll_back()
            raise ServiceError(
                f"the store could not commit ({exc}); the data plane change was undone"
            ) from exc

    def _undo_maps(self, change: IndexChange, slots: dict[str, int], cause: Exception) -> None:
        """Put the maps back as they were before the change (call before rolling the index back)."""
        try:
            self.dataplane.apply_changes(change.inverse(), restore_slots=slots)
        except (DataplaneError, ValueError) as exc:
            self._maps_stale = f"undoing a failed change ({cause}) failed: {exc}"
            self._checks["reconcile"] = self._maps_stale

    def _reject_collisions(
        self,
        who: Principal,
        added: list[CompiledRule],
        where: Optional[Callable[[str], Optional[int]]] = None,
    ) -> None:
        for rule in added:
            collisions = self._index.collisions(rule.intent_id)
            if collisions:
                raise self._collision_error(who, rule, collisions[0], where)

    def _collision_error(
        self,
        who: Principal,
        rule: CompiledRule,
        conflict: RuleConflict,
        where: Optional[Callable[[str], Optional[int]]] = None,
    ) -> Conflict:
        other = conflict.intent_a if conflict.intent_b == rule.intent_id else conflict.intent_b
        at = where(rule.intent_id) if where is not None else None
        other_at = where(other) if where is not None else None
        if at is not None and other_at is not None and other_at > at:
            # two of one batch: blame the later one, which collides with what comes before it
            later = self._index.get(other)
            if later is not None:
                rule, other, at, other_at = later, rule.intent_id, other_at, at
        mine, theirs = self._display(who, rule.intent_id), self._display(who, other)
        prefix = "" if at is None else f"{batch_field(at)}: "
        if other_at is not None:
            theirs_named = f"{theirs!r} ({batch_field(other_at)} of the same batch)"
        else:
            theirs_named = theirs if theirs in ANONYMOUS_OWNERS else repr(theirs)
        extra = {} if at is None else {"index": at}
        why = {
            "duplicate": "the same match, priority and action",
            "shadowed": f"the same match {rule.shape.describe()}; the lower priority one would never match",
            "conflict": f"the same match {rule.shape.describe()} and priority, and another action",
        }[conflict.kind]
        return Conflict(
            f"{prefix}intent {mine!r} collides with {theirs_named}: {why}. "
            "The data plane keys rules by match, so only one of them can be installed",
            field="match" if at is None else batch_field(at, "match"),
            intent_a=mine,
            intent_b=theirs,
            kind=conflict.kind,
            **extra,
        )

    def _display(self, who: Principal, qualified: str) -> str:
        """How `who` may see an intent's name: its own by id, an admin everything, others nothing."""
        tenant, intent_id = split_rule_id(qualified)
        if tenant == who.tenant:
            return intent_id
        if who.is_admin:
            return qualified
        return OTHER_TENANT if self.tenancy.grants_for(who, who.tenant) is None else SITE_RULE

    def _warnings(self, who: Principal, qualified: list[str]) -> list[IntentWarning]:
        """What `who` should know about these intents as the index now holds them: the intents of
        other shapes they overlap, named as `who` may see them (netapp.service.overlaps)."""
        return overlap_warnings(self._index, qualified, lambda name: self._display(who, name), ANONYMOUS_OWNERS)

    def _require_started(self) -> None:
        if not self._started:
            raise DataplaneUnavailable("the service is not started")

    @staticmethod
    def _require(who: Principal, scope: Scope) -> None:
        if not who.allows(scope):
            raise Forbidden(f"needs scope {scope.value!r}", required_scope=scope.value)

    def _owner(self, who: Principal, name: str, kind: str) -> tuple[str, str]:
        """(tenant, id) of an object `who` names: its own, or for admins `<tenant>/<id>`."""
        if "/" not in name:
            return who.tenant, name
        tenant, local = split_rule_id(name)
        if tenant != who.tenant and not who.is_admin:
            raise NotFound(f"no {kind} {name!r}")
        return tenant, local

    @property
    def tenancy(self) -> TenantPolicy:
        return TenantPolicy(self.store)

    def _confined(
        self, who: Principal, tenant: str, intent: Intent, notes: Optional[list[IntentWarning]] = None
    ) -> Intent:
        """The intent kept inside the traffic its tenant owns (netapp.tenancy); IntentError if it
        cannot be. A narrowed match is logged, and told in `notes` (a `narrowed` warning)."""
        confined, narrowed = self.tenancy.confined(who, tenant, intent)
        if narrowed is not None:
            log.info("intent %s of tenant %s: match %s", intent.id, tenant, narrowed)
            if notes is not None:
                notes.append(IntentWarning(kind="narrowed", intent_a=intent.id, reason=f"the match was {narrowed}"))
        return confined

    def _confined_member(self, who: Principal, tenant: str, intent: Intent) -> Intent:
        """_confined for a slice member's intent: an error names the member (its label)."""
        try:
            return self._confined(who, tenant, intent)
        except IntentError as exc:
            raise IntentError.at("members", f"{intent.label}: {exc.line()}") from exc

    def _compile(self, tenant: str, intent: Intent) -> CompiledRule:
        return self._index.compile(intent, rule_id(tenant, intent.id))

    def _now(self) -> datetime:
        return self._clock()

    # --- intents ---------------------------------------------------------------------------------

    def list_intents(self, who: Principal, flt: IntentFilter) -> Page[IntentRecord]:
        self._require(who, Scope.READ)
        if not who.is_admin:
            if flt.tenant not in (None, who.tenant):
                raise Forbidden("filtering by another tenant needs scope 'admin'", field="tenant")
            flt = IntentFilter(**{**vars(flt), "tenant": who.tenant})
        return self.store.list_intents(flt)

    def get_intent(self, who: Principal, intent_id: str) -> IntentRecord:
        self._require(who, Scope.READ)
        tenant, local = self._owner(who, intent_id, "intent")
        record = self.store.get_intent(tenant, local)
        if record is None:
            raise NotFound(f"no intent {intent_id!r}")
        return record

    def create_intent(
        self, who: Principal, intent: Intent, *, idempotency_key: Optional[str] = None
    ) -> CreateResult:
        return self.submit_create(who, intent, idempotency_key=idempotency_key).result()

    def submit_create(
        self, who: Principal, intent: Intent, *, idempotency_key: Optional[str] = None
    ) -> "Future[CreateResult]":
        self._require(who, Scope.INTENTS_WRITE)
        return self._submit_create(_CreateRequest(who, intent, NATIVE_SOURCE, idempotency_key))

    def replace_intent(self, who: Principal, intent_id: str, intent: Intent) -> IntentResult:
        self._require(who, Scope.INTENTS_WRITE)
        tenant, local = self._owner(who, intent_id, "intent")
        return self._replace(who, tenant, local, intent, None)

    def delete_intent(self, who: Principal, intent_id: str) -> None:
        self._require(who, Scope.INTENTS_WRITE)
        tenant, local = self._owner(who, intent_id, "intent")
        self._delete(who, tenant, local)

    def apply_legacy(self, who: Principal, message: LegacyMessage) -> Optional[IntentResult]:
        self._require(who, Scope.INTENTS_WRITE)
        try:
            action_type, intent = legacy_to_native(message)
        except IntentError as exc:
            raise _invalid_input(exc) from exc
        if action_type == "INSERT":
            created = self._create(who, intent, LEGACY_SOURCE, None)
            return IntentResult.of(created.record, created.warnings)
        if action_type == "UPDATE":
            return self._replace(who, who.tenant, intent.id, intent, LEGACY_SOURCE)
        self._delete(who, who.tenant, intent.id)
        return None

    def create_intents(
        self, who: Principal, intents: list[Intent], *, idempotency_key: Optional[str] = None
    ) -> BatchCreateResult:
        self._require(who, Scope.INTENTS_WRITE)
        if not intents:
            raise InvalidInput("a batch needs at least one intent", field="intents")
        if len(intents) > MAX_BATCH_INTENTS:
            raise InvalidInput(
                f"a batch takes at most {MAX_BATCH_INTENTS} intents (got {len(intents)}): split it",
                field="intents",
                max_items=MAX_BATCH_INTENTS,
            )
        return self._create_many(who, intents, NATIVE_SOURCE, idempotency_key, batch=True)

    def _create(self, who: Principal, intent: Intent, source: str, key: Optional[str]) -> CreateResult:
        return self._submit_create(_CreateRequest(who, intent, source, key)).result()

    def _submit_create(self, request: _CreateRequest) -> "Future[CreateResult]":
        """Queue a single create for the next group (netapp.service.group_commit)."""
        if self._creates is None:
            raise DataplaneUnavailable("the service is not started")
        try:
            return self._creates.submit(request)
        except WriterClosed as exc:
            raise DataplaneUnavailable("the service is not started") from exc

    def _create_group(self, requests: list[_CreateRequest]) -> list[Union[CreateResult, Exception]]:
        """Single creates that queued up together, as the parts of one transaction: each gets its own
        answer, and one that fails does not fail the others. Should the transaction fail as a whole
        (the maps refuse the delta, the commit fails), each is made alone, so that it gets the answer
        it would have got alone."""
        parts = [self._create_part(request) for request in requests]
        try:
            self._change_parts(parts)
        except Exception as exc:  # noqa: BLE001 - an answer for each caller, whatever it was
            if len(parts) == 1:
                return [exc]
            log.warning("a group of %d creates failed as a whole (%s): making each alone", len(parts), exc)
            return [self._create_alone(request) for request in requests]
        return [_create_outcome(part) for part in parts]

    def _create_part(self, request: _CreateRequest) -> _Part[BatchCreateResult]:
        who = request.who
        work, where = self._create_work(who, [request.intent], request.source, request.key, batch=False)
        return _Part(who, work, where)

    def _create_alone(self, request: _CreateRequest) -> Union[CreateResult, Exception]:
        part = self._create_part(request)
        try:
            self._change_parts([part])
        except Exception as exc:  # noqa: BLE001 - the caller's answer
            return exc
        return _create_outcome(part)

    def _create_many(
        self, who: Principal, intents: list[Intent], source: str, key: Optional[str], *, batch: bool
    ) -> BatchCreateResult:
        """Create intents in one transaction. In a batch, errors name the intent by its position."""
        return self._change(who, *self._create_work(who, intents, source, key, batch=batch))

    def _create_work(
        self, who: Principal, intents: list[Intent], source: str, key: Optional[str], *, batch: bool
    ) -> tuple[Callable[[IndexChange], BatchCreateResult], Callable[[str], Optional[int]]]:
        """The transaction's work of a create, and where in the batch a rule id is."""
        tenant = who.tenant
        fingerprint = batch_hash(intents) if key is not None else ""
        positions = {rule_id(tenant, intent.id): n for n, intent in enumerate(intents)}
        where: Callable[[str], Optional[int]] = positions.get if batch else lambda _: None

        narrowed: list[IntentWarning] = []

        def work(change: IndexChange) -> BatchCreateResult:
            now = self._now()
            narrowed.clear()
            if key is not None:
                earlier = self._earlier_create(tenant, key, fingerprint, now)
                if earlier is not None:
                    return earlier
            records = []
            for n, intent in enumerate(intents):
                at = n if batch else None
                self._require_free_intent_id(tenant, intent.id, at, positions)
                try:
                    intent = self._confined(who, tenant, intent, narrowed)
                    change.add(self._compile(tenant, intent))
                except IntentError as exc:
                    raise exc.prefixed(batch_field(n)) if batch else exc
                record = IntentRecord(intent=intent, tenant=tenant, source=source, created_at=now, updated_at=now)
                self.store.insert_intent(record)
                records.append(record)
            self.tenancy.check_quotas(tenant)
            if key is not None:
                self.store.purge_idempotency(now)
                self.store.remember_idempotent(tenant, key, fingerprint, records, now, now + IDEMPOTENCY_TTL)
            return BatchCreateResult(records, created=True)

        def warned(change: IndexChange) -> BatchCreateResult:
            result = work(change)
            result.warnings = narrowed + self._warnings(who, list(positions))
            return result

        return warned, where

    def _earlier_create(
        self, tenant: str, key: str, fingerprint: str, now: datetime
    ) -> Optional[BatchCreateResult]:
        earlier = self.store.find_idempotent(tenant, key, now)
        if earlier is None:
            return None
        if earlier.request_hash != fingerprint:
            what = (
                f"intent {earlier.record.intent.id!r}"
                if len(earlier.records) == 1
                else f"a batch of {len(earlier.records)} intents"
            )
            raise Conflict(
                f"Idempotency-Key {key!r} was used for another request ({what}): "
                "use a new key for a new create",
                field="Idempotency-Key",
            )
        return BatchCreateResult(list(earlier.records), created=False)

    def _require_free_intent_id(
        self,
        tenant: str,
        intent_id: str,
        at: Optional[int] = None,
        positions: Optional[dict[str, int]] = None,
    ) -> None:
        """Conflict if the tenant has an intent of that id. `at`: the intent's position in a batch
        (`positions`: each id's last position), for the error to name it and catch repeats."""
        field = "id" if at is None else batch_field(at, "id")
        where = "" if at is None else f"{batch_field(at)}: "
        if positions is not None and at is not None and positions[rule_id(tenant, intent_id)] != at:
            raise Conflict(
                f"{where}intent id {intent_id!r} appears more than once in the batch "
                f"(again at {batch_field(positions[rule_id(tenant, intent_id)])})",
                field=field,
            )
        existing = self.store.get_intent(tenant, intent_id)
        if existing is None:
            return
        owner = f" (it belongs to slice {existing.slice_id!r})" if existing.slice_id else ""
        raise Conflict(f"{where}intent id {intent_id!r} is in use{owner}", field=field)

    def _replace(
        self, who: Principal, tenant: str, intent_id: str, intent: Intent, source: Optional[str]
    ) -> IntentResult:
        if intent.id != intent_id:
            raise InvalidInput(
                f"id {intent.id!r} differs from the intent being replaced ({intent_id!r})", field="id"
            )
        qualified = rule_id(tenant, intent_id)

        def work(change: IndexChange) -> IntentResult:
            old = self._changeable_intent(tenant, intent_id)
            narrowed: list[IntentWarning] = []
            confined = self._confined(who, tenant, intent, narrowed)
            record = old.model_copy(
                update={
                    "intent": confined,
                    "source": source or old.source,
                    "updated_at": self._now(),
                    "revision": old.revision + 1,
                }
            )
            self.store.update_intent(record)
            if qualified in self._index:
                change.remove(qualified)
            change.add(self._compile(tenant, confined))
            return IntentResult.of(record, narrowed + self._warnings(who, [qualified]))

        record = self._change(who, work)
        self._uncompiled.pop(qualified, None)
        return record

    def _delete(self, who: Principal, tenant: str, intent_id: str) -> None:
        qualified = rule_id(tenant, intent_id)

        def work(change: IndexChange) -> None:
            self._changeable_intent(tenant, intent_id)
            self.store.delete_intent(tenant, intent_id)
            if qualified in self._index:
                change.remove(qualified)

        self._change(who, work)
        self._uncompiled.pop(qualified, None)

    def _changeable_intent(self, tenant: str, intent_id: str) -> IntentRecord:
        record = self.store.get_intent(tenant, intent_id)
        if record is None:
            raise NotFound(f"no intent {intent_id!r}")
        if record.slice_id is not None:
            raise Conflict(
                f"intent {intent_id!r} belongs to slice {record.slice_id!r}: change the slice instead",
                field="id",
            )
        return record

    def dry_run(self, who: Principal, intents: list[Intent]) -> DryRunReport:
        """Compile against the current index, report, and roll the index back: nothing is written."""
        self._require(who, Scope.INTENTS_WRITE)
        with self._exclusive():
            self._require_started()
            change = self._index.track()
            try:
                narrowed: list[IntentWarning] = []
                qualified = [self._stage(change, who, intent, narrowed) for intent in intents]
                return self._report(who, qualified, narrowed)
            except IntentError as exc:
                raise _invalid_input(exc) from exc
            finally:
                change.roll_back()

    def _stage(self, change: IndexChange, who: Principal, intent: Intent, notes: list[IntentWarning]) -> str:
        """Add an intent to the change, replacing the caller's intent of that id if there is one."""
        tenant = who.tenant
        intent = self._confined(who, tenant, intent, notes)
        qualified = rule_id(tenant, intent.id)
        if qualified in self._index and qualified not in {rule.intent_id for rule in change.added()}:
            change.remove(qualified)
        change.add(self._compile(tenant, intent))
        return qualified

    def _report(self, who: Principal, qualified: list[str], narrowed: list[IntentWarning]) -> DryRunReport:
        rules, conflicts, seen = [], [], set()
        interface_names = {ifindex: name for name, ifindex in self._index.interfaces.items()}
        for name in qualified:
            rule = self._index.get(name)
            assert rule is not None
            rules.append(CompiledRuleView.of(rule, self._display(who, rule.intent_id), interface_names))
            for conflict in self._index.collisions(name):
                if (conflict.intent_a, conflict.intent_b) not in seen:
                    seen.add((conflict.intent_a, conflict.intent_b))
                    conflicts.append(self._conflict_view(who, conflict))
        return DryRunReport(rules=rules, conflicts=conflicts, warnings=narrowed + self._warnings(who, qualified))

    def _conflict_view(self, who: Principal, conflict: RuleConflict) -> ConflictView:
        a, b = self._display(who, conflict.intent_a), self._display(who, conflict.intent_b)
        reason = conflict.reason.replace(repr(conflict.intent_a), repr(a)).replace(
            repr(conflict.intent_b), repr(b)
        )
        return ConflictView(kind=conflict.kind, intent_a=a, intent_b=b, reason=reason)  # type: ignore[arg-type]

    # --- slices ----------------------------------------------------------------------------------

    def list_slices(self, who: Principal, offset: int = 0, limit: int = 100) -> Page[SliceRecord]:
        self._require(who, Scope.READ)
        return self.store.list_slices(None if who.is_admin else who.tenant, offset, limit)

    def get_slice(self, who: Principal, slice_id: str) -> SliceRecord:
        self._require(who, Scope.READ)
        tenant, local = self._owner(who, slice_id, "slice")
        record = self.store.get_slice(tenant, local)
        if record is None:
            raise NotFound(f"no slice {slice_id!r}")
        return record

    def put_slice(self, who: Principal, spec: SliceSpec) -> tuple[SliceRecord, bool]:
        """Create or resize: the difference between the old and new intents, in one transaction."""
        self._require(who, Scope.SLICES_WRITE)
        tenant = who.tenant
        try:
            asked = {intent.id: intent for intent in slice_intents(spec)}
        except IntentError as exc:
            raise _invalid_input(exc) from exc

        def work(change: IndexChange) -> tuple[SliceRecord, bool]:
            now = self._now()
            self.tenancy.check_slice(who, tenant, spec)
            wanted = {intent_id: self._confined_member(who, tenant, intent) for intent_id, intent in asked.items()}
            old = self.store.get_slice(tenant, spec.id)
            current = {record.intent.id: record for record in self.store.slice_intents(tenant, spec.id)}
            for intent_id in wanted.keys() - current.keys():
                self._require_free_intent_id(tenant, intent_id)
            self._resize(change, tenant, spec.id, current, wanted, now)
            created_at = old.created_at if old else now
            revision = old.revision + 1 if old else 1
            self.store.put_slice(
                SliceRecord(
                    spec=spec,
                    tenant=tenant,
                    intent_ids=[],
                    created_at=created_at,
                    updated_at=now,
                    revision=revision,
                )
            )
            self.tenancy.check_quotas(tenant)
            record = self.store.get_slice(tenant, spec.id)
            assert record is not None
            return record, old is None

        return self._change(who, work)

    def _resize(
        self,
        change: IndexChange,
        tenant: str,
        slice_id: str,
        current: dict[str, IntentRecord],
        wanted: dict[str, Intent],
        now: datetime,
    ) -> None:
        """Store and index steps from the slice's current intents to the wanted ones: removals
        first, so that an intent that moves does not collide with its old self."""
        changed = [i for i in wanted if i in current and current[i].intent != wanted[i]]
        removed = [i for i in current if i not in wanted]
        added = [i for i in wanted if i not in current]
        for intent_id in removed + changed:
            qualified = rule_id(tenant, intent_id)
            if qualified in self._index:
                change.remove(qualified)
        for intent_id in removed:
            self.store.delete_intent(tenant, intent_id)
        for intent_id in changed:
            old = current[intent_id]
            self.store.update_intent(
                old.model_copy(
                    update={"intent": wanted[intent_id], "updated_at": now, "revision": old.revision + 1}
                )
            )
        for intent_id in added:
            self.store.insert_intent(
                IntentRecord(
                    intent=wanted[intent_id],
                    tenant=tenant,
                    slice_id=slice_id,
                    source=SLICE_SOURCE,
                    created_at=now,
                    updated_at=now,
                )
            )
        for intent_id in changed + added:
            change.add(self._compile(tenant, wanted[intent_id]))

    def delete_slice(self, who: Principal, slice_id: str) -> None:
        self._require(who, Scope.SLICES_WRITE)
        tenant, local = self._owner(who, slice_id, "slice")

        def work(change: IndexChange) -> None:
            if self.store.get_slice(tenant, local) is None:
                raise NotFound(f"no slice {slice_id!r}")
            current = {record.intent.id: record for record in self.store.slice_intents(tenant, local)}
            self._resize(change, tenant, local, current, {}, self._now())
            self.store.delete_slice(tenant, local)

        self._change(who, work)

    # --- alternative groups and CPUs (admin) -----------------------------------------------------

    def list_alternatives(self, who: Principal) -> list[AlternativeGroup]:
        self._require(who, Scope.READ)
        return self.store.list_alternatives()

    def put_alternative(self, who: Principal, group: AlternativeGroup) -> AlternativeGroup:
        self._require(who, Scope.ADMIN)
        try:
            (compiled,) = compile_alternatives([group], self._index.interfaces)
        except CompileError as exc:
            raise _invalid_input(exc) from exc

        def work(_: IndexChange) -> Callable[[], None]:
            previous = self.store.get_alternative(group.id)
            self.store.put_alternative(group, self._now())
            self._watch_alternatives()  # new probed members start not alive: forwarded to once they answer
            self._site_write(lambda: self.dataplane.set_alternative(group.id, self._live(compiled).members))
            return lambda: self._restore_alternative(group.id, previous)

        with self._rewatching():
            self._site_change(who, work)
        return group

    def get_alternative(self, who: Principal, group_id: int) -> AlternativeGroupStatus:
        self._require(who, Scope.READ)
        group = self.store.get_alternative(group_id)
        if group is None:
            raise NotFound(f"no alternative group {group_id}")
        liveness = self._liveness
        views = (
            liveness.view(group_id, len(group.members))
            if liveness is not None
            else [MemberLiveness(UNPROBED, True, None, 0, None)] * len(group.members)
        )
        members = [
            AlternativeMemberStatus(**member.model_dump(), **dataclasses.asdict(view))
            for member, view in zip(group.members, views)
        ]
        return AlternativeGroupStatus(id=group.id, members=members, active=sum(view.alive for view in views))

    def _restore_alternative(self, group_id: int, previous: Optional[AlternativeGroup]) -> None:
        if previous is None:
            self.dataplane.clear_alternative(group_id)
            return
        (compiled,) = compile_alternatives([previous], self._index.interfaces)
        self.dataplane.set_alternative(group_id, self._live(compiled).members)

    def delete_alternative(self, who: Principal, group_id: int) -> None:
        """Refused while intents use the group: their overflow would have nowhere to go."""
        self._require(who, Scope.ADMIN)

        def work(_: IndexChange) -> Callable[[], None]:
            previous = self.store.get_alternative(group_id)
            if previous is None:
                raise NotFound(f"no alternative group {group_id}")
            self._require_unused(who, group_id)
            self.store.delete_alternative(group_id)
            self._site_write(lambda: self.dataplane.clear_alternative(group_id))
            return lambda: self._restore_alternative(group_id, previous)

        with self._rewatching():
            self._site_change(who, work)

    def _require_unused(self, who: Principal, group_id: int) -> None:
        users = sorted(
            self._display(who, name)
            for name in self._index.rule_ids()
            if getattr(self._index.get(name), "alt_group", None) == group_id
        )
        if users:
            listed = ", ".join(repr(name) for name in users[:5]) + (" ..." if len(users) > 5 else "")
            raise Conflict(
                f"alternative group {group_id} is used by {len(users)} intents ({listed})", field="id"
            )

    # --- liveness of alternative nodes (netapp.service.liveness) -----------------------------------

    def _open_liveness(self) -> None:
        """Bind the GTP-U echo end point in the site's namespace (the caller is in it) and watch
        the stored groups, before the reconcile that publishes their active members."""
        settings = self.settings.liveness
        if not settings.enabled:
            self._checks["liveness"] = "off (settings): probed members are forwarded to unchecked"
            return
        monitor = LivenessMonitor(
            settings.interval_ms / 1000,
            settings.detect_multiplier,
            self._alternatives_changed,
            port=self._echo_port,
        )
        try:
            monitor.open()
        except OSError as exc:
            monitor.close()
            self._checks["liveness"] = (
                f"GTP-U echo port {self._echo_port} not bound ({exc.strerror}): "
                "probed members are forwarded to unchecked"
            )
            log.warning("liveness: %s", self._checks["liveness"])
            return
        self._liveness = monitor
        self._checks["liveness"] = "ok"
        self._watch_alternatives()

    def _watch_alternatives(self) -> None:
        """Have the monitor probe the members marked `probe` of the groups the store holds."""
        if self._liveness is None:
            return
        port = self._peer_echo_port if self._peer_echo_port is not None else self._liveness.port

        def target(member: Any) -> Optional[Target]:
            address = member.ip4 if member.ip4 is not None else member.ip6
            return (str(address), port) if member.probe else None

        groups = {group.id: [target(member) for member in group.members] for group in self.store.list_alternatives()}
        self._liveness.watch(groups)

    @contextlib.contextmanager
    def _rewatching(self) -> Iterator[None]:
        """Watch what the store holds once a change is over, committed or undone."""
        try:
            yield
        finally:
            with self._exclusive():
                if self._started:
                    self._watch_alternatives()

    def _live(self, compiled: CompiledAltGroup) -> CompiledAltGroup:
        """The group with only its alive members (all, when probing is off); may be empty."""
        if self._liveness is None:
            return compiled
        members: tuple[CompiledAltMember, ...] = tuple(
            compiled.members[i] for i in self._liveness.active(compiled.group_id) if i < len(compiled.members)
        )
        return dataclasses.replace(compiled, members=members)

    def _alternatives_changed(self, groups: frozenset[int]) -> None:
        """From the monitor's thread: members of `groups` became alive or dead; publish the groups'
        active sets (an empty one: their overflow takes the default verdict)."""
        with self._exclusive():
            if not self._started:
                return
            for group_id in sorted(groups):
                group = self.store.get_alternative(group_id)
                if group is None:
                    continue
                (compiled,) = compile_alternatives([group], self._index.interfaces)
                self.dataplane.set_alternative(group_id, self._live(compiled).members)

    def list_cpus(self, who: Principal) -> list[dict[str, Any]]:
        self._require(who, Scope.READ)
        return [self._cpu_view(spec) for spec in self.store.list_cpus()]

    def _cpu_view(self, spec: CpuSpec, thread: bool = True) -> dict[str, Any]:
        """The CPU's spec, meter state and (unless `thread` is False: telemetry polls skip the
        search through /proc) its CPUMAP thread."""
        view: dict[str, Any] = spec.model_dump()
        try:
            view["state"] = self.dataplane.cpu_state(spec.cpu)
        except (DataplaneError, ServiceError) as exc:
            view["state"] = None
            view["problem"] = str(exc)
        if thread:
            view["thread"] = self._cpumap_thread_view(spec.cpu)
        return view

    def _cpumap_thread_view(self, cpu: int) -> Optional[dict[str, Any]]:
        """The CPUMAP thread's pid and scheduling, and why its priority is not the configured one."""
        view: dict[str, Any] = {}
        pid = cpumap_threads.newest(cpumap_threads.find_threads(cpu, self.dataplane.map_id("dpp_cpu_map")))
        if pid is not None:
            try:
                view.update(cpumap_threads.scheduling(pid).as_dict())
            except OSError:  # replaced while we looked
                pass
        if cpu in self._thread_problems:
            view["problem"] = self._thread_problems[cpu]
        return view or None

    def put_cpu(self, who: Principal, spec: CpuSpec) -> CpuSpec:
        self._require(who, Scope.ADMIN)
        if spec.queue_size > self._queue_limit:
            raise self._queue_too_large(spec.queue_size)

        def work(_: IndexChange) -> Callable[[], None]:
            previous = self.store.get_cpu(spec.cpu)
            self.store.put_cpu(spec, self._now())
            try:
                self._site_write(
                    lambda: self._write_cpu(spec), undo=lambda: self._write_cpu(previous, spec.cpu)
                )
            except DataplaneUnavailable as exc:
                cause = exc.__cause__
                if isinstance(cause, DataplaneError) and cause.errno == errno.EINVAL:
                    raise InvalidInput(
                        f"CPU {spec.cpu} is not one of this machine's CPUs ({cause})", field="cpu"
                    ) from exc
                if isinstance(cause, DataplaneError) and cause.errno == errno.EOVERFLOW:
                    raise self._queue_too_large(spec.queue_size) from exc
                raise
            return lambda: self._write_cpu(previous, spec.cpu)

        self._site_change(who, work)
        return spec

    def _queue_too_large(self, queue_size: int) -> InvalidInput:
        return InvalidInput(
            f"queue_size {queue_size} is more than this kernel's CPUMAP takes ({self._queue_limit} frames)",
            field="queue_size",
            allowed=f"0 (the default, 2048 frames) to {self._queue_limit}",
        )

    def _write_cpu(self, spec: Optional[CpuSpec], cpu: Optional[int] = None) -> None:
        """Make the CPU set hold `spec` (None: CPU `cpu` leaves the set)."""
        if spec is None:
            assert cpu is not None
            self.dataplane.disable_cpu(cpu)
            return
        self.dataplane.enable_cpu(spec.cpu, spec.capacity_pps, spec.queue_size)
        self.dataplane.set_cpu_overloaded(spec.cpu, spec.overloaded)
        self._prioritise_cpumap_thread(spec.cpu)

    def _prioritise_cpumap_thread(self, cpu: int) -> None:
        """Give the thread the kernel just made for the CPU's CPUMAP entry the configured
        real-time priority. A failure costs only the priority, so it is logged and shown in the
        CPU's status, never raised."""
        priority = self.settings.cpumap_priority
        if priority is None:
            return
        pids = cpumap_threads.find_threads(cpu, self.dataplane.map_id("dpp_cpu_map"))
        problem = "no CPUMAP thread found for it"
        for pid in pids:  # the old entry's thread too, if it is still stopping: harmless
            try:
                cpumap_threads.make_realtime(pid, priority)
                problem = ""
            except ProcessLookupError:  # that one has stopped
                continue
            except OSError as exc:
                problem = exc.strerror or str(exc)
                break
        if problem:
            self._thread_problems[cpu] = f"SCHED_FIFO {priority} not set: {problem}"
            log.warning("CPU %d: %s", cpu, self._thread_problems[cpu])
        else:
            self._thread_problems.pop(cpu, None)

    def _site_change(self, who: Principal, work: Callable[[IndexChange], Callable[[], None]]) -> None:
        """A transaction whose map writes are not rules: `work` returns how to undo them."""
        with self._exclusive():
            self._require_started()
            try:
                with self.store.transaction() as transaction:
                    undo = work(self._index.track())
                    try:
                        transaction.commit()
                    except StoreError as exc:
                        self._site_write(undo)
                        raise ServiceError(
                            f"the store could not commit ({exc}); the data plane change was undone"
                        ) from exc
            except StoreError as exc:
                raise ServiceError(f"store: {exc}") from exc

    def _site_write(self, write: Callable[[], None], undo: Optional[Callable[[], None]] = None) -> None:
        """One map write of the site; DataplaneUnavailable if refused (after `undo`, if given)."""
        try:
            write()
        except DataplaneError as exc:
            if undo is not None:
                with contextlib.suppress(DataplaneError):
                    undo()
            raise DataplaneUnavailable(f"the data plane refused the change: {exc}") from exc

    # --- data plane and statistics ---------------------------------------------------------------

    def dataplane_status(self, who: Principal) -> dict[str, Any]:
        self._require(who, Scope.READ)
        with self._exclusive():
            self._require_started()
            status = self.dataplane.status()
            status["instance"] = self.settings.instance
            status["interfaces"] = self._interface_views()
            status["cpus"] = [self._cpu_view(spec) for spec in self.store.list_cpus()]
            status["reconciled"] = self._maps_stale is None
            status["defaults"] = {
                "verdict": self.settings.default_verdict,
                "alternative": self.settings.default_alternative,
            }
            if who.is_admin:
                status["not_installed"] = self._left_out()
            return status

    def _interface_views(self) -> list[dict[str, Any]]:
        attached = set(self.dataplane.attached())
        modes = {setting.name: setting.mode for setting in self.settings.interfaces}
        modes.update({a.interface: a.mode for a in self.store.list_attachments()})
        views = []
        for name, netns in self._wanted_attachments().items():
            ifindex = self._index.interfaces.get(name)
            views.append(
                {
                    "name": name,
                    "netns": netns,
                    "mode": modes[name],
                    "ifindex": ifindex,
                    "attached": ifindex in attached,
                }
            )
        return views

    def attach(self, who: Principal, interface: str, mode: str) -> dict[str, Any]:
        self._require(who, Scope.ADMIN)
        netns = self._netns_of(interface)

        def work(_: IndexChange) -> Callable[[], None]:
            self.store.put_attachment(Attachment(interface, mode, netns), self._now())
            self._site_write(lambda: self._attach_now(interface, mode, netns))
            return lambda: self._detach_now(interface, netns)

        try:
            self._site_change(who, work)
        except DataplaneUnavailable as exc:
            raise self._interface_error(interface, exc, mode) from exc
        return {
            "interface": interface,
            "mode": mode,
            "netns": netns,
            "ifindex": self._index.interfaces[interface],
        }

    def _attach_now(self, interface: str, mode: str, netns: Optional[str]) -> None:
        with self._namespace(netns):
            self._index.interfaces[interface] = self.dataplane.attach(interface, mode)
        self._checks[f"interface {interface}"] = "ok"

    def _detach_now(self, interface: str, netns: Optional[str]) -> None:
        with self._namespace(netns):
            self.dataplane.detach(interface)
        self._checks.pop(f"interface {interface}", None)

    def detach(self, who: Principal, interface: str) -> None:
        self._require(who, Scope.ADMIN)
        netns = self._netns_of(interface)

        def work(_: IndexChange) -> Callable[[], None]:
            mode = next((a.mode for a in self.store.list_attachments() if a.interface == interface), "native")
            self.store.delete_attachment(interface)
            self._site_write(lambda: self._detach_now(interface, netns))
            return lambda: self._attach_now(interface, mode, netns)

        try:
            self._site_change(who, work)
        except DataplaneUnavailable as exc:
            raise self._interface_error(interface, exc) from exc

    def reload_dataplane(self, who: Principal) -> dict[str, Any]:
        """Swap in the program this build carries (an upgrade, or after a settings change of the
        flow cache). Maps are kept, so the store, the index and the maps stay in step and nothing
        is written to the store; the telemetry sees a new program id and restarts its rates."""
        self._require(who, Scope.ADMIN)
        with self._exclusive():
            self._require_started()
            started = time.monotonic()
            try:
                before, after = self.dataplane.reload(flow_cache=self.settings.flow_cache)
            except DataplaneError as exc:
                raise DataplaneUnavailable(
                    f"the program was not replaced, the previous one still runs: {exc}"
                ) from exc
            log.info("data plane program replaced: id %d -> %d", before, after)
            return {
                "previous_program_id": before,
                "program_id": after,
                "interfaces": [view["name"] for view in self._interface_views() if view["attached"]],
                "duration_ms": round((time.monotonic() - started) * 1000, 3),
            }

    @staticmethod
    def _interface_error(
        interface: str, exc: DataplaneUnavailable, mode: Optional[str] = None
    ) -> ServiceError:
        """Name what the caller can fix: a missing interface, one taken, one not attached, a mode
        its driver does not run."""
        cause = exc.__cause__
        code = cause.errno if isinstance(cause, DataplaneError) else None
        if mode is not None and code is not None and mode_refused(code, mode):
            return InvalidInput(str(cause), field="mode")
        if code == errno.ENODEV or (isinstance(cause, DataplaneError) and cause.op.startswith("enter netns")):
            return NotFound(f"no interface {interface!r} ({cause})", field="interface")
        if code == errno.ENOENT:
            return NotFound(f"the pipeline is not attached to {interface!r}", field="interface")
        if code == errno.EEXIST:
            return Conflict(str(cause), field="interface")
        return exc

    def stats(self, who: Principal) -> dict[str, Any]:
        self._require(who, Scope.READ)
        with self._exclusive():
            self._require_started()
            counters = self.dataplane.rule_stats()
            result: dict[str, Any] = {
                "intents": self._intent_stats(who, counters),
                "slices": self._slice_stats(who, counters),
            }
            if who.is_admin:
                result["cpus"] = self._cpu_stats()
                result["verdicts"] = _counter_views(self.dataplane.verdict_stats())
                result["actions"] = _counter_views(self.dataplane.action_stats())
                result["reasons"] = _counter_views(self.dataplane.reason_stats())
            return result

    def _cpu_stats(self) -> dict[str, Optional[dict[str, Any]]]:
        """CPU of the set -> its state with what STEER handed it (packets, bytes) added; None, as
        before, when the state cannot be read."""
        steered = self.dataplane.cpu_stats()
        views: dict[str, Optional[dict[str, Any]]] = {}
        for spec in self.store.list_cpus():
            state = self._cpu_view(spec, thread=False).get("state")
            packets, size = steered.get(spec.cpu, (0, 0))
            views[str(spec.cpu)] = None if state is None else {**state, "packets": packets, "bytes": size}
        return views

    def _intent_stats(self, who: Principal, counters: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
        views = []
        for qualified, (packets, size) in counters.items():
            tenant, intent_id = split_rule_id(qualified)
            if who.is_admin or tenant == who.tenant:
                views.append({"tenant": tenant, "id": intent_id, "packets": packets, "bytes": size})
        return views

    def _slice_stats(self, who: Principal, counters: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
        totals: dict[tuple[str, str], list[int]] = {}
        for (tenant, intent_id), slice_id in self.store.intent_slices(
            None if who.is_admin else who.tenant
        ).items():
            total = totals.setdefault((tenant, slice_id), [0, 0])
            packets, size = counters.get(rule_id(tenant, intent_id), (0, 0))
            total[0] += packets
            total[1] += size
        return [
            {"tenant": tenant, "id": slice_id, "packets": packets, "bytes": size}
            for (tenant, slice_id), (packets, size) in sorted(totals.items())
        ]


    # --- telemetry -------------------------------------------------------------------------------

    def counters(self) -> Counters:
        """Every counter at one moment, named, for the telemetry collector (netapp.telemetry).
        Holds the lock for the map reads only, so the slots and the counters match."""
        with self._lock:
            self._require_started()
            dataplane = self.dataplane
            table = self._current_intent_table()
            counters = Counters(
                program_id=dataplane.program_id(),
                stats_map_id=dataplane.map_id("dpp_rule_stats"),
                intents=table,
                rule_counters=rule_rows(table, dataplane.rule_counter_array()),
                cpus=self._cpu_counters(),
                verdicts=dataplane.verdict_stats(),
                actions=dataplane.action_stats(),
                reasons=dataplane.reason_stats(),
            )
            attached = self._wanted_attachments()
        liveness = self._liveness
        return dataclasses.replace(
            counters,
            interfaces=read_interfaces(attached),
            alternatives=tuple(liveness.counters()) if liveness is not None else (),
        )

    def _current_intent_table(self) -> IntentTable:
        if self._intent_table.revision == self._revision:
            return self._intent_table
        slices = self.store.intent_slices(None)
        rows = list(self.dataplane.installed_intents.items())  # any order: rows realign by slot
        names = [qualified.rpartition("/") for qualified, _ in rows]  # split_rule_id, inlined: 100k rows
        tenants = tuple(name[0] for name in names)
        ids = tuple(name[2] for name in names)
        slots = [slot for _, slot in rows]
        self._intent_table = IntentTable(
            revision=self._revision,
            tenants=tenants,
            ids=ids,
            slices=tuple(map(slices.get, zip(tenants, ids))),
            slots=numpy.array(slots, dtype=numpy.int64),
            epochs=tuple(map(self.dataplane.slot_epoch, slots)),
        )
        return self._intent_table

    def _cpu_counters(self) -> tuple[CpuCounters, ...]:
        steered = self.dataplane.cpu_stats()
        found = []
        for spec in self.store.list_cpus():
            try:
                state = self.dataplane.cpu_state(spec.cpu)
            except DataplaneError as exc:  # one unreadable CPU must not cost the whole poll
                log.debug("telemetry: CPU %d unreadable: %s", spec.cpu, exc)
                continue
            packets, size = steered.get(spec.cpu, (0, 0))
            found.append(
                CpuCounters(
                    cpu=spec.cpu,
                    packets=packets,
                    bytes=size,
                    enabled=bool(state["enabled"]),
                    overloaded=bool(state["overloaded"]),
                    capacity_pps=int(state["capacity_pps"]),
                )
            )
        return tuple(found)


def _create_outcome(part: _Part[BatchCreateResult]) -> Union[CreateResult, Exception]:
    if part.error is not None:
        return part.error
    assert part.result is not None
    return CreateResult(part.result.records[0], created=part.result.created, warnings=part.result.warnings)


def _counter_views(counters: dict[str, tuple[int, int]]) -> dict[str, dict[str, int]]:
    return {name: {"packets": packets, "bytes": size} for name, (packets, size) in counters.items()}
