"""MEC 011 DNS rules, lifecycle confirmations and termination subscriptions through the service
(netapp.mec.app_service) over the recording fake data plane: DNS rules are stored and served with
their state, a confirmation answers to the application's state, a termination confirmed removes the
instance with what it installed, callbacks go only where callbacks may, and another tenant sees
none of it."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Callable, Optional

import pytest
from pydantic import ValidationError

from netapp.core.config import SubscriptionSettings
from netapp.core.destinations import AllowList, Destinations, Resolver, resolve
from netapp.mec.app_models import AppTerminationConfirmation, AppTerminationNotificationSubscription, TerminationRequest
from netapp.mec.app_service import MecAppService, retry_delay_s
from netapp.mec.compiler import intent_ids
from netapp.mec.models import DnsRule, MecApplicationSpec
from netapp.mec.notify import TerminationNotifier
from netapp.service.contract import Conflict, InvalidInput, NotFound
from netapp.service.service import NetAppService
from tests.mec.test_etsi_conformance import etsi_validator
from tests.mec.test_service import installed
from tests.utils.callbacks import CallbackReceiver, Names
from tests.utils.mec import rule_model as rule
from tests.utils.service import ADMIN, ALICE, BOB, Clock, fake_service, few_policers_fake

APP = "video-1"
PUBLIC_CALLBACK = "http://8.8.8.8/mec/termination"  # a public literal: checked, never connected to here
# Retries in milliseconds, so that a test waits for three attempts, not three seconds; the
# receivers listen on 127.0.0.1, which the allow-list names. A request's timeout far above what a
# receiver on a loaded machine takes to answer: a slow answer is never a retry the test did not ask for.
FAST = SubscriptionSettings(workers=1, timeout_ms=30_000, max_retries=2, retry_interval_ms=10, max_retry_delay_ms=40,
                            callback_allow=["127.0.0.1/32"])


def dns(rule_id: str = "d1", **fields) -> DnsRule:
    body = {"dnsRuleId": rule_id, "domainName": "video.example.com", "ipAddressType": "IP_V4",
            "ipAddress": "192.0.2.7", "ttl": 300, "state": "ACTIVE"}
    body.update(fields)
    return DnsRule.model_validate(body)


def subscription(callback: str = PUBLIC_CALLBACK, **fields) -> AppTerminationNotificationSubscription:
    body = {"subscriptionType": "AppTerminationNotificationSubscription", "callbackReference": callback,
            "_links": {"self": {"href": "ignored"}}, "appInstanceId": APP}
    body.update(fields)
    return AppTerminationNotificationSubscription.model_validate(body)


def operation_schema_of(name: str) -> dict:
    """A schema of ETSI's MEC 011 document, by name."""
    return {"$ref": f"#/components/schemas/{name}"}


class Deadlines:
    """The graceful timeouts a service arms, fired when the test says (no waiting on a clock)."""

    def __init__(self):
        self.armed: list[list] = []  # [delay_s, action, cancelled]

    def __call__(self, delay_s: float, action: Callable[[], None]) -> Callable[[], None]:
        entry = [delay_s, action, False]
        self.armed.append(entry)
        return lambda: entry.__setitem__(2, True)

    def fire(self, index: int = -1) -> None:
        """What a timer does when the delay has passed: the action, cancelled or not (the action
        must tell)."""
        self.armed[index][1]()


def local_apps(service: NetAppService, settings: SubscriptionSettings = FAST, resolver: Resolver = resolve,
               schedule: Optional[Deadlines] = None, start: bool = True) -> MecAppService:
    """The service's MEC 011 application support with the test's notifier, DNS and deadlines."""
    notifier = TerminationNotifier(settings, Destinations(AllowList.of(settings.callback_allow), resolver))
    apps = MecAppService(service._state, service.mec, notifier, schedule or Deadlines())
    if start:
        apps.start()
    return apps


@pytest.fixture
def service(tmp_path) -> NetAppService:
    started = fake_service(tmp_path, few_policers_fake())
    started.mec.create_application(ADMIN, MecApplicationSpec(
        appInstanceId=APP, tenant="alice", trafficRules=[rule("r1")], dnsRules=[dns(), dns("d2", state="INACTIVE")]))
    yield started
    started.close()


