"""A MEC 010-2 AppD (v2.1.1, AppPkgMgmt's AppD) read for onboarding: its appTrafficRule,
appDNSRule and appServiceProduced become MEC 011 traffic rules, DNS rules and services of one
application instance (pure; netapp.mec.onboarding applies them).

The types keep ETSI's names, enums and required members (MEC010-2_AppPkgMgmt.json); the members of
the AppD that say how the application is deployed (compute, image, external connection points) are
the NFVO's and are kept out. Where MEC 010-2 and MEC 011 spell a thing differently, the AppD's
spelling is read and MEC 011's written:

| MEC 010-2 (TrafficRuleDescriptor)       | MEC 011 (TrafficRule)                        |
|-----------------------------------------|----------------------------------------------|
| action FORWARD_AS_IS, DUPLICATE_AS_IS   | FORWARD_ENCAPSULATED, DUPLICATE_ENCAPSULATED |
| action DUPLICATED_DECAPSULATED          | DUPLICATE_DECAPSULATED                       |
| dstInterface: a list of 0 to 2          | one dstInterface; a DUPLICATE_*'s two as a list |
| dstIPAddress, dstMACAddress, srcMACAddress | dstIpAddress, dstMacAddress, srcMacAddress |
| tunnelType GTP-U, filter member tag     | GTP_U, token                                 |
| (no state)                              | state ACTIVE                                 |

An AppD's rule acts on the application's own traffic: each filter names an address (the
application's, as dstAddress or srcAddress), so that onboarding never installs a rule over every
packet of a port or protocol. Runtime values an AppD cannot know (the address the instance gets)
are written as `<name>` placeholders, given a value when the AppD is applied; one left without a
value is refused naming its member.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Callable, Literal, Mapping, Optional, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from netapp.intents.errors import IntentError

from netapp.mec.models import (
    DestinationInterface,
    DnsRule,
    FilterType,
    Int32,
    InterfaceType,
    MecId,
    RuleAction,
    RuleState,
    TrafficFilter,
    TrafficRule,
    TunnelInfo,
)
from netapp.mec.service_models import (
    CategoryRef,
    EndPointAlternative,
    SecurityInfo,
    SerializerType,
    ServiceInfo,
    ServiceState,
    TransportInfo,
    TransportType,
)
from netapp.service.contract import InvalidInput

MAX_RULES = 64  # as an application declared through the API holds (netapp.mec.models)
PLACEHOLDER = re.compile(r"<([a-z][a-z0-9-]{0,62})>")
# serInstanceIds of an AppD's services: the same for the same application and service each time it
# is applied, so that applying again changes nothing.
_SERVICE_NAMESPACE = uuid.UUID("6f1c3c52-6a43-5b8e-9d9e-2f0e1a4f7b21")

_ACTIONS = {
    "DROP": RuleAction.DROP,
    "FORWARD_DECAPSULATED": RuleAction.FORWARD_DECAPSULATED,
    "FORWARD_AS_IS": RuleAction.FORWARD_ENCAPSULATED,
    "PASSTHROUGH": RuleAction.PASSTHROUGH,
    "DUPLICATED_DECAPSULATED": RuleAction.DUPLICATE_DECAPSULATED,
    "DUPLICATE_AS_IS": RuleAction.DUPLICATE_ENCAPSULATED,
}
_TUNNELS = {"GTP-U": "GTP_U", "GRE": "GRE"}
T = TypeVar("T")


class _Etsi(BaseModel):
    # ETSI's types do not forbid other members (and the AppD has many this module does not read).
    model_config = ConfigDict(extra="ignore")


class AppdTunnelInfo(_Etsi):
    tunnelType: Literal["GTP-U", "GRE"]
    tunnelDstAddress: str
    tunnelSrcAddress: str
    tunnelSpecificData: Optional[Any] = None


class InterfaceDescriptor(_Etsi):
    interfaceType: InterfaceType
    tunnelInfo: Optional[AppdTunnelInfo] = None
    srcMACAddress: Optional[str] = None
    dstMACAddress: Optional[str] = None
    dstIPAddress: Optional[str] = None


class AppdTrafficFilter(TrafficFilter):
    """MEC 010-2's TrafficFilter: MEC 011's, its token named tag."""

    tag: Optional[list[str]] = None


class TrafficRuleDescriptor(_Etsi):
    trafficRuleId: MecId
    filterType: FilterType
    priority: Int32
    trafficFilter: list[AppdTrafficFilter] = Field(min_length=1)
    action: Literal["DROP", "FORWARD_DECAPSULATED", "FORWARD_AS_IS", "PASSTHROUGH", "DUPLICATED_DECAPSULATED",
                    "DUPLICATE_AS_IS"]
    dstInterface: list[InterfaceDescriptor] = Field(default_factory=list, max_length=2)


class DnsRuleDescriptor(DnsRule):
    """MEC 010-2's DNSRuleDescriptor: MEC 011's DnsRule with no state (onboarding makes it ACTIVE)."""

    state: RuleState = RuleState.ACTIVE


class ServiceDescriptor(_Etsi):
    serName: str = Field(min_length=1, max_length=256)
    serCategory: Optional[CategoryRef] = None
    version: str = Field(min_length=1, max_length=256)
    transportsSupported: Optional[dict[str, Any]] = None


class AppD(_Etsi):
    """The AppD's identity and what onboarding makes of it."""

    appDId: str = Field(min_length=1)
    appName: str = Field(min_length=1)
    appProvider: str
    appSoftVersion: str
    appDVersion: str
    mecVersion: list[str] = Field(min_length=1)
    appDescription: str
    appTrafficRule: list[TrafficRuleDescriptor] = Field(default_factory=list, max_length=MAX_RULES)
    appDNSRule: list[DnsRuleDescriptor] = Field(default_factory=list, max_length=MAX_RULES)
    appServiceProduced: list[ServiceDescriptor] = Field(default_factory=list, max_length=MAX_RULES)


