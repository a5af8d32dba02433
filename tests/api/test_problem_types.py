"""Every error the API answers is a problem with one of the types api/rest.md lists, never
about:blank, whoever produced it: pydantic, FastAPI's body parser, Starlette's router, an
HTTPException, the request limits, the service, the stream limit, a bug."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterator

import httpx
import pytest

from netapp.api.main import build_routes, create_app
from netapp.api.problems import problem_type
from netapp.core.config import Settings, StreamSettings
from netapp.service.contract import DataplaneUnavailable
from netapp.telemetry.collector import Collector
from netapp.telemetry.runtime import Telemetry
from tests.api.conftest import NoCounters, token_of
from tests.api.fake_service import FakeIntentService
from tests.api.problems import assert_problem
from tests.api.server import ServerThread
from tests.utils.intents import native_intent

REST_MD = Path(__file__).resolve().parents[2] / "api" / "rest.md"
INTENTS = "/api/v1/intents"
JSON = {"Content-Type": "application/json"}


def documented_types() -> dict[int, str]:
    """status -> problem type, from the table in api/rest.md."""
    rows = re.findall(r"^\| `([^`]+)` \| (\d{3}) \|", REST_MD.read_text(), re.M)
    return {int(status): kind for kind, status in rows}


def test_the_documented_types_are_the_ones_answered_and_none_is_about_blank():
    documented = documented_types()

    assert {400, 401, 403, 404, 405, 409, 413, 415, 429, 500, 503} <= set(documented)
    assert all(problem_type(status) == kind for status, kind in documented.items())
    assert "about:blank" not in documented.values()


def test_every_error_status_of_the_openapi_document_has_a_documented_type():
    documented = documented_types()
    for path, operations in build_routes().openapi()["paths"].items():
        for method, operation in operations.items():
            for status, answer in operation["responses"].items():
                if "application/problem+json" in answer.get("content", {}):
                    assert int(status) in documented, f"{method.upper()} {path}: {status}"


# Each: (the call, the status it gets). Together they make every kind of error the API has.
Call = Callable[[Callable[..., httpx.Client]], httpx.Response]

CALLS: dict[str, tuple[Call, int]] = {
    "pydantic": (lambda c: c("tenant-a").post(INTENTS, json=native_intent(priority=-1)), 400),
    "malformed-json": (lambda c: c("tenant-a").post(INTENTS, content=b"{", headers=JSON), 400),
    "body-parser": (
        lambda c: c("tenant-a").post(INTENTS, content=b'{"id": ' + b"9" * 5000 + b"}", headers=JSON),
        400,
    ),
    "json-depth": (lambda c: c("tenant-a").post(INTENTS, content=b"[" * 40, headers=JSON), 400),
    "unknown-query": (lambda c: c("tenant-a").get(INTENTS, params={"x": 1}), 400),
    "no-token": (lambda c: c(None).get(INTENTS), 401),
    "no-token-with-body": (lambda c: c(None).post(INTENTS, json=native_intent()), 401),
    "bad-token-with-body": (
        lambda c: c(None).post(INTENTS, json=native_intent(), headers={"Authorization": "Bearer x"}),
        401,
    ),
    "scope": (lambda c: c("reader-a").post(INTENTS, json=native_intent()), 403),
    "router": (lambda c: c("tenant-a").get("/api/v1/nowhere"), 404),
    "service-not-found": (lambda c: c("tenant-a").get(f"{INTENTS}/absent"), 404),
    "method": (lambda c: c("tenant-a").patch(INTENTS), 405),
    "conflict": (
        lambda c: [c("tenant-a").post(INTENTS, json=native_intent()) for _ in range(2)][1],
        409,
    ),
    "content-length": (
        lambda c: c("tenant-a").post(INTENTS, content=b" " * (4 << 20 | 1), headers=JSON),
        413,
    ),
    "media-type": (
        lambda c: c("tenant-a").post(INTENTS, content=b"{}", headers={"Content-Type": "text/plain"}),
        415,
    ),
}


@pytest.mark.parametrize("name", CALLS)
def test_each_kind_of_error_is_a_problem_of_its_documented_type(client_for, name):
    call, status = CALLS[name]

    problem = assert_problem(call(client_for), status)

    assert problem["type"] == documented_types()[status]


@pytest.mark.parametrize(
    "error, status",
    [(RuntimeError("a bug"), 500), (DataplaneUnavailable("the maps refused it"), 503)],
    ids=["bug", "dataplane"],
)
def test_errors_of_the_service_are_problems_of_their_documented_type(tenant_a, service, error, status):
    service.fail_next(error)

    problem = assert_problem(tenant_a.get(INTENTS), status)

    assert problem["type"] == documented_types()[status]


@pytest.fixture(scope="module")
def one_stream(tokens_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """A server whose telemetry serves one stream at a time."""
    telemetry = Telemetry(Collector(NoCounters(), node="n"), None, StreamSettings(max_clients=1))
    telemetry.streams.start()
    settings = Settings(tokens_file=tokens_path, state_dir=tmp_path_factory.mktemp("state"))
    with ServerThread(create_app(settings, FakeIntentService(), telemetry)) as running:
        yield running
    telemetry.streams.stop()


def test_a_stream_beyond_the_limit_is_a_problem_of_its_documented_type(one_stream):
    def client(name: str) -> httpx.Client:
        return httpx.Client(base_url=one_stream.url, headers={"Authorization": f"Bearer {token_of(name)}"})

    with client("reader-a") as reader, client("admin") as admin:
        with reader.stream("GET", "/api/v1/telemetry/stream") as served:
            lines = served.iter_lines()  # kept: a dropped iterator would close the stream
            assert next(lines) == "retry: 5000"
            with admin.stream("GET", "/api/v1/telemetry/stream") as refused:
                refused.read()

    problem = assert_problem(refused, 429)
    assert problem["type"] == "urn:dpp-netapp:problem:too-many-requests"