def test_dns_rules_are_served_as_declared_and_put_with_their_state(service):
    assert service.mec_apps.list_dns_rules(ALICE, APP) == [dns(), dns("d2", state="INACTIVE")]
    service.mec_apps.put_dns_rule(ALICE, APP, "d1", dns(state="INACTIVE", ipAddress="192.0.2.8"))
    served = service.mec_apps.get_dns_rule(ALICE, APP, "d1")
    assert served.state == "INACTIVE" and served.ipAddress == "192.0.2.8"


@pytest.mark.parametrize("fields, field", [
    ({"ipAddress": "2001:db8::1"}, "ipAddress"),  # not of ipAddressType IP_V4
    ({"ipAddress": "video"}, "ipAddress"),
    ({"ttl": -1}, "ttl"),
    ({"dnsRuleId": "d2"}, "dnsRuleId"),  # not the rule of the path
])
def test_a_dns_rule_that_cannot_be_served_is_refused_naming_the_field(service, fields, field):
    with pytest.raises(InvalidInput) as refused:
        service.mec_apps.put_dns_rule(ALICE, APP, "d1", dns(**fields))
    assert refused.value.field == field
    assert service.mec_apps.get_dns_rule(ALICE, APP, "d1") == dns()


def test_a_declaration_with_a_bad_dns_rule_is_refused_naming_it(service):
    with pytest.raises(InvalidInput) as refused:
        service.mec.create_application(ADMIN, MecApplicationSpec(
            appInstanceId="other", tenant="alice", dnsRules=[dns(), dns(ipAddressType="IP_V6")]))
    assert refused.value.field == "dnsRules[1].ipAddress"


def test_confirm_ready_makes_the_application_ready(service):
    assert service.mec.get_application(ALICE, APP).state == "INSTANTIATED"
    service.mec_apps.confirm_ready(ALICE, APP)
    service.mec_apps.confirm_ready(ALICE, APP)  # again, after a restart of its own: the same
    assert service.mec.get_application(ALICE, APP).state == "READY"


def test_confirm_termination_without_a_termination_asked_is_a_conflict(service):
    with pytest.raises(Conflict) as refused:
        service.mec_apps.confirm_termination(ALICE, APP, AppTerminationConfirmation(operationAction="TERMINATING"))
    assert refused.value.field == "operationAction"
    assert service.mec.get_application(ALICE, APP)


def test_a_termination_asked_and_confirmed_removes_the_instance_and_its_rules(service):
    asked = service.mec_apps.request_termination(ADMIN, APP, 60)
    assert asked.termination == "TERMINATING"
    with pytest.raises(Conflict):
        service.mec_apps.confirm_ready(ALICE, APP)
    with pytest.raises(Conflict):
        service.mec_apps.confirm_termination(ALICE, APP, AppTerminationConfirmation(operationAction="STOPPING"))

    service.mec_apps.confirm_termination(ALICE, APP, AppTerminationConfirmation(operationAction="TERMINATING"))
    with pytest.raises(NotFound):
        service.mec.get_application(ADMIN, APP)
    assert all(service.store.get_intent("alice", one) is None for one in intent_ids(APP, "r1"))


def test_a_termination_asked_notifies_each_subscriber_with_etsis_notification(service):
    local = local_apps(service)
    with CallbackReceiver() as receiver:
        made = local.create_subscription(ALICE, APP, subscription(receiver.url))
        local.request_termination(ADMIN, APP, 45)
        (got,) = receiver.wait_for(1)
        local.close()
    body = got.json()
    etsi_validator(operation_schema_of("AppTerminationNotification")).validate(body)
    assert body["maxGracefulTimeout"] == 45 and body["operationAction"] == "TERMINATING"
    assert body["_links"]["subscription"]["href"].endswith(f"/applications/{APP}/subscriptions/{made}")
    assert body["_links"]["confirmTermination"]["href"] == f"/mec_app_support/v1/applications/{APP}/confirm_termination"


