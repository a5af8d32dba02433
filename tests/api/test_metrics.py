"""/metrics through a real uvicorn over the real service (FakeDpp underneath): the text parses with
Prometheus' own parser, agrees with /api/v1/stats, keeps tenants apart, and needs a token."""

from __future__ import annotations

from typing import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from netapp.api.main import create_app
from netapp.core.config import Settings
from netapp.steering.models import CpuSpec
from netapp.service.contract import Principal, Scope
from netapp.telemetry.runtime import Telemetry
from tests.api.conftest import token_of
from tests.api.server import ServerThread
from tests.utils.service import fake_service, intent, slice_spec

OPERATOR = Principal("operator", frozenset({Scope.ADMIN}))
TENANT_A = Principal("tenant-a", frozenset({Scope.READ, Scope.INTENTS_WRITE, Scope.SLICES_WRITE}))
TENANT_B = Principal("tenant-b", frozenset({Scope.READ, Scope.INTENTS_WRITE, Scope.SLICES_WRITE}))


@pytest.fixture
def served(tmp_path, tokens_path) -> Iterator[tuple[str, object]]:
    """(url, service): the API with telemetry over a service holding a few counted intents."""
    service = fake_service(tmp_path)
    service.create_intent(TENANT_A, intent("voice", 5004))
    service.create_intent(TENANT_B, intent("video", 5006))
    service.put_slice(TENANT_A, slice_spec())
    service.put_cpu(OPERATOR, CpuSpec(cpu=1, capacity_pps=1000))
    fake = service.dataplane._dpp
    for n, slot in enumerate(sorted(service.dataplane.installed_intents.values()), start=1):
        fake.count(slot, n * 10, 100)
    fake.steer(1, 42, 64)
    settings = Settings(tokens_file=tokens_path)
    telemetry = Telemetry.from_settings(settings, service)
    try:
        with ServerThread(create_app(settings, service, telemetry)) as server:
            yield server.url, service
    finally:
        service.close()


def scrape(url: str, caller: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, labels) -> value, through Prometheus' text parser."""
    response = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token_of(caller)}"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def stats(url: str, caller: str) -> dict:
    response = httpx.get(f"{url}/api/v1/stats", headers={"Authorization": f"Bearer {token_of(caller)}"})
    assert response.status_code == 200
    return response.json()


def by_tags(samples, name: str, *keys: str) -> dict[tuple[str, ...], float]:
    """The samples called `name`, by the values of the tags `keys`."""
    found = {}
    for (sample, labels), value in samples.items():
        if sample == name:
            tags = dict(labels)
            found[tuple(tags[key] for key in keys)] = value
    return found


def views(table, *keys: str, field: str) -> dict[tuple[str, ...], float]:
    return {tuple(view[key] for key in keys): float(view[field]) for view in table}


def test_metrics_agree_with_the_stats_endpoint_for_an_admin(served):
    url, _ = served

    samples = scrape(url, "admin")
    expected = stats(url, "admin")

    for field in ("packets", "bytes"):
        assert by_tags(samples, f"dpp_intent_{field}_total", "tenant", "intent") == views(
            expected["intents"], "tenant", "id", field=field
        )
        assert by_tags(samples, f"dpp_slice_{field}_total", "tenant", "slice") == views(
            expected["slices"], "tenant", "id", field=field
        )
        assert by_tags(samples, f"dpp_verdict_{field}_total", "verdict") == {
            (verdict,): float(view[field]) for verdict, view in expected["verdicts"].items()
        }
    cpus = {(cpu,): view for cpu, view in expected["cpus"].items()}
    assert by_tags(samples, "dpp_cpu_packets_total", "cpu") == {k: v["packets"] for k, v in cpus.items()}
    capacities = {k: v["capacity_pps"] for k, v in cpus.items()}
    assert by_tags(samples, "dpp_cpu_capacity_packets_per_second", "cpu") == capacities


def test_a_tenant_scrapes_only_its_own_intents_and_slices(served):
    url, _ = served

    samples = scrape(url, "reader-a")

    assert set(by_tags(samples, "dpp_intent_packets_total", "tenant", "intent")) == set(
        views(stats(url, "reader-a")["intents"], "tenant", "id", field="packets")
    )
    assert {dict(labels)["tenant"] for (_, labels) in samples} == {"tenant-a"}
    assert not [name for name, _ in samples if name.startswith(("dpp_cpu", "dpp_verdict", "dpp_telemetry"))]


def test_an_intent_outside_a_slice_has_an_empty_slice_label(served):
    url, _ = served

    samples = scrape(url, "admin")

    slices = by_tags(samples, "dpp_intent_packets_total", "intent", "slice")
    assert ("voice", "") in slices


def test_metrics_need_a_token(served):
    url, _ = served

    response = httpx.get(f"{url}/metrics")

    assert response.status_code == 401
    assert response.headers["content-type"].startswith("application/problem+json")


def test_without_telemetry_metrics_answer_503(tmp_path, tokens_path):
    service = fake_service(tmp_path)
    try:
        with ServerThread(create_app(Settings(tokens_file=tokens_path), service)) as server:
            response = httpx.get(
                f"{server.url}/metrics", headers={"Authorization": f"Bearer {token_of('admin')}"}
            )
    finally:
        service.close()

    assert response.status_code == 503
    assert "telemetry" in response.json()["detail"]
