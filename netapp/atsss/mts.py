"""ETSI GS MEC 015 v2.1.1 Multi-access Traffic Steering (TrafficSteeringApi: its server URL is
/mts/v1): what the node can steer (mts_capability_info) and MTS sessions, each of which sets the
steering mode of one UE's ATSSS session (netapp.atsss.service), or of flows of its downlink.

The ETSI types keep ETSI's names and required members (clauses 7.2.4, 7.2.5); answers leave absent
members out, as ETSI's types have no nulls, and carry `sessionId` besides (the id of the path's
{sessionId}, which v2.1.1's MtsSessionInfo lacks and later versions add). What the node cannot
serve is refused with a ProblemDetails naming ETSI's field:

- mtsMode, onto our schedulers (abi.Mode): 0 low cost -> ACTIVE_STANDBY over the session's paths in
  their order, which must put the unmetered (non-3GPP) accesses first; 1 low latency ->
  SMALLEST_DELAY (the path with the smallest RTT fed through the PATCH of /api/v1/atsss);
  2 high throughput -> WEIGHTED (every path at once, by the paths' weights); 3 redundancy ->
  REDUNDANT (a copy on every path up), which sends each copy out of its path's interface: a
  session whose paths lack one is refused naming mtsMode and the path. 4 QoS -> the scheduler
  qosD asks for, below.
- qosD (mtsMode 4), decided from the requirement and what the node knows of the session's paths
  when the MTS session is written (POST, PUT: a PUT decides again); one requirement per session,
  but for maxLatency beside maxLoss, which redundancy serves too:

  | qosD field       | scheduler                    | served when (else a 400 naming qosD.<field>)   |
  |------------------|------------------------------|------------------------------------------------|
  | maxLoss (1/10^x) | REDUNDANT: a copy on every   | two paths or more, each with its interface     |
  |                  | path up, the UE keeps one    |                                                |
  | maxLatency       | SMALLEST_DELAY: the path up  | a path up whose RTT (rtt_us, fed through the   |
  | (10 ns, one way) | of the smallest RTT          | PATCH of /api/v1/atsss) is known and at most   |
  |                  |                              | twice maxLatency                               |
  | minTpt (kbps)    | WEIGHTED: every path up at   | always: the paths' capacities add up (the node |
  |                  | once, by the paths' weights  | measures none)                                 |
  | priority (0..3)  | PRIORITY: the path of the    | always                                         |
  |                  | highest one not congested    |                                                |
  | maxJitter        | none                         | never: the node measures no jitter             |

  An empty qosD, or two requirements one scheduler cannot serve together, is refused naming qosD
  or the second field; with maxLoss, maxLatency is checked against the fastest path (the UE's
  first copy comes by it).
- Whether qosD is still met: the paths' RTT and loss change after the session is written (fed
  through the PATCH of /api/v1/atsss: rtt_us, loss, up). The scheduler chosen stays: it is already
  the one that serves its requirement best over whatever paths are up (smallest delay takes the
  fastest, redundancy loses a packet only when every path loses it), so no other mode or set of
  paths would meet a requirement it misses. What changes is said: every read of an MTS session of
  mtsMode 4 checks qosD against the paths' state at that moment and answers `qosStatus` MET,
  NOT_MET (with `qosStatusReason`: which field, by how much) or UNVERIFIED (the node lacks what it
  would take to tell). MEC 015 v2.1.1's MtsSessionInfo has no member for it and does not forbid
  others (as `sessionId`); ETSI's readers ignore them. maxLatency: the fastest path up's RTT / 2
  against it (no path up with a known RTT: NOT_MET). maxLoss (a loss of at most 10^-maxLoss): the
  paths up lose a packet together, taken as independent, with the product of their losses; MET
  when the known ones' product is within it (an unknown loss is at most 1), UNVERIFIED when an
  unknown one could decide, else NOT_MET; with hysteresis: a maxLoss last told NOT_MET is MET
  again only once the product is LOSS_MARGIN below the bound. minTpt: UNVERIFIED (the node measures
  no capacity). priority: MET. qosD's members are requirements each of its own (ETSI: any member
  left out is ignored), so each keeps its own status (Atsss.qos_held, by qosD field): the margin
  is maxLoss's alone, held by maxLoss's NOT_MET and by no other's (a latency missed, then met again,
  leaves a loss within its bound MET; a loss missed stays NOT_MET inside its margin while the
  latency recovers). The session's qosStatus is its worst requirement's, and `qosStatusReason`
  names each requirement not met, the worst first.
- A path's loss is measured as well: the data path counts what the UE's Ack Vectors report
  delivered and lost, and each telemetry poll hands the loss of its window to
  netapp.atsss.qos_watch.QosWatch, which keeps it in the service, checks the QoS sessions of the
  paths whose measured loss changed again and tells each change of their qosStatus as a
  `dpp_atsss_qos` point of that poll (InfluxDB, the event stream, subscriptions). When a path has both, the measured loss wins:
  it is what the UE received over the latest window, while a fed one is a monitor's report of an
  unknown age (often of the same counters); a fed loss stands for a path no Ack Vector reported
  on (a UE that sends none, no telemetry). The data path measures no RTT: the RTT it holds is the
  one fed, checked at each read as it changes.
- flowFilter: every filter's dstIp is the UE of an ATSSS session of the caller's tenant (an
  address, or a prefix of that one address), the same UE. One filter of dstIp alone steers the UE's
  whole downlink (one such MTS session a UE). Filters with more (sourceIp, sourcePort, dstPort,
  protocol, dscp) select flows of it: they become classifier rules (netapp.atsss.flows) and those
  flows run the session's mode while the UE's others keep the ATSSS session's own (or the mode of
  the UE's MTS session without filters), in round-robin and weighted with a scheduler state of the
  MTS session's own (netapp.atsss.flow_states: each session's flows get their split, by the ATSSS
  session's path weights, whatever the UE's other frames; MEC 015 names no weights); several such
  MTS sessions may steer one UE, the most specific filter winning where they overlap, and one as
  specific as another session's that a packet could match is refused naming flowFilter[i].
  flowlabel is refused: the classifier's key holds no IPv6 flow label. A filter of dstIp alone
  among filters that select flows is refused.
- requestType 1 (FLOW_SPECIFIC_MTS_SESSION) only: an application's sessions are not known to the
  node; trafficDirection "00" (downlink) only: the node steers the downlink, the UE its uplink.
"""

