"""Intents that protect their flows (action.protect, netapp.frer.protect): each such intent owns one
FRER stream of its tenant, named by the intent's id and marked with it (`StreamStatus.intent`), which
/api/v1/frer shows but refuses to change.

The stream is written in the intent's own transaction (netapp.service.transaction): its row in the
store's savepoint with the intent's, checked there against the tenant's grants and quota and
compiled with every other stream (a ninth set of compared fields, an identity another stream has,
are the intent's errors), and FRER's maps written by a follower of the change before the rules'
delta. Whatever refuses -- the intent's compile, FRER's compiler, a quota, FRER's maps, the rules'
maps, the commit -- nothing stays: neither the intent nor the stream, and both sets of maps as they
were. A restart reconciles both from the one store (the service's rules, and Frer.start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from netapp.frer.compiler import FrerTables
from netapp.frer.models import StreamDefinition, StreamStatus
from netapp.frer.protect import stream_definition
from netapp.frer.scope import check_scope
from netapp.frer.service import Frer
from netapp.intents.errors import IntentError
from netapp.intents.models import Intent
from netapp.service.contract import Conflict, Forbidden, Principal, QuotaExceeded
from netapp.service.store import Store
from netapp.service.transaction import RuleChange
from netapp.tenancy.policy import TenantPolicy

FOLLOWER = "frer"
PROTECT = "action.protect"


def protects(intent: Optional[Intent]) -> bool:
    return intent is not None and getattr(intent.action, "protect", None) is not None


def wanted_stream(intent: Optional[Intent]) -> Optional[StreamDefinition]:
    """The stream `intent` asks for (None: no protection, or no intent); IntentError naming the
    match field FRER cannot compare."""
    if intent is None or not protects(intent):
        return None
    return stream_definition(intent.match, intent.action.protect)  # type: ignore[union-attr]


class Protection:
    """The streams of the intents that protect their flows, kept with the intents."""

    def __init__(self, store: Callable[[], Store]):
        self._open_store = store
        self._frer: Optional[Frer] = None

    def use(self, frer: Frer) -> None:
        """FRER over the node's maps (`netapp serve`'s); without it, the streams are only stored and
        reach the maps when a service with them starts."""
        self._frer = frer

    @property
    def frer(self) -> Frer:
        if self._frer is None:
            self._frer = Frer(self._store)
        return self._frer

    @property
    def _store(self) -> Store:
        return self._open_store()

    def follow(self, change: RuleChange, who: Principal, tenant: str, before: Optional[Intent],
               intent: Optional[Intent]) -> None:
        """In the change's transaction: the stream of the intent that was `before` (None: created)
        made what `intent` asks for (None: the intent is deleted). IntentError naming the intent's
        field, Forbidden, Conflict or QuotaExceeded when it cannot be. Free when neither protects."""
        plan = self._plan(who, tenant, before, intent)
        if plan is None:
            return
        change.follow(FOLLOWER, lambda: _StreamsFollower(self.frer, plan.streams))
        if plan.wanted is None:
            self.frer.stored_remove(tenant, plan.intent_id)
            return
        status = plan.status(self.frer)
        self.frer.stored_save(status)
        self._compile(plan.others, status)

    def check(self, who: Principal, tenant: str, before: Optional[Intent], intent: Intent) -> None:
        """What `follow` would refuse of replacing `before` (None: a new intent) by `intent`,
        refused the same way with nothing stored or written: a dry run's check."""
        plan = self._plan(who, tenant, before, intent)
        if plan is not None and plan.wanted is not None:
            self._compile(plan.others, plan.status(self.frer), quiet=True)

    def _plan(self, who: Principal, tenant: str, before: Optional[Intent],
              intent: Optional[Intent]) -> Optional["_Plan"]:
        """The stream change that replacing `before` by `intent` makes, checked against an
        /api/v1/frer stream of that name, the tenant's grants and quota; None: the stream stays."""
        if not protects(before) and not protects(intent):
            return None
        intent_id = (intent or before).id  # type: ignore[union-attr]
        wanted = wanted_stream(intent)
        streams = self.frer.stored_streams()
        old = next((stream for stream in streams if (stream.tenant, stream.name) == (tenant, intent_id)), None)
        if old is not None and old.intent != intent_id:
            if wanted is None:
                return None  # a stream of that name made through /api/v1/frer: not this intent's
            raise Conflict(f"tenant {tenant!r} has a stream {intent_id!r} made through /api/v1/frer: an intent's "
                           "protection is the stream of the intent's id; rename or delete that stream first",
                           field=PROTECT)
        if (old is None and wanted is None) or (old is not None and _definition(old) == wanted):
            return None
        if wanted is not None:
            self._check_scope(who, tenant, wanted)
            if old is None:
                held = sum(stream.tenant == tenant for stream in streams)
                quota = TenantPolicy(self._store).quotas_of(tenant).frer_streams
                QuotaExceeded.unless_room(tenant, "frer_streams", held, quota, "delete a stream or a protection first")
        return _Plan(tenant, intent_id, wanted, old, streams)

    def _compile(self, others: list[StreamStatus], status: StreamStatus, quiet: bool = False) -> None:
        """FRER's compiler over the node's other streams and the intent's: its refusals as the intent's."""
        try:
            self.frer.tables(others, status, quiet=quiet)
        except IntentError as exc:
            raise IntentError([(_intent_field(path), f"FRER cannot take the flow's stream: {message}")
                               for path, message in exc.problems]) from None

    def _check_scope(self, who: Principal, tenant: str, wanted: StreamDefinition) -> None:
        """The stream inside the tenant's grants, as a stream of its own must be (netapp.frer.scope)."""
        try:
            policy = TenantPolicy(self._store)
            check_scope(wanted, policy.grants_for(who, tenant), tenant, policy.interfaces_for(who, tenant))
        except Forbidden as exc:
            field = _intent_field(exc.field or "")
            raise Forbidden(f"{field}: {exc.detail.partition(': ')[2]}", field=field, allowed=exc.allowed) from None