class Onboarded(BaseModel):
    """What an AppD makes of one application instance, in MEC 011's types."""

    trafficRules: list[TrafficRule]
    dnsRules: list[DnsRule]
    services: list[ServiceInfo]


# --- placeholders ----------------------------------------------------------------------------------


def filled(document: Any, values: Mapping[str, str], path: str = "") -> Any:
    """The AppD (as parsed JSON) with each `<name>` in its strings replaced by values[name];
    InvalidInput naming the member that holds a placeholder without a value."""
    if isinstance(document, dict):
        return {key: filled(value, values, f"{path}.{key}" if path else key) for key, value in document.items()}
    if isinstance(document, list):
        return [filled(value, values, f"{path}[{n}]") for n, value in enumerate(document)]
    if not isinstance(document, str):
        return document
    for name in PLACEHOLDER.findall(document):
        if name not in values:
            given = ", ".join(sorted(values)) or "none"
            raise refused(path, f"{document!r} holds the placeholder <{name}>, and no value was given for it "
                                f"(values given: {given})")
    return PLACEHOLDER.sub(lambda found: values[found.group(1)], document)


# --- the AppD's rules and services in MEC 011's types ----------------------------------------------


def onboarded(appd: AppD, app_instance_id: str) -> Onboarded:
    """MEC 011's rules and services of the AppD; InvalidInput naming `appTrafficRule[i].member`
    (or appDNSRule's, appServiceProduced's) when one cannot be one of the application's."""
    _reject_repeats([rule.trafficRuleId for rule in appd.appTrafficRule], "appTrafficRule", "trafficRuleId")
    _reject_repeats([rule.dnsRuleId for rule in appd.appDNSRule], "appDNSRule", "dnsRuleId")
    _reject_repeats([service.serName for service in appd.appServiceProduced], "appServiceProduced", "serName")
    rules = [_made(f"appTrafficRule[{n}]", traffic_rule, rule) for n, rule in enumerate(appd.appTrafficRule)]
    dns = [_made(f"appDNSRule[{n}]", dns_rule, rule) for n, rule in enumerate(appd.appDNSRule)]
    services = [_made(f"appServiceProduced[{n}]", lambda service, _: service_info(service, app_instance_id), service)
                for n, service in enumerate(appd.appServiceProduced)]
    return Onboarded(trafficRules=rules, dnsRules=dns, services=services)


def traffic_rule(rule: TrafficRuleDescriptor, where: str) -> TrafficRule:
    """The MEC 011 TrafficRule of an AppD's TrafficRuleDescriptor, ACTIVE."""
    for n, flt in enumerate(rule.trafficFilter):
        if not (flt.srcAddress or flt.dstAddress):
            raise refused(
                f"{where}.trafficFilter[{n}].dstAddress",
                "an AppD's rule acts on the application's own traffic: name the application's address as "
                "dstAddress (or srcAddress), e.g. \"<mgmt-address>\", given a value when the AppD is applied",
            )
    return TrafficRule(
        trafficRuleId=rule.trafficRuleId,
        filterType=rule.filterType,
        priority=rule.priority,
        trafficFilter=[_traffic_filter(flt) for flt in rule.trafficFilter],
        action=_ACTIONS[rule.action],
        dstInterface=_destination(rule, where),
        state=RuleState.ACTIVE,
    )


