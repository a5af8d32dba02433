"""The API over TLS, with a self-signed certificate made for the test."""

from __future__ import annotations

import ssl

import httpx
import pytest

from netapp.api.main import create_app
from netapp.core.config import Settings
from tests.api.conftest import token_of
from tests.api.fake_service import FakeIntentService
from tests.api.server import ServerThread
from tests.utils.tls import self_signed


@pytest.fixture
def tls_server(tmp_path, tokens_path):
    cert, key = self_signed(tmp_path)
    settings = Settings(tokens_file=tokens_path, tls_cert=cert, tls_key=key)
    app = create_app(settings, FakeIntentService())
    with ServerThread(app, certfile=settings.tls_cert, keyfile=settings.tls_key) as server:
        yield server, cert


def test_given_tls_then_a_client_that_trusts_the_certificate_gets_answers(tls_server):
    server, cert = tls_server
    context = ssl.create_default_context(cafile=str(cert))
    response = httpx.get(
        f"{server.url}/api/v1/intents",
        headers={"Authorization": f"Bearer {token_of('admin')}"},
        verify=context,
    )

    assert server.url.startswith("https://")
    assert response.status_code == 200 and response.json()["total"] == 0


def test_given_tls_then_a_client_that_does_not_trust_the_certificate_is_refused(tls_server):
    server, _ = tls_server

    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{server.url}/healthz")


def test_given_tls_then_plain_http_gets_no_answer(tls_server):
    server, _ = tls_server

    with pytest.raises(httpx.HTTPError):
        httpx.get(server.url.replace("https://", "http://") + "/healthz")
