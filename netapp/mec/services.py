"""MEC 011 service management (Mp1, /mec_service_mgmt/v1): the services MEC applications register,
the NetApp's own, their discovery, and service availability subscriptions.

Who: an application's tenant (or an administrator) registers, changes and removes the services of
its own application instances (scope intents:write; another tenant's application does not exist
for it: 404). Discovery is not scoped: MEC 011 has every application discover every service of the
platform (a service is registered to be consumed by others), so any caller with scope read lists
them all. What discovery shows is a service's description and where it is reached; using it is the
service's own affair.

The NetApp's own services (traffic rules, bandwidth management, telemetry) follow from the settings
at each start, their transport pointing at the API as configured; no application owns them, so
none may change or remove them.

Service availability notifications go out through the same notifier the telemetry subscriptions
use (netapp.telemetry.notify): callbacks only to destinations the operator's policy allows
(telemetry.subscriptions.callback_allow), checked when subscribing and at each delivery. ETSI's
subscriptions carry no secret, so the signature header is keyed with the empty string: it says
nothing of who sent it.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Callable, Optional

import httpx

from netapp.core.config import Settings
from netapp.mec import service_store
from netapp.mec.service import MecService
from netapp.mec.service_models import (
    SER_AVAILABILITY,
    CategoryRef,
    ChangeType,
    EndPointUris,
    FilteringCriteria,
    MecLink,
    LocalityType,
    SecurityInfo,
    SerAvailabilitySubscription,
    SerializerType,
    ServiceAvailabilityNotification,
    ServiceInfo,
    ServiceReference,
    ServiceState,
    Self,
    ServiceSubscriptionLink,
    ServiceSubscriptionLinkList,
    ServiceSubscriptionLinks,
    SubscriptionRef,
    TransportInfo,
    TransportType,
)
from netapp.service.contract import Forbidden, InvalidInput, NotFound, Principal, Scope
from netapp.service.state import ServiceState as State
from netapp.telemetry.notify import Delivery, DeliveryStats, Notifier
from netapp.telemetry.pinned import callback_refusal

SERVICE_MGMT = "/mec_service_mgmt/v1"
API_TRANSPORT_ID = "dpp-netapp-rest"


@dataclass(frozen=True)
class ServiceQuery:
    """Services_GET's query: at most one of the first three (ETSI: "either ... or none")."""

    ser_instance_id: Optional[list[str]] = None
    ser_name: Optional[list[str]] = None
    ser_category_id: Optional[str] = None
    consumed_local_only: Optional[bool] = None
    is_local: Optional[bool] = None
    scope_of_locality: Optional[str] = None

    def check(self) -> None:
        given = [name for name in ("ser_instance_id", "ser_name", "ser_category_id") if getattr(self, name)]
        if len(given) > 1:
            raise InvalidInput(
                f"{' and '.join(given)} are given: either ser_instance_id or ser_name or ser_category_id "
                "or none of them may be",
                field=given[1],
            )

    def matches(self, service: ServiceInfo) -> bool:
        category = service.serCategory.id if service.serCategory is not None else None
        return (
            (not self.ser_instance_id or service.serInstanceId in self.ser_instance_id)
            and (not self.ser_name or service.serName in self.ser_name)
            and (not self.ser_category_id or category == self.ser_category_id)
            and (self.consumed_local_only is None or bool(service.consumedLocalOnly) == self.consumed_local_only)
            and (self.is_local is None or bool(service.isLocal) == self.is_local)
            and (self.scope_of_locality is None or service.scopeOfLocality == self.scope_of_locality)
        )


def api_base_url(settings: Settings) -> str:
    """The NetApp's API as configured: where its own services are reached."""
    scheme = "https" if settings.tls_cert is not None else "http"
    host = f"[{settings.api_host}]" if ":" in settings.api_host else settings.api_host
    return f"{scheme}://{host}:{settings.api_port}"


