"""/api/v1/subscriptions and /api/v1/telemetry/stream on a real server, over the service on FakeDpp
with a collector polled by the test: creation (the secret once), reads, deletes, scopes, tenant
isolation, refusals naming the field, notifications a real receiver verifies, expiry, the stream."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from netapp.api.main import create_app
from netapp.core.config import Settings
from netapp.core.destinations import resolve
from netapp.service.contract import Principal
from netapp.telemetry.collector import Collector
from netapp.telemetry.runtime import Telemetry
from netapp.telemetry.notify import Notifier
from netapp.telemetry.subscription_store import SubscriptionStore
from netapp.telemetry.subscriptions import SUBSCRIPTIONS_DB, SubscriptionManager
from tests.api.conftest import token_of
from tests.api.fake_service import FakeIntentService
from tests.api.problems import assert_problem
from tests.api.server import ServerThread
from tests.utils.callbacks import CallbackReceiver, Names
from tests.utils.service import ADMIN, WRITER_SCOPES, fake_service, intent

SECOND = 1_000_000_000
TENANT_A = Principal("tenant-a", WRITER_SCOPES, "tenant-a")
TENANT_B = Principal("tenant-b", WRITER_SCOPES, "tenant-b")
PATH = "/api/v1/subscriptions"
STREAM = "/api/v1/telemetry/stream"


class PollClock:
    """The collector's clock: real time at the start, then one second per poll the test makes."""

    def __init__(self) -> None:
        self.now = time.time_ns()

    def __call__(self) -> int:
        return self.now


class Live:
    """A NetApp as `netapp serve` runs it, except that the test makes the polls."""

    def __init__(self, state_dir: Path, tokens_path: Path):
        self.service = fake_service(state_dir)
        self.service.create_intent(TENANT_A, intent("voice", 5004))
        self.service.create_intent(TENANT_B, intent("voice", 5006))
        settings = Settings(
            tokens_file=tokens_path,
            state_dir=state_dir,
            telemetry={
                "node": "edge-1",
                "subscriptions": {
                    "retry_interval_ms": 10,
                    "max_retries": 2,
                    "max_per_tenant": 20,
                    "callback_allow": ["127.0.0.1/32"],  # the test's receivers; nothing else local
                },
                "stream": {"keepalive_s": 0.2, "max_clients": 2},
            },
        )
        self.clock = PollClock()
        self.collector = Collector(self.service, node="edge-1", interval_s=1.0, clock_ns=self.clock)
        self.names = Names({}, otherwise=resolve)  # the DNS the notifier asks; a test adds names
        self.subscriptions = SubscriptionManager(
            SubscriptionStore.open(state_dir / SUBSCRIPTIONS_DB),
            settings.telemetry.subscriptions,
            interval_s=settings.telemetry.interval_s,
            notifier=Notifier(settings.telemetry.subscriptions, resolver=self.names),
        )
        self.telemetry = Telemetry(self.collector, self.subscriptions, settings.telemetry.stream)
        self.subscriptions.start()
        self.telemetry.streams.start()  # not Telemetry.start: the test makes the polls
        self.server = ServerThread(create_app(settings, self.service, self.telemetry))

    def poll(self) -> None:
        self.clock.now += SECOND
        self.collector.poll_once()
        assert self.subscriptions.flush()

    def close(self) -> None:
        self.subscriptions.stop()
        self.service.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, tokens_path: Path) -> Iterator[Live]:
    running = Live(tmp_path_factory.mktemp("live"), tokens_path)
    with running.server:
        yield running
    running.close()


@pytest.fixture
def call(live: Live) -> Iterator[Any]:
    """call("tenant-a") -> an httpx client of the live NetApp with that caller's token."""
    opened: list[httpx.Client] = []

    def make(name: str) -> httpx.Client:
        client = httpx.Client(
            base_url=live.server.url, headers={"Authorization": f"Bearer {token_of(name)}"}, timeout=10
        )
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()
    for item in live.subscriptions.list_subscriptions(ADMIN):  # every test starts with none
        live.subscriptions.delete(ADMIN, item.id)


@pytest.fixture
def receiver() -> Iterator[CallbackReceiver]:
    with CallbackReceiver() as running:
        yield running


