"""ETSI GS MEC 011 v2.1.1 service management and timing types (MecServiceMgmtApi: ServiceInfo,
TransportInfo, SerAvailabilityNotificationSubscription and its notification; MecAppSupportApi:
CurrentTime, TimingCaps).

ETSI's names, enums and required members, as its OpenAPI documents have them; members ETSI makes
optional stay optional and are left out of answers when absent (its types have no nulls). v2.1.1's
ServiceInfo has no livenessInterval (a later version adds it), so neither has ours.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from netapp.mec.models import Int32

# What a free-text member of ours holds: ETSI says "string"; bounded so a body stays small.
Text = Annotated[str, StringConstraints(max_length=256)]
SER_AVAILABILITY = "SerAvailabilityNotificationSubscription"
SER_AVAILABILITY_NOTIFICATION = "SerAvailabilityNotification"


class _Etsi(BaseModel):
    # ETSI's types do not forbid other members; a member we do not know is kept out of the answer.
    model_config = ConfigDict(extra="ignore", use_enum_values=True)


class ServiceState(str, Enum):
    ACTIVE = "ACTIVE"
    INACTIVE = "INACTIVE"


class SerializerType(str, Enum):
    JSON = "JSON"
    XML = "XML"
    PROTOBUF3 = "PROTOBUF3"


class LocalityType(str, Enum):
    MEC_SYSTEM = "MEC_SYSTEM"
    MEC_HOST = "MEC_HOST"
    NFVI_POP = "NFVI_POP"
    ZONE = "ZONE"
    ZONE_GROUP = "ZONE_GROUP"
    NFVI_NODE = "NFVI_NODE"


class TransportType(str, Enum):
    REST_HTTP = "REST_HTTP"
    MB_TOPIC_BASED = "MB_TOPIC_BASED"
    MB_ROUTING = "MB_ROUTING"
    MB_PUBSUB = "MB_PUBSUB"
    RPC = "RPC"
    RPC_STREAMING = "RPC_STREAMING"
    WEBSOCKET = "WEBSOCKET"


class GrantType(str, Enum):
    OAUTH2_AUTHORIZATION_CODE = "OAUTH2_AUTHORIZATION_CODE"
    OAUTH2_IMPLICIT_GRANT = "OAUTH2_IMPLICIT_GRANT"
    OAUTH2_RESOURCE_OWNER = "OAUTH2_RESOURCE_OWNER"
    OAUTH2_CLIENT_CREDENTIALS = "OAUTH2_CLIENT_CREDENTIALS"


class CategoryRef(_Etsi):
    href: Text
    id: Text
    name: Text
    version: Text


class EndPointAddress(_Etsi):
    """EndPointInfo.Address."""

    host: Text
    port: Int32


class EndPointUris(_Etsi):
    """EndPointInfo.Uris: the service's entry points as URIs."""

    uris: list[Text] = Field(max_length=16)


class EndPointAddresses(_Etsi):
    """EndPointInfo.Addresses: the service's entry points as host and port."""

    addresses: list[EndPointAddress] = Field(max_length=16)


class EndPointAlternative(_Etsi):
    """EndPointInfo.Alternative: an entry point of the transport's own kind."""

    alternative: dict[str, Any]


class OAuth2Info(_Etsi):
    grantTypes: list[GrantType] = Field(min_length=1, max_length=4)
    tokenEndpoint: Text


class SecurityInfo(_Etsi):
    oAuth2Info: Optional[OAuth2Info] = None


class TransportInfo(_Etsi):
    """How a service is reached."""

    id: Text
    name: Text
    description: Optional[Text] = None
    type: TransportType
    protocol: Text
    version: Text
    # ETSI's oneOf: the first that validates is taken (a body with `uris` is EndPointUris).
    endpoint: Union[EndPointUris, EndPointAddresses, EndPointAlternative]
    security: SecurityInfo
    implSpecificInfo: Optional[dict[str, Any]] = None


class ServiceInfo(_Etsi):
    """MEC 011 ServiceInfo: a service a MEC application (or the platform) offers. serInstanceId is
    assigned by the NetApp when the service is registered."""

    serInstanceId: Optional[Text] = None
    serName: Text
    serCategory: Optional[CategoryRef] = None
    version: Text
    state: ServiceState
    transportInfo: TransportInfo
    serializer: SerializerType
    scopeOfLocality: Optional[LocalityType] = None
    consumedLocalOnly: Optional[bool] = None
    isLocal: Optional[bool] = None


class MecLink(_Etsi):
    href: str


class Self(_Etsi):
    self: MecLink


class FilteringCriteria(_Etsi):
    """SerAvailabilityNotificationSubscription.FilteringCriteria: every member given must match."""

    serInstanceIds: Optional[list[Text]] = Field(None, max_length=64)
    serNames: Optional[list[Text]] = Field(None, max_length=64)
    serCategories: Optional[list[CategoryRef]] = Field(None, max_length=64)
    states: Optional[list[ServiceState]] = Field(None, max_length=2)
    isLocal: Optional[bool] = None


class SerAvailabilitySubscription(_Etsi):
    """SerAvailabilityNotificationSubscription: `_links` is ours to set (a request's is ignored)."""

    subscriptionType: str = Field(description=f"{SER_AVAILABILITY!r}")
    callbackReference: Annotated[str, StringConstraints(max_length=2048)]
    links: Optional[Self] = Field(None, alias="_links")
    filteringCriteria: Optional[FilteringCriteria] = None

    model_config = ConfigDict(extra="ignore", use_enum_values=True, populate_by_name=True)


class ServiceSubscriptionLink(_Etsi):
    """MecServiceMgmtApiSubscriptionLinkList.Subscription."""

    href: str
    rel: str


class ServiceSubscriptionLinks(_Etsi):
    self: MecLink
    subscriptions: list[ServiceSubscriptionLink] = Field(default_factory=list)


class ServiceSubscriptionLinkList(_Etsi):
    """MecServiceMgmtApiSubscriptionLinkList: an application's subscriptions."""

    links: ServiceSubscriptionLinks = Field(alias="_links")

    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ChangeType(str, Enum):
    ADDED = "ADDED"
    REMOVED = "REMOVED"
    STATE_CHANGED = "STATE_CHANGED"
    ATTRIBUTES_CHANGED = "ATTRIBUTES_CHANGED"


class ServiceReference(_Etsi):
    """ServiceAvailabilityNotification.ServiceReferences."""

    link: Optional[MecLink] = None
    serName: str
    serInstanceId: str
    state: ServiceState
    changeType: ChangeType


class SubscriptionRef(_Etsi):
    subscription: MecLink


class ServiceAvailabilityNotification(_Etsi):
    notificationType: str = SER_AVAILABILITY_NOTIFICATION
    serviceReferences: list[ServiceReference]
    links: SubscriptionRef = Field(alias="_links")

    model_config = ConfigDict(extra="ignore", use_enum_values=True, populate_by_name=True)


# --- timing (MecAppSupportApi) -------------------------------------------------------------------


class TimeSourceStatus(str, Enum):
    TRACEABLE = "TRACEABLE"
    NONTRACEABLE = "NONTRACEABLE"


class CurrentTime(_Etsi):
    seconds: Int32
    nanoSeconds: Int32
    timeSourceStatus: TimeSourceStatus


class MecTimeStamp(_Etsi):
    seconds: Int32
    nanoSeconds: Int32


class TimingCaps(_Etsi):
    """What the platform says of its time: the time it answered at. It names no NTP server nor PTP
    master: the host's clock discipline is not the NetApp's to configure or report."""

    timeStamp: Optional[MecTimeStamp] = None
