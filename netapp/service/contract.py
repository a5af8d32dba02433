"""What the NetApp service offers its front doors (REST API, CLI, charm): resources, who asks,
what can go wrong, and the operations, one contract per domain (intents, slices, the data plane
here; each network function's in its package, `netapp.<function>.contract`). The REST routers
depend on `IntentService`, which holds them all; the one implementation keeps the store and the BPF
maps in step (netapp.service.service)."""

from __future__ import annotations

import abc
import enum
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, Mapping, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, Strict, model_serializer

from netapp.forwarding.compiler import rule_group
from netapp.forwarding.contract import AlternativesContract
from netapp.intents.compiler import CompiledRule
from netapp.intents.models import Intent, LegacyMessage, Protect
from netapp.qos.contract import PolicersContract
from netapp.steering.contract import CpusContract

T = TypeVar("T")
# JSON numbers only: no booleans, no numeric strings.
StrictInt = Annotated[int, Strict()]


# --- who asks ------------------------------------------------------------------------------------


class Scope(str, enum.Enum):
    """What a bearer token allows. ADMIN implies every other scope and sees every tenant."""

    READ = "read"
    INTENTS_WRITE = "intents:write"  # also creates and deletes the tenant's telemetry subscriptions
    SLICES_WRITE = "slices:write"
    ADMIN = "admin"


@dataclass(frozen=True)
class Principal:
    """The caller behind a request: the tenant (slice owner) its token belongs to, its scopes."""

    tenant: str
    scopes: frozenset[Scope]
    name: str = ""  # the token's name, for logs; never the token itself

    @property
    def is_admin(self) -> bool:
        return Scope.ADMIN in self.scopes

    def allows(self, scope: Scope) -> bool:
        return self.is_admin or scope in self.scopes


# --- what can go wrong (each becomes one RFC 7807 problem in the API) -----------------------------


class ServiceError(Exception):
    """Base of the service's domain errors. `field` names the offending input where there is one,
    `allowed` what it may be."""

    status = 500
    title = "Internal error"

    def __init__(
        self,
        detail: str,
        field: Optional[str] = None,
        allowed: Optional[str] = None,
        reason: Optional[str] = None,
        **extra: Any,
    ):
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.allowed = allowed
        self.reason = reason or detail  # what is wrong with `field`, where detail says more
        self.extra = extra


class InvalidInput(ServiceError):
    status, title = 400, "Invalid input"


class NotFound(ServiceError):
    """Also what another tenant's object looks like: its existence is not revealed."""

    status, title = 404, "Not found"


class Forbidden(ServiceError):
    status, title = 403, "Forbidden"


class QuotaExceeded(Forbidden):
    """The change would make the tenant hold more than its quota (extras: quota, limit, used)."""

    title = "Quota exceeded"

    @classmethod
    def unless_room(cls, tenant: str, kind: str, held: int, quota: Optional[int], remedy: str) -> None:
        """Raised when the tenant holds `quota` of `kind` already (None: no quota)."""
        if quota is not None and held >= quota:
            raise cls(
                f"tenant {tenant!r} may hold {quota} {kind} (quotas.{kind}): {remedy}",
                quota=kind,
                limit=quota,
                used=held + 1,
            )


class Conflict(ServiceError):
    """The change contradicts the state: an id in use, intents that collide, a stale precondition."""

    status, title = 409, "Conflict"


class DataplaneFull(Conflict):
    """Every rule slot of the data plane is taken (setting max_rules): the change was not made.
    The caller's to resolve, by deleting what it no longer needs, or the operator's, by raising
    max_rules: the maps themselves are fine."""

    title = "Data plane full"


class DataplaneUnavailable(ServiceError):
    """The BPF maps refused the change; it was rolled back in the maps and not stored."""

    status, title = 503, "Data plane unavailable"


class TelemetryUnavailable(ServiceError):
    """Telemetry is disabled in the settings (or not started): no metrics, stream or subscriptions."""

    status, title = 503, "Telemetry unavailable"


# --- resources -----------------------------------------------------------------------------------