def subscription(callback: str, **fields: Any) -> dict[str, Any]:
    body = {
        "subscriptionType": "TelemetryNotificationSubscription",
        "callbackReference": callback,
        "period": 1,
    }
    body.update(fields)
    return {name: value for name, value in body.items() if value is not None}


# --- the resource ---------------------------------------------------------------------------------


def test_creating_answers_201_with_the_location_and_the_secret_which_no_read_shows_again(call, receiver):
    tenant_a = call("tenant-a")

    created = tenant_a.post(PATH, json=subscription(receiver.url, filterCriteria={"intents": ["voice"]}))

    assert created.status_code == 201, created.text
    body = created.json()
    location = f"{PATH}/{body['id']}"
    assert created.headers["location"] == location
    assert body["_links"] == {"self": {"href": location}}
    assert body["tenant"] == "tenant-a" and body["callbackReference"] == receiver.url
    assert body["filterCriteria"] == {"intents": ["voice"]}  # what is not there is left out
    assert "threshold" not in body and "expiryDeadline" not in body
    assert len(body["secret"]) >= 32
    read = tenant_a.get(location).json()
    assert "secret" not in read and read["id"] == body["id"]
    assert read["notificationStats"] == {
        "sent": 0,
        "retried": 0,
        "failed": 0,
        "dropped": 0,
        "refused": 0,
        "lastSequence": 0,
    }
    listed = tenant_a.get(PATH).json()
    assert listed["_links"]["self"] == {"href": PATH}
    assert listed["_links"]["subscriptions"] == [
        {"href": location, "subscriptionType": "TelemetryNotificationSubscription"}
    ]


def test_a_notification_reaches_the_callback_signed_with_the_secret_and_holds_the_tenants_points(
    live, call, receiver
):
    created = call("tenant-a").post(PATH, json=subscription(receiver.url)).json()

    live.poll()

    [notification] = receiver.wait_for(1)
    assert notification.verifies(created["secret"])
    body = notification.json()
    assert body["_links"]["subscription"]["href"] == f"{PATH}/{created['id']}"
    assert {(p["measurement"], p["tags"]["tenant"]) for p in body["points"]} == {("dpp_intent", "tenant-a")}
    stats = call("tenant-a").get(f"{PATH}/{created['id']}").json()["notificationStats"]
    assert stats["sent"] == 1 and stats["lastSequence"] == body["sequence"]


def test_a_subscription_past_its_expiry_deadline_is_told_and_gone(live, call, receiver):
    tenant_a = call("tenant-a")
    # Far enough ahead that a slow create on a loaded machine still takes it (a past deadline is a
    # 400); the expiry then comes within a second of it, waited for with room to spare.
    deadline = {"seconds": int(time.time()) + 4, "nanoSeconds": 0}
    created = tenant_a.post(PATH, json=subscription(receiver.url, expiryDeadline=deadline)).json()
    assert created["expiryDeadline"] == deadline

    expiry = receiver.wait_for(1, timeout_s=60)[0].json()  # no poll needed: the manager checks every second

    assert expiry["notificationType"] == "ExpiryNotification" and expiry["expiryDeadline"] == deadline
    assert_problem(tenant_a.get(f"{PATH}/{created['id']}"), 404)


def test_deleting_answers_204_then_the_subscription_is_not_found(call, receiver):
    tenant_a = call("tenant-a")
    location = tenant_a.post(PATH, json=subscription(receiver.url)).headers["location"]

    assert tenant_a.delete(location).status_code == 204

    assert_problem(tenant_a.get(location), 404)
    assert_problem(tenant_a.delete(location), 404)


def test_another_tenants_subscription_is_not_found_and_not_listed_but_an_admin_sees_it(call, receiver):
    location = call("tenant-a").post(PATH, json=subscription(receiver.url)).headers["location"]
    tenant_b = call("tenant-b")

    assert_problem(tenant_b.get(location), 404)
    assert_problem(tenant_b.delete(location), 404)
    assert tenant_b.get(PATH).json()["_links"]["subscriptions"] == []
    assert call("admin").get(location).json()["tenant"] == "tenant-a"
    assert call("tenant-a").get(location).status_code == 200  # still there


