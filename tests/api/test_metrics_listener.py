"""The metrics listener (telemetry.metrics_listener): `/metrics` without a token on a port of its
own, as OSM's Prometheus scrapes it. It shows what an admin sees on the API's `/metrics`, answers
nothing else, refuses writes, survives a failing counter read, and a taken port stops the start."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
from pydantic import ValidationError

from netapp.core.config import Settings
from netapp.telemetry.runtime import Telemetry
from tests.api.test_metrics import by_tags, scrape, served  # noqa: F401 (a fixture)

LISTENER = {"enabled": True, "host": "127.0.0.1", "port": 0}


@pytest.fixture
def listening(served, tokens_path) -> Iterator[tuple[str, str, object]]:  # noqa: F811
    """(api url, listener url, service): the served API, and a second telemetry over the same
    service whose listener took a free port."""
    url, service = served
    settings = Settings(tokens_file=tokens_path, telemetry={"metrics_listener": LISTENER})
    telemetry = Telemetry.from_settings(settings, service)
    telemetry.start()
    try:
        yield url, f"http://127.0.0.1:{telemetry.metrics_listener.port}", service
    finally:
        telemetry.stop()


def samples_of(text: str) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_the_listener_shows_what_an_admin_scrapes_from_the_api_without_a_token(listening):
    api_url, listener_url, _ = listening

    response = httpx.get(f"{listener_url}/metrics")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    unauthenticated, admin = samples_of(response.text), scrape(api_url, "admin")
    for name, keys in [
        ("dpp_intent_packets_total", ("tenant", "intent")),
        ("dpp_slice_bytes_total", ("tenant", "slice")),
        ("dpp_cpu_packets_total", ("cpu",)),
        ("dpp_verdict_packets_total", ("verdict",)),
    ]:
        assert by_tags(unauthenticated, name, *keys) == by_tags(admin, name, *keys) != {}, name
    assert {dict(labels).get("tenant") for (_, labels) in unauthenticated} >= {"tenant-a", "tenant-b"}


@pytest.mark.parametrize("path", ["/", "/api/v1/stats", "/metrics/x"])
def test_only_metrics_is_served(listening, path):
    _, listener_url, _ = listening

    response = httpx.get(f"{listener_url}{path}")

    assert response.status_code == 404
    assert "only /metrics" in response.text


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_the_listener_refuses_every_method_but_get(listening, method):
    _, listener_url, _ = listening

    response = httpx.request(method, f"{listener_url}/metrics", content=b"x")

    assert response.status_code == 405
    assert response.headers["allow"] == "GET"


def test_a_failing_counter_read_is_a_503_and_the_listener_goes_on(listening, monkeypatch):
    _, listener_url, service = listening

    def broken():
        raise OSError("the counters are gone")

    with monkeypatch.context() as patch:
        patch.setattr(service, "counters", broken)
        failed = httpx.get(f"{listener_url}/metrics")
    assert failed.status_code == 503 and "the counters are gone" in failed.text
    assert httpx.get(f"{listener_url}/metrics").status_code == 200


def test_a_port_in_use_fails_the_start(served, tokens_path):
    _, service = served
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        listener = {**LISTENER, "port": port}
        settings = Settings(tokens_file=tokens_path, telemetry={"metrics_listener": listener})
        telemetry = Telemetry.from_settings(settings, service)
        with pytest.raises(OSError):
            telemetry.start()
        telemetry.stop()


def test_the_listener_is_off_by_default_and_its_host_must_be_an_address(tokens_path):
    assert Settings(tokens_file=tokens_path).telemetry.metrics_listener.enabled is False
    with pytest.raises(ValidationError, match="telemetry.metrics_listener.host"):
        Settings(tokens_file=tokens_path, telemetry={"metrics_listener": {"host": "mgmt-net"}})
