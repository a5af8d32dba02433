"""Subscriptions over the collector (the service on FakeDpp underneath) and a real HTTP receiver:
delivery, retries on a failing callback, signatures, expiry, filters, tenant isolation, restarts,
and a collector that never waits for any of it."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from netapp.core.config import SubscriptionSettings
from netapp.core.destinations import Resolver, resolve
from netapp.steering.models import CpuSpec
from netapp.service.contract import Conflict, Forbidden, InvalidInput, NotFound, Principal, QuotaExceeded
from netapp.service.service import NetAppService
from netapp.telemetry.collector import Collector
from netapp.telemetry.notify import SUBSCRIPTION_HEADER, Notifier, sign, verify_signature
from netapp.telemetry.poll import CPU, INTENT, SLICE, TELEMETRY
from netapp.telemetry.runtime import Telemetry
from netapp.telemetry.subscription_models import THRESHOLD_FIELDS, SubscriptionRequest
from netapp.telemetry.subscription_notifications import ExpiryNotification, TelemetryNotification
from netapp.telemetry.subscription_store import SubscriptionStore
from netapp.telemetry.subscriptions import SUBSCRIPTIONS_DB, SubscriptionManager
from tests.utils.callbacks import CallbackReceiver, Names
from tests.utils.clock import SECOND, START, NanoClock
from tests.utils.service import ADMIN, ALICE, BOB, fake_service, few_policers_fake, intent, settings_for, slice_spec
from tests.utils.tls import self_signed

TELEMETRY_DOC = Path(__file__).resolve().parents[2] / "api" / "telemetry.md"
# Retries in milliseconds, so that a test waits for three attempts, not three seconds. The
# receivers listen on 127.0.0.1: the allow-list names it (only public addresses otherwise). No test
# waits a request's timeout out: far above what a receiver on a loaded machine takes to answer, so that
# a slow answer is never a retry the test did not ask for.
FAST = SubscriptionSettings(
    workers=2,
    timeout_ms=30_000,
    max_retries=2,
    retry_interval_ms=10,
    max_retry_delay_ms=40,
    callback_allow=["127.0.0.1/32"],
)


@pytest.fixture
def service(tmp_path):
    service = fake_service(tmp_path, few_policers_fake())
    service.create_intent(ALICE, intent("voice", 5004))
    service.create_intent(BOB, intent("voice", 5006))  # the same id, another tenant
    service.put_cpu(ADMIN, CpuSpec(cpu=1, capacity_pps=1000))
    yield service
    service.close()


@pytest.fixture
def clock() -> NanoClock:
    return NanoClock()


@pytest.fixture
def receiver():
    with CallbackReceiver() as running:
        yield running


class Rig:
    """The collector and the subscription manager wired as `netapp serve` wires them (through
    Telemetry), polled by hand on the test's clock."""

    def __init__(
        self,
        service: NetAppService,
        state_dir: Path,
        clock: NanoClock,
        settings: SubscriptionSettings,
        resolver: Resolver = resolve,
    ):
        self.service = service
        self.state_dir = state_dir
        self.clock = clock
        self.settings = settings
        self.resolver = resolver
        self.collector = Collector(service, node="edge-1", interval_s=1.0, clock_ns=clock)
        self.manager = self.open_manager()
        self.telemetry = Telemetry(self.collector, self.manager)
        self.manager.start()

    def open_manager(self) -> SubscriptionManager:
        store = SubscriptionStore.open(self.state_dir / SUBSCRIPTIONS_DB)
        notifier = Notifier(self.settings, resolver=self.resolver)
        return SubscriptionManager(
            store, self.settings, interval_s=1.0, notifier=notifier, clock_ns=self.clock
        )

    def restart(self) -> None:
        """Stop the manager and open a new one on the same file (as a restart of serve does)."""
        self.collector.remove_listener(self.manager.offer)
        self.manager.stop()
        self.manager = self.open_manager()
        self.collector.add_listener(self.manager.offer)
        self.manager.start()

    def poll(self, seconds: float = 1.0) -> None:
        """Advance the clock, poll once, and wait until the notifications are out."""
        self.clock.advance(seconds)
        self.collector.poll_once()
        assert self.manager.flush(), "notifications still pending"

    def count(self, qualified: str, packets: int, size: int = 100) -> None:
        self.service.dataplane._dpp.count(self.service.dataplane.installed_intents[qualified], packets, size)

    def subscribe(self, who: Principal, callback: str, **fields: Any):
        return self.manager.create(who, request(callback, **fields))

    def close(self) -> None:
        self.manager.stop()