def test_subscribing_and_deleting_need_intents_write_and_read_is_enough_to_list_and_read(call, receiver):
    refused = assert_problem(call("reader-a").post(PATH, json=subscription(receiver.url)), 403)
    assert refused["required_scope"] == "intents:write"
    location = call("tenant-a").post(PATH, json=subscription(receiver.url)).headers["location"]
    reader = call("reader-a")

    assert reader.get(PATH).json()["_links"]["subscriptions"][0]["href"] == location
    assert reader.get(location).status_code == 200
    assert assert_problem(reader.delete(location), 403)["required_scope"] == "intents:write"
    assert call("writer-a").delete(location).status_code == 204  # intents:write alone deletes
    assert assert_problem(call("writer-a").get(PATH), 403)["required_scope"] == "read"


# --- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "status", "name"),
    [
        ({"filterCriteria": {"measurements": ["dpp_cpu"]}}, 403, "filterCriteria.measurements"),
        (
            {"period": None, "threshold": {"measurement": "dpp_verdict", "field": "packets", "value": 1}},
            403,
            "threshold.measurement",
        ),
        ({"period": 0.5}, 400, "period"),
        ({"period": None}, 400, "threshold"),
        ({"threshold": {"measurement": "dpp_intent", "field": "packets_rate", "value": 9}}, 400, "period"),
        ({"callbackReference": "ftp://example.com/"}, 400, "callbackReference"),
        (
            {"period": None, "threshold": {"measurement": "dpp_intent", "field": "pkts", "value": 1}},
            400,
            "threshold.field",
        ),
        ({"expiryDeadline": {"seconds": 1}}, 400, "expiryDeadline"),
        ({"websockNotifConfig": {"websocketUri": "ws://example.com/"}}, 400, "websockNotifConfig"),
        ({"subscriptionType": "BwInfoSubscription"}, 400, "subscriptionType"),
    ],
)
def test_a_subscription_that_cannot_be_served_is_refused_naming_the_field(
    call, receiver, fields, status, name
):
    response = call("tenant-a").post(PATH, json=subscription(receiver.url, **fields))

    problem = assert_problem(response, status)
    assert name in [param["name"] for param in problem["invalid-params"]], problem


ALLOWED = "allowed: public addresses and 127.0.0.1/32"


@pytest.mark.parametrize(
    ("callback", "reason"),
    [
        ("http://169.254.169.254/latest/meta-data/", f"169.254.169.254 is a link-local address; {ALLOWED}"),
        ("http://10.0.0.5:8080/", f"10.0.0.5 is a private address; {ALLOWED}"),
        ("http://127.0.0.2:8080/", f"127.0.0.2 is a loopback address; {ALLOWED}"),  # beside the list's
        ("http://[::1]:8080/", f"::1 is a loopback address; {ALLOWED}"),
        ("http://0.0.0.0:8080/", f"0.0.0.0 is an unspecified address (never allowed); {ALLOWED}"),
        ("http://2130706433:8080/", "2130706433 is an IPv4 address in an unusual spelling"),
        ("http://0x7f.1:8080/", "0x7f.1 is an IPv4 address in an unusual spelling"),
    ],
)
def test_a_callback_to_an_address_that_is_not_allowed_is_refused_naming_the_field_and_what_is(
    call, callback, reason
):
    problem = assert_problem(call("tenant-a").post(PATH, json=subscription(callback)), 400)

    [param] = problem["invalid-params"]
    assert param["name"] == "callbackReference" and param["reason"].startswith(reason), param
    assert call("tenant-a").get(PATH).json()["_links"]["subscriptions"] == []


def test_a_notification_to_a_name_that_moved_to_an_address_not_allowed_is_not_sent_and_says_why(
    live, call, receiver
):
    live.names.answers["receiver.test"] = ["127.0.0.1"]
    callback = receiver.url_for("receiver.test")
    created = call("tenant-a").post(PATH, json=subscription(callback)).json()
    live.names.answers["receiver.test"] = ["10.0.0.5"]

    live.poll()

    stats = call("tenant-a").get(f"{PATH}/{created['id']}").json()["notificationStats"]
    assert (stats["sent"], stats["refused"], stats["failed"]) == (0, 1, 0) and receiver.received == []
    assert stats["lastError"] == f"refused: receiver.test resolves to 10.0.0.5, a private address; {ALLOWED}"


