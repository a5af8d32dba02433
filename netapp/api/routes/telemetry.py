"""/api/v1/telemetry/stream: every poll as a server-sent event, filtered like a subscription."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from netapp.api.deps import ReaderDep, TelemetryDep, TenantsDep
from netapp.api.routes.common import AUTHENTICATED, documented
from netapp.intents.models import IntentId
from netapp.telemetry.stream import EVENT_STREAM, ClosedEvent, DroppedEvent, PollEvent, StreamEvent
from netapp.telemetry.subscription_models import FilterCriteria, MeasurementName, SliceId, point_filter

router = APIRouter(prefix="/api/v1/telemetry", tags=["telemetry"])

# Plain arrays, empty by default (not Optional: the document would say "an array or null", which
# a query string cannot tell apart, and property-based clients then send "invalid" values that are
# valid strings).
IntentsQuery = Annotated[
    list[IntentId], Query(alias="intent", description="this intent's points only (repeatable)")
]
SlicesQuery = Annotated[
    list[SliceId], Query(alias="slice", description="this slice's points and its intents' only (repeatable)")
]
MeasurementsQuery = Annotated[
    list[MeasurementName],
    Query(
        alias="measurement", description="this measurement only (repeatable); node-wide ones need scope admin"
    ),
]


_STREAM_DESCRIPTION = (
    "Server-sent events until the client goes away (the schema is one event's): `event: poll` per "
    "poll, `event: dropped` when the client fell behind and lost polls, `event: closed` when the "
    "NetApp ends the stream, and `: keep-alive` comments while no poll comes."
)


# One event of the stream; before OpenAPI 3.2's itemSchema, an event stream's schema is one event's.
_EVENT_SCHEMA = {
    "oneOf": [
        {"$ref": f"#/components/schemas/{model.__name__}"} for model in (PollEvent, DroppedEvent, ClosedEvent)
    ]
}


# response_model only puts the event models into the document's components (the route returns
# the stream itself); with a response class without a media type, FastAPI adds no `type: string`
# to the 200 response's schema, and the one below is the whole of it.
@router.get(
    "/stream",
    response_class=StreamingResponse,
    response_model=StreamEvent,
    responses={
        200: {"content": {EVENT_STREAM: {"schema": _EVENT_SCHEMA}}, "description": _STREAM_DESCRIPTION},
        **documented(*AUTHENTICATED, 429, 503),
    },
)
def stream_telemetry(
    telemetry: TelemetryDep,
    who: ReaderDep,
    tenants: TenantsDep,
    intents: IntentsQuery = [],  # noqa: B006 - FastAPI copies defaults; never mutated
    slices: SlicesQuery = [],  # noqa: B006
    measurements: MeasurementsQuery = [],  # noqa: B006
) -> StreamingResponse:
    """Stream the caller's telemetry (an admin's: every tenant's and the node's), poll by poll."""
    criteria = FilterCriteria(
        intents=intents or None, slices=slices or None, measurements=measurements or None
    )
    which = point_filter(who, criteria, "measurement")
    streams = telemetry.streams
    quota = tenants.quotas_of(who).streams
    streams.check_room(who.tenant, quota)
    return StreamingResponse(
        streams.events(which, who.tenant, quota),
        media_type=EVENT_STREAM,
        # No caching, and no buffering by a reverse proxy (nginx honours this header).
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