from __future__ import annotations

import enum
import ipaddress
import math
import time
import uuid
from typing import Annotated, Any, Iterable, Mapping, NamedTuple, Optional

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from netapp.api.deps import IntentWriterDep, JsonBody, ReaderDep
from netapp.api.routes.common import AUTHENTICATED, WITH_BODY, documented
from netapp.atsss import store as stored
from netapp.atsss.admission import metered_first, tenant_session_of_ue
from netapp.atsss.flows import MAX_FLOW_FILTERS, MAX_RULES_PER_FILTER, has_flow_members, session_rules
from netapp.atsss.models import AtsssSession, SteeringMode
from netapp.atsss.routes import AtsssDep
from netapp.atsss.service import Atsss
from netapp.service.contract import InvalidInput, NotFound, Principal, Scope
from netapp.service.state import ServiceState

MTS = "/mts/v1"
router = APIRouter(prefix=MTS, tags=["mec015"])

Uint32 = Annotated[int, Field(ge=0, le=(1 << 32) - 1)]

# mtsMode -> the scheduler that serves it (the module's docstring says why).
LOW_COST, LOW_LATENCY, HIGH_THROUGHPUT, REDUNDANCY, QOS = range(5)
SERVED_MODES = {
    LOW_COST: SteeringMode.ACTIVE_STANDBY,
    LOW_LATENCY: SteeringMode.SMALLEST_DELAY,
    HIGH_THROUGHPUT: SteeringMode.WEIGHTED,
    REDUNDANCY: SteeringMode.REDUNDANT,
}
# qosD's requirements, in the order one is taken when several are given, and their schedulers
QOS_SCHEDULERS = {
    "maxLoss": SteeringMode.REDUNDANT,
    "maxLatency": SteeringMode.SMALLEST_DELAY,
    "minTpt": SteeringMode.WEIGHTED,
    "priority": SteeringMode.PRIORITY,
}
UNSERVED_QOS = {"maxJitter": "the node measures no path's jitter"}
TEN_NS_PER_US = 100  # qosD's latency unit, 10 ns, in a microsecond (the RTTs' unit)
# A session last told NOT_MET over its paths' loss is MET again only when their product is this part
# of maxLoss's bound below it (0.8 of it). Relative: the bounds span decades (maxLoss 2 is 1%, 6 one
# in a million), where one absolute margin would be nothing at one end and all at the other. A
# fifth: the average loss (telemetry.atsss_loss_weight) still moves a few percent a window when the
# UE's loss sits at the bound, and a product that hovers there must not flap the status each poll;
# a lasting return to the bound's level is told once it is clearly below it.
LOSS_MARGIN = 0.2
FLOW_SPECIFIC = 1
DOWNLINK = "00"
# The node's accesses as MtsCapabilityInfo.mtsAccessInfo says them: accessType 2 "any 3GPP-based
# cellular technology", metered (1); accessType 1 "any IEEE 802.11-based WLAN", not metered (0): low
# cost prefers it.
ACCESS_INFO = (
    {"accessId": 1, "accessType": 2, "metered": 1},
    {"accessId": 2, "accessType": 1, "metered": 0},
)


