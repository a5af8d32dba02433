"""RFC 7807 problem details: the one error shape of the API, a superset of ETSI MEC's ProblemDetails.

Every error the API returns, whoever raised it (pydantic, the service, Starlette, a bug), becomes an
`application/problem+json` body with type, title, status, detail and instance; input errors add an
"invalid-params" list (RFC 7807 section 3's example member) naming each offending field, the
reason, and where the schema says so, what is allowed.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any, Callable, Iterable, Optional
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.status import HTTP_405_METHOD_NOT_ALLOWED, HTTP_500_INTERNAL_SERVER_ERROR

from netapp.intents.errors import IntentError
from netapp.service.contract import ServiceError

PROBLEM_JSON = "application/problem+json"
PROBLEM_TYPE_PREFIX = "urn:dpp-netapp:problem:"

log = logging.getLogger(__name__)

# Problem types by status, documented in api/rest.md, so that a client can branch without parsing
# titles. A status not listed (none is answered today) gets `http-<status>`, never about:blank.
_PROBLEM_SLUGS = {
    400: "invalid-input",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    413: "content-too-large",
    415: "unsupported-media-type",
    429: "too-many-requests",
    500: "internal-error",
    503: "unavailable",
}

_HTTP_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")
# Where a request parameter came from, as FastAPI puts it first in an error's location.
_PARAMETER_SOURCES = frozenset({"query", "path", "header", "cookie"})


class InvalidParam(BaseModel):
    """One offending input: a field path into the body (`match.vni`) or a parameter name."""

    name: str = Field(description="field path, e.g. match.vni or Resources[0].encapsulationID1")
    reason: str
    allowed: Optional[str] = Field(None, description="what the schema allows there, when it says")


class Problem(BaseModel):
    """RFC 7807 problem details (ETSI MEC ProblemDetails plus invalid-params and extensions)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    type: str = Field(description="URI reference identifying the problem type (api/rest.md lists them)")
    title: str = Field(description="short summary of the problem type")
    status: int = Field(description="the HTTP status code")
    detail: Optional[str] = Field(None, description="what went wrong in this occurrence")
    instance: Optional[str] = Field(None, description="the request path that failed")
    invalid_params: Optional[list[InvalidParam]] = Field(None, alias="invalid-params")


# Paths served after ETSI documents whose ProblemDetails.instance is a URI ("format": "uri", not a
# reference): MEC 015's, traffic steering (netapp.atsss.mts) and bandwidth management (netapp.mec).
# Their problems name the request by its absolute URL; elsewhere instance is the request's path.
ABSOLUTE_INSTANCE_PATHS = ("/mts/v1/", "/bwm/")


def problem_instance(request: Request) -> str:
    """The `instance` of a problem about `request`: its path, absolute where ETSI's document asks."""
    path = request.url.path
    if path.startswith(ABSOLUTE_INSTANCE_PATHS):
        # as the request spelt it (percent-encoded): a URI holds no raw control or non-ASCII characters
        raw = request.scope.get("raw_path") or quote(path).encode()
        return f"{request.url.scheme}://{request.url.netloc}{raw.decode('ascii', 'replace')}"
    return path


def problem_type(status: int) -> str:
    return PROBLEM_TYPE_PREFIX + _PROBLEM_SLUGS.get(status, f"http-{status}")


def problem_response(
    request: Request,
    status: int,
    title: str,
    detail: Optional[str] = None,
    invalid_params: Optional[list[InvalidParam]] = None,
    headers: Optional[dict[str, str]] = None,
    **extensions: Any,
) -> JSONResponse:
    """A problem+json response; `extensions` become extra members (RFC 7807 section 3.2)."""
    problem = Problem(
        type=problem_type(status),
        title=title,
        status=status,
        detail=detail,
        instance=problem_instance(request),
        invalid_params=invalid_params or None,
        **jsonable_encoder(_without_standard_members(extensions)),
    )
    return JSONResponse(
        problem.model_dump(mode="json", by_alias=True, exclude_none=True),
        status_code=status,
        headers=headers,
        media_type=PROBLEM_JSON,
    )


def _without_standard_members(extensions: dict[str, Any]) -> dict[str, Any]:
    # A service error's extras must not overwrite what the problem says (its status, its type).
    reserved = {*Problem.model_fields, "invalid-params"}
    return {key: value for key, value in extensions.items() if key not in reserved}


# --- request validation (pydantic, via FastAPI) -------------------------------------------------


class _ErrorList:
    """Quacks like a pydantic ValidationError for IntentError.from_validation, which only reads
    errors(): FastAPI hands us the errors already unpacked, with the request part in the location."""

    def __init__(self, errors: list[dict[str, Any]]):
        self._errors = errors

    def errors(self) -> list[dict[str, Any]]:
        return self._errors


def invalid_params_of(errors: Iterable[dict[str, Any]]) -> list[InvalidParam]:
    return [_invalid_param(error) for error in errors]


def _invalid_param(error: dict[str, Any]) -> InvalidParam:
    source, *loc = error["loc"] or ("body",)
    if error["type"] == "json_invalid":
        reason = f"malformed JSON: {(error.get('ctx') or {}).get('error', 'cannot parse')}"
        return InvalidParam(name="body", reason=f"{reason} (at character {loc[0] if loc else 0})")
    if source == "body" and not loc and error["type"] == "missing":
        return InvalidParam(name="body", reason="a JSON body is required")
    if source in _PARAMETER_SOURCES:
        # A parameter's name is what the client typed; the message is pydantic's.
        name = ".".join(str(part) for part in loc) or "(empty name)"
        if error["type"] == "extra_forbidden":
            return InvalidParam(name=name, reason=f"unknown {source} parameter", allowed=_allowed(error))
        return InvalidParam(name=name, reason=_described({**error, "loc": ()})[1], allowed=_allowed(error))
    path, reason = _described({**error, "loc": tuple(loc)})
    return InvalidParam(name=path or "body", reason=reason, allowed=_allowed(error))


