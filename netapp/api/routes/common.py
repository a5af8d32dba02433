"""What several routers share: path/body agreement and the problem responses they document."""

from __future__ import annotations

from typing import Annotated, Any, Optional

from fastapi import Query

from netapp.api.problems import problem_responses
from netapp.service.contract import Forbidden, InvalidInput, Principal

# Problem statuses every authenticated operation can answer with.
AUTHENTICATED = (400, 401, 403, 500)
# ... those of operations that take a body (netapp.api.limits, deps.require_json_body) ...
WITH_BODY = (413, 415)
# ... and those of operations that change state through the service.
CHANGES = AUTHENTICATED + WITH_BODY + (404, 409, 503)


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return problem_responses(*sorted(set(statuses)))


def require_path_matches_body(path_name: str, path_value: Any, body_field: str, body_value: Any) -> None:
    """A PUT names its object twice (path and body); they must agree."""
    if path_value != body_value:
        raise InvalidInput(
            f"{body_field} {body_value!r} differs from the {path_name} in the path ({path_value!r})",
            field=body_field,
        )


TenantQuery = Annotated[
    Optional[str],
    Query(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9._-]+$",
        description="admins: the tenant that owns the object (default: the caller's own tenant)",
    ),
]


def require_tenant_access(who: Principal, tenant: Optional[str]) -> None:
    """Naming another tenant is for admins."""
    if tenant is not None and tenant != who.tenant and not who.is_admin:
        raise Forbidden(
            f"tenant {tenant!r}: another tenant's objects need scope 'admin'",
            field="tenant",
            required_scope="admin",
        )


def service_name(who: Principal, object_id: str, tenant: Optional[str]) -> str:
    """How the service names an object: a bare id for the caller's own, `<tenant>/<id>` for another
    tenant's (admins only; ids cannot hold '/', see IntentService)."""
    require_tenant_access(who, tenant)
    if tenant is None or tenant == who.tenant:
        return object_id
    return f"{tenant}/{object_id}"