def test_subscriptions_are_made_listed_and_deleted(service):
    made = service.mec_apps.create_subscription(ALICE, APP, subscription())
    assert service.mec_apps.list_subscriptions(ALICE, APP) == [made]
    assert service.mec_apps.get_subscription(ALICE, APP, made) == PUBLIC_CALLBACK
    service.mec_apps.delete_subscription(ALICE, APP, made)
    assert service.mec_apps.list_subscriptions(ALICE, APP) == []
    with pytest.raises(NotFound):
        service.mec_apps.delete_subscription(ALICE, APP, made)


@pytest.mark.parametrize("callback", [
    "http://127.0.0.1:8080/cb",  # loopback
    "http://169.254.169.254/latest",  # the cloud metadata service
    "http://10.1.2.3/cb",  # private
    "ftp://8.8.8.8/cb",
    "http://user:secret@8.8.8.8/cb",
])
def test_a_callback_goes_only_where_callbacks_may(service, callback):
    with pytest.raises(InvalidInput) as refused:
        service.mec_apps.create_subscription(ALICE, APP, subscription(callback))
    assert refused.value.field == "callbackReference"
    assert service.mec_apps.list_subscriptions(ALICE, APP) == []


def test_a_subscription_is_of_its_type_and_application(service):
    for fields, field in (({"subscriptionType": "Other"}, "subscriptionType"), ({"appInstanceId": "x"}, "appInstanceId")):
        with pytest.raises(InvalidInput) as refused:
            service.mec_apps.create_subscription(ALICE, APP, subscription(**fields))
        assert refused.value.field == field


def test_another_tenant_sees_and_changes_none_of_it(service):
    made = service.mec_apps.create_subscription(ALICE, APP, subscription())
    for attempt in (
        lambda: service.mec_apps.list_dns_rules(BOB, APP),
        lambda: service.mec_apps.put_dns_rule(BOB, APP, "d1", dns(state="INACTIVE")),
        lambda: service.mec_apps.confirm_ready(BOB, APP),
        lambda: service.mec_apps.list_subscriptions(BOB, APP),
        lambda: service.mec_apps.delete_subscription(BOB, APP, made),
        lambda: service.mec_apps.create_subscription(BOB, APP, subscription()),
    ):
        with pytest.raises(NotFound):
            attempt()
    assert service.mec_apps.get_dns_rule(ALICE, APP, "d1") == dns()
    assert service.mec.get_application(ALICE, APP).state == "INSTANTIATED"
    assert service.mec_apps.list_subscriptions(ALICE, APP) == [made]


def test_deleting_the_application_takes_its_dns_rules_and_subscriptions(service):
    service.mec_apps.create_subscription(ALICE, APP, subscription())
    service.mec.delete_application(ADMIN, APP)
    service.mec.create_application(ADMIN, MecApplicationSpec(appInstanceId=APP, tenant="alice"))
    assert service.mec_apps.list_dns_rules(ALICE, APP) == []
    assert service.mec_apps.list_subscriptions(ALICE, APP) == []


# --- notification retries ------------------------------------------------------------------------


def test_a_termination_notification_is_queued_not_awaited_and_retried_until_taken(service):
    local = local_apps(service, start=False)  # no worker yet: the request cannot wait on a delivery
    with CallbackReceiver() as receiver:
        receiver.answer(503, 503)
        made = local.create_subscription(ALICE, APP, subscription(receiver.url))
        assert local.request_termination(ADMIN, APP, 60).termination == "TERMINATING"
        assert receiver.received == []
        local.start()
        receiver.wait_for(1)
        assert local.notifier.flush()
        local.close()
    assert [got.status for got in receiver.received] == [503, 503, 204]
    assert receiver.received[0].body == receiver.received[2].body  # the same notification again
    stats = local.delivery_stats(made)
    assert (stats.sent, stats.retried, stats.failed, stats.last_error) == (1, 2, 0, "")


@pytest.mark.parametrize("failure", ["HTTP 500", "connection refused"])
def test_a_termination_notification_failing_every_attempt_is_given_up_and_counted(service, failure):
    local = local_apps(service)
    with CallbackReceiver() as receiver:
        receiver.answer(500, 500, 500, 500)
        made = local.create_subscription(ALICE, APP, subscription(receiver.url))
        if failure == "connection refused":
            receiver.__exit__()  # nobody listens at the callback any more
        local.request_termination(ADMIN, APP, 60)
        assert local.notifier.flush()
        local.close()
    stats = local.delivery_stats(made)
    assert (stats.sent, stats.retried, stats.failed) == (0, FAST.max_retries, 1)
    if failure == "HTTP 500":
        assert [got.status for got in receiver.received] == [500] * (FAST.max_retries + 1)
    else:
        assert receiver.received == [] and "ConnectError" in stats.last_error
    assert service.mec.get_application(ADMIN, APP).termination == "TERMINATING"  # delivery or not


