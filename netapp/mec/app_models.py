"""ETSI GS MEC 011 v2.1.1 data types of an application's lifecycle (MecAppSupportApi: AppReadyConfirmation, AppTerminationConfirmation, AppTerminationNotificationSubscription,
MecAppSuptApiSubscriptionLinkList), with ETSI's names, enums and required members."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

INSTANTIATED, READY = "INSTANTIATED", "READY"
TERMINATING, STOPPING = "TERMINATING", "STOPPING"
TERMINATION_SUBSCRIPTION = "AppTerminationNotificationSubscription"


class _Etsi(BaseModel):
    # ETSI's types do not forbid other members; a member we do not know is kept out of the answer.
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class TerminationRequest(BaseModel):
    """An administrator's request that an application terminate or stop (sent to it as an
    AppTerminationNotification's operationAction and maxGracefulTimeout)."""

    model_config = ConfigDict(extra="forbid")

    operationAction: Literal["STOPPING", "TERMINATING"] = Field(
        TERMINATING, description="TERMINATING: the instance and its rules are removed; STOPPING: its rules are made "
        "INACTIVE (out of the data plane), the instance kept",
    )
    maxGracefulTimeout: StrictInt = Field(
        60, ge=0, le=86_400, description="seconds the application has to confirm its termination "
        "(confirm_termination); when they pass, it is terminated all the same (MEC 011 graceful timeout)",
    )


class AppReadyConfirmation(_Etsi):
    indication: Literal["READY"]


class AppTerminationConfirmation(_Etsi):
    operationAction: Literal["STOPPING", "TERMINATING"]


class LinkType(_Etsi):
    href: str


class SelfLink(_Etsi):
    self_: LinkType = Field(alias="self")


class AppTerminationNotificationSubscription(_Etsi):
    """A subscription to an application's termination: where its AppTerminationNotification goes."""

    subscriptionType: str
    callbackReference: str
    links: SelfLink = Field(alias="_links")
    appInstanceId: str


class SubscriptionLink(_Etsi):
    href: str
    rel: str


class SubscriptionListLinks(_Etsi):
    self_: LinkType = Field(alias="self")
    subscriptions: list[SubscriptionLink] = Field(default_factory=list)


class SubscriptionLinkList(_Etsi):
    """MecAppSuptApiSubscriptionLinkList: an application's subscriptions, as links."""

    links: SubscriptionListLinks = Field(alias="_links")
