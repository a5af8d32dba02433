"""Request limits over a real server: a body is read only from a caller with a valid token, never
past api_max_body_bytes (413), and its JSON no deeper than api_max_json_depth (400, before it is
parsed)."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
from pathlib import Path
from typing import Any, Iterator, Optional
from urllib.parse import urlsplit

import httpx
import pytest

from netapp.api.main import create_app
from netapp.api.routes.intents import IntentBatch
from netapp.core.config import Settings
from netapp.intents.models import MAX_ALT_GROUPS, MAX_CPUS, MAX_PRIORITY, MAX_U32
from netapp.service.contract import MAX_BATCH_INTENTS
from tests.api.conftest import token_of
from tests.api.fake_service import FakeIntentService
from tests.api.problems import assert_problem, invalid_param
from tests.api.server import ServerThread
from tests.utils.intents import native_intent

INTENTS = "/api/v1/intents"
JSON = {"Content-Type": "application/json"}
MIB = 1 << 20
HUGE_BODY = 100 * MIB
# What reading a refused body may cost the server at most: its own buffers, not the body.
FEW_MIB = 12 * MIB


# --- a body sent by hand, so that the answer can come before the body is all sent -----------------


def peak_rss() -> int:
    """This process's peak resident size in bytes (the server runs in a thread of it)."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) * 1024  # type: ignore[union-attr]


def reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # proc(5): resets VmHWM to the current size