def api_transport(settings: Settings, uris: Iterable[str] = ()) -> TransportInfo:
    """The NetApp's REST API as a transport. Callers authenticate with bearer tokens the operator
    issues, which none of ETSI's OAuth 2.0 grant types describes: SecurityInfo stays empty and
    implSpecificInfo says so."""
    base = api_base_url(settings)
    return TransportInfo(
        id=API_TRANSPORT_ID,
        name="REST",
        description="the DPP NetApp's REST API",
        type=TransportType.REST_HTTP,
        protocol="HTTP",
        version="1.1",
        endpoint=EndPointUris(uris=[base + uri for uri in uris] or [base]),
        security=SecurityInfo(),
        implSpecificInfo={"authorization": "Bearer token (RFC 6750) issued by the operator"},
    )


# The NetApp's own services: (serInstanceId, serName, category, paths under the API).
PLATFORM_SERVICES = (
    ("dpp-traffic-rules", "TrafficRules", "Traffic steering", ("/mec_app_support/v1",)),
    ("dpp-bwm", "BWM", "BWM", ("/bwm/v1",)),
    ("dpp-telemetry", "Telemetry", "Telemetry",
     ("/api/v1/subscriptions", "/api/v1/telemetry/stream", "/metrics")),
)


def platform_services(settings: Settings) -> list[ServiceInfo]:
    """The services the NetApp offers itself, as the settings place its API."""
    return [
        ServiceInfo(
            serInstanceId=ser_id,
            serName=name,
            serCategory=CategoryRef(href=f"{SERVICE_MGMT}/services/{ser_id}", id=ser_id, name=category,
                                    version="1"),
            version="1",
            state=ServiceState.ACTIVE,
            transportInfo=api_transport(settings, paths),
            serializer=SerializerType.JSON,
            scopeOfLocality=LocalityType.MEC_HOST,
            consumedLocalOnly=True,
            isLocal=True,
        )
        for ser_id, name, category, paths in PLATFORM_SERVICES
    ]


