"""/api/v1/tenants: the traffic each tenant owns, its quotas and its usage (written by admins)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from netapp.api.deps import AdminDep, JsonBody, ReaderDep, TenantsDep
from netapp.api.routes.common import AUTHENTICATED, CHANGES, documented
from netapp.tenancy.models import TENANT_PATTERN, TenantRecord, TenantSpec

router = APIRouter(prefix="/api/v1/tenants", tags=["tenants"])

TenantPath = Annotated[str, Path(min_length=1, max_length=64, pattern=TENANT_PATTERN, description="the tenant")]


@router.get("", response_model=list[TenantRecord], responses=documented(*AUTHENTICATED))
def list_tenants(tenants: TenantsDep, who: AdminDep) -> list[TenantRecord]:
    """List the tenants that have a record, with their usage (admin)."""
    return tenants.list_tenants(who)


@router.get("/{tenant}", response_model=TenantRecord, responses=documented(*AUTHENTICATED, 404))
def get_tenant(tenants: TenantsDep, who: ReaderDep, tenant: TenantPath) -> TenantRecord:
    """Read a tenant's traffic, quotas and usage: one's own, or any for admins. Without a record:
    what applies (site-wide for an admin's own tenant, else no traffic), revision 0."""
    return tenants.get_tenant(who, tenant)


@router.put(
    "/{tenant}",
    response_model=TenantRecord,
    responses={
        200: {"description": "replaced"},
        201: {"model": TenantRecord, "description": "created"},
        **documented(*CHANGES),
    },
    dependencies=[JsonBody],
)
def put_tenant(
    request: Request, response: Response, tenants: TenantsDep, who: AdminDep, tenant: TenantPath, body: TenantSpec
) -> TenantRecord:
    """Grant a tenant its traffic and quotas, or make it site-wide (admin). 409 when the traffic
    meets another tenant's, or would leave one of the tenant's intents outside it."""
    record, created = tenants.put_tenant(who, tenant, body)
    if created:
        response.status_code = 201
        response.headers["Location"] = request.url_for("get_tenant", tenant=tenant).path
    return record


@router.delete(
    "/{tenant}", status_code=204, response_model=None, responses=documented(*AUTHENTICATED, 404, 409)
)
def delete_tenant(tenants: TenantsDep, who: AdminDep, tenant: TenantPath) -> None:
    """Delete a tenant's record (admin); refused while it holds intents or slices."""
    tenants.delete_tenant(who, tenant)