# Where a stored intent came from: created directly (native, legacy), by a slice, by a MEC 011
# traffic rule (netapp.mec.compiler.MEC_SOURCE) or a MEC 015 session's bandwidth allocation
# (netapp.mec.bwm_compiler.BWM_SOURCE).
IntentSource = Literal["native", "legacy", "slice", "mec011", "mec015"]


class IntentRecord(BaseModel):
    """An intent as stored: the intent, its owner, where it came from, when it changed."""

    model_config = ConfigDict(extra="forbid")

    intent: Intent
    tenant: str
    slice_id: Optional[str] = Field(None, description="the slice that owns it; null: created directly")
    source: IntentSource = "native"
    created_at: datetime
    updated_at: datetime
    revision: int = Field(1, description="bumped on every replace")


class CompiledRuleView(BaseModel):
    """One rule an intent compiles into, readable (for dry runs)."""

    intent_id: str
    shape: str = Field(description="the key fields compared, with prefix lengths")
    match: dict[str, Any] = Field(description="key field -> value; an interface by its name")
    priority: int
    action: str
    cpu: Optional[int] = None
    alternative: Optional[int] = None

    @classmethod
    def of(cls, rule: CompiledRule, intent_id: str, interface_names: Mapping[int, str]) -> "CompiledRuleView":
        """`rule` as `intent_id`, its interface named by `interface_names` (ifindex -> name)."""
        match = {name: value if isinstance(value, int) else str(value) for name, value in rule.values.items()}
        if "interface" in match:
            match["interface"] = interface_names.get(match["interface"], match["interface"])
        return cls(
            intent_id=intent_id,
            shape=rule.shape.describe(),
            match=match,
            priority=rule.priority,
            action=rule.action,
            cpu=rule.arg if rule.action == "steer" else None,
            alternative=rule_group(rule),
        )


class ConflictView(BaseModel):
    kind: Literal["conflict", "duplicate", "shadowed"]
    intent_a: str
    intent_b: str
    reason: str


# What a warning is about. "overlap": the intent and another of a different shape both match some
# packets; "more_overlaps": how many more it overlaps than are listed; "narrowed": the match was
# wider than the traffic the tenant owns and was narrowed to it (netapp.tenancy).
WarningKind = Literal["overlap", "more_overlaps", "narrowed"]


class IntentWarning(BaseModel):
    """Something a change does that its author may not expect. The change is made all the same (or,
    in a dry run, would be)."""

    kind: WarningKind = Field(description="what the warning is about (more kinds may come: ignore unknown ones)")
    intent_a: str = Field(description="the intent of the request")
    intent_b: Optional[str] = Field(None, description="overlap: the other intent")
    shared: Optional[str] = Field(None, description="overlap: the packets both match, in words")
    winner: Optional[str] = Field(None, description="overlap: the intent whose action those packets get")
    reason: str = Field(
        description="overlap: why that one wins; narrowed: the grant and the fields set; otherwise what it means"
    )
    count: Optional[int] = Field(
        None, description="more_overlaps: how many more intents overlap intent_a (at least, see reason)"
    )


class IntentResult(IntentRecord):
    """An intent as stored after a create or replace, and the warnings the change raised."""

    warnings: list[IntentWarning] = Field(default_factory=list)

    @classmethod
    def of(cls, record: IntentRecord, warnings: list[IntentWarning]) -> "IntentResult":
        return cls(**dict(record), warnings=warnings)


class DryRunReport(BaseModel):
    """What a change would do, without doing it."""

    applied: Literal[False] = False
    rules: list[CompiledRuleView]
    conflicts: list[ConflictView]
    warnings: list[IntentWarning] = Field(default_factory=list)


# A bitrate in kbps takes 40 bits in PFCP's MBR and GBR information elements (TS 29.244).
MAX_BITRATE_KBPS = (1 << 40) - 1


class Snssai(BaseModel):
    """S-NSSAI (TS 23.003): slice/service type and optional slice differentiator."""

    model_config = ConfigDict(extra="forbid")

    sst: StrictInt = Field(ge=0, le=255)
    sd: Optional[str] = Field(None, pattern=r"^[0-9A-Fa-f]{6}$", description="24-bit hex, e.g. 00A1B2")