class _Etsi(BaseModel):
    # ETSI's types do not forbid other members; a member we do not know is kept out of the answer.
    model_config = ConfigDict(extra="ignore")


class TimeStamp(_Etsi):
    seconds: Uint32
    nanoSeconds: Uint32

    @classmethod
    def now(cls) -> "TimeStamp":
        ns = time.time_ns()
        return cls(seconds=ns // 1_000_000_000 % (1 << 32), nanoSeconds=ns % 1_000_000_000)


class MtsAccessInfo(_Etsi):
    accessId: Uint32
    accessType: Uint32
    metered: Uint32


class MtsCapabilityInfo(_Etsi):
    """7.2.4: the accesses the node steers over and the MTS modes it serves."""

    mtsAccessInfo: list[MtsAccessInfo] = Field(min_length=1)
    mtsMode: list[Uint32] = Field(min_length=1)
    timeStamp: Optional[TimeStamp] = None


class FlowFilter(_Etsi):
    """MtsSessionInfo.flowFilter's items."""

    sourceIp: Optional[str] = None
    sourcePort: Optional[list[Uint32]] = None
    dstIp: Optional[str] = None
    dstPort: Optional[list[Uint32]] = None
    protocol: Optional[Uint32] = None
    dscp: Optional[Uint32] = None
    flowlabel: Optional[Uint32] = None


class QosD(_Etsi):
    """MtsSessionInfo.qosD: the QoS an app asks (mtsMode 4 only), one requirement: maxLoss runs
    redundancy (maxLatency may come with it), maxLatency the smallest delay, minTpt weighted load
    balancing, priority the priority-based scheduler; maxJitter is not served."""

    minTpt: Optional[Uint32] = None
    maxLatency: Optional[Uint32] = None
    maxLoss: Optional[Uint32] = None
    maxJitter: Optional[Uint32] = None
    priority: Optional[Uint32] = None


class QosStatus(str, enum.Enum):
    """Whether an MTS session's qosD is met over its paths' state now (the module's docstring)."""

    MET = "MET"
    NOT_MET = "NOT_MET"
    UNVERIFIED = "UNVERIFIED"


class MtsSessionInfo(_Etsi):
    """7.2.5: an MTS session, as an application asks it (POST, PUT) and reads it back."""

    appInsId: str
    requestType: int = Field(description="0 APPLICATION_SPECIFIC_MTS_SESSION, 1 FLOW_SPECIFIC_MTS_SESSION")
    flowFilter: list[FlowFilter] = Field(
        min_length=1, max_length=MAX_FLOW_FILTERS,
        description=f"1..{MAX_FLOW_FILTERS} filters; those selecting flows at most {MAX_RULES_PER_FILTER} port pairs "
        "each, a tenant's rules at most its quotas.atsss_flow_rules")
    qosD: QosD
    mtsMode: Uint32
    trafficDirection: str = Field(description='"00" downlink, "01" uplink, "10" symmetrical')
    timeStamp: Optional[TimeStamp] = None
    sessionId: Optional[str] = Field(None, description="the node's id of the session (the path's {sessionId})")
    qosStatus: Optional[QosStatus] = Field(
        None, description="mtsMode 4, read back: whether qosD is met over the paths' state now (not ETSI's)")
    qosStatusReason: Optional[str] = Field(None, description="NOT_MET, UNVERIFIED: which qosD field and why")


# --- what an MTS session becomes --------------------------------------------------------------------


def served_mode(info: MtsSessionInfo) -> SteeringMode:
    """The scheduler serving `info.mtsMode` (but QoS, which steering_mode decides); InvalidInput
    naming mtsMode when none does."""
    if info.mtsMode in SERVED_MODES:
        return SERVED_MODES[info.mtsMode]
    why = f"{info.mtsMode} is not an MTS mode of MEC 015"
    allowed = ", ".join(str(mode) for mode in (*SERVED_MODES, QOS))
    raise InvalidInput(f"mtsMode: {why} (served: {allowed})", field="mtsMode", reason=why, allowed=allowed)


def steering_mode(info: MtsSessionInfo) -> tuple[SteeringMode, str]:
    """The scheduler serving `info` and the field that chose it: mtsMode, or of QoS the qosD
    requirement; InvalidInput naming what cannot be served."""
    if info.mtsMode != QOS:
        return served_mode(info), "mtsMode"
    requirement = qos_requirement(info.qosD)
    return QOS_SCHEDULERS[requirement], f"qosD.{requirement}"


def check_paths(info: MtsSessionInfo, session: AtsssSession) -> None:
    """What `info`'s mode needs of the paths of the ATSSS session it steers."""
    if info.mtsMode == LOW_COST:
        check_low_cost(session)
    elif info.mtsMode == QOS:
        check_qos(info.qosD, session)


def _qos_refused(field: str, why: str, allowed: Optional[str] = None) -> InvalidInput:
    return InvalidInput(f"{field}: {why}", field=field, reason=why, allowed=allowed)


def qos_requirement(qos: QosD) -> str:
    """The qosD field that chooses the scheduler; InvalidInput naming what cannot be served."""
    given = [name for name, value in qos.model_dump(exclude_none=True).items() if value is not None]
    for name, why in UNSERVED_QOS.items():
        if name in given:
            raise _qos_refused(f"qosD.{name}", f"{why}: leave it out", allowed="absent")
    wanted = [name for name in QOS_SCHEDULERS if name in given]
    if not wanted:
        raise _qos_refused("qosD", "QoS (mtsMode 4) needs one of its requirements", allowed=", ".join(QOS_SCHEDULERS))
    extra = [name for name in wanted[1:] if (wanted[0], name) != ("maxLoss", "maxLatency")]
    if extra:
        raise _qos_refused(f"qosD.{extra[0]}", f"qosD.{wanted[0]} chose the {QOS_SCHEDULERS[wanted[0]].value} "
                           f"scheduler, which cannot serve qosD.{extra[0]} too: ask one requirement", allowed="absent")
    return wanted[0]


def _fastest(session: AtsssSession) -> Optional[int]:
    """The smallest RTT (µs) of the session's paths that are up with one known; None without."""
    known = [path.rtt_us for path in session.paths if path.up and path.rtt_us]
    return min(known) if known else None


def check_latency(session: AtsssSession, max_latency: int) -> None:
    """A path up whose one-way delay (half its RTT) is within qosD.maxLatency (10 ns)."""
    fastest, field = _fastest(session), "qosD.maxLatency"
    if fastest is None:
        raise _qos_refused(field, f"no path up of ATSSS session {session.name!r} has a known RTT: feed the paths' "
                           "rtt_us (PATCH /api/v1/atsss/sessions) before asking a latency")
    if fastest * TEN_NS_PER_US // 2 > max_latency:
        raise _qos_refused(field, f"the fastest path up of ATSSS session {session.name!r} takes "
                           f"{fastest * TEN_NS_PER_US // 2} (10 ns, half its RTT of {fastest} µs) one way, more than "
                           f"{max_latency}", allowed=f">= {fastest * TEN_NS_PER_US // 2}")


def check_qos(qos: QosD, session: AtsssSession) -> None:
    """What `qos`'s requirement needs of `session`'s paths: two for redundancy, one fast enough for
    a latency."""
    requirement = qos_requirement(qos)
    if requirement == "maxLoss" and len(session.paths) < 2:
        raise _qos_refused(f"qosD.{requirement}",
                           f"ATSSS session {session.name!r} has one path: redundancy needs two to lose less")
    if qos.maxLatency is not None:
        check_latency(session, qos.maxLatency)


def _latency_status(session: AtsssSession, max_latency: int) -> tuple[QosStatus, Optional[str]]:
    fastest = _fastest(session)
    if fastest is None:
        return QosStatus.NOT_MET, "qosD.maxLatency: no path up has a known RTT"
    one_way = fastest * TEN_NS_PER_US // 2
    if one_way > max_latency:
        return QosStatus.NOT_MET, (f"qosD.maxLatency: the fastest path up takes {one_way} (10 ns, half its RTT of "
                                   f"{fastest} µs) one way, more than {max_latency}")
    return QosStatus.MET, None


def _loss_status(session: AtsssSession, max_loss: int, held: Optional[str]) -> tuple[QosStatus, Optional[str]]:
    up = [path for path in session.paths if path.up]
    if not up:
        return QosStatus.NOT_MET, "qosD.maxLoss: no path is up"
    bound = 10.0 ** -max_loss
    met_below = bound * (1 - LOSS_MARGIN) if held == QosStatus.NOT_MET else bound
    known = math.prod(path.loss for path in up if path.loss is not None)
    if known <= met_below:
        return QosStatus.MET, None
    if known <= bound:
        return QosStatus.NOT_MET, (f"qosD.maxLoss: the paths up lose {known:.3g} together, within {bound:.3g} but not "
                                   f"yet {met_below:.3g} ({LOSS_MARGIN:.0%} below it), which a session NOT_MET "
                                   "needs to be MET again")
    if any(path.loss is None for path in up):
        return QosStatus.UNVERIFIED, (f"qosD.maxLoss: the paths up of known loss lose {known:.3g} together, more "
                                      f"than {bound:.3g}; a path's loss is unknown (no Ack Vector of the UE measured "
                                      "it: feed it, PATCH /api/v1/atsss)")
    return QosStatus.NOT_MET, f"qosD.maxLoss: the {len(up)} paths up lose {known:.3g} together, more than {bound:.3g}"


class QosCheck(NamedTuple):
    """An MTS session's qosD checked: its qosStatus, the worst of its requirements' (NOT_MET before
    UNVERIFIED before MET), why (each requirement not met, the worst first) and each requirement's
    own status, by its qosD field: what the next check holds (`held`)."""

    status: QosStatus
    reason: Optional[str]
    requirements: dict[str, QosStatus]


# The statuses from the worst: a session's is its worst requirement's.
STATUS_ORDER = (QosStatus.NOT_MET, QosStatus.UNVERIFIED, QosStatus.MET)


def worst(statuses: Iterable[str]) -> QosStatus:
    """The worst of `statuses` (MET when there are none: nothing asked is missed)."""
    return min((QosStatus(status) for status in statuses), key=STATUS_ORDER.index, default=QosStatus.MET)


def qos_check(qos: QosD, session: AtsssSession, held: Optional[Mapping[str, str]] = None) -> QosCheck:
    """Whether `qos` is met over `session`'s paths as they are now, and if not, why. `held`: each
    requirement's status as last told (Atsss.qos_held), by its qosD field: a maxLoss last told
    NOT_MET keeps its margin (LOSS_MARGIN) whatever the other requirements were, so that one
    requirement's violation or recovery never moves another's threshold."""
    found: dict[str, tuple[QosStatus, Optional[str]]] = {}
    if qos.maxLatency is not None:
        found["maxLatency"] = _latency_status(session, qos.maxLatency)
    if qos.maxLoss is not None:
        found["maxLoss"] = _loss_status(session, qos.maxLoss, (held or {}).get("maxLoss"))
    if qos.minTpt is not None:
        found["minTpt"] = (QosStatus.UNVERIFIED, "qosD.minTpt: the node measures no path's capacity")
    missed = sorted((each for each in found.values() if each[0] is not QosStatus.MET),
                    key=lambda each: STATUS_ORDER.index(each[0]))
    return QosCheck(worst(status for status, _ in found.values()),
                    "; ".join(reason for _, reason in missed if reason) or None,
                    {field: status for field, (status, _) in found.items()})


def steered_ue(info: MtsSessionInfo) -> str:
    """The UE address whose downlink (or flows of it) the session steers, the dstIp of every filter;
    InvalidInput naming the field of what the node cannot serve."""
    if info.requestType != FLOW_SPECIFIC:
        raise InvalidInput("requestType: the node steers one UE's downlink, named by a flow filter: give 1 "
                           "(FLOW_SPECIFIC_MTS_SESSION)", field="requestType", allowed="1")
    if info.trafficDirection != DOWNLINK:
        raise InvalidInput(f"trafficDirection: {info.trafficDirection!r} is not served: the node steers the "
                           "downlink (towards the UE)", field="trafficDirection", allowed='"00"')
    ue = _ue_address(info.flowFilter[0].dstIp, "flowFilter[0].dstIp")
    for index, item in enumerate(info.flowFilter[1:], start=1):
        field = f"flowFilter[{index}].dstIp"
        if _ue_address(item.dstIp, field) != ue:
            raise InvalidInput(f"{field}: {item.dstIp!r} is not flowFilter[0]'s UE ({ue}): an MTS session steers "
                               "flows of one UE", field=field, allowed=ue)
    return ue


def flow_filters(info: MtsSessionInfo) -> Optional[list[dict[str, Any]]]:
    """The members given of each filter when they select flows of the UE's downlink (netapp.atsss.
    flows), None when the session takes the whole downlink (one filter, of dstIp alone)."""
    given = [item.model_dump(exclude_none=True) for item in info.flowFilter]
    selecting = [has_flow_members(members) for members in given]
    if all(selecting):
        return given
    if len(given) == 1:
        return None
    index = selecting.index(False)
    if not any(selecting):
        raise InvalidInput(f"flowFilter[{index}]: a filter of dstIp alone takes the UE's whole downlink, as "
                           f"flowFilter[{index + 1}] does: give one filter of dstIp alone",
                           field=f"flowFilter[{index}]",
                           allowed="one filter of dstIp alone, or filters with a member besides dstIp")
    raise InvalidInput(f"flowFilter[{index}]: a filter of dstIp alone takes the UE's whole downlink, of which the "
                       "other filters select flows: give it an MTS session of its own", field=f"flowFilter[{index}]",
                       allowed="a member besides dstIp")


def _ue_address(text: Optional[str], field: str) -> str:
    if text is None:
        raise InvalidInput(f"{field}: give the UE's address", field=field)
    try:
        network = ipaddress.ip_network(text.strip(), strict=True)
    except ValueError:
        raise InvalidInput(f"{field}: {text!r} is not an IPv4 or IPv6 address", field=field) from None
    if network.num_addresses != 1:
        raise InvalidInput(f"{field}: {text!r} is a range: the node steers one UE, give its address", field=field)
    return str(network.network_address)


def check_low_cost(session: AtsssSession) -> None:
    """Low cost runs active-standby over the session's order: the unmetered paths must come first."""
    if metered_first(session.paths) is not None:
        raise InvalidInput(
            f"mtsMode: low cost (0) takes the first path up in the order of ATSSS session {session.name!r}, whose "
            "paths put a 3GPP (metered) access before a non-3GPP one: reorder its paths, or ask another mode",
            field="mtsMode", allowed="1, 2, 3, 4")


# --- the service part -----------------------------------------------------------------------------


def _body(info: MtsSessionInfo) -> dict[str, Any]:
    return info.model_dump(mode="json", exclude_none=True,
                           exclude={"sessionId", "timeStamp", "qosStatus", "qosStatusReason"})


def _info(mts_id: str, body: dict[str, Any], session: Optional[AtsssSession] = None,
          held: Optional[Mapping[str, str]] = None) -> MtsSessionInfo:
    """The stored MTS session as read back; of mtsMode 4, with its qosD checked over `session`'s
    paths now (`held`: each requirement's status last told)."""
    status: dict[str, Any] = {}
    if body.get("mtsMode") == QOS and session is not None:
        check = qos_check(QosD.model_validate(body["qosD"]), session, held)
        status = {"qosStatus": check.status, "qosStatusReason": check.reason}
    return MtsSessionInfo.model_validate({**body, **status, "sessionId": mts_id,
                                          "timeStamp": TimeStamp.now().model_dump()})


def with_measured_loss(session: AtsssSession, measured: list[Optional[float]]) -> AtsssSession:
    """`session` with each path's loss the `measured` one where there is one (it wins over a fed
    one: the module's docstring), else the fed one."""
    if all(loss is None for loss in measured):
        return session
    paths = [path if loss is None else path.model_copy(update={"loss": loss})
             for path, loss in zip(session.paths, measured)]
    return session.model_copy(update={"paths": paths})


def steered_session(atsss: Atsss, tenant: str, ue: str) -> Optional[AtsssSession]:
    """The tenant's ATSSS session of `ue`, its paths' losses the measured ones where known; None
    when it has none."""
    session = tenant_session_of_ue(atsss.store, tenant, ue)
    return with_measured_loss(session, atsss.measured_losses(session)) if session is not None else None


def _found(atsss: Atsss, who: Principal, mts_id: str) -> tuple[str, str, dict[str, Any]]:
    """(tenant, UE, body) of the MTS session `mts_id` the caller may see, in one read; NotFound
    otherwise."""
    ServiceState.require(who, Scope.READ)
    visible = [(tenant, ue, body) for tenant, found, ue, body in stored.load_mts(atsss.store)
               if found == mts_id and (who.is_admin or tenant == who.tenant)]
    if not visible:
        raise NotFound(f"no MTS session {mts_id!r}")
    return visible[0]


def _steer(atsss: Atsss, tenant: str, mts_id: str, info: MtsSessionInfo, replacing: bool = False) -> MtsSessionInfo:
    """`info` written as the tenant's MTS session `mts_id`: its UE's ATSSS session read, checked and
    steered under the service's lock (Atsss.steer), so that a change made meanwhile (the ATSSS
    session's paths changed, the MTS session deleted before a PUT's write: `replacing`) is seen."""
    mode, mode_field = steering_mode(info)
    ue = steered_ue(info)
    filters = flow_filters(info)
    flows = session_rules(mts_id, ue, filters, mode) if filters is not None else None
    session = atsss.steer(tenant, mts_id, ue, mode, _body(info), field="flowFilter[0].dstIp", mode_field=mode_field,
                          flows=flows, check=lambda session: check_paths(info, session), replacing=replacing)
    return _info(mts_id, _body(info), with_measured_loss(session, atsss.measured_losses(session)))


# --- routes ---------------------------------------------------------------------------------------

# Any string, as ETSI's document says: one the node never gave is not found (404, which every
# operation documents; a 400 DELETE does not).
SessionIdPath = Annotated[str, Path(description="an MTS session")]


@router.get("/mts_capability_info", response_model=MtsCapabilityInfo, response_model_exclude_none=True,
            responses=documented(*AUTHENTICATED))
def mts_capability_info(who: ReaderDep) -> MtsCapabilityInfo:
    """MEC 015 mtsCapabilityInfoGET: the accesses the node steers over and the MTS modes it serves."""
    return MtsCapabilityInfo(mtsAccessInfo=[MtsAccessInfo(**access) for access in ACCESS_INFO],
                             mtsMode=[*SERVED_MODES, QOS], timeStamp=TimeStamp.now())


@router.get("/mts_sessions", response_model=list[MtsSessionInfo], response_model_exclude_none=True,
            responses=documented(*AUTHENTICATED))
def mts_sessions_list(
    atsss: AtsssDep,
    who: ReaderDep,
    app_instance_id: Annotated[list[str], Query(description="only these application instances' (none: all)")] = [],
    app_name: Annotated[list[str], Query(description="only these applications' (the node is told no names)")] = [],
    session_id: Annotated[list[str], Query(description="only these sessions (none: all)")] = [],
) -> list[MtsSessionInfo]:
    """MEC 015 mtsSessionsListGET: the caller's MTS sessions (an admin's: all)."""
    ServiceState.require(who, Scope.READ)
    found = []
    for tenant, mts_id, ue, body in stored.load_mts(atsss.store, None if who.is_admin else who.tenant):
        if app_name:
            continue  # the node is told no application names: none matches
        if (not app_instance_id or body["appInsId"] in app_instance_id) and (not session_id or mts_id in session_id):
            found.append(_info(mts_id, body, steered_session(atsss, tenant, ue), atsss.qos_held.get((tenant, mts_id))))
    return found


@router.post("/mts_sessions", response_model=MtsSessionInfo, response_model_exclude_none=True, status_code=201,
             responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 409, 503), dependencies=[JsonBody])
