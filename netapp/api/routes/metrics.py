"""/metrics: the Prometheus text exposition of every counter the caller may see (a bearer token
with scope read, as for /api/v1/stats: Prometheus sends it with `authorization: credentials`)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from netapp.api.deps import ReaderDep, TelemetryDep
from netapp.api.routes.common import AUTHENTICATED, documented
from netapp.telemetry.prometheus import CONTENT_TYPE, scrape

router = APIRouter(tags=["telemetry"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "content": {CONTENT_TYPE: {"schema": {"type": "string"}}},
            "description": "Prometheus text format",
        },
        **documented(*AUTHENTICATED, 503),
    },
)
def get_metrics(who: ReaderDep, telemetry: TelemetryDep) -> Response:
    """Counters read now (not the last poll's): per intent and slice (the caller's), and for admins
    per CPU, verdict, action, reason, interface and of the telemetry pipeline itself."""
    # `who` comes first in the signature: dependencies resolve in order, so a caller without a
    # token gets 401, not the 503 of disabled telemetry.
    tenant = None if who.is_admin else who.tenant
    return Response(scrape(telemetry.collector, tenant), media_type=CONTENT_TYPE)