class SliceMembers(BaseModel):
    """The traffic that belongs to a slice: any of these."""

    model_config = ConfigDict(extra="forbid")

    vnis: list[StrictInt] = Field(default_factory=list)
    teids: list[StrictInt] = Field(default_factory=list)
    ue_prefixes: list[str] = Field(default_factory=list)
    dscp: list[StrictInt] = Field(default_factory=list)


class SliceSpec(BaseModel):
    """What a slicing manager asks for (create, or replace to resize)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=48, pattern=r"^[A-Za-z0-9._-]+$")
    snssai: Snssai
    priority_level: StrictInt = Field(ge=1, le=127, description="5QI-style: lower is more important")
    gbr_kbps: StrictInt = Field(
        0,
        ge=0,
        le=MAX_BITRATE_KBPS,
        description="guaranteed bitrate (stored, not enforced); at most 2^40 - 1, PFCP's",
    )
    mbr_kbps: StrictInt = Field(
        0,
        ge=0,
        le=MAX_BITRATE_KBPS,
        description="maximum bitrate of all the slice's traffic together, enforced by one policer its intents "
        "share (0, or 400 Gb/s and more: not policed; 1..7 refused); at most 2^40 - 1, PFCP's",
    )
    members: SliceMembers
    cpus: list[StrictInt] = Field(default_factory=list, description="dedicated CPUs; empty: pass locally")
    alternative: Optional[StrictInt] = Field(None, ge=0, le=63)
    protect: Optional[Protect] = Field(
        None, description="protect every flow of the slice with FRER (IEEE 802.1CB), as an intent's action.protect: "
        "each of its intents' flows a stream of its own (members FRER can identify only: UE prefixes)"
    )

    @model_serializer(mode="wrap")
    def _without_unset_protect(self, handler: SerializerFunctionWrapHandler) -> Any:
        """A slice that protects nothing reads as it did before the option existed (no null)."""
        data = handler(self)
        if isinstance(data, dict) and data.get("protect") is None:
            data.pop("protect", None)
        return data


class SliceRecord(BaseModel):
    spec: SliceSpec
    tenant: str
    intent_ids: list[str]
    created_at: datetime
    updated_at: datetime
    revision: int = 1


@dataclass
class Page(Generic[T]):
    items: list[T]
    total: int
    offset: int
    limit: int


@dataclass
class CreateResult:
    record: IntentRecord
    created: bool  # False: an idempotent retry returned the earlier result
    warnings: list[IntentWarning] = field(default_factory=list)  # as of this answer, retries too


@dataclass
class BatchCreateResult:
    records: list[IntentRecord]  # in the order of the request
    created: bool  # False: an idempotent retry returned the earlier batch's records
    warnings: list[IntentWarning] = field(default_factory=list)


# The most intents one batch create takes (one transaction; ~100 per request is the sweet spot).
MAX_BATCH_INTENTS = 1000


def batch_field(position: int, path: Optional[str] = None) -> str:
    """The field path of the intent at `position` of a batch: `intents[3]`, `intents[3].match.vni`
    (the same paths the API gives for the body `{"intents": [...]}`)."""
    prefix = f"intents[{position}]"
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


@dataclass
class IntentFilter:
    tenant: Optional[str] = None
    slice_id: Optional[str] = None
    action: Optional[str] = None
    source: Optional[str] = None
    offset: int = 0
    limit: int = 100


@dataclass
class Health:
    ready: bool
    checks: dict[str, str] = field(default_factory=dict)  # name -> "ok" or what is wrong


# --- the operations ------------------------------------------------------------------------------


class IntentsContract(abc.ABC):
    """Intents: every change is a transaction, the store and the BPF maps change together or not at
    all. Tenants see and change only their own objects (another tenant's look like NotFound); admins
    see all. Methods block (BPF syscalls, SQLite): the API calls them from plain `def` routes; only
    `submit_create` does not, for a route that awaits its future instead.

    Ids are unique per tenant. Where a method takes an intent or slice id, a bare id names the
    caller's own object; `<tenant>/<id>` names another tenant's, for admins (ids cannot hold '/').

    Creates, replaces and dry runs answer warnings as well: the installed intents of other shapes
    that the request's intents overlap (netapp.service.overlaps)."""

    @abc.abstractmethod
    def list_intents(self, who: Principal, flt: IntentFilter) -> Page[IntentRecord]: ...

    @abc.abstractmethod
    def get_intent(self, who: Principal, intent_id: str) -> IntentRecord: ...

    @abc.abstractmethod
    def create_intent(
        self, who: Principal, intent: Intent, *, idempotency_key: Optional[str] = None
    ) -> CreateResult: ...

    @abc.abstractmethod
    def submit_create(
        self, who: Principal, intent: Intent, *, idempotency_key: Optional[str] = None
    ) -> "Future[CreateResult]":
        """create_intent without blocking: the future is answered (with the result, or the error
        create_intent would raise) once the intent is stored and installed, or refused."""

    @abc.abstractmethod
    def create_intents(
        self, who: Principal, intents: list[Intent], *, idempotency_key: Optional[str] = None
    ) -> BatchCreateResult:
        """Create all of `intents` in one transaction, or none: each is validated, compiled and
        checked for collisions against the installed rules and the rest of the batch. An error names
        the offending intent by its position (`intents[3].match`). At most MAX_BATCH_INTENTS
        (InvalidInput beyond). An idempotency key covers the whole batch."""

    @abc.abstractmethod
    def replace_intent(self, who: Principal, intent_id: str, intent: Intent) -> IntentResult: ...

    @abc.abstractmethod
    def delete_intent(self, who: Principal, intent_id: str) -> None: ...

    @abc.abstractmethod
    def apply_legacy(self, who: Principal, message: LegacyMessage) -> Optional[IntentResult]:
        """INSERT/UPDATE/DELETE of the paper's message; None after a DELETE."""

    @abc.abstractmethod
    def dry_run(self, who: Principal, intents: list[Intent]) -> DryRunReport:
        """What creating (or replacing) these intents would install, next to what is installed."""

    @abc.abstractmethod
    def dry_run_legacy(self, who: Principal, message: LegacyMessage) -> DryRunReport:
        """dry_run of a legacy INSERT or UPDATE, the UPDATE's intent as applying it would make it."""


class SlicesContract(abc.ABC):
    """Slices: each a set of intents (netapp.service.slices), created and resized atomically."""

    @abc.abstractmethod
    def list_slices(self, who: Principal, offset: int = 0, limit: int = 100) -> Page[SliceRecord]: ...

    @abc.abstractmethod
    def get_slice(self, who: Principal, slice_id: str) -> SliceRecord: ...

    @abc.abstractmethod
    def put_slice(self, who: Principal, spec: SliceSpec) -> tuple[SliceRecord, bool]:
        """Create or resize (replace) a slice and its intents atomically; True when created."""

    @abc.abstractmethod
    def delete_slice(self, who: Principal, slice_id: str) -> None: ...


class DataplaneContract(abc.ABC):
    """The data plane itself: its status, interfaces and program (admin), statistics, health."""

    @abc.abstractmethod
    def dataplane_status(self, who: Principal) -> dict[str, Any]:
        """Interfaces and modes, program and map ids, map fill levels, per-CPU state."""

    @abc.abstractmethod
    def attach(self, who: Principal, interface: str, mode: str) -> dict[str, Any]: ...

    @abc.abstractmethod
    def detach(self, who: Principal, interface: str) -> None: ...

    @abc.abstractmethod
    def reload_dataplane(self, who: Principal) -> dict[str, Any]:
        """Replace the XDP program under traffic, keeping rules, counters and attachments."""

    @abc.abstractmethod
    def stats(self, who: Principal) -> dict[str, Any]:
        """Per intent and slice (the caller's own), and for admins per CPU, verdict and reason."""


class IntentService(
    IntentsContract, SlicesContract, AlternativesContract, CpusContract, DataplaneContract, PolicersContract
):
    """Everything the front doors call: the contract of each domain, and the service's health. The
    REST routers depend on this; the one implementation composes one class per domain. A network
    function adds its contract (`netapp.<function>.contract`) to these bases."""

    @abc.abstractmethod
    def health(self) -> Health: ...
