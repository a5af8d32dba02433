"""Bearer tokens and scopes: 401 without a valid token, 403 without the scope (naming it), tokens
file reloaded when it changes, auth_disabled acting as admin."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from netapp.api.auth import TokensFileError, TokenStore, token_hash, write_tokens_file
from netapp.api.main import create_app
from netapp.core.config import Settings
from netapp.service.contract import Scope
from tests.api.conftest import CALLERS, token_of, tokens_file_for
from tests.api.fake_service import FakeIntentService
from tests.api.problems import assert_problem
from tests.api.server import ServerThread
from tests.utils.intents import native_intent

INTENTS = "/api/v1/intents"


# --- 401 -------------------------------------------------------------------------------------------


def test_given_no_token_then_401_with_a_bearer_challenge_and_no_error_code(client_for, service):
    response = client_for(None).get(INTENTS)

    problem = assert_problem(response, 401)
    assert response.headers["www-authenticate"] == 'Bearer realm="dpp-netapp"'
    assert "bearer token is required" in problem["detail"]
    assert service.calls == []


@pytest.mark.parametrize(
    "authorization, challenge",
    [
        ("Bearer not-a-token", 'Bearer realm="dpp-netapp", error="invalid_token"'),
        (f"Bearer {token_of('admin')}x", 'Bearer realm="dpp-netapp", error="invalid_token"'),
        ("Bearer", 'Bearer realm="dpp-netapp"'),
        (f"Basic {token_of('admin')}", 'Bearer realm="dpp-netapp"'),
    ],
    ids=["unknown", "one-character-more", "empty", "another-scheme"],
)
def test_given_a_bad_token_then_401_and_the_challenge_says_whether_one_was_sent(
    client_for, service, authorization, challenge
):
    response = client_for(None).get(INTENTS, headers={"Authorization": authorization})

    assert_problem(response, 401)
    assert response.headers["www-authenticate"] == challenge
    assert service.calls == []


def test_given_no_token_and_a_body_that_is_not_json_then_401_comes_before_415(client_for):
    response = client_for(None).post(INTENTS, content=b"x", headers={"Content-Type": "text/plain"})

    assert_problem(response, 401)


# --- 403 -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "caller, method, path, body, scope",
    [
        ("reader-a", "post", INTENTS, native_intent(), "intents:write"),
        ("reader-a", "delete", f"{INTENTS}/x", None, "intents:write"),
        ("writer-a", "get", INTENTS, None, "read"),
        ("reader-a", "put", "/api/v1/slices/s1", None, "slices:write"),
        (
            "tenant-a",
            "put",
            "/api/v1/alternatives/0",
            {"id": 0, "members": [{"mac": "02:00:00:00:00:01"}]},
            "admin",
        ),
        ("tenant-a", "delete", "/api/v1/alternatives/0", None, "admin"),
        ("tenant-a", "post", "/api/v1/dataplane/attach", {"interface": "eth0"}, "admin"),
        ("tenant-a", "post", "/api/v1/dataplane/detach", {"interface": "eth0"}, "admin"),
        ("tenant-a", "post", "/api/v1/dataplane/reload", None, "admin"),
        ("tenant-a", "put", "/api/v1/dataplane/cpus/1", {"cpu": 1}, "admin"),
        ("tenant-a", "delete", "/api/v1/dataplane/cpus/1", None, "admin"),
        ("writer-a", "get", "/api/v1/stats", None, "read"),
    ],
)
def test_given_a_token_without_the_scope_then_403_names_the_scope_and_the_service_is_not_called(
    client_for, service, caller, method, path, body, scope
):
    kwargs = {"json": body} if body is not None else {}
    problem = assert_problem(getattr(client_for(caller), method)(path, **kwargs), 403)

    assert problem["required_scope"] == scope
    assert f"needs scope '{scope}'" in problem["detail"]
    assert service.calls == []


def test_given_an_admin_token_then_every_scope_is_granted(admin, service):
    assert admin.post(INTENTS, json=native_intent()).status_code == 201
    assert admin.get(INTENTS).status_code == 200
    assert admin.put("/api/v1/dataplane/cpus/1", json={"cpu": 1}).status_code == 200


def test_given_health_probes_then_they_need_no_token(client_for):
    anonymous = client_for(None)

    assert anonymous.get("/healthz").status_code == 200
    assert anonymous.get("/readyz").status_code == 200


# --- the tokens file -------------------------------------------------------------------------------


@pytest.fixture
def own_server(tmp_path: Path):
    """A server of its own whose tokens file the test may rewrite."""
    path = tmp_path / "tokens.yaml"
    write_tokens_file(path, tokens_file_for({"tenant-a": CALLERS["tenant-a"]}))
    app = create_app(Settings(tokens_file=path), FakeIntentService())
    with ServerThread(app) as server:
        yield server, path


def status_with(server: ServerThread, name: str) -> int:
    headers = {"Authorization": f"Bearer {token_of(name)}"}
    return httpx.get(f"{server.url}{INTENTS}", headers=headers, timeout=10).status_code


def test_given_the_tokens_file_changes_then_added_tokens_work_and_removed_ones_fail_without_a_restart(
    own_server,
):
    server, path = own_server
    assert (status_with(server, "tenant-a"), status_with(server, "tenant-b")) == (200, 401)

    write_tokens_file(path, tokens_file_for({"tenant-b": CALLERS["tenant-b"]}))

    assert (status_with(server, "tenant-a"), status_with(server, "tenant-b")) == (401, 200)


def test_given_the_tokens_file_becomes_invalid_then_the_previous_tokens_stay_in_force(own_server, caplog):
    server, path = own_server

    path.write_text("tokens: [{name: broken}]\n")

    assert status_with(server, "tenant-a") == 200
    assert any("tokens file not reloaded" in record.getMessage() for record in caplog.records)


def test_given_the_tokens_file_is_removed_then_every_token_is_revoked(own_server):
    server, path = own_server

    path.unlink()

    assert status_with(server, "tenant-a") == 401


def test_given_auth_disabled_then_requests_without_a_token_act_as_admin():
    service = FakeIntentService()
    app = create_app(Settings(auth_disabled=True), service)
    with ServerThread(app) as server:
        response = httpx.put(f"{server.url}/api/v1/dataplane/cpus/2", json={"cpu": 2}, timeout=10)

    assert response.status_code == 200
    assert service.cpus[2].cpu == 2


# --- TokenStore ------------------------------------------------------------------------------------


def test_given_a_token_then_the_store_finds_its_principal_and_no_other(tmp_path):
    path = tmp_path / "tokens.yaml"
    write_tokens_file(path, tokens_file_for(CALLERS))
    store = TokenStore(path)

    principal = store.principal_for(token_of("tenant-a"))

    assert principal is not None
    assert (principal.tenant, principal.name) == ("tenant-a", "tenant-a")
    assert principal.scopes == frozenset({Scope.READ, Scope.INTENTS_WRITE, Scope.SLICES_WRITE})
    assert store.principal_for("tenant-a") is None
    assert store.principal_for(token_hash(token_of("tenant-a"))) is None  # the hash is not the token


def test_the_tokens_file_holds_hashes_only(tokens_path):
    text = tokens_path.read_text()

    assert token_of("admin") not in text and token_hash(token_of("admin")) in text
    assert tokens_path.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    "content, message",
    [
        ("tokens: [{name: a, sha256: abc, tenant: t, scopes: [read]}]", "tokens[0].sha256"),
        ("tokens: [{name: a, sha256: " + "0" * 64 + ", tenant: t, scopes: [root]}]", "tokens[0].scopes[0]"),
        (
            "tokens: [{name: a, sha256: " + "0" * 64 + ", tenant: t, scopes: [read], token: x}]",
            "tokens[0].token",
        ),
        ("tokens: [", "not valid YAML"),
    ],
    ids=["short-hash", "unknown-scope", "plain-token-field", "yaml"],
)
def test_given_an_invalid_tokens_file_then_the_error_names_the_file_and_field(tmp_path, content, message):
    path = tmp_path / "tokens.yaml"
    path.write_text(content)

    with pytest.raises(TokensFileError) as raised:
        TokenStore(path)

    assert str(path) in str(raised.value) and message in str(raised.value)


def test_given_no_tokens_file_then_the_error_says_how_to_make_one(tmp_path):
    with pytest.raises(TokensFileError, match="netapp tokens add"):
        TokenStore(tmp_path / "missing.yaml")
