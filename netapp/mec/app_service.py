"""MEC 011 application support beyond traffic rules: DNS rules (stored and served as written, state
included: the NetApp runs no DNS server, so an INACTIVE rule is one a platform's DNS must not
answer), confirm_ready and confirm_termination against the application's lifecycle state, and
subscriptions to the application's termination.

Who: as for traffic rules (netapp.mec.service), an application's tenant or an administrator; other
tenants get 404s. A callback goes only where the operator's allow-list lets callbacks go
(netapp.core.destinations: public addresses and telemetry.subscriptions.callback_allow), checked
when the subscription is made.

A termination is asked by an administrator (`request_termination`, with a maxGracefulTimeout): the
application's subscribers get an AppTerminationNotification (operationAction TERMINATING, retried:
netapp.mec.notify), the instance's termination is TERMINATING from then on, and it goes, as an
administrator's DELETE takes it (rules, allocations, DNS rules, subscriptions), when the application
confirms with confirm_termination or, at the latest, when maxGracefulTimeout has passed (MEC 011:
the graceful timeout bounds the application's own termination actions). When it passes is stored
with the termination (the instance's terminationDeadline) and awaited by a timer: a restart of the
NetApp arms the timer again for what is left, and does at start what passed while it was down, so
that no application's rules stay in force for ever because the NetApp restarted meanwhile. An
operation that fails when due (at start, or when its timer fires: the data plane refused a write)
is tried again by the running service, after 1 s, then twice as long each time up to a minute,
until it is done, confirmed or deleted, or the service closes (the next start tries it again).
"""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import datetime, timedelta
from typing import Any, Callable, Optional

import httpx

from netapp.core.destinations import DestinationRefused
from netapp.mec import app_store
from netapp.mec.app_models import (
    READY,
    TERMINATING,
    TERMINATION_SUBSCRIPTION,
    AppTerminationConfirmation,
    AppTerminationNotificationSubscription,
)
from netapp.mec.models import MEC_APP_SUPPORT, DnsRule, MecApplication
from netapp.mec.notify import TerminationNotifier
from netapp.mec.service import MecService
from netapp.service.contract import Conflict, Forbidden, InvalidInput, NotFound, Principal, Scope
from netapp.service.state import ServiceState
from netapp.telemetry.notify import DeliveryStats
from netapp.telemetry.pinned import check_url
from netapp.telemetry.subscription_models import callback_refusal

log = logging.getLogger("netapp.mec")

MAX_SUBSCRIPTIONS = 16  # termination subscriptions one application instance may hold
# Who does a termination once its graceful timeout passed: the platform, on the administrator's
# earlier request (which may predate a restart, so the administrator is not known any more).
GRACEFUL_TIMEOUT = Principal(tenant="", scopes=frozenset({Scope.ADMIN}), name="mec-graceful-timeout")

Schedule = Callable[[float, Callable[[], None]], Callable[[], None]]
"""(delay in seconds, what to do then) -> what cancels it."""

RETRY_FIRST_S = 1.0  # an operation due that failed is tried again after this, then twice as long
RETRY_MAX_S = 60.0  # each time, up to this


def retry_delay_s(failures: int) -> float:
    """How long after its `failures`-th failure (1 on) an operation due is tried again."""
    return min(RETRY_FIRST_S * 2 ** min(failures - 1, 32), RETRY_MAX_S)


def timer_schedule(delay_s: float, action: Callable[[], None]) -> Callable[[], None]:
    """`action` in a timer thread of its own after `delay_s`."""
    timer = threading.Timer(delay_s, action)
    timer.name = "mec-graceful-timeout"
    timer.daemon = True
    timer.start()
    return timer.cancel