class MecServices:
    """The services of the MEC host (the NetApp's and its applications') and their subscriptions."""

    def __init__(self, state: State, mec: MecService):
        self._state = state
        self._mec = mec
        self._settings = state.settings
        self._own = {service.serInstanceId: service for service in platform_services(self._settings)}
        self.notifier = Notifier(self._settings.telemetry.subscriptions)
        self._stats: dict[str, DeliveryStats] = {}
        self._sequence = itertools.count(1)
        self._lock = threading.Lock()  # the stats and the sequence (API threads)
        mec.on_application_removed(self._application_removed)

    def start(self) -> None:
        self._own = {service.serInstanceId: service for service in platform_services(self._settings)}
        self.notifier.start()

    def close(self) -> None:
        self.notifier.stop()

    # --- discovery (every application) -----------------------------------------------------------

    def transports(self, who: Principal) -> list[TransportInfo]:
        self._state.require(who, Scope.READ)
        return [api_transport(self._settings)]

    def discover(self, who: Principal, query: ServiceQuery) -> list[ServiceInfo]:
        """Every service of the host that `query` matches: the NetApp's first, then the applications'."""
        self._state.require(who, Scope.READ)
        query.check()
        found = list(self._own.values()) + service_store.list_services(self._state.store)
        return [service for service in found if query.matches(service)]

    def get(self, who: Principal, ser_instance_id: str) -> ServiceInfo:
        self._state.require(who, Scope.READ)
        if ser_instance_id in self._own:
            return self._own[ser_instance_id]
        stored = service_store.get_service(self._state.store, ser_instance_id)
        if stored is None:
            raise NotFound(f"no service {ser_instance_id!r}")
        return stored[1]

    # --- an application's services ---------------------------------------------------------------

    def app_services(self, who: Principal, app_instance_id: str, query: ServiceQuery) -> list[ServiceInfo]:
        self._mec.get_application(who, app_instance_id)  # scope read, the caller's application
        query.check()
        found = service_store.list_services(self._state.store, app_instance_id)
        return [service for service in found if query.matches(service)]

    def app_service(self, who: Principal, app_instance_id: str, ser_instance_id: str) -> ServiceInfo:
        self._mec.get_application(who, app_instance_id)
        return self._owned(app_instance_id, ser_instance_id)

    def register(self, who: Principal, app_instance_id: str, service: ServiceInfo) -> ServiceInfo:
        """A new service of the application, its serInstanceId ours; subscribers hear ADDED."""
        self._state.require(who, Scope.INTENTS_WRITE)
        if service.serInstanceId is not None:
            raise InvalidInput("serInstanceId is assigned by the platform: leave it out of a registration",
                               field="serInstanceId")
        registered = service.model_copy(update={"serInstanceId": str(uuid.uuid4())})
        with self._state.store.transaction():
            tenant = self._mec.get_application(who, app_instance_id).tenant
            service_store.put_service(self._state.store, app_instance_id, tenant, registered, self._state.now())
        self.notify(registered, ChangeType.ADDED)
        return registered

    def update(self, who: Principal, app_instance_id: str, ser_instance_id: str, service: ServiceInfo) -> ServiceInfo:
        """Replace a service of the application; subscribers hear STATE_CHANGED or ATTRIBUTES_CHANGED."""
        self._state.require(who, Scope.INTENTS_WRITE)
        if service.serInstanceId not in (None, ser_instance_id):
            raise InvalidInput(
                f"serInstanceId {service.serInstanceId!r} differs from the service being replaced ({ser_instance_id!r})",
                field="serInstanceId",
            )
        updated = service.model_copy(update={"serInstanceId": ser_instance_id})
        with self._state.store.transaction():
            tenant = self._mec.get_application(who, app_instance_id).tenant
            before = self._owned(app_instance_id, ser_instance_id)
            service_store.put_service(self._state.store, app_instance_id, tenant, updated, self._state.now())
        if updated != before:
            changed = ChangeType.STATE_CHANGED if updated.state != before.state else ChangeType.ATTRIBUTES_CHANGED
            self.notify(updated, changed)
        return updated

    def remove(self, who: Principal, app_instance_id: str, ser_instance_id: str) -> None:
        self._state.require(who, Scope.INTENTS_WRITE)
        with self._state.store.transaction():
            self._mec.get_application(who, app_instance_id)
            removed = self._owned(app_instance_id, ser_instance_id)
            service_store.delete_service(self._state.store, ser_instance_id)
        self.notify(removed, ChangeType.REMOVED)

    def _application_removed(self, app_instance_id: str) -> Callable[[], None]:
        """In the application's removal: its services and subscriptions go too; once that is
        committed, the services' subscribers hear they were removed."""
        gone = service_store.list_services(self._state.store, app_instance_id)
        service_store.delete_application_rows(self._state.store, app_instance_id)

        def notify() -> None:
            for service in gone:
                self.notify(service, ChangeType.REMOVED)

        return notify

    def _owned(self, app_instance_id: str, ser_instance_id: str) -> ServiceInfo:
        """The application's service; the NetApp's own are refused (403), another's do not exist."""
        if ser_instance_id in self._own:
            raise Forbidden(f"service {ser_instance_id!r} is the platform's: no application changes it",
                            field="serviceId")
        stored = service_store.get_service(self._state.store, ser_instance_id)
        if stored is None or stored[0] != app_instance_id:
            raise NotFound(f"application instance {app_instance_id!r} has no service {ser_instance_id!r}")
        return stored[1]

    # --- subscriptions ---------------------------------------------------------------------------

    def subscribe(
        self, who: Principal, app_instance_id: str, subscription: SerAvailabilitySubscription
    ) -> tuple[str, SerAvailabilitySubscription]:
        """A service availability subscription of the application: (its id, as stored)."""
        self._state.require(who, Scope.INTENTS_WRITE)
        if subscription.subscriptionType != SER_AVAILABILITY:
            raise InvalidInput(f"subscriptionType must be {SER_AVAILABILITY!r}", field="subscriptionType")
        self._check_callback(subscription.callbackReference)
        subscription_id = str(uuid.uuid4())
        stored = subscription.model_copy(update={"links": Self(self=self._subscription_link(app_instance_id, subscription_id))})
        with self._state.store.transaction():
            tenant = self._mec.get_application(who, app_instance_id).tenant
            service_store.insert_subscription(self._state.store, subscription_id, app_instance_id, tenant, stored,
                                              self._state.now())
        return subscription_id, stored

    def subscriptions(self, who: Principal, app_instance_id: str) -> ServiceSubscriptionLinkList:
        self._mec.get_application(who, app_instance_id)
        listed = service_store.list_subscriptions(self._state.store, app_instance_id)
        base = api_base_url(self._settings)
        return ServiceSubscriptionLinkList(links=ServiceSubscriptionLinks(
            self=MecLink(href=f"{base}{SERVICE_MGMT}/applications/{app_instance_id}/subscriptions"),
            subscriptions=[ServiceSubscriptionLink(href=stored.links.self.href, rel=SER_AVAILABILITY)
                           for _, stored in listed if stored.links is not None],
        ))

    def subscription(self, who: Principal, app_instance_id: str, subscription_id: str) -> SerAvailabilitySubscription:
        self._mec.get_application(who, app_instance_id)
        found = service_store.get_subscription(self._state.store, app_instance_id, subscription_id)
        if found is None:
            raise NotFound(f"application instance {app_instance_id!r} has no subscription {subscription_id!r}")
        return found

    def unsubscribe(self, who: Principal, app_instance_id: str, subscription_id: str) -> None:
        self._state.require(who, Scope.INTENTS_WRITE)
        with self._state.store.transaction():
            self._mec.get_application(who, app_instance_id)
            if not service_store.delete_subscription(self._state.store, app_instance_id, subscription_id):
                raise NotFound(f"application instance {app_instance_id!r} has no subscription {subscription_id!r}")
        with self._lock:
            stats = self._stats.pop(subscription_id, None)
        if stats is not None:
            stats.cancelled = True

    def _check_callback(self, uri: str) -> None:
        """The callback is an http(s) URI whose host resolves only to addresses the policy allows
        (the notifier checks again at every delivery)."""
        try:
            url = httpx.URL(uri)
        except (httpx.InvalidURL, TypeError) as exc:
            raise InvalidInput(f"not a URI ({exc})", field="callbackReference") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise InvalidInput("an http or https URI with a host is taken", field="callbackReference")
        reason = callback_refusal(self.notifier.destinations, url)
        if reason is not None:
            raise InvalidInput(reason, field="callbackReference")

    def _subscription_link(self, app_instance_id: str, subscription_id: str) -> MecLink:
        base = api_base_url(self._settings)
        return MecLink(href=f"{base}{SERVICE_MGMT}/applications/{app_instance_id}/subscriptions/{subscription_id}")

    # --- notifications ---------------------------------------------------------------------------

    def notify(self, service: ServiceInfo, change: ChangeType) -> None:
        """Queue a ServiceAvailabilityNotification to every subscription whose criteria match."""
        reference = ServiceReference(
            link=MecLink(href=f"{api_base_url(self._settings)}{SERVICE_MGMT}/services/{service.serInstanceId}"),
            serName=service.serName, serInstanceId=service.serInstanceId, state=service.state, changeType=change,
        )
        for subscription_id, subscription in service_store.list_subscriptions(self._state.store):
            if subscription.links is None or not criteria_match(subscription.filteringCriteria, service):
                continue
            body = ServiceAvailabilityNotification(
                serviceReferences=[reference], links=SubscriptionRef(subscription=subscription.links.self)
            ).model_dump_json(by_alias=True, exclude_none=True).encode()
            with self._lock:
                stats = self._stats.setdefault(subscription_id, DeliveryStats())
                sequence = next(self._sequence)
            self.notifier.send(Delivery(subscription_id, subscription.callbackReference, "", body, sequence, stats))

    def delivery_stats(self, subscription_id: str) -> Optional[DeliveryStats]:
        """How the subscription's notifications went since the start (None: none was sent)."""
        with self._lock:
            stats = self._stats.get(subscription_id)
        return None if stats is None else self.notifier.stats_of(stats)


def criteria_match(criteria: Optional[FilteringCriteria], service: ServiceInfo) -> bool:
    """Every member of the criteria that is given holds for the service (none given: all match)."""
    if criteria is None:
        return True
    return (
        (not criteria.serInstanceIds or service.serInstanceId in criteria.serInstanceIds)
        and (not criteria.serNames or service.serName in criteria.serNames)
        and (not criteria.serCategories or (service.serCategory is not None and service.serCategory.id in
                                            [category.id for category in criteria.serCategories]))
        and (not criteria.states or service.state in criteria.states)
        and (criteria.isLocal is None or bool(service.isLocal) == criteria.isLocal)
    )
