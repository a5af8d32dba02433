"""The notifiers' delivery counts in /metrics (dpp_notification, netapp.telemetry.notifications),
through a real uvicorn over the real service (FakeDpp underneath) and its real notifiers, posting
to real receivers on loopback: a callback that takes a MEC 011 termination notification counts as
delivered, one that fails every attempt as retried and then failed; Prometheus' parser and promtool
read the text; a tenant sees none of it (the counts are node-wide)."""

from __future__ import annotations

from typing import Iterator

import httpx
import pytest

from netapp.api.main import create_app
from netapp.core.config import Settings, SubscriptionSettings, TelemetrySettings
from netapp.mec.models import MecApplicationSpec
from netapp.service.service import NetAppService
from netapp.telemetry.notifications import MEC_SERVICE_AVAILABILITY, MEC_TERMINATION, TELEMETRY_SUBSCRIPTIONS
from netapp.telemetry.runtime import Telemetry
from tests.api.conftest import token_of
from tests.api.server import ServerThread
from tests.api.test_metrics import by_tags, scrape
from tests.mec.test_app_service import APP, subscription
from tests.utils.callbacks import CallbackReceiver
from tests.utils.prometheus import promtool
from tests.utils.service import ADMIN, ALICE, fake_service

# One retry 10 ms after the first attempt, so that a failing callback is given up at once; the
# receivers listen on 127.0.0.1, which the allow-list names. A request's timeout far above what a
# receiver on a loaded machine takes to answer: a slow answer is never counted as a retry.
FAST = SubscriptionSettings(workers=1, timeout_ms=30_000, max_retries=1, retry_interval_ms=10, max_retry_delay_ms=10,
                            callback_allow=["127.0.0.1/32"])
OUTCOMES = ("delivered", "retried", "failed", "refused", "dropped")


@pytest.fixture
def served(tmp_path, tokens_path) -> Iterator[tuple[str, NetAppService]]:
    """(url, service): the API with telemetry over a service with one MEC application."""
    telemetry_settings = TelemetrySettings(subscriptions=FAST)
    service = fake_service(tmp_path, telemetry=telemetry_settings)
    service.mec.create_application(ADMIN, MecApplicationSpec(appInstanceId=APP, tenant="alice"))
    settings = Settings(state_dir=tmp_path, tokens_file=tokens_path, telemetry=telemetry_settings)
    try:
        with ServerThread(create_app(settings, service, Telemetry.from_settings(settings, service))) as server:
            yield server.url, service
    finally:
        service.close()


def notification_counts(url: str, caller: str = "admin") -> dict[tuple[str, str], float]:
    """(notifier, outcome) -> count, as /metrics says."""
    samples = scrape(url, caller)
    return {(notifier, outcome): value
            for outcome in OUTCOMES
            for (notifier,), value in by_tags(samples, f"dpp_notification_{outcome}_total", "notifier").items()}


def test_a_working_callback_counts_as_delivered_and_a_failing_one_as_retried_then_failed(served):
    url, service = served
    before = notification_counts(url)
    assert before == {(notifier, outcome): 0.0 for outcome in OUTCOMES
                      for notifier in (TELEMETRY_SUBSCRIPTIONS, MEC_TERMINATION, MEC_SERVICE_AVAILABILITY)}

    with CallbackReceiver() as working, CallbackReceiver() as failing:
        failing.answer(500, 503)  # each attempt: the first and its one retry
        for receiver in (working, failing):
            service.mec_apps.create_subscription(ALICE, APP, subscription(receiver.url))
        service.mec_apps.request_termination(ADMIN, APP, 60)
        assert service.mec_apps.notifier.flush(), "the notifications were not sent or given up in time"
    after = notification_counts(url)

    assert [got.status for got in working.received] == [204]
    assert [got.status for got in failing.received] == [500, 503]
    changed = {key: value for key, value in after.items() if value != before[key]}
    assert changed == {(MEC_TERMINATION, "delivered"): 1.0, (MEC_TERMINATION, "retried"): 1.0,
                       (MEC_TERMINATION, "failed"): 1.0}


def test_promtool_finds_nothing_to_say_and_tenants_see_no_notification_counts(served):
    url, _ = served
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token_of('admin')}"}).text
    assert "dpp_notification_failed_total" in text
    checked = promtool("check", "metrics", stdin=text.encode())
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, b"")
    assert notification_counts(url, "reader-a") == {}