def mts_session_post(request: Request, response: Response, atsss: AtsssDep, who: IntentWriterDep,
                     body: MtsSessionInfo) -> MtsSessionInfo:
    """MEC 015 mtsSessionPOST: steer a UE's downlink, or the flows of it its filters select, as the
    session asks; the node gives its sessionId."""
    mts_id = str(uuid.uuid4())
    created = _steer(atsss, who.tenant, mts_id, body)
    response.headers["Location"] = f"{request.scope.get('root_path', '')}{MTS}/mts_sessions/{mts_id}"
    return created


@router.get("/mts_sessions/{sessionId}", response_model=MtsSessionInfo, response_model_exclude_none=True,
            responses=documented(*AUTHENTICATED, 404))
def mts_session_get(atsss: AtsssDep, who: ReaderDep, sessionId: SessionIdPath) -> MtsSessionInfo:
    """MEC 015 mtsSessionGET."""
    tenant, ue, body = _found(atsss, who, sessionId)
    return _info(sessionId, body, steered_session(atsss, tenant, ue), atsss.qos_held.get((tenant, sessionId)))


@router.put("/mts_sessions/{sessionId}", response_model=MtsSessionInfo, response_model_exclude_none=True,
            responses=documented(*AUTHENTICATED, *WITH_BODY, 404, 409, 503), dependencies=[JsonBody])
def mts_session_put(atsss: AtsssDep, who: IntentWriterDep, sessionId: SessionIdPath,
                    body: MtsSessionInfo) -> MtsSessionInfo:
    """MEC 015 mtsSessionPUT: replace a session (its UE may change); the data path follows."""
    tenant, _, _ = _found(atsss, who, sessionId)
    if body.sessionId is not None and body.sessionId != sessionId:
        raise InvalidInput(f"sessionId: {body.sessionId!r} differs from the path's ({sessionId!r})", field="sessionId")
    return _steer(atsss, tenant, sessionId, body, replacing=True)


@router.delete("/mts_sessions/{sessionId}", status_code=204, response_model=None,
               responses=documented(*AUTHENTICATED, 404, 503))
def mts_session_delete(atsss: AtsssDep, who: IntentWriterDep, sessionId: SessionIdPath) -> None:
    """MEC 015 mtsSessionDELETE: the UE's ATSSS session (or the flows the session's filters
    selected) runs its own mode again."""
    tenant, _, _ = _found(atsss, who, sessionId)
    if not atsss.unsteer(tenant, sessionId):  # deleted since it was found
        raise NotFound(f"no MTS session {sessionId!r}")