def open_post(url: str, headers: dict[str, str]) -> socket.socket:
    """A connection on which the headers of a POST to the intents went, and nothing of a body."""
    address = urlsplit(url)
    sock = socket.create_connection((address.hostname, address.port), timeout=30)
    head = [f"POST {INTENTS} HTTP/1.1", f"Host: {address.netloc}", "Content-Type: application/json"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    return sock


def read_answer(sock: socket.socket, url: str) -> httpx.Response:
    raw = http.client.HTTPResponse(sock)
    raw.begin()
    content = raw.read()
    return httpx.Response(
        raw.status, headers=raw.getheaders(), content=content, request=httpx.Request("POST", url + INTENTS)
    )


def send_body(sock: socket.socket, size: int, chunked: bool) -> None:
    """Write `size` bytes of body, until the server closes the connection."""
    piece = b" " * (64 * 1024)
    sent = 0
    try:
        while sent < size:
            data = piece[: size - sent]
            sock.sendall(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
            sent += len(data)
        if chunked:
            sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # the server answered and closed the connection: the rest is not wanted


def post_streaming(url: str, size: int, token: Optional[str], chunked: bool) -> httpx.Response:
    """POST a body of `size` bytes to the intents, written from another thread while this one
    reads the answer."""
    headers = {"Transfer-Encoding": "chunked"} if chunked else {"Content-Length": str(size)}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    with open_post(url, headers) as sock:
        sender = threading.Thread(target=send_body, args=(sock, size, chunked), daemon=True)
        sender.start()
        try:
            return read_answer(sock, url)
        finally:
            sender.join(30)
            assert not sender.is_alive()


@pytest.mark.parametrize(
    "token, chunked, status",
    [(None, False, 401), (None, True, 401), ("tenant-a", False, 413), ("tenant-a", True, 413)],
    ids=["no-token", "no-token-chunked", "token", "token-chunked"],
)
def test_given_a_100_mib_body_then_it_is_refused_without_the_server_holding_it(
    server, service, token, chunked, status
):
    reset_peak_rss()
    before = peak_rss()

    response = post_streaming(server.url, HUGE_BODY, token and token_of(token), chunked)

    grown = peak_rss() - before
    assert_problem(response, status)
    assert response.headers["Connection"] == "close"
    assert grown < FEW_MIB, f"the process grew by {grown / MIB:.1f} MiB"
    assert service.calls == []


def test_given_no_token_then_401_comes_before_a_byte_of_the_body(server):
    # Headers only: an answer that waited for the body would never come.
    with open_post(server.url, {"Content-Length": str(HUGE_BODY)}) as sock:
        response = read_answer(sock, server.url)

    problem = assert_problem(response, 401)
    assert "bearer token is required" in problem["detail"]
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="dpp-netapp"'


def test_given_a_content_length_over_the_limit_then_413_says_the_limit_and_the_setting(server):
    headers = {"Content-Length": str(5 * MIB), "Authorization": f"Bearer {token_of('tenant-a')}"}
    with open_post(server.url, headers) as sock:  # headers only again: they are enough
        response = read_answer(sock, server.url)

    problem = assert_problem(response, 413)
    assert problem["type"] == "urn:dpp-netapp:problem:content-too-large"
    assert problem["max_body_bytes"] == 4 * MIB
    assert f"Content-Length is {5 * MIB} bytes" in problem["detail"]
    assert "api_max_body_bytes" in problem["detail"]


@pytest.fixture(scope="module")
def small_limits(tokens_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """A server that takes bodies of 2 KiB nested 8 deep at most."""
    settings = Settings(
        tokens_file=tokens_path,
        state_dir=tmp_path_factory.mktemp("state"),
        api_max_body_bytes=2048,
        api_max_json_depth=8,
    )
    with ServerThread(create_app(settings, FakeIntentService())) as running:
        yield running


@pytest.fixture
def small_admin(small_limits: ServerThread) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {token_of('admin')}"}
    with httpx.Client(base_url=small_limits.url, headers=headers) as client:
        yield client


def batch_of(count: int) -> dict[str, Any]:
    return {"intents": [native_intent(f"i{n}", match={"dst": f"10.0.{n}.0/24"}) for n in range(count)]}


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_given_the_setting_then_bodies_up_to_it_pass_and_larger_ones_get_413(small_admin, chunked):
    small, large = json.dumps(batch_of(2)).encode(), json.dumps(batch_of(30)).encode()
    assert len(small) <= 2048 < len(large)

    def post(body: bytes) -> httpx.Response:
        content = iter([body[:100], body[100:]]) if chunked else body  # an iterator goes chunked
        return small_admin.post(f"{INTENTS}/batch", content=content, headers=JSON, params={"dry_run": True})

    assert post(small).status_code == 200
    assert assert_problem(post(large), 413)["max_body_bytes"] == 2048


# --- JSON depth -----------------------------------------------------------------------------------


def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


def test_given_json_deeper_than_the_limit_then_400_names_the_body_before_parsing_it(tenant_a, service):
    # 33 levels (the object and 32 arrays), malformed too (no closing brace), which a parser would
    # report first; then a million.
    for body in ('{"label": ' + nested(32), nested(1_000_000)):
        response = tenant_a.post(INTENTS, content=body, headers=JSON)

        param = invalid_param(assert_problem(response, 400))
        assert param["name"] == "body"
        assert param["reason"] == "the JSON body nests arrays and objects more than 32 levels deep"
        assert param["allowed"] == "at most 32 levels (setting api_max_json_depth)"
    assert service.calls == []


def test_given_json_as_deep_as_the_limit_then_the_parser_judges_it(tenant_a):
    body = json.dumps(native_intent(label="x")).replace('"x"', nested(31, '"x"'))  # 32 with the intent

    param = invalid_param(assert_problem(tenant_a.post(INTENTS, content=body, headers=JSON), 400))

    assert (param["name"], param["allowed"]) == ("label", "a string")


def test_brackets_and_escaped_quotes_inside_strings_do_not_count(tenant_a):
    label = '"' + "[{" * 100 + "\\"  # in JSON: an escaped quote, brackets, an escaped backslash
    body = json.dumps(native_intent(label=label))
    assert '"\\"[{[{' in body and '[{\\\\"' in body

    response = tenant_a.post(INTENTS, content=body, headers=JSON)

    assert response.status_code == 201, response.text
    assert response.json()["intent"]["label"] == label


def test_the_depth_setting_is_the_one_applied(small_admin):
    shallow = small_admin.post(INTENTS, content=nested(8), headers=JSON)
    assert "levels deep" not in assert_problem(shallow, 400)["detail"]  # not an intent, but not too deep

    param = invalid_param(assert_problem(small_admin.post(INTENTS, content=nested(9), headers=JSON), 400))

    assert param["allowed"] == "at most 8 levels (setting api_max_json_depth)"


# --- the largest legitimate request --------------------------------------------------------------


def longest_intent(number: int) -> dict[str, Any]:
    """A valid intent with every field at its longest."""
    return {
        "id": f"{number:04d}".rjust(64, "i"),
        "priority": MAX_PRIORITY,
        "traffic_class": "best-effort",
        "match": {
            "interface": "e" * 15,
            "vlan": 4094,
            "overlay": "gre",
            "vni": MAX_U32,
            "teid": MAX_U32 - number,  # ten digits still, and a match of its own
            "qfi": 63,
            "src": "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128",
            "dst": "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128",
            "protocol": "icmpv6",
            "dscp": 63,
        },
        "action": {"type": "steer", "cpu": MAX_CPUS - 1},
        "alternative": MAX_ALT_GROUPS - 1,
        "label": "\U0001f4e1" * 256,  # 12 bytes each as JSON escapes its surrogate pair
    }


def test_the_default_limit_takes_the_largest_batch_indented(server, admin, service):
    body = json.dumps({"intents": [longest_intent(n) for n in range(MAX_BATCH_INTENTS)]}, indent=4)
    IntentBatch.model_validate_json(body)
    assert 3 * MIB < len(body) <= Settings.model_fields["api_max_body_bytes"].default

    # A dry run: the fake service's creates compare every pair of intents.
    response = admin.post(f"{INTENTS}/batch", content=body, headers=JSON, params={"dry_run": True})

    assert response.status_code == 200, response.text[:500]
    assert len(response.json()["rules"]) == MAX_BATCH_INTENTS