@dataclass
class _Plan:
    """What an intent's change does to its stream: `old` (None: none yet) becomes `wanted` (None:
    removed), beside the other stored `streams`."""

    tenant: str
    intent_id: str
    wanted: Optional[StreamDefinition]
    old: Optional[StreamStatus]
    streams: list[StreamStatus]

    @property
    def others(self) -> list[StreamStatus]:
        return [stream for stream in self.streams if stream is not self.old]

    def status(self, frer: Frer) -> StreamStatus:
        """The intent's stream as stored: the old one's handle and next revision, or a free handle."""
        old = self.old
        return StreamStatus(
            **dict(self.wanted or {}), name=self.intent_id, tenant=self.tenant, intent=self.intent_id,
            handle=old.handle if old is not None else frer.free_handle(),
            revision=old.revision + 1 if old is not None else 1, updated_at=frer.now(),
        )


def _definition(stream: StreamStatus) -> StreamDefinition:
    return StreamDefinition.model_validate(stream.model_dump(include=set(StreamDefinition.model_fields)))


def _intent_field(path: str) -> str:
    """A field of the stream as the intent's: its identity is the match, its roles action.protect."""
    if path.startswith("identification"):
        return "match"
    if path.startswith("generation.ports"):
        return PROTECT + ".ports" + path[len("generation.ports"):]
    return PROTECT


class _StreamsFollower:
    """FRER's maps, following a change of rules: made to hold the stored streams of the change, put
    back to those before it (compiled only then: a change writes only what it touches)."""

    def __init__(self, frer: Frer, before: list[StreamStatus]):
        self._frer = frer
        self._before = before

    def apply(self) -> None:
        self._frer.write_maps(self._frer.tables(self._frer.stored_streams()), self._before_tables)

    def undo(self) -> None:
        self._frer.put_back(self._before_tables)

    def _before_tables(self) -> FrerTables:
        return self._frer.tables(self._before, quiet=True)