def _described(error: dict[str, Any]) -> tuple[str, str]:
    """(field path, message) in the wording intent files get (netapp.intents.errors)."""
    return IntentError.from_validation(_ErrorList([error])).problems[0]  # type: ignore[arg-type]


def _allowed(error: dict[str, Any]) -> Optional[str]:
    ctx = error.get("ctx") or {}
    kind = error["type"]
    if kind in ("literal_error", "enum"):
        return str(ctx.get("expected"))
    if kind == "union_tag_invalid":
        return str(ctx.get("expected_tags"))
    for bound, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if bound in ctx:
            return f"{symbol} {ctx[bound]}"
    if kind == "string_pattern_mismatch":
        return f"a string matching {ctx.get('pattern')}"
    if kind in ("string_too_long", "string_too_short"):
        return _length("characters", ctx)
    if kind in ("too_long", "too_short"):
        return _length("items", ctx)
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "an integer (a JSON number)"
    if kind == "bool_type":
        return "true or false"
    if kind == "string_type":
        return "a string"
    if kind == "extra_forbidden" and "known" in ctx:
        return ("one of: " + ", ".join(ctx["known"])) if ctx["known"] else "none"
    return None


def _length(unit: str, ctx: dict[str, Any]) -> Optional[str]:
    if "max_length" in ctx:
        return f"at most {ctx['max_length']} {unit}"
    if "min_length" in ctx:
        return f"at least {ctx['min_length']} {unit}"
    return None


# --- the handlers ---------------------------------------------------------------------------------


def _on_validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    params = invalid_params_of(exc.errors())
    detail = "; ".join(f"{param.name}: {param.reason}" for param in params)
    return problem_response(request, 400, "Invalid input", detail, params)


def _on_intent_error(request: Request, exc: IntentError) -> JSONResponse:
    params = [InvalidParam(name=path or "body", reason=message) for path, message in exc.problems]
    return problem_response(request, 400, "Invalid input", exc.line(), params)


def _on_service_error(request: Request, exc: ServiceError) -> JSONResponse:
    if exc.status == HTTP_500_INTERNAL_SERVER_ERROR:
        return _on_unexpected_error(request, exc)
    params = [InvalidParam(name=exc.field, reason=exc.reason, allowed=exc.allowed)] if exc.field else None
    return problem_response(request, exc.status, exc.title, exc.detail, params, **exc.extra)


def _on_http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    title = _http_title(exc.status_code)
    detail = exc.detail if isinstance(exc.detail, str) and exc.detail != title else None
    headers = dict(exc.headers or {})
    if exc.status_code == HTTP_405_METHOD_NOT_ALLOWED:
        allowed = _methods_of_path(request)
        headers["Allow"] = ", ".join(allowed)
        detail = f"{request.method} is not allowed here; allowed: {', '.join(allowed)}"
    return problem_response(request, exc.status_code, title, detail, headers=headers)


def _methods_of_path(request: Request) -> list[str]:
    """Every method some route offers at this path. Starlette's own Allow header names only the
    methods of the first route that matched the path, and each of our routes has one method."""
    return [
        method
        for method in _HTTP_METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] == Match.FULL
            for route in request.app.routes
        )
    ]


def _on_unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    # The traceback goes to the log, never to the client: it would show paths and internals.
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return problem_response(
        request, 500, "Internal error", "the request failed unexpectedly; the server log says why"
    )


def _http_title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


class UnexpectedErrorMiddleware:
    """Answers an exception no handler took with a 500 problem, and keeps the connection.

    Starlette's own last-resort handler (ServerErrorMiddleware) re-raises after answering, and
    uvicorn then closes the connection under a keep-alive client that may already be reusing it.
    """

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracking_start(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracking_start)
        except Exception as exc:
            if started:
                raise  # too late for another answer: let the server end the connection
            await _on_unexpected_error(Request(scope), exc)(scope, receive, send)


_HANDLERS: tuple[tuple[type[Exception], Callable[[Request, Any], JSONResponse]], ...] = (
    (RequestValidationError, _on_validation_error),
    (IntentError, _on_intent_error),
    (ServiceError, _on_service_error),
    (StarletteHTTPException, _on_http_error),
)


def error_response(request: Request, exc: Exception) -> JSONResponse:
    """The problem+json answer to `exc` from code that runs before the routes (a middleware of
    ours), which the app's exception handlers do not reach."""
    for kind, handler in _HANDLERS:
        if isinstance(exc, kind):
            return handler(request, exc)
    return _on_unexpected_error(request, exc)


def install_problem_handlers(app: FastAPI) -> None:
    """Route every kind of failure to a problem+json response."""
    for kind, handler in _HANDLERS:
        app.add_exception_handler(kind, handler)
    app.add_middleware(UnexpectedErrorMiddleware)
    # Still there for failures outside the routes (a middleware of ours): better a problem than text.
    app.add_exception_handler(Exception, _on_unexpected_error)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries saying these statuses come as problem+json."""
    return {
        status: {
            "description": _http_title(status),
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        for status in statuses
    }
