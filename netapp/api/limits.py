"""What a request may send before any route sees it: who may send a body, how large, how deeply
nested.

FastAPI reads a request's body, and parses its JSON, before it resolves a single dependency,
authentication included. `RequestLimits` runs first, on every request that has a body:

- the caller must hold a valid bearer token before a byte of the body is read (401 otherwise);
- the body may not be larger than `api_max_body_bytes`: 413 as soon as Content-Length says so,
  or, without one, as soon as the bytes received go past it;
- its arrays and objects may not nest deeper than `api_max_json_depth` (400), counted on the raw
  bytes in linear time before anything parses them.

A 401 or 413 given here closes the connection (`Connection: close`): what the client has yet to
send of the body is never read.
"""

from __future__ import annotations

from typing import Optional

import numpy
from fastapi import Request
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from netapp.api.deps import authenticate, has_body, is_json
from netapp.api.problems import error_response
from netapp.core.config import Settings
from netapp.service.contract import InvalidInput, ServiceError

_QUOTE = ord('"')
# The change of nesting depth each byte makes, outside strings.
_DEPTH_STEPS = numpy.zeros(256, dtype=numpy.int8)
_DEPTH_STEPS[[ord("["), ord("{")]] = 1
_DEPTH_STEPS[[ord("]"), ord("}")]] = -1


class ContentTooLarge(ServiceError):
    status, title = 413, "Content too large"


class RequestLimits:
    """The limits above, as a pure ASGI middleware: it reads the body, counting, and hands it to
    the app as one message. Settings come from the app's state at each request; an app without
    them (the one the OpenAPI document is exported from) is not limited."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limited = _limited_request(scope)
        if limited is None:
            await self.app(scope, receive, send)
            return
        request, settings = limited
        try:
            authenticate(request)
            _check_announced_length(request, settings.api_max_body_bytes)
            body = await _read_body(receive, settings.api_max_body_bytes)
        except (HTTPException, ContentTooLarge) as exc:
            response = error_response(request, exc)
            response.headers["Connection"] = "close"  # the rest of the body stays unread
            await response(scope, receive, send)
            return
        if body is None:
            return  # the client went away
        try:
            if is_json(request):
                _check_json_depth(body, settings.api_max_json_depth)
        except InvalidInput as exc:
            await error_response(request, exc)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


def _limited_request(scope: Scope) -> Optional[tuple[Request, Settings]]:
    """The request and the settings that limit it; None when none do: not HTTP, no body, or an app
    without settings."""
    if scope["type"] != "http":
        return None
    request = Request(scope)
    settings: Optional[Settings] = getattr(request.app.state, "settings", None)
    if settings is None or not has_body(request):
        return None
    return request, settings


def _check_announced_length(request: Request, limit: int) -> None:
    length = request.headers.get("content-length", "").strip()
    if length.isdigit() and int(length) > limit:
        raise _too_large(f"Content-Length is {int(length)} bytes", limit)


async def _read_body(receive: Receive, limit: int) -> Optional[bytes]:
    """The whole body, or None when the client disconnected; ContentTooLarge as soon as more than
    `limit` bytes came."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > limit:
            raise _too_large(f"the body is more than {limit} bytes", limit)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _too_large(what: str, limit: int) -> ContentTooLarge:
    return ContentTooLarge(
        f"{what}; this NetApp takes at most {limit} (setting api_max_body_bytes)",
        max_body_bytes=limit,
    )


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the body read already, then what the client sends next (a disconnect)."""
    given = False

    async def replay() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _check_json_depth(body: bytes, limit: int) -> None:
    """InvalidInput when the arrays and objects of `body` nest deeper than `limit`. Read on the raw
    bytes, strings left out; what is not JSON is left to the parser to refuse."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return  # not enough brackets to go that deep: most bodies stop here
    # Escaped backslashes first, then escaped quotes: every quote left opens or closes a string.
    chars = numpy.frombuffer(body.replace(b"\\\\", b"").replace(b'\\"', b""), dtype=numpy.uint8)
    steps = _DEPTH_STEPS[chars]
    steps[numpy.bitwise_xor.accumulate(chars == _QUOTE)] = 0  # brackets inside strings
    if int(steps.cumsum(dtype=numpy.int32).max(initial=0)) > limit:
        raise InvalidInput(
            f"the JSON body nests arrays and objects more than {limit} levels deep",
            field="body",
            allowed=f"at most {limit} levels (setting api_max_json_depth)",
        )