@pytest.fixture
def make_rig(service, tmp_path, clock):
    """make_rig(settings, resolver) -> a Rig, stopped when the test ends."""
    made: list[Rig] = []

    def make(settings: SubscriptionSettings = FAST, resolver: Resolver = resolve) -> Rig:
        made.append(Rig(service, tmp_path, clock, settings, resolver))
        return made[-1]

    yield make
    for running in made:
        running.close()


@pytest.fixture
def rig(make_rig) -> Rig:
    return make_rig()


def request(callback: str, **fields: Any) -> SubscriptionRequest:
    body = {"subscriptionType": "TelemetryNotificationSubscription", "callbackReference": callback}
    if "threshold" not in fields:
        body["period"] = 1
    body.update(fields)
    return SubscriptionRequest.model_validate(body)


def points_of(body: dict[str, Any], measurement: str = INTENT) -> list[dict[str, Any]]:
    return [point for point in body["points"] if point["measurement"] == measurement]


# --- delivery and signatures -------------------------------------------------------------------


def test_a_period_subscription_is_notified_every_period_signed_and_numbered(rig, receiver):
    created = rig.subscribe(ALICE, receiver.url, period=2)

    for _ in range(5):
        rig.poll()

    notifications = receiver.wait_for(3)
    bodies = [received.json() for received in notifications]
    assert [body["sequence"] for body in bodies] == [1, 2, 3]
    assert [body["timeStamp"]["seconds"] for body in bodies] == [START // SECOND + t for t in (1, 3, 5)]
    assert all(
        body["notificationType"] == "TelemetryNotification" and body["trigger"] == "period" for body in bodies
    )
    assert bodies[0]["_links"] == {"subscription": {"href": f"/api/v1/subscriptions/{created.id}"}}
    assert all(received.verifies(created.secret) for received in notifications)
    assert notifications[0].headers[SUBSCRIPTION_HEADER.lower()] == created.id
    assert notifications[0].headers["content-type"] == "application/json"
    stats = rig.manager.get(ALICE, created.id).notification_stats
    assert (stats.sent, stats.last_sequence, stats.failed) == (3, 3, 0)


def test_a_notification_holds_the_polls_points_and_validates_as_documented(rig, receiver):
    rig.subscribe(ALICE, receiver.url)
    rig.count("alice/voice", 10)

    rig.poll()

    body = receiver.wait_for(1)[0].json()
    TelemetryNotification.model_validate(body)
    [voice] = points_of(body)
    assert voice["tags"] == {"node": "edge-1", "tenant": "alice", "intent": "voice"}
    assert voice["fields"] == {"packets": 10, "bytes": 1000}
    assert body["truncated"] is False


def test_a_failing_callback_is_retried_with_a_fresh_signature_until_it_takes_the_notification(rig, receiver):
    created = rig.subscribe(ALICE, receiver.url)
    receiver.answer(503, 502)

    rig.poll()

    attempts = receiver.wait_for(3, accepted=False)
    assert [attempt.status for attempt in attempts] == [503, 502, 204]
    assert len({attempt.body for attempt in attempts}) == 1  # the same notification each time
    assert all(attempt.verifies(created.secret) for attempt in attempts)
    stats = rig.manager.get(ALICE, created.id).notification_stats
    assert (stats.sent, stats.retried, stats.failed, stats.last_error) == (1, 2, 0, None)


def test_a_callback_that_keeps_failing_is_given_up_after_the_retries_and_counted(rig, receiver):
    created = rig.subscribe(ALICE, receiver.url)
    receiver.answer(500, 500, 500, 500)

    rig.poll()

    assert len(receiver.received) == 1 + FAST.max_retries
    stats = rig.manager.get(ALICE, created.id).notification_stats
    assert (stats.sent, stats.retried, stats.failed, stats.last_error) == (0, 2, 1, "HTTP 500")
    rig.poll()  # the subscription goes on: the next notification is tried afresh
    assert receiver.wait_for(1)[0].json()["sequence"] == 2


def test_a_callback_that_refuses_a_notification_is_not_asked_again(rig, receiver):
    created = rig.subscribe(ALICE, receiver.url)
    receiver.answer(400)

    rig.poll()

    assert [attempt.status for attempt in receiver.received] == [400]
    stats = rig.manager.get(ALICE, created.id).notification_stats
    assert (stats.failed, stats.retried, stats.last_error) == (1, 0, "HTTP 400")


def test_a_callback_nobody_listens_on_is_retried_then_given_up(rig, receiver):
    with CallbackReceiver() as gone:
        url = gone.url  # a port that was just closed
    created = rig.subscribe(ALICE, url)

    rig.poll()

    stats = rig.manager.get(ALICE, created.id).notification_stats
    assert (stats.sent, stats.retried, stats.failed) == (0, 2, 1)
    assert stats.last_error.startswith("ConnectError")


def test_a_signature_verifies_only_with_the_secret_the_body_and_a_recent_timestamp():
    body = b'{"sequence":1}'
    now = 1_750_000_000
    signature = sign("s3cret", now, body)

    assert re.fullmatch(r"sha256=[0-9a-f]{64}", signature)
    assert verify_signature("s3cret", body, str(now), signature, now_s=now + 10)
    assert not verify_signature("other", body, str(now), signature, now_s=now)
    assert not verify_signature("s3cret", body + b" ", str(now), signature, now_s=now)
    assert not verify_signature("s3cret", body, str(now + 1), signature, now_s=now)  # timestamp is signed
    assert not verify_signature("s3cret", body, str(now), signature, now_s=now + 301)  # a replay, later
    assert not verify_signature("s3cret", body, "yesterday", signature, now_s=now)
    assert not verify_signature("s3cret", body, str(now), "sha256=\u00e9", now_s=now)
    assert not verify_signature("s3cret", body, None, None, now_s=now)


# --- filters and tenants -------------------------------------------------------------------------


def test_a_tenant_gets_its_own_points_only_even_for_an_intent_id_another_tenant_also_has(rig, receiver):
    rig.subscribe(ALICE, receiver.url, filterCriteria={"intents": ["voice"]})
    rig.count("alice/voice", 1)
    rig.count("bob/voice", 7)

    rig.poll()

    body = receiver.wait_for(1)[0].json()
    assert {point["measurement"] for point in body["points"]} == {INTENT}
    [voice] = body["points"]
    assert voice["tags"]["tenant"] == "alice" and voice["fields"]["packets"] == 1


def test_the_filter_narrows_to_slices_and_measurements(rig, receiver, service):
    service.put_slice(ALICE, slice_spec("embb"))
    rig.subscribe(ALICE, receiver.url, filterCriteria={"slices": ["embb"], "measurements": ["dpp_slice"]})

    rig.poll()

    body = receiver.wait_for(1)[0].json()
    assert [(p["measurement"], p["tags"]["slice"]) for p in body["points"]] == [(SLICE, "embb")]


def test_an_unfiltered_tenant_subscription_never_sees_the_node_or_other_tenants(rig, receiver, service):
    service.put_slice(BOB, slice_spec("embb"))
    rig.subscribe(ALICE, receiver.url)

    rig.poll()

    body = receiver.wait_for(1)[0].json()
    assert {point["tags"]["tenant"] for point in body["points"]} == {"alice"}
    assert {point["measurement"] for point in body["points"]} == {INTENT}


def test_an_admin_subscription_sees_every_tenant_and_the_node(rig, receiver):
    rig.subscribe(ADMIN, receiver.url)

    rig.poll()

    body = receiver.wait_for(1)[0].json()
    tenants = {point["tags"]["tenant"] for point in points_of(body)}
    assert tenants == {"alice", "bob"}
    assert points_of(body, CPU)


def test_a_tenant_asking_for_node_wide_measurements_is_forbidden_naming_the_field(rig, receiver):
    with pytest.raises(Forbidden) as asked:
        rig.subscribe(ALICE, receiver.url, filterCriteria={"measurements": ["dpp_intent", "dpp_cpu"]})
    assert asked.value.field == "filterCriteria.measurements" and "dpp_cpu" in asked.value.detail

    threshold = {"measurement": "dpp_cpu", "field": "load", "value": 0.8}
    with pytest.raises(Forbidden) as watched:
        rig.subscribe(ALICE, receiver.url, threshold=threshold)
    assert watched.value.field == "threshold.measurement"


def test_another_tenants_subscription_is_not_found_and_not_listed(rig, receiver):
    mine = rig.subscribe(ALICE, receiver.url)
    rig.subscribe(BOB, receiver.url)

    with pytest.raises(NotFound):
        rig.manager.get(BOB, mine.id)
    with pytest.raises(NotFound):
        rig.manager.delete(BOB, mine.id)
    assert [item.id for item in rig.manager.list_subscriptions(ALICE)] == [mine.id]
    assert len(rig.manager.list_subscriptions(ADMIN)) == 2
    assert rig.manager.get(ADMIN, mine.id).tenant == "alice"


# --- thresholds ----------------------------------------------------------------------------------


def test_a_threshold_fires_once_per_crossing_and_again_only_after_it_rearmed(rig, receiver):
    threshold = {"measurement": "dpp_intent", "field": "packets_rate", "value": 100, "rearmValue": 50}
    created = rig.subscribe(ALICE, receiver.url, threshold=threshold)
    rig.poll()  # the first poll has no rates: nothing to compare

    for packets in (200, 150, 80, 40, 300):  # above, still above, not yet re-armed, re-armed, above
        rig.count("alice/voice", packets)
        rig.poll()

    bodies = [received.json() for received in receiver.wait_for(2)]
    assert len(receiver.received) == 2
    assert [body["trigger"] for body in bodies] == ["threshold", "threshold"]
    assert [points_of(body)[0]["fields"]["packets_rate"] for body in bodies] == [200.0, 300.0]
    assert all(len(body["points"]) == 1 for body in bodies)
    assert rig.manager.get(ALICE, created.id).notification_stats.sent == 2


def test_a_falling_threshold_fires_when_the_field_goes_below(rig, receiver):
    threshold = {"measurement": "dpp_intent", "field": "packets_rate", "direction": "falling", "value": 10}
    rig.subscribe(ALICE, receiver.url, threshold=threshold)
    rig.count("alice/voice", 50)
    rig.poll()

    for packets in (50, 5, 0):  # above, below (fires), still below
        rig.count("alice/voice", packets)
        rig.poll()

    [body] = [received.json() for received in receiver.wait_for(1)]
    assert points_of(body)[0]["fields"]["packets_rate"] == 5.0


def test_a_threshold_on_another_tenants_series_never_fires(rig, receiver):
    rig.subscribe(
        ALICE, receiver.url, threshold={"measurement": "dpp_intent", "field": "packets", "value": 5}
    )

    rig.count("bob/voice", 100)
    rig.poll()

    assert receiver.received == []


def test_threshold_fields_are_those_of_the_telemetry_document():
    documented = _documented_fields(TELEMETRY_DOC.read_text())

    assert THRESHOLD_FIELDS == {name: fields for name, fields in documented.items() if name != TELEMETRY}


def test_a_threshold_on_the_pipelines_own_health_takes_any_field_a_component_may_have():
    threshold = {"measurement": "dpp_telemetry", "field": "points_rejected", "value": 0}

    assert request("http://example.com/", threshold=threshold).threshold.field == "points_rejected"


def _documented_fields(text: str) -> dict[str, frozenset[str]]:
    fields: dict[str, set[str]] = {}
    measurement = None
    for line in text.splitlines():
        heading = re.match(r"^### `(dpp_\w+)`", line)
        if heading:
            measurement = heading.group(1)
            fields[measurement] = set()
        elif measurement and line.startswith("| field |"):
            fields[measurement].add(re.search(r"`(\w+)`", line).group(1))
    return {name: frozenset(names) for name, names in fields.items()}


# --- expiry and restarts ------------------------------------------------------------------------


def test_a_subscription_past_its_deadline_is_removed_and_told(rig, receiver, clock):
    deadline = {"seconds": (clock.now // SECOND) + 3, "nanoSeconds": 0}
    created = rig.subscribe(ALICE, receiver.url, expiryDeadline=deadline)
    rig.poll()

    rig.poll(3)

    expiry = receiver.wait_for(2)[-1]
    body = expiry.json()
    ExpiryNotification.model_validate(body)
    assert body["notificationType"] == "ExpiryNotification"
    assert body["expiryDeadline"] == deadline and body["sequence"] == 2
    assert expiry.verifies(created.secret)
    assert rig.manager.list_subscriptions(ALICE) == []
    assert rig.manager.store.load() == []
    rig.poll()
    assert len(receiver.received) == 2  # nothing after the expiry


def test_a_subscription_that_expired_while_the_netapp_was_down_is_told_when_it_starts(rig, receiver, clock):
    deadline = {"seconds": (clock.now // SECOND) + 60, "nanoSeconds": 0}
    rig.subscribe(ALICE, receiver.url, expiryDeadline=deadline)
    rig.manager.stop()
    clock.advance(3600)

    rig.restart()

    [expiry] = receiver.wait_for(1)
    assert expiry.json()["notificationType"] == "ExpiryNotification"
    assert rig.manager.list_subscriptions(ALICE) == []


def test_subscriptions_survive_a_restart_and_their_sequence_keeps_rising(rig, receiver):
    created = rig.subscribe(ALICE, receiver.url)
    rig.poll()
    rig.poll()

    rig.restart()
    rig.poll()

    assert rig.manager.get(ALICE, created.id).callback_reference == receiver.url
    sequences = [body["sequence"] for body in receiver.bodies()]
    assert sequences[:2] == [1, 2] and sequences[2] > 2
    assert receiver.received[-1].verifies(created.secret)  # the secret was kept


def test_the_subscriptions_file_is_readable_by_its_owner_only(rig, receiver):
    rig.subscribe(ALICE, receiver.url)

    assert (rig.state_dir / SUBSCRIPTIONS_DB).stat().st_mode & 0o777 == 0o600


def test_a_deleted_subscription_gets_nothing_that_was_still_queued(service, tmp_path, clock, receiver):
    collector = Collector(service, node="edge-1", interval_s=1.0, clock_ns=clock)
    store = SubscriptionStore.open(tmp_path / SUBSCRIPTIONS_DB)
    manager = SubscriptionManager(store, FAST, interval_s=1.0, clock_ns=clock)
    created = manager.create(ALICE, request(receiver.url))
    manager.evaluate(collector.poll_once())  # not started: the notification waits in the queue
    assert len(manager.notifier.queue) == 1

    manager.delete(ALICE, created.id)
    manager.start()

    assert manager.flush()
    assert receiver.received == []
    manager.stop()


# --- what is refused -----------------------------------------------------------------------------


def test_a_period_shorter_than_the_collectors_interval_is_refused_naming_period(rig, receiver):
    with pytest.raises(InvalidInput) as refused:
        rig.subscribe(ALICE, receiver.url, period=0.5)
    assert refused.value.field == "period" and "telemetry.interval_s" in refused.value.detail


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"period": None}, "threshold"),
        ({"period": 5, "threshold": {"measurement": "dpp_intent", "field": "packets", "value": 1}}, "period"),
        (
            {
                "threshold": {"measurement": "dpp_slice", "field": "packets", "value": 1},
                "filterCriteria": {"measurements": ["dpp_intent"]},
            },
            "threshold.measurement",
        ),
        ({"expiryDeadline": {"seconds": START // SECOND - 1}}, "expiryDeadline"),
    ],
)
def test_a_request_that_cannot_work_is_refused_naming_the_field(rig, receiver, fields, field):
    with pytest.raises(InvalidInput) as refused:
        rig.subscribe(ALICE, receiver.url, **fields)
    assert refused.value.field == field


def test_a_tenant_holding_the_most_subscriptions_allowed_is_refused_another(make_rig, receiver):
    rig = make_rig(FAST.model_copy(update={"max_per_tenant": 2}))
    rig.subscribe(ALICE, receiver.url)
    rig.subscribe(ALICE, receiver.url)

    with pytest.raises(Conflict, match="max_per_tenant"):
        rig.subscribe(ALICE, receiver.url)
    rig.subscribe(BOB, receiver.url)  # another tenant's room is its own


def test_a_tenant_at_its_subscriptions_quota_is_refused_another_with_403(make_rig, receiver):
    rig = make_rig(FAST)
    rig.manager.create(ALICE, request(receiver.url), quota=1)

    with pytest.raises(QuotaExceeded) as refused:
        rig.manager.create(ALICE, request(receiver.url), quota=1)
    assert refused.value.extra == {"quota": "subscriptions", "limit": 1, "used": 2}
    assert (rig.manager.held(ALICE.tenant), rig.manager.held(BOB.tenant)) == (1, 0)


@pytest.mark.parametrize(
    ("callback", "reason"),
    [
        ("ftp://example.com/x", "http or https"),
        ("http:///notify", "host"),
        ("https://user:pw@example.com/", "credentials"),
        ("http://example.com/#part", "fragment"),
        ("http://example.com:99999/", "not a URI"),
        # What inet_aton reads as 127.0.0.1 (0: 0.0.0.0): refused, never interpreted.
        ("http://2130706433/", "unusual spelling"),
        ("http://0x7f.1/", "unusual spelling"),
        ("http://0x7f000001/", "unusual spelling"),
        ("http://127.1/", "unusual spelling"),
        ("http://0/", "unusual spelling"),
        ("http://127.0.0.1./", "unusual spelling"),
        ("http://[fe80::1%25eth0]/", "zone id"),
    ],
)
def test_a_callback_that_is_not_an_http_uri_is_refused(callback, reason):
    with pytest.raises(ValidationError) as refused:
        request(callback)
    [error] = refused.value.errors()
    assert error["loc"] == ("callbackReference",) and reason in error["msg"]


def test_a_threshold_on_a_field_the_measurement_lacks_is_refused_listing_its_fields():
    with pytest.raises(ValidationError) as refused:
        request("http://example.com/", threshold={"measurement": "dpp_cpu", "field": "lod", "value": 1})
    [error] = refused.value.errors()
    assert error["loc"] == ("threshold", "field") and "load" in error["msg"]


def test_a_threshold_that_rearms_beyond_its_value_is_refused():
    threshold = {"measurement": "dpp_intent", "field": "packets_rate", "value": 100, "rearmValue": 150}
    with pytest.raises(ValidationError) as refused:
        request("http://example.com/", threshold=threshold)
    assert refused.value.errors()[0]["loc"] == ("threshold", "rearmValue")


# --- never in the collector's way ----------------------------------------------------------------


def test_a_slow_callback_never_delays_a_poll(rig, receiver):
    rig.subscribe(ALICE, receiver.url)
    receiver.hold()  # no callback is answered until the polls are done
    try:
        for _ in range(4):
            rig.clock.advance(1)
            rig.collector.poll_once()
        receiver.wait_holding(1)
        # Every poll returned, a callback was sent, and the receiver had answered nothing: a poll
        # that waited for a callback would have waited until the receiver gave up holding it.
        assert receiver.received == []
    finally:
        receiver.release()
    assert rig.manager.flush(timeout_s=10)
    assert receiver.accepted(), "answered once released"


def test_notifications_beyond_a_full_queue_are_dropped_and_counted(service, tmp_path, clock, receiver):
    settings = FAST.model_copy(update={"workers": 1, "queue": 1, "max_retries": 0})
    collector = Collector(service, node="edge-1", interval_s=1.0, clock_ns=clock)
    manager = SubscriptionManager(
        SubscriptionStore.open(tmp_path / SUBSCRIPTIONS_DB), settings, interval_s=1.0, clock_ns=clock
    )
    created = manager.create(ALICE, request(receiver.url))
    receiver.hold()  # the first notification stays in flight while the others come
    manager.notifier.start()
    try:
        for _ in range(4):  # one in flight, one queued: the others find the queue full
            clock.advance(1)
            manager.evaluate(collector.poll_once())
    finally:
        receiver.release()

    assert manager.flush(timeout_s=10)
    stats = manager.get(ALICE, created.id).notification_stats
    assert stats.dropped >= 2 and stats.sent + stats.dropped == 4
    manager.stop()


def test_a_notification_with_more_points_than_allowed_is_truncated_and_says_so(make_rig, service, receiver):
    service.create_intent(ALICE, intent("video", 5008))
    rig = make_rig(FAST.model_copy(update={"max_points": 1}))
    rig.subscribe(ALICE, receiver.url)

    rig.poll()

    body = receiver.wait_for(1)[0].json()
    assert len(body["points"]) == 1 and body["truncated"] is True


def test_telemetry_from_settings_serves_subscriptions_from_the_state_dir(service, tmp_path, receiver):
    settings = settings_for(
        tmp_path,
        telemetry={"interval_s": 0.05, "subscriptions": {"workers": 1, "callback_allow": ["127.0.0.1"]}},
    )
    telemetry = Telemetry.from_settings(settings, service)
    telemetry.start()
    try:
        created = telemetry.subscriptions.create(ALICE, request(receiver.url, period=0.05))
        notifications = receiver.wait_for(2)  # the collector's own thread polls
    finally:
        telemetry.stop()

    assert all(received.verifies(created.secret) for received in notifications)
    assert (tmp_path / SUBSCRIPTIONS_DB).exists()


# --- where callbacks may go ----------------------------------------------------------------------

PUBLIC_ONLY = FAST.model_copy(update={"callback_allow": []})


@pytest.mark.parametrize(
    ("callback", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://10.0.0.5:8080/", "10.0.0.5 is a private address"),
        ("http://192.168.1.10/", "192.168.1.10 is a private address"),
        ("http://100.64.0.1/", "100.64.0.1 is a non-global address"),
        ("http://127.0.0.1:8080/", "127.0.0.1 is a loopback address"),
        ("http://[::1]:8080/", "::1 is a loopback address"),
        ("http://[::ffff:a9fe:a9fe]/", "::ffff:a9fe:a9fe reaches 169.254.169.254, a link-local address"),
        ("http://0.0.0.0:8080/", "0.0.0.0 is an unspecified address"),
        ("http://[ff02::1]/", "ff02::1 is a multicast address"),
        ("http://localhost:8080/", r"localhost resolves to \S+, a loopback address"),  # the system's resolver
        ("http://internal.test/", "internal.test resolves to 10.0.0.5, a private address"),
        ("http://mixed.test/", "mixed.test resolves to 10.0.0.5, a private address"),  # one is enough
        ("http://nowhere.test/", "nowhere.test does not resolve"),
    ],
)
def test_a_callback_that_may_reach_an_address_that_is_not_public_is_refused_naming_the_field(
    make_rig, callback, reason
):
    answers = {"internal.test": ["10.0.0.5"], "mixed.test": ["93.184.215.14 10.0.0.5"], "nowhere.test": [""]}
    rig = make_rig(PUBLIC_ONLY, Names(answers, otherwise=resolve))

    with pytest.raises(InvalidInput) as refused:
        rig.subscribe(ALICE, callback)

    assert refused.value.field == "callbackReference"
    assert re.search(reason, refused.value.detail), refused.value.detail
    assert refused.value.detail.endswith("allowed: public addresses only")
    assert rig.manager.list_subscriptions(ADMIN) == []


def test_a_loopback_listener_the_allow_list_names_is_taken_and_notified(make_rig, receiver):
    with pytest.raises(InvalidInput, match="127.0.0.1 is a loopback address"):
        make_rig(PUBLIC_ONLY).subscribe(ALICE, receiver.url)
    rig = make_rig(PUBLIC_ONLY.model_copy(update={"callback_allow": ["127.0.0.0/8"]}))

    created = rig.subscribe(ALICE, receiver.url)
    rig.poll()

    assert receiver.wait_for(1)[0].verifies(created.secret)


def test_a_name_the_allow_list_names_is_taken_whatever_it_resolves_to(make_rig, receiver):
    names = Names({"receiver.internal": ["127.0.0.1"], "other.internal": ["127.0.0.1"]})
    rig = make_rig(PUBLIC_ONLY.model_copy(update={"callback_allow": ["Receiver.Internal."]}), names)

    rig.subscribe(ALICE, receiver.url_for("receiver.internal"))
    rig.poll()

    assert receiver.wait_for(1)[0].headers["host"] == f"receiver.internal:{receiver.port}"
    with pytest.raises(InvalidInput, match="other.internal resolves to 127.0.0.1, a loopback address"):
        rig.subscribe(ALICE, receiver.url_for("other.internal"))


def test_a_name_that_moves_to_an_address_not_allowed_is_not_contacted_and_is_counted_and_logged_once(
    make_rig, receiver, caplog
):
    names = Names({"receiver.test": ["127.0.0.1"]})
    rig = make_rig(FAST, names)
    with CallbackReceiver("127.0.0.2", receiver.port) as elsewhere:  # loopback, not on the list
        created = rig.subscribe(ALICE, receiver.url_for("receiver.test"))
        rig.poll()
        receiver.wait_for(1)

        names.answers["receiver.test"] = ["127.0.0.2"]
        with caplog.at_level(logging.WARNING, logger="netapp.telemetry.notify"):
            rig.poll()
            rig.poll()

    assert elsewhere.received == [] and len(receiver.received) == 1
    stats = rig.manager.get(ALICE, created.id).notification_stats
    assert (stats.sent, stats.refused, stats.retried, stats.failed) == (1, 2, 0, 0)
    assert stats.last_error == (
        "refused: receiver.test resolves to 127.0.0.2, a loopback address; "
        "allowed: public addresses and 127.0.0.1/32"
    )
    # Only the notifier's warnings: a test before may have left other loggers at DEBUG.
    warnings = [r for r in caplog.records if r.name == "netapp.telemetry.notify" and r.levelno >= logging.WARNING]
    assert [record.getMessage() for record in warnings] == [
        f"telemetry: subscription {created.id}: notifications to {receiver.url_for('receiver.test')} "
        f"are not sent: {stats.last_error}"
    ]


def test_a_delivery_connects_to_the_address_it_checked_and_asks_the_resolver_once(make_rig, receiver):
    # Once at the subscription, once for the delivery: a third question would get the other address.
    names = Names({"receiver.test": ["127.0.0.1", "127.0.0.1", "127.0.0.2"]})
    rig = make_rig(FAST, names)
    with CallbackReceiver("127.0.0.2", receiver.port) as elsewhere:
        rig.subscribe(ALICE, receiver.url_for("receiver.test"))
        rig.poll()
        [notification] = receiver.wait_for(1)

    assert elsewhere.received == []
    assert names.asked == ["receiver.test", "receiver.test"]
    assert notification.headers["host"] == f"receiver.test:{receiver.port}"


def test_a_redirect_is_not_followed(rig, receiver):
    with CallbackReceiver() as elsewhere:
        receiver.location = elsewhere.url
        receiver.answer(307)
        created = rig.subscribe(ALICE, receiver.url)

        rig.poll()

    assert [attempt.status for attempt in receiver.received] == [307] and elsewhere.received == []
    stats = rig.manager.get(ALICE, created.id).notification_stats
    assert (stats.failed, stats.retried) == (1, 0)
    assert stats.last_error == "HTTP 307 (redirects are not followed)"


PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def test_proxies_named_in_the_environment_are_not_used(make_rig, receiver, monkeypatch):
    with CallbackReceiver() as proxy:
        for name in PROXY_VARIABLES:
            monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        httpx.post(receiver.url, content=b"{}")  # a client that trusts the environment goes through it
        assert len(proxy.received) == 1
        rig = make_rig()  # its workers start with this environment

        rig.subscribe(ALICE, receiver.url)
        rig.poll()

        receiver.wait_for(1)
        assert len(proxy.received) == 1


def test_a_proxy_named_in_the_settings_carries_the_notifications(make_rig, receiver):
    with CallbackReceiver() as proxy:
        rig = make_rig(FAST.model_copy(update={"proxy": f"http://127.0.0.1:{proxy.port}"}))

        rig.subscribe(ALICE, receiver.url)
        rig.poll()

        [through] = proxy.wait_for(1)
    assert through.path == receiver.url and receiver.received == []  # the absolute form: a proxy's


def test_over_tls_the_certificate_is_verified_for_the_name_and_no_connection_serves_two_names(
    make_rig, tmp_path, monkeypatch
):
    cert, key = self_signed(tmp_path, dns_name="receiver.test")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the CA the notifier trusts
    names = Names({"receiver.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    # One worker: the connection that took alice's notification is open when bob's is sent.
    rig = make_rig(FAST.model_copy(update={"workers": 1, "max_retries": 0}), names)
    with CallbackReceiver(tls=(cert, key)) as receiver:
        rig.subscribe(ALICE, receiver.url_for("receiver.test"))
        rig.poll()
        [first] = receiver.wait_for(1)
        other = rig.subscribe(BOB, receiver.url_for("other.test"))  # the same address

        rig.poll()

        assert len(receiver.wait_for(2)) == 2  # alice's second; bob's never got through
    assert first.headers["host"] == f"receiver.test:{receiver.port}"
    assert receiver.server_names == ["receiver.test", "other.test"]  # alice's second: the same connection
    stats = rig.manager.get(BOB, other.id).notification_stats
    assert stats.sent == 0 and "CERTIFICATE_VERIFY_FAILED" in stats.last_error