def test_an_admin_may_subscribe_to_node_wide_measurements(call, receiver):
    body = subscription(receiver.url, filterCriteria={"measurements": ["dpp_cpu", "dpp_verdict"]})

    assert call("admin").post(PATH, json=body).status_code == 201


def test_subscriptions_and_the_stream_answer_503_when_telemetry_is_disabled(tokens_path, tmp_path):
    settings = Settings(tokens_file=tokens_path, state_dir=tmp_path, telemetry={"enabled": False})
    headers = {"Authorization": f"Bearer {token_of('tenant-a')}"}
    with ServerThread(create_app(settings, FakeIntentService(), None)) as server:
        with httpx.Client(base_url=server.url, headers=headers, timeout=10) as tenant_a:
            assert_problem(tenant_a.get(PATH), 503)
            assert_problem(tenant_a.post(PATH, json=subscription("http://127.0.0.1:9/")), 503)
            assert_problem(tenant_a.get(STREAM), 503)


# --- the event stream -----------------------------------------------------------------------------


def read_events(response: httpx.Response, live: Live, wanted: int) -> list[tuple[str, Any]]:
    """Events (and comments, as ("comment", text)) of an open stream; polls once it has begun."""
    events: list[tuple[str, Any]] = []
    name = None
    for line in response.iter_lines():
        if line.startswith("retry:"):
            threading.Thread(target=live.poll).start()
        elif line.startswith(":"):
            events.append(("comment", line[1:].strip()))
        elif line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[len("data: ") :])))
        if len(events) >= wanted:
            return events
    raise AssertionError(f"the stream ended after {events}")


def test_the_stream_sends_each_poll_with_the_callers_points_then_keepalives(live, call):
    with call("tenant-b").stream("GET", STREAM) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        (name, poll), keepalive = read_events(response, live, 2)

    assert name == "poll" and poll["node"] == "edge-1" and poll["seq"] >= 1
    assert {(p["measurement"], p["tags"]["tenant"]) for p in poll["points"]} == {("dpp_intent", "tenant-b")}
    assert keepalive == ("comment", "keep-alive")


def test_the_stream_filters_by_the_query_and_an_admin_sees_the_node(live, call):
    with call("admin").stream(
        "GET", STREAM, params={"measurement": "dpp_cpu", "intent": "voice"}
    ) as response:
        [(_, poll)] = read_events(response, live, 1)
    with call("admin").stream("GET", STREAM, params={"intent": "voice"}) as response:
        [(_, voices)] = read_events(response, live, 1)

    assert {p["measurement"] for p in poll["points"]} <= {"dpp_cpu"}
    assert {p["tags"]["tenant"] for p in voices["points"] if p["measurement"] == "dpp_intent"} == {
        "tenant-a",
        "tenant-b",
    }


def test_the_stream_refuses_node_wide_measurements_to_a_tenant_and_unknown_parameters(call):
    tenant_a = call("tenant-a")

    problem = assert_problem(tenant_a.get(STREAM, params={"measurement": "dpp_verdict"}), 403)
    assert problem["invalid-params"][0]["name"] == "measurement"
    assert_problem(tenant_a.get(STREAM, params={"tenant": "tenant-b"}), 400)
    assert_problem(call("writer-a").get(STREAM), 403)


def test_streams_beyond_the_most_allowed_are_refused_and_a_closed_one_frees_its_place(live, call):
    first, second, third = call("tenant-a"), call("tenant-b"), call("admin")
    with first.stream("GET", STREAM) as one, second.stream("GET", STREAM) as two:
        # Kept: an iterator dropped at once would close its stream when it is collected.
        lines = one.iter_lines(), two.iter_lines()
        assert [next(line) for line in lines] == ["retry: 5000"] * 2  # both are being served

        with third.stream("GET", STREAM) as refused:  # a stream, so that a bug cannot hang the test
            assert refused.status_code == 429
            problem = assert_problem(refused.read() and refused, 429)

    assert "max_clients" in problem["detail"]
    deadline = time.monotonic() + 5
    while live.telemetry.streams.clients and time.monotonic() < deadline:
        time.sleep(0.02)
    assert live.telemetry.streams.clients == 0