def _traffic_filter(flt: AppdTrafficFilter) -> TrafficFilter:
    members = flt.model_dump(exclude_none=True, exclude={"tag", "token"})
    return TrafficFilter(**members, token=flt.tag)


def _destination(
    rule: TrafficRuleDescriptor, where: str
) -> Optional[Union[DestinationInterface, list[DestinationInterface]]]:
    """MEC 011's dstInterface: one, or a DUPLICATE_* action's list (its copies' interfaces)."""
    if not rule.dstInterface:
        return None
    if rule.action.startswith("DUPLICATE"):
        return [_interface(given) for given in rule.dstInterface]
    if len(rule.dstInterface) > 1:
        raise refused(f"{where}.dstInterface", f"{len(rule.dstInterface)} interfaces: {rule.action} sends a packet to one")
    return _interface(rule.dstInterface[0])


def _interface(given: InterfaceDescriptor) -> DestinationInterface:
    """An AppD's interface in MEC 011's spelling."""
    tunnel = None
    if given.tunnelInfo is not None:
        tunnel = TunnelInfo(tunnelType=_TUNNELS[given.tunnelInfo.tunnelType],
                            tunnelDstAddress=given.tunnelInfo.tunnelDstAddress,
                            tunnelSrcAddress=given.tunnelInfo.tunnelSrcAddress,
                            tunnelSpecificData=given.tunnelInfo.tunnelSpecificData)
    return DestinationInterface(interfaceType=given.interfaceType, tunnelInfo=tunnel,
                                srcMacAddress=given.srcMACAddress, dstMacAddress=given.dstMACAddress,
                                dstIpAddress=given.dstIPAddress)


def dns_rule(rule: DnsRuleDescriptor, where: str) -> DnsRule:
    """The MEC 011 DnsRule of an AppD's DNSRuleDescriptor, ACTIVE; InvalidInput naming its member."""
    made = DnsRule.model_validate(rule.model_dump() | {"state": RuleState.ACTIVE})
    problem = made.problem()
    if problem is not None:
        raise refused(f"{where}.{problem[0]}", problem[1])
    return made


def service_info(service: ServiceDescriptor, app_instance_id: str) -> ServiceInfo:
    """The MEC 011 ServiceInfo of a service the AppD says the application produces. It is INACTIVE:
    the AppD does not say where the service is reached, so the application makes it ACTIVE with its
    endpoint (MEC 011 PUT) once it serves."""
    serializers = (service.transportsSupported or {}).get("serializers") or []
    serializer = serializers[0] if serializers and serializers[0] in SerializerType.__members__ else "JSON"
    return ServiceInfo(
        serInstanceId=str(uuid.uuid5(_SERVICE_NAMESPACE, f"{app_instance_id}\0{service.serName}")),
        serName=service.serName,
        serCategory=service.serCategory,
        version=service.version,
        state=ServiceState.INACTIVE,
        transportInfo=TransportInfo(
            id=f"appd-{service.serName}"[:256],
            name="REST",
            description="declared by the application's AppD; its endpoint is the application's to give",
            type=TransportType.REST_HTTP,
            protocol="HTTP",
            version="1.1",
            endpoint=EndPointAlternative(alternative={}),
            security=SecurityInfo(),
        ),
        serializer=SerializerType(serializer),
    )


def _made(where: str, make: Callable[[Any, str], T], descriptor: Any) -> T:
    """make(descriptor, where); a MEC 011 constraint the descriptor's value breaks (one ETSI's AppD
    type does not state) refused at `where`, in MEC 011's member names."""
    try:
        return make(descriptor, where)
    except ValidationError as exc:
        raise IntentError.from_validation(exc, where) from None


def _reject_repeats(ids: list[str], member: str, key: str) -> None:
    seen: dict[str, int] = {}
    for position, given in enumerate(ids):
        if given in seen:
            raise refused(f"{member}[{position}].{key}", f"{given!r} is already {member}[{seen[given]}]'s")
        seen[given] = position


def refused(field: str, why: str) -> InvalidInput:
    """InvalidInput at `field`, its detail naming it (a line of the CLI shows the detail)."""
    return InvalidInput(f"{field}: {why}", field=field)
