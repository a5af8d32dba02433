"""Dependencies of the routes: the service, the caller, the scope an operation needs, JSON bodies.

Routes name them through the `Annotated` aliases (`ServiceDep`, `ReaderDep`, ...). Tests replace the
service with `app.dependency_overrides[get_service]`.
"""

from __future__ import annotations

from typing import Annotated, Any, Awaitable, Callable, Optional

from fastapi import Depends, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from netapp.api.auth import Authenticator
from netapp.service.contract import Forbidden, IntentService, Principal, Scope, TelemetryUnavailable
from netapp.tenancy.service import TenantService

BEARER_REALM = "dpp-netapp"

# auto_error=False: a missing token is answered by `get_principal` as a problem+json 401.
# The dependencies below are `async def` although routes are plain `def`: they never block, and a
# sync dependency costs a hop to the thread pool and back (several per request, most of a create's
# time in the HTTP layer). Routes stay sync because the service they call does block; the one
# exception, POST /api/v1/intents, awaits the service's future instead.
_bearer = HTTPBearer(auto_error=False, scheme_name="bearer", description="A token from `netapp tokens add`.")


async def get_service(request: Request) -> IntentService:
    return request.app.state.service


async def get_telemetry(request: Request) -> Any:
    """The running telemetry (netapp.telemetry.runtime.Telemetry); 503 when it is disabled."""
    telemetry = getattr(request.app.state, "telemetry", None)
    if telemetry is None:
        raise TelemetryUnavailable("telemetry is disabled on this NetApp (setting telemetry.enabled)")
    return telemetry


async def get_tenants(request: Request) -> TenantService:
    return request.app.state.tenants


ServiceDep = Annotated[IntentService, Depends(get_service)]
TenantsDep = Annotated[TenantService, Depends(get_tenants)]
TelemetryDep = Annotated[Any, Depends(get_telemetry)]
CredentialsDep = Annotated[Optional[HTTPAuthorizationCredentials], Depends(_bearer)]


async def get_principal(request: Request, _credentials: CredentialsDep) -> Principal:
    """The caller behind the bearer token; 401 without a valid one. (`_credentials` puts the bearer
    scheme into the OpenAPI document; the token is read by `authenticate`.)"""
    return authenticate(request)


def authenticate(request: Request) -> Principal:
    """The caller behind the request's bearer token, found once per request: the request limits
    (netapp.api.limits) ask first when there is a body. HTTPException 401 without a valid token."""
    known: Optional[Principal] = getattr(request.state, "principal", None)
    if known is not None:
        return known
    token = bearer_token(request.headers.get("authorization"))
    # The app's authenticator read here, not through a dependency of its own: each dependency
    # costs FastAPI some 15 us per request, and this one is on every request.
    authenticator: Authenticator = request.app.state.authenticator
    principal = authenticator.authenticate(token)
    if principal is not None:
        request.state.principal = principal
        return principal
    if token is None:
        raise _unauthorized("a bearer token is required (Authorization: Bearer <token>)", error=None)
    raise _unauthorized("the bearer token is not valid", error="invalid_token")


def bearer_token(authorization: Optional[str]) -> Optional[str]:
    """The token of an `Authorization: Bearer <token>` header, as HTTPBearer reads it; None for
    no header, another scheme or an empty token."""
    scheme, token = get_authorization_scheme_param(authorization)
    if not token or scheme.lower() != "bearer":
        return None
    return token


def _unauthorized(detail: str, error: Optional[str]) -> HTTPException:
    # RFC 6750 section 3: no error code when the request carried no credentials at all.
    challenge = f'Bearer realm="{BEARER_REALM}"'
    if error:
        challenge += f', error="{error}"'
    return HTTPException(status_code=401, detail=detail, headers={"WWW-Authenticate": challenge})


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def require_scope(scope: Scope) -> Callable[[Principal], Awaitable[Principal]]:
    """A dependency that lets the caller through only with `scope` (admin has every scope)."""

    async def check(who: PrincipalDep) -> Principal:
        if not who.allows(scope):
            held = ", ".join(sorted(s.value for s in who.scopes)) or "none"
            raise Forbidden(
                f"this operation needs scope {scope.value!r}; token {who.name!r} has: {held}",
                required_scope=scope.value,
            )
        return who

    check.__name__ = f"require_{scope.name.lower()}"
    return check


ReaderDep = Annotated[Principal, Depends(require_scope(Scope.READ))]
IntentWriterDep = Annotated[Principal, Depends(require_scope(Scope.INTENTS_WRITE))]
SliceWriterDep = Annotated[Principal, Depends(require_scope(Scope.SLICES_WRITE))]
AdminDep = Annotated[Principal, Depends(require_scope(Scope.ADMIN))]


async def require_json_body(request: Request, _caller: PrincipalDep) -> None:
    """415 for a body that is not JSON (FastAPI would try to validate the raw bytes). It depends on
    the caller so that a request without a valid token gets its 401 first."""
    if not has_body(request) or is_json(request):
        return
    got = _media_type(request) or "no Content-Type"
    raise HTTPException(status_code=415, detail=f"the body must be application/json (got {got})")


def has_body(request: Request) -> bool:
    if "transfer-encoding" in request.headers:
        return True
    return request.headers.get("content-length", "0").strip() not in ("", "0")


def is_json(request: Request) -> bool:
    """The body is application/json or a +json type."""
    media_type = _media_type(request)
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


JsonBody = Depends(require_json_body)


async def reject_unknown_query_parameters(request: Request) -> None:
    """400 for a query parameter the operation does not take: a misspelt filter (`?actoin=drop`)
    would otherwise be ignored, and the caller would get the whole list."""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None or not request.scope.get("query_string"):
        return  # most requests have no query at all: nothing to walk the dependency tree for
    known = _query_parameter_names(dependant)
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        raise RequestValidationError(
            [
                {
                    "type": "extra_forbidden",
                    "loc": ("query", name),
                    "msg": "unknown query parameter",
                    "input": request.query_params.get(name),
                    "ctx": {"known": sorted(known)},
                }
                for name in unknown
            ]
        )


def _query_parameter_names(dependant: Any) -> frozenset[str]:
    """The query parameters of an operation and of every dependency it has, by their public name."""
    names = {param.alias for param in dependant.query_params}
    for sub_dependant in dependant.dependencies:
        names |= _query_parameter_names(sub_dependant)
    return frozenset(names)