def test_a_termination_notification_goes_only_where_the_policy_allows_when_sent(service):
    with CallbackReceiver() as receiver:
        # Allowed when subscribed; then the name moves to an address the policy does not allow.
        names = Names({"subscriber.test": ["127.0.0.1", "192.0.2.1"]})
        local = local_apps(service, resolver=names)
        made = local.create_subscription(ALICE, APP, subscription(receiver.url_for("subscriber.test")))
        local.request_termination(ADMIN, APP, 60)
        assert local.notifier.flush()
        local.close()
        assert receiver.received == []
    stats = local.delivery_stats(made)
    assert (stats.sent, stats.refused, stats.retried) == (0, 1, 0)
    assert "192.0.2.1" in stats.last_error


# --- graceful termination ------------------------------------------------------------------------


def test_an_application_that_does_not_confirm_goes_when_its_graceful_timeout_passes(service):
    deadlines = Deadlines()
    local = local_apps(service, schedule=deadlines)
    local.request_termination(ADMIN, APP, 45)
    assert [entry[0] for entry in deadlines.armed] == [45]
    assert service.store.get_intent("alice", intent_ids(APP, "r1")[0]) is not None  # still in force
    deadlines.fire()
    with pytest.raises(NotFound):
        service.mec.get_application(ADMIN, APP)
    assert all(service.store.get_intent("alice", one) is None for one in intent_ids(APP, "r1"))
    local.close()


def test_a_confirmation_before_the_timeout_ends_it_and_the_timeout_does_nothing_more(service):
    deadlines = Deadlines()
    local = local_apps(service, schedule=deadlines)
    local.request_termination(ADMIN, APP, 45)
    local.confirm_termination(ALICE, APP, AppTerminationConfirmation(operationAction="TERMINATING"))
    assert deadlines.armed[0][2], "the graceful timeout is cancelled"
    service.mec.create_application(ADMIN, MecApplicationSpec(appInstanceId=APP, tenant="alice", trafficRules=[rule("r1")]))
    deadlines.fire()  # a timer that ran all the same: the new instance of the same id stays
    assert service.mec.get_application(ADMIN, APP).termination is None
    local.close()


def test_an_instance_deleted_while_terminating_takes_its_graceful_timeout_with_it(service):
    deadlines = Deadlines()
    local = local_apps(service, schedule=deadlines)
    local.request_termination(ADMIN, APP, 45)
    service.mec.delete_application(ADMIN, APP)
    assert deadlines.armed[0][2], "the graceful timeout is cancelled"
    local.close()


@pytest.mark.parametrize("timeout", [False, True, "60", 1.5, -1, 86_401])
def test_a_graceful_timeout_that_is_not_a_whole_number_of_seconds_in_range_is_refused(timeout):
    # JSON's false is not 0 s: a bool or a string is refused, not converted.
    with pytest.raises(ValidationError) as refused:
        TerminationRequest(maxGracefulTimeout=timeout)
    assert refused.value.errors()[0]["loc"] == ("maxGracefulTimeout",)


def test_asking_again_starts_the_graceful_timeout_over(service):
    deadlines = Deadlines()
    local = local_apps(service, schedule=deadlines)
    local.request_termination(ADMIN, APP, 45)
    local.request_termination(ADMIN, APP, 90)
    assert [(entry[0], entry[2]) for entry in deadlines.armed] == [(45, True), (90, False)]
    deadlines.fire(0)  # the first one's timer, cancelled too late: nothing
    assert service.mec.get_application(ADMIN, APP).termination == "TERMINATING"
    deadlines.fire(1)
    with pytest.raises(NotFound):
        service.mec.get_application(ADMIN, APP)
    local.close()


