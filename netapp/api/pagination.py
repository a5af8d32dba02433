"""Offset/limit pagination: query parameters, the page bodies, and the RFC 8288 Link header."""

from __future__ import annotations

from typing import Annotated, Generic, TypeVar

from fastapi import Query, Request, Response
from pydantic import BaseModel, Field

from netapp.intents.models import MAX_I64
from netapp.service.contract import IntentRecord, Page, SliceRecord

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000

T = TypeVar("T")

# The store's INTEGER (SQLite: signed 64 bits) holds any offset up to this one.
Offset = Annotated[int, Query(ge=0, le=MAX_I64, description="how many items to skip")]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="how many items at most")]


class _PageBody(BaseModel, Generic[T]):
    items: list[T]
    total: int = Field(description="how many items match, on every page")
    offset: int
    limit: int

    @classmethod
    def of(cls, page: Page[T]):  # type: ignore[no-untyped-def]
        return cls(items=page.items, total=page.total, offset=page.offset, limit=page.limit)


# Concrete classes rather than `_PageBody[IntentRecord]`: they give the OpenAPI schemas plain names.
class IntentPage(_PageBody[IntentRecord]):
    """A page of intents."""


class SlicePage(_PageBody[SliceRecord]):
    """A page of slices."""


def set_link_header(request: Request, response: Response, page: Page) -> None:
    """Link: first, prev, next and last pages, as relative references with the same filters."""
    response.headers["Link"] = ", ".join(
        f'<{_page_url(request, offset, page.limit)}>; rel="{rel}"' for rel, offset in _page_offsets(page)
    )


def _page_offsets(page: Page) -> list[tuple[str, int]]:
    last = max(0, (page.total - 1) // page.limit * page.limit)
    offsets = [("first", 0)]
    if page.offset > 0:
        offsets.append(("prev", max(0, page.offset - page.limit)))
    if page.offset + page.limit < page.total:
        offsets.append(("next", page.offset + page.limit))
    offsets.append(("last", last))
    return offsets


def _page_url(request: Request, offset: int, limit: int) -> str:
    url = request.url.include_query_params(offset=offset, limit=limit)
    return f"{url.path}?{url.query}"
