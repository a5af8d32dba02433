"""The FastAPI app factory: routers, problem+json error handling, authentication, the service.

`create_app(settings, service)` builds an app per call and does nothing at import time; the CLI
(`netapp serve`) and the tests call it with the service they want.
"""

from __future__ import annotations

from typing import Any, Optional

from fastapi import Depends, FastAPI

import netapp
from netapp.api.auth import Authenticator
from netapp.api.deps import reject_unknown_query_parameters
from netapp.api.limits import RequestLimits
from netapp.api.openapi import OPENAPI_PATH, install_openapi
from netapp.api.problems import install_problem_handlers
from netapp.api.routes import dataplane, health, intents, metrics, slices, stats
from netapp.api.routes import subscriptions, telemetry as telemetry_stream, tenants
from netapp.atsss import mts, routes as atsss
from netapp.core.config import Settings
from netapp.forwarding import routes as forwarding
from netapp.frer import routes as frer
from netapp.mec import app_routes, bwm_routes, routes as mec
from netapp.mec import service_routes as mec_services
from netapp.qos import routes as policers
from netapp.routing import routes as routing
from netapp.service.contract import IntentService
from netapp.steering import routes as steering
from netapp.tenancy.service import TenantService
from netapp.upf import routes as upf

TITLE = "DPP NetApp"
DESCRIPTION = (
    "Intent-based northbound API of the DPP NetApp, an XDP data-plane accelerator for the 5G edge. "
    "Errors are RFC 7807 problem details (application/problem+json)."
)
# Every router of the API, in the order the OpenAPI document lists their paths: the core's
# (netapp.api.routes) and each network function's (netapp.<function>.routes), which adds its own here.
ROUTERS = (
    health.router,
    intents.router,
    slices.router,
    forwarding.router,
    tenants.router,
    dataplane.router,
    steering.router,
    stats.router,
    metrics.router,
    subscriptions.router,
    telemetry_stream.router,
    upf.router,
    policers.router,
    routing.router,
    frer.router,
    atsss.router,
    mec.applications,
    mec.app_support,
    mts.router,
    app_routes.app_lifecycle,
    app_routes.terminations,
    bwm_routes.bwm,
    mec_services.service_mgmt,
    mec_services.app_timing,
)


def create_app(
    settings: Settings,
    service: IntentService,
    telemetry: Optional[Any] = None,
    tenants: Optional[TenantService] = None,
) -> FastAPI:
    """The API over `service`, authenticating as `settings` say (raises TokensFileError).
    `telemetry` (netapp.telemetry.runtime.Telemetry) serves /metrics, subscriptions and the event
    stream; without it they answer 503. `tenants` defaults to the records in the service's store."""
    app = build_routes()
    app.state.settings = settings
    app.state.service = service
    app.state.tenants = tenants or TenantService(
        lambda: getattr(service, "store"), open_objects=lambda tenant: telemetry_held(telemetry, tenant)
    )
    app.state.telemetry = telemetry
    app.state.authenticator = Authenticator.from_settings(settings)
    return app


def telemetry_held(telemetry: Optional[Any], tenant: str) -> dict[str, int]:
    """The tenant's subscriptions and open streams, for its usage (none without telemetry)."""
    if telemetry is None:
        return {}
    held = {"streams": telemetry.streams.held(tenant)}
    if telemetry.subscriptions is not None:
        held["subscriptions"] = telemetry.subscriptions.held(tenant)
    return held


def build_routes() -> FastAPI:
    """The app without settings or a service: what the OpenAPI document is exported from."""
    app = FastAPI(
        title=TITLE,
        description=DESCRIPTION,
        version=netapp.__version__,
        openapi_url=OPENAPI_PATH,
        # The interactive docs load their scripts from a CDN; edge sites often cannot reach one.
        docs_url=None,
        redoc_url=None,
        # One schema per model (no "-Input"/"-Output" twins): requests and responses share them.
        separate_input_output_schemas=False,
        # operationId = the route function's name (create_intent), not FastAPI's path-derived one.
        generate_unique_id_function=lambda route: route.name,
        dependencies=[Depends(reject_unknown_query_parameters)],
    )
    app.add_middleware(RequestLimits)  # before the problem handlers': their 500 middleware wraps it
    install_problem_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    install_openapi(app)
    return app