def test_the_graceful_timeout_runs_on_a_real_timer(service):
    removed = threading.Event()
    service.mec.on_application_removed(lambda app_instance_id: removed.set)
    service.mec_apps.request_termination(ADMIN, APP, 0)
    assert removed.wait(10), "the instance was not terminated when its graceful timeout passed"
    with pytest.raises(NotFound):
        service.mec.get_application(ADMIN, APP)


@pytest.mark.parametrize("ended_by", ["confirmation", "graceful timeout"])
def test_a_stop_takes_the_rules_out_of_the_data_plane_and_keeps_the_instance(service, ended_by):
    deadlines = Deadlines()
    local = local_apps(service, schedule=deadlines)
    service.mec_apps.confirm_ready(ALICE, APP)
    installed = installed_of(service)
    assert installed
    assert local.request_termination(ADMIN, APP, 45, "STOPPING").termination == "STOPPING"
    with pytest.raises(Conflict):
        local.confirm_termination(ALICE, APP, AppTerminationConfirmation(operationAction="TERMINATING"))
    if ended_by == "confirmation":
        local.confirm_termination(ALICE, APP, AppTerminationConfirmation(operationAction="STOPPING"))
        assert deadlines.armed[0][2], "the graceful timeout is cancelled"
    else:
        deadlines.fire()
    stopped = service.mec.get_application(ALICE, APP)
    assert (stopped.state, stopped.termination, stopped.terminationDeadline) == ("INSTANTIATED", None, None)
    assert [one.state for one in stopped.trafficRules] == ["INACTIVE"]
    assert installed_of(service) == []
    assert service.mec_apps.list_dns_rules(ALICE, APP)  # the rest of the instance stays

    service.mec.put_traffic_rule(ALICE, APP, "r1", rule("r1"))  # started again: its rule ACTIVE
    assert installed_of(service) == installed
    local.close()


def installed_of(service: NetAppService) -> list[str]:
    """The ids of the intents the application's rule r1 installed."""
    return [one for one in intent_ids(APP, "r1") if service.store.get_intent("alice", one) is not None]


def test_a_stop_is_notified_as_stopping(service):
    local = local_apps(service)
    with CallbackReceiver() as receiver:
        local.create_subscription(ALICE, APP, subscription(receiver.url))
        local.request_termination(ADMIN, APP, 30, "STOPPING")
        (got,) = receiver.wait_for(1)
        local.close()
    body = got.json()
    etsi_validator(operation_schema_of("AppTerminationNotification")).validate(body)
    assert (body["operationAction"], body["maxGracefulTimeout"]) == ("STOPPING", 30)


# --- graceful timeouts over a restart ------------------------------------------------------------


@pytest.fixture
def before_restart(tmp_path) -> NetAppService:
    """A service whose application confirmed ready, on a clock the test moves; the test restarts it."""
    started = fake_service(tmp_path, few_policers_fake(), clock=Clock())
    started.mec.create_application(ADMIN, MecApplicationSpec(appInstanceId=APP, tenant="alice", trafficRules=[rule("r1")]))
    started.mec_apps.confirm_ready(ALICE, APP)
    return started


def restart(tmp_path, before: NetAppService, **advance: float) -> NetAppService:
    """`before` closed, its clock moved by `advance`, and a service started again on its store and
    data plane (what a restart of `netapp serve` does)."""
    clock, fake = before._state.clock, before.dataplane._dpp
    before.close()
    clock.advance(**advance)
    return fake_service(tmp_path, fake, clock=clock)


@pytest.mark.parametrize("action", ["TERMINATING", "STOPPING"])
def test_a_graceful_timeout_that_passed_while_the_netapp_was_down_is_done_at_start(tmp_path, before_restart, action):
    asked_at = before_restart._state.now()
    asked = before_restart.mec_apps.request_termination(ADMIN, APP, 45, action)
    assert asked.terminationDeadline == asked_at + timedelta(seconds=45)
    assert installed(before_restart, "alice", APP, "r1")

    again = restart(tmp_path, before_restart, seconds=46)
    try:
        assert not installed(again, "alice", APP, "r1")
        if action == "TERMINATING":
            with pytest.raises(NotFound):
                again.mec.get_application(ADMIN, APP)
        else:
            stopped = again.mec.get_application(ALICE, APP)
            assert (stopped.state, stopped.termination, stopped.terminationDeadline) == ("INSTANTIATED", None, None)
            assert [one.state for one in stopped.trafficRules] == ["INACTIVE"]
    finally:
        again.close()


