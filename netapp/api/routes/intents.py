"""/api/v1/intents: create (native or the paper's legacy message), list, read, replace, delete."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal, Optional, Union

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from netapp.api.deps import IntentWriterDep, JsonBody, ReaderDep, ServiceDep
from netapp.api.pagination import DEFAULT_LIMIT, IntentPage, Limit, Offset, set_link_header
from netapp.api.routes.common import (
    AUTHENTICATED,
    CHANGES,
    TenantQuery,
    documented,
    require_path_matches_body,
    require_tenant_access,
    service_name,
)
from netapp.intents.compiler import ACTIONS
from netapp.intents.models import Intent, IntentEntry, IntentId, LegacyMessage, is_legacy
from netapp.service.contract import (
    MAX_BATCH_INTENTS,
    DryRunReport,
    IntentFilter,
    IntentRecord,
    IntentResult,
    IntentSource,
    IntentService,
    IntentWarning,
    Principal,
)

router = APIRouter(prefix="/api/v1/intents", tags=["intents"])

ActionName = Literal[ACTIONS]  # type: ignore[valid-type]
SourceName = IntentSource
IntentIdPath = Annotated[IntentId, Path(description="the intent's id")]
DryRun = Annotated[bool, Query(description="compile and report the rules and conflicts; change nothing")]
IdempotencyKey = Annotated[
    Optional[str],
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="a retried create with the same key returns the first result (200), not a new one",
    ),
]
# Body() said explicitly: FastAPI before 0.116 takes an Annotated union for a query parameter.
IntentBody = Annotated[IntentEntry, Body(description="a native intent, or the paper's legacy message")]
CreateResponse = Union[IntentResult, DryRunReport]


def _native_only(value: Any) -> Any:
    if is_legacy(value):
        raise ValueError(
            "a legacy message (Resources/Action/Params) is not accepted in a batch: "
            "send native intents, or POST legacy messages one by one to /api/v1/intents/legacy"
        )
    return value


class IntentBatch(BaseModel):
    """Native intents to create together: all of them or, on any error, none."""

    model_config = ConfigDict(extra="forbid")

    intents: list[Annotated[Intent, BeforeValidator(_native_only)]] = Field(
        min_length=1,
        max_length=MAX_BATCH_INTENTS,
        description=f"native intents (at most {MAX_BATCH_INTENTS}); legacy messages are refused",
    )


class IntentBatchRecords(BaseModel):
    """The records a batch created (or an idempotent retry's earlier ones), in the request's order,
    and the warnings about them."""

    items: list[IntentRecord]
    warnings: list[IntentWarning] = Field(default_factory=list)

# The route's own model (the union) documents 200; 201 is always a record.
_WRITE_RESPONSES = {
    200: {"description": "a dry run's report, an idempotent retry or a legacy UPDATE"},
    201: {"model": IntentResult, "description": "created (`warnings`: intents of other shapes it overlaps)"},
    204: {"description": "a legacy DELETE message was applied"},
    **documented(*CHANGES),
}


def intent_filter(
    who: ReaderDep,
    offset: Offset = 0,
    limit: Limit = DEFAULT_LIMIT,
    slice_id: Annotated[
        Optional[str], Query(alias="slice", max_length=48, description="a slice's only")
    ] = None,
    action: Annotated[Optional[ActionName], Query(description="this action type only")] = None,
    source: Annotated[Optional[SourceName], Query(description="those that came this way only")] = None,
    tenant: TenantQuery = None,
) -> IntentFilter:
    """The list filter from the query; another tenant's intents are for admins."""
    require_tenant_access(who, tenant)
    return IntentFilter(
        tenant=tenant, slice_id=slice_id, action=action, source=source, offset=offset, limit=limit
    )


FilterDep = Annotated[IntentFilter, Depends(intent_filter)]


@router.get("", response_model=IntentPage, responses=documented(*AUTHENTICATED))
def list_intents(
    request: Request, response: Response, service: ServiceDep, who: ReaderDep, flt: FilterDep
) -> IntentPage:
    """List intents (the caller's; an admin's: everyone's), filtered, one page at a time."""
    page = service.list_intents(who, flt)
    set_link_header(request, response, page)
    return IntentPage.of(page)


@router.post(
    "",
    response_model=CreateResponse,
    responses=_WRITE_RESPONSES,
    dependencies=[JsonBody],
)
async def create_intent(
    request: Request,
    response: Response,
    service: ServiceDep,
    who: IntentWriterDep,
    body: IntentBody,
    dry_run: DryRun = False,
    idempotency_key: IdempotencyKey = None,
) -> Union[IntentResult, DryRunReport, Response]:
    """Create an intent, native or a legacy message (recognised by its "Resources" key)."""
    # async, unlike the other routes: a native create awaits its group commit
    # (netapp.service.group_commit) rather than holding a thread of the pool while it waits, a hop
    # there and back that cost more than the rest of the route. Legacy messages and dry runs block.
    if isinstance(body, LegacyMessage):
        return await run_in_threadpool(_apply_legacy, request, response, service, who, body, dry_run)
    if dry_run:
        return await run_in_threadpool(service.dry_run, who, [body])
    result = await asyncio.wrap_future(service.submit_create(who, body, idempotency_key=idempotency_key))
    if result.created:
        _created(request, response, result.record)
    return IntentResult.of(result.record, result.warnings)


@router.post(
    "/legacy",
    response_model=CreateResponse,
    responses=_WRITE_RESPONSES,
    dependencies=[JsonBody],
)
def apply_legacy_message(
    request: Request,
    response: Response,
    service: ServiceDep,
    who: IntentWriterDep,
    body: LegacyMessage,
    dry_run: DryRun = False,
) -> Union[IntentResult, DryRunReport, Response]:
    """Apply the paper's Resources/Action/Params message (INSERT 201, UPDATE 200, DELETE 204)."""
    return _apply_legacy(request, response, service, who, body, dry_run)


@router.post(
    "/batch",
    response_model=Union[IntentBatchRecords, DryRunReport],
    responses={
        200: {"description": "a dry run's report, or an idempotent retry's earlier records"},
        201: {"model": IntentBatchRecords, "description": "all of them created"},
        **documented(*CHANGES),
    },
    dependencies=[JsonBody],
)
def create_intents(
    response: Response,
    service: ServiceDep,
    who: IntentWriterDep,
    body: IntentBatch,
    dry_run: DryRun = False,
    idempotency_key: IdempotencyKey = None,
) -> Union[IntentBatchRecords, DryRunReport]:
    """Create many native intents in one transaction: all or none. An error names the intent by its
    position (`intents[3].match.vni`); an Idempotency-Key covers the whole batch."""
    if dry_run:
        return service.dry_run(who, body.intents)
    result = service.create_intents(who, body.intents, idempotency_key=idempotency_key)
    if result.created:
        response.status_code = 201
    return IntentBatchRecords(items=result.records, warnings=result.warnings)


@router.get("/{intent_id}", response_model=IntentRecord, responses=documented(*AUTHENTICATED, 404))
def get_intent(
    service: ServiceDep, who: ReaderDep, intent_id: IntentIdPath, tenant: TenantQuery = None
) -> IntentRecord:
    """Read one intent."""
    return service.get_intent(who, service_name(who, intent_id, tenant))


@router.put(
    "/{intent_id}",
    response_model=CreateResponse,
    responses={
        200: {"description": "replaced, or a dry run's report"},
        **documented(*CHANGES),
    },
    dependencies=[JsonBody],
)
def replace_intent(
    service: ServiceDep,
    who: IntentWriterDep,
    intent_id: IntentIdPath,
    body: Intent,
    dry_run: DryRun = False,
    tenant: TenantQuery = None,
) -> Union[IntentResult, DryRunReport]:
    """Replace an intent (native format; the id in the body must be the one in the path)."""
    require_path_matches_body("intent id", intent_id, "id", body.id)
    name = service_name(who, intent_id, tenant)
    if dry_run:
        return service.dry_run(who, [body])
    return service.replace_intent(who, name, body)


@router.delete(
    "/{intent_id}", status_code=204, response_model=None, responses=documented(*AUTHENTICATED, 404, 409, 503)
)
def delete_intent(
    service: ServiceDep, who: IntentWriterDep, intent_id: IntentIdPath, tenant: TenantQuery = None
) -> None:
    """Delete an intent and its rules."""
    service.delete_intent(who, service_name(who, intent_id, tenant))


def _apply_legacy(
    request: Request,
    response: Response,
    service: IntentService,
    who: Principal,
    message: LegacyMessage,
    dry_run: bool,
) -> Union[IntentResult, DryRunReport, Response]:
    if dry_run:
        return service.dry_run_legacy(who, message)
    record = service.apply_legacy(who, message)
    if record is None:
        return Response(status_code=204)
    if message.action.action_type == "INSERT":
        _created(request, response, record)
    return record


def _created(request: Request, response: Response, record: IntentRecord) -> None:
    response.status_code = 201
    # Written out rather than request.url_for("get_intent", ...), which searches every route per
    # create. Intent ids are URL-safe (IntentId: letters, digits, '.', '_', '-').
    response.headers["Location"] = f"{request.scope.get('root_path', '')}{router.prefix}/{record.intent.id}"
