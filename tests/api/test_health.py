"""/healthz and /readyz: liveness always, readiness from the service's health checks."""

from __future__ import annotations

from tests.api.problems import assert_problem


def test_liveness_answers_ok(client_for):
    response = client_for(None).get("/healthz")

    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_given_a_ready_service_then_readyz_is_200_with_its_checks(client_for):
    response = client_for(None).get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"ready": True, "checks": {"store": "ok", "dataplane": "ok"}}


def test_given_a_service_that_is_not_ready_then_readyz_is_503_saying_why(client_for, service):
    service.ready = False

    response = client_for(None).get("/readyz")

    assert response.status_code == 503
    assert response.json()["checks"]["dataplane"] == "pinned maps are missing"


def test_given_a_health_check_that_crashes_then_readyz_is_a_500_problem(client_for, service):
    service.fail_next(RuntimeError("boom"))

    assert_problem(client_for(None).get("/readyz"), 500)