@pytest.mark.parametrize("ended_by", ["confirmation", "graceful timeout"])
def test_a_graceful_timeout_not_passed_at_a_restart_is_armed_again_for_what_is_left(tmp_path, before_restart, ended_by):
    deadline = before_restart.mec_apps.request_termination(ADMIN, APP, 45).terminationDeadline

    again = restart(tmp_path, before_restart, seconds=10)
    deadlines = Deadlines()
    local = local_apps(again, schedule=deadlines)  # started: takes over the stored timeouts
    try:
        pending = again.mec.get_application(ALICE, APP)
        assert (pending.termination, pending.terminationDeadline) == ("TERMINATING", deadline)
        assert installed(again, "alice", APP, "r1")  # in force until confirmed or timed out
        assert [entry[0] for entry in deadlines.armed] == [35]
        if ended_by == "confirmation":
            again.mec_apps.confirm_termination(ALICE, APP, AppTerminationConfirmation(operationAction="TERMINATING"))
            assert deadlines.armed[0][2], "the graceful timeout is cancelled"
        else:
            deadlines.fire()
        with pytest.raises(NotFound):
            again.mec.get_application(ADMIN, APP)
        assert not installed(again, "alice", APP, "r1")
    finally:
        local.close()
        again.close()



# --- an operation due that fails is tried again --------------------------------------------------


@pytest.fixture
def terminating(service):
    """The application asked to terminate within 45 s, through a service whose timers the test fires."""
    deadlines = Deadlines()
    local = local_apps(service, schedule=deadlines)
    local.request_termination(ADMIN, APP, 45)
    yield local, deadlines
    local.close()


def test_a_termination_that_fails_when_due_is_tried_again_with_growing_delays_until_done(service, terminating):
    _, deadlines = terminating
    service.dataplane._dpp.fail("rules_delete", times=3)  # the data plane refuses to remove the rule
    for _ in range(3):
        deadlines.fire()
        assert service.mec.get_application(ALICE, APP).termination == "TERMINATING"
        assert installed_of(service) == intent_ids(APP, "r1")[:1]
    assert [entry[0] for entry in deadlines.armed] == [45, 1, 2, 4]
    deadlines.fire()
    with pytest.raises(NotFound):
        service.mec.get_application(ADMIN, APP)
    assert installed_of(service) == []
    assert len(deadlines.armed) == 4, "nothing is armed once done"


def test_a_confirmation_cancels_the_retry_of_a_failed_termination(service, terminating):
    local, deadlines = terminating
    service.dataplane._dpp.fail("rules_delete")
    deadlines.fire()
    assert [entry[0] for entry in deadlines.armed] == [45, 1]
    local.confirm_termination(ALICE, APP, AppTerminationConfirmation(operationAction="TERMINATING"))
    assert deadlines.armed[1][2], "the retry is cancelled"
    with pytest.raises(NotFound):
        service.mec.get_application(ADMIN, APP)


def test_retries_wait_twice_as_long_each_time_up_to_a_minute():
    assert [retry_delay_s(n) for n in (1, 2, 3, 6, 7, 8, 1000)] == [1, 2, 4, 32, 60, 60, 60]


def test_a_termination_overdue_at_start_that_fails_is_done_by_the_running_service(tmp_path, before_restart):
    """The service's own timer (a real one): the retry a second after the failed attempt at start."""
    before_restart.mec_apps.request_termination(ADMIN, APP, 45)
    before_restart.dataplane._dpp.fail("rules_delete")  # armed for the start after the restart

    again = restart(tmp_path, before_restart, seconds=46)
    try:
        removed = threading.Event()
        again.mec.on_application_removed(lambda app_instance_id: removed.set)
        if not removed.is_set() and installed(again, "alice", APP, "r1"):  # not yet retried
            assert ("failed", "rules_delete") in again.dataplane._dpp.calls, "the attempt at start failed"
            assert removed.wait(timeout=30), "the running service did not try again"
        with pytest.raises(NotFound):
            again.mec.get_application(ADMIN, APP)
        assert not installed(again, "alice", APP, "r1")
    finally:
        again.close()