class MecAppService:
    """DNS rules, lifecycle confirmations and termination subscriptions of application instances."""

    def __init__(
        self, state: ServiceState, mec: MecService, notifier: Optional[TerminationNotifier] = None,
        schedule: Schedule = timer_schedule,
    ):
        """`notifier`: one over telemetry.subscriptions' settings unless given; `schedule`: how a
        graceful timeout is awaited (a timer thread unless given)."""
        self._state = state
        self._mec = mec
        self.notifier = notifier or TerminationNotifier(state.settings.telemetry.subscriptions)
        self._destinations = self.notifier.destinations
        self._schedule = schedule
        # application -> (its request, what cancels its graceful timeout)
        self._deadlines: dict[str, tuple[object, Callable[[], None]]] = {}
        self._deadlines_lock = threading.Lock()
        self._closed = False  # no graceful timeout, nor retry, is armed any more
        # However the instance goes (confirmed, DELETE), its graceful timeout has nothing left to end.
        mec.on_application_removed(lambda app_instance_id: lambda: self._cancel_deadline(app_instance_id))

    def start(self) -> None:
        """Start the notifier, and take over the graceful timeouts the store holds (a restart)."""
        self.notifier.start()
        self._resume_deadlines()

    def close(self) -> None:
        with self._deadlines_lock:
            armed, self._deadlines, self._closed = list(self._deadlines.values()), {}, True
        for _, cancel in armed:
            cancel()
        self.notifier.close()

    # --- DNS rules -------------------------------------------------------------------------------

    def list_dns_rules(self, who: Principal, app_instance_id: str) -> list[DnsRule]:
        self._state.require(who, Scope.READ)
        return self._mec.application_of(who, app_instance_id).dnsRules

    def get_dns_rule(self, who: Principal, app_instance_id: str, dns_rule_id: str) -> DnsRule:
        self._state.require(who, Scope.READ)
        self._mec.application_of(who, app_instance_id)
        return self._dns_rule(app_instance_id, dns_rule_id)

    def put_dns_rule(self, who: Principal, app_instance_id: str, dns_rule_id: str, rule: DnsRule) -> DnsRule:
        """Replace a DNS rule (its state too: ACTIVE or INACTIVE, served as it is)."""
        self._state.require(who, Scope.INTENTS_WRITE)
        if rule.dnsRuleId != dns_rule_id:
            raise InvalidInput(
                f"dnsRuleId {rule.dnsRuleId!r} differs from the rule being replaced ({dns_rule_id!r})", field="dnsRuleId"
            )
        check_dns_rule(rule)
        with self._state.store.transaction():
            self._mec.application_of(who, app_instance_id)
            self._dns_rule(app_instance_id, dns_rule_id)
            app_store.replace_dns_rule(self._state.store, app_instance_id, rule, self._state.now())
        return rule

    def _dns_rule(self, app_instance_id: str, dns_rule_id: str) -> DnsRule:
        rule = app_store.get_dns_rule(self._state.store, app_instance_id, dns_rule_id)
        if rule is None:
            raise NotFound(f"application instance {app_instance_id!r} has no DNS rule {dns_rule_id!r}")
        return rule

    # --- lifecycle -------------------------------------------------------------------------------

    def confirm_ready(self, who: Principal, app_instance_id: str) -> None:
        """The application is up (again, after a restart of its own: the same answer)."""
        self._state.require(who, Scope.INTENTS_WRITE)
        with self._state.store.transaction():
            application = self._mec.application_of(who, app_instance_id)
            if application.termination is not None:
                raise Conflict(
                    f"application instance {app_instance_id!r} is being asked to stop ({application.termination}): "
                    "it confirms the termination, not its readiness", field="indication"
                )
            app_store.set_state(self._state.store, app_instance_id, READY, None)

    def request_termination(
        self, who: Principal, app_instance_id: str, max_graceful_timeout_s: int, operation_action: str = TERMINATING
    ) -> MecApplication:
        """An administrator asks the application to terminate (or stop: `operation_action`): its
        subscribers are notified (queued, retried: netapp.mec.notify) and it has
        `max_graceful_timeout_s` to confirm with confirm_termination; when it does, or when they
        pass, the operation is done (`_end`). Asking again starts the graceful timeout over."""
        self._state.require(who, Scope.ADMIN)
        with self._state.store.transaction():
            application = self._mec.application_of(who, app_instance_id)
            deadline = self._state.now() + timedelta(seconds=max_graceful_timeout_s)
            app_store.set_state(self._state.store, app_instance_id, application.state, operation_action, deadline)
            subscriptions = app_store.list_subscriptions(self._state.store, app_instance_id)
        self._arm_deadline(app_instance_id, max_graceful_timeout_s)
        self.notifier.send([
            (subscription_id, callback,
             termination_notification(app_instance_id, subscription_id, max_graceful_timeout_s, operation_action))
            for subscription_id, callback in subscriptions
        ])
        return self._mec.application_of(who, app_instance_id)

    def delivery_stats(self, subscription_id: str) -> Optional[DeliveryStats]:
        """How the termination notifications of a subscription went (None: none was sent)."""
        return self.notifier.stats_of(subscription_id)

    def confirm_termination(self, who: Principal, app_instance_id: str, confirmation: AppTerminationConfirmation) -> None:
        """The application is ready to go: the termination asked of it is done (the instance, its
        rules and allocations removed). 409 when none was asked, or another operation was."""
        self._state.require(who, Scope.INTENTS_WRITE)
        application = self._mec.application_of(who, app_instance_id)
        if application.termination is None:
            raise Conflict(f"no termination of application instance {app_instance_id!r} was asked",
                           field="operationAction")
        if confirmation.operationAction != application.termination:
            raise Conflict(
                f"{confirmation.operationAction}: the operation asked of the instance is {application.termination}",
                field="operationAction",
            )
        self._end(who, application)

    def _end(self, who: Principal, application: MecApplication) -> None:
        """Do the operation asked of the instance. TERMINATING: the instance goes as a DELETE takes
        it (its graceful timeout cancelled with it). STOPPING: its rules leave the data plane
        (INACTIVE), the instance stays, INSTANTIATED until it confirms ready again."""
        app_instance_id = application.appInstanceId
        if application.termination == TERMINATING:
            self._mec.remove_application(who, app_instance_id)
            return
        self._cancel_deadline(app_instance_id)
        self._mec.stop_application(who, app_instance_id)

    def _resume_deadlines(self) -> None:
        """The graceful timeouts stored by an earlier run: those that passed meanwhile are done now,
        the others armed for what is left of them."""
        for app_instance_id, deadline in app_store.pending_terminations(self._state.store):
            left_s = (deadline - self._state.now()).total_seconds()
            if left_s <= 0:
                self._graceful_timeout_passed(app_instance_id, deadline)
            else:
                self._arm_deadline(app_instance_id, left_s)

    def _arm_deadline(self, app_instance_id: str, timeout_s: float) -> None:
        """After `timeout_s`, do the operation asked of the instance unless it confirmed first."""
        self._arm(app_instance_id, timeout_s, self._state.now() + timedelta(seconds=timeout_s), 0)

    def _arm(self, app_instance_id: str, delay_s: float, deadline: datetime, failures: int) -> None:
        """After `delay_s`, the operation due at `deadline` (which failed `failures` times so far),
        unless the instance confirmed, was asked again or went first."""
        arming = object()  # which request (or retry) this is

        def passed() -> None:
            with self._deadlines_lock:
                if self._deadlines.get(app_instance_id, (None,))[0] is not arming:
                    return  # confirmed, asked again or closed meanwhile
                del self._deadlines[app_instance_id]
            self._graceful_timeout_passed(app_instance_id, deadline, failures)

        self._cancel_deadline(app_instance_id)
        with self._deadlines_lock:  # held: a timeout of 0 must find its deadline armed
            if not self._closed:
                self._deadlines[app_instance_id] = (arming, self._schedule(delay_s, passed))

    def _cancel_deadline(self, app_instance_id: str) -> None:
        with self._deadlines_lock:
            _, cancel = self._deadlines.pop(app_instance_id, (None, None))
        if cancel is not None:
            cancel()

    def _graceful_timeout_passed(self, app_instance_id: str, deadline: datetime, failures: int = 0) -> None:
        try:
            application = self._mec.application_of(GRACEFUL_TIMEOUT, app_instance_id)
            if application.termination is None:
                return
            self._end(GRACEFUL_TIMEOUT, application)
        except NotFound:
            return  # deleted meanwhile (an administrator's DELETE)
        except Exception:  # a timer thread, or start(): nobody else would hear of it
            delay_s = retry_delay_s(failures + 1)
            log.exception("MEC 011: application instance %s: the operation asked, due at %s, failed (%d times): "
                          "tried again in %.0f s", app_instance_id, deadline.isoformat(), failures + 1, delay_s)
            self._arm(app_instance_id, delay_s, deadline, failures + 1)
            return
        log.warning("MEC 011: application instance %s did not confirm by %s: %s done all the same",
                    app_instance_id, deadline.isoformat(), application.termination)

    # --- termination subscriptions ---------------------------------------------------------------

    def list_subscriptions(self, who: Principal, app_instance_id: str) -> list[str]:
        """The ids of the application's termination subscriptions."""
        self._state.require(who, Scope.READ)
        self._mec.application_of(who, app_instance_id)
        return [subscription_id for subscription_id, _ in app_store.list_subscriptions(self._state.store, app_instance_id)]

    def get_subscription(self, who: Principal, app_instance_id: str, subscription_id: str) -> str:
        """The callback of one of the application's termination subscriptions."""
        self._state.require(who, Scope.READ)
        self._mec.application_of(who, app_instance_id)
        for known, callback in app_store.list_subscriptions(self._state.store, app_instance_id):
            if known == subscription_id:
                return callback
        raise NotFound(f"application instance {app_instance_id!r} has no subscription {subscription_id!r}")

    def create_subscription(
        self, who: Principal, app_instance_id: str, request: AppTerminationNotificationSubscription
    ) -> str:
        """Subscribe a callback to the application's termination; its id."""
        self._state.require(who, Scope.INTENTS_WRITE)
        if request.subscriptionType != TERMINATION_SUBSCRIPTION:
            raise InvalidInput(f"{request.subscriptionType!r}: this resource takes {TERMINATION_SUBSCRIPTION}",
                               field="subscriptionType")
        if request.appInstanceId != app_instance_id:
            raise InvalidInput(f"{request.appInstanceId!r} is not the application of the path ({app_instance_id!r})",
                               field="appInstanceId")
        self._check_callback(request.callbackReference)
        subscription_id = str(uuid.uuid4())
        with self._state.store.transaction():
            self._mec.application_of(who, app_instance_id)
            held = len(app_store.list_subscriptions(self._state.store, app_instance_id))
            if held >= MAX_SUBSCRIPTIONS:
                raise Forbidden(f"application instance {app_instance_id!r} holds {held} subscriptions, the most it may: "
                                "delete one first", field="callbackReference")
            app_store.insert_subscription(
                self._state.store, subscription_id, app_instance_id, request.callbackReference, self._state.now()
            )
        return subscription_id

    def delete_subscription(self, who: Principal, app_instance_id: str, subscription_id: str) -> None:
        self._state.require(who, Scope.INTENTS_WRITE)
        with self._state.store.transaction():
            self._mec.application_of(who, app_instance_id)
            if not app_store.delete_subscription(self._state.store, app_instance_id, subscription_id):
                raise NotFound(f"application instance {app_instance_id!r} has no subscription {subscription_id!r}")

    def _check_callback(self, uri: str) -> None:
        """A URI the notifier may send to, whose host resolves only to addresses it may reach."""
        refusal = callback_refusal(uri)
        if refusal is None:
            try:
                check_url(self._destinations, httpx.URL(uri))
                return
            except DestinationRefused as exc:
                refusal = str(exc)
            except OSError as exc:
                refusal = f"its host does not resolve ({exc})"
        raise InvalidInput(f"{uri!r}: {refusal}", field="callbackReference")


def termination_notification(
    app_instance_id: str, subscription_id: str, max_graceful_timeout_s: int, operation_action: str = TERMINATING
) -> dict[str, Any]:
    """The AppTerminationNotification of a subscription (its links as paths of this API)."""
    application = f"{MEC_APP_SUPPORT}/applications/{app_instance_id}"
    return {
        "notificationType": "AppTerminationNotification",
        "operationAction": operation_action,
        "maxGracefulTimeout": max_graceful_timeout_s,
        "_links": {
            "subscription": {"href": f"{application}/subscriptions/{subscription_id}"},
            "confirmTermination": {"href": f"{application}/confirm_termination"},
        },
    }


def check_dns_rule(rule: DnsRule) -> None:
    """InvalidInput naming the member of a DNS rule that cannot be served."""
    problem = rule.problem()
    if problem is not None:
        raise InvalidInput(problem[1], field=problem[0])
