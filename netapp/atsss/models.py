"""An ATSSS session as a tenant states it: one UE (its address on the data network), the access
paths its downlink is split over (1-4, in priority order: active-standby's order), the steering
mode and the paths' weights. Each path is an MP-DCCP subflow towards the UE's address on that
access: the outer addresses, the DCCP ports, and the next hop's MAC addresses, or the interface
whose neighbour table gives them.

What the control plane feeds the scheduler while the session runs (a path up or down, its RTT, its
loss, its weight: what a monitoring or AI module reports) comes as a patch (AtsssSessionPatch); the
RTT and loss are what MEC 015's QoS sessions are checked against (netapp.atsss.mts). Read back
with each path's counters (SessionCounters). The steering modes are TS 29.244's ATSSS modes that the
data path has (netapp.atsss.abi.Mode)."""

from __future__ import annotations

import enum
from datetime import datetime
from ipaddress import IPv4Address, IPv6Address
from typing import Annotated, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator

from netapp.atsss.abi import MAX_PATHS_PER_SESSION, Access, Mode
from netapp.intents.errors import FieldError
from netapp.intents.fields import InterfaceName, MacAddress

Address = Union[IPv4Address, IPv6Address]
SessionName = Annotated[str, Field(
    min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$", description="the session's name, unique per tenant"
)]
DccpPort = Annotated[int, Strict(), Field(ge=1, le=65535)]
Weight = Annotated[int, Strict(), Field(ge=0, le=65535, description="weighted mode's share; 0: never picked")]
RttMicroseconds = Annotated[int, Strict(), Field(ge=0, le=(1 << 32) - 1, description="smoothed RTT in µs; 0: unknown")]
LossRatio = Annotated[float, Field(ge=0, le=1, description="the part of the path's packets lost, 0-1, as a monitor "
                                   "or AI module reports it (e.g. the counters' loss); null: unknown")]
PathPriority = Annotated[int, Strict(), Field(ge=0, le=255, description="priority mode's rank: 0 the highest")]
PathIndex = Annotated[int, Strict(), Field(ge=0, le=MAX_PATHS_PER_SESSION - 1, description="the path's position")]


class AccessType(str, enum.Enum):
    """The access a path runs over (TS 29.244 ATSSS): cellular or not (e.g. Wi-Fi)."""

    THREE_GPP = "3GPP"
    NON_THREE_GPP = "non-3GPP"

    @property
    def c_access(self) -> Access:
        return Access.THREE_GPP if self is AccessType.THREE_GPP else Access.NON_THREE_GPP


class SteeringMode(str, enum.Enum):
    """The session's scheduler (TS 29.244's steering modes the data path has)."""

    ROUND_ROBIN = "round_robin"  # the paths that are up in turn
    WEIGHTED = "weighted"  # load balancing by the paths' weights (smooth weighted round-robin)
    ACTIVE_STANDBY = "active_standby"  # the first path up, in the session's order
    SMALLEST_DELAY = "smallest_delay"  # the path up with the smallest RTT the control plane fed
    PRIORITY = "priority"  # the path up of the highest priority that is not congested (else: up)
    REDUNDANT = "redundant"  # every path up, a copy each, all with one MP_SEQ number

    @property
    def c_mode(self) -> Mode:
        return Mode[self.name]


class ChecksumCoverage(str, enum.Enum):
    """What the DCCP checksum of the session's downlink packets covers (RFC 4340 9.2)."""

    FULL = "full"  # CsCov 0: the whole packet; every DCCP receiver takes it
    HEADER = "header"  # CsCov 1: header and options; only a receiver that asked for it (MinCsCov 1)


class AtsssPath(BaseModel):
    """One access path: an MP-DCCP subflow from `local` (this node, DCCP `local_port`) to `peer` (the
    UE's address on that access, DCCP `peer_port`), one IP family. Ethernet: `source_mac` and
    `next_hop_mac` as given; with `interface`, what is not given is that interface's address and the
    neighbour entry of `peer` there, looked up when the session is written."""

    model_config = ConfigDict(extra="forbid")

    access: AccessType
    local: Address = Field(description="this node's address on the access (outer source)")
    peer: Address = Field(description="the UE's address on the access (outer destination)")
    local_port: DccpPort = Field(description="DCCP source port of the downlink")
    peer_port: DccpPort = Field(description="DCCP destination port of the downlink")
    source_mac: Optional[MacAddress] = Field(None, description="null: the interface's address")
    next_hop_mac: Optional[MacAddress] = Field(None, description="null: the interface's neighbour entry of peer")
    interface: Optional[InterfaceName] = Field(
        None, description="where the MAC addresses not given are looked up; redundant mode: where its copies leave")
    weight: Weight = 1
    priority: PathPriority = Field(0, description="priority mode: the path of the smallest number is taken; ties: "
                                                  "the first")
    up: bool = Field(True, description="false: the scheduler leaves the path out (reported down)")
    congested: bool = Field(False, description="priority mode: taken only when no path up is free of congestion")
    rtt_us: RttMicroseconds = 0
    loss: Optional[LossRatio] = None

    @model_validator(mode="after")
    def _fields(self) -> "AtsssPath":
        if self.local.version != self.peer.version:
            raise FieldError("peer", f"local is IPv{self.local.version}: peer must be of the same family")
        if self.interface is None:
            for name in ("source_mac", "next_hop_mac"):
                if getattr(self, name) is None:
                    raise FieldError(name, f"give {name}, or an interface to look it up on")
        return self


class SessionDefinition(BaseModel):
    """What a session is: the UE, its paths by position, its steering mode."""

    model_config = ConfigDict(extra="forbid")

    ue: Address = Field(description="the UE's address on the data network: its downlink is steered")
    mode: SteeringMode
    paths: list[AtsssPath] = Field(min_length=1, max_length=MAX_PATHS_PER_SESSION,
                                   description="in priority order (active-standby takes the first up)")
    checksum_coverage: ChecksumCoverage = Field(
        ChecksumCoverage.FULL,
        description="what the DCCP checksum of the downlink covers: full (CsCov 0), or header (CsCov 1: header "
        "and options, cheaper; for a UE whose receiver accepts partial coverage, Minimum Checksum Coverage 1, "
        "RFC 4340 9.2.1: one at the default 0 drops such packets)")

    @model_validator(mode="after")
    def _fields(self) -> "SessionDefinition":
        if self.mode is SteeringMode.WEIGHTED and not any(path.weight for path in self.paths):
            raise FieldError("paths", "weighted mode needs a path of weight above 0: every weight is 0")
        if self.mode is SteeringMode.REDUNDANT:
            problem = redundant_problem(self.paths)
            if problem is not None:
                raise FieldError(*problem)
        seen: dict[tuple, int] = {}
        for i, path in enumerate(self.paths):
            subflow = (path.local, path.peer, path.local_port, path.peer_port)
            if subflow in seen:
                raise FieldError(f"paths[{i}]", f"the same subflow (addresses and ports) as paths[{seen[subflow]}]")
            seen[subflow] = i
        return self


def redundant_problem(paths: list[AtsssPath]) -> Optional[tuple[str, str]]:
    """(field, why) of the first path that cannot carry a redundant copy; None if all can. Each
    copy leaves by its path's interface, and two paths may not share one: the kernel runs a
    DEVMAP broadcast's program once per interface of a batch, not per entry, so both copies would
    take the first position's encapsulation (the same path's addresses, twice)."""
    seen: dict[str, int] = {}
    for i, path in enumerate(paths):
        if path.interface is None:
            return f"paths[{i}].interface", "redundant mode sends a copy out of each path's interface: give it"
        if path.interface in seen:
            return (f"paths[{i}].interface", f"redundant mode sends each copy out of its own interface, and "
                    f"{path.interface!r} is already paths[{seen[path.interface]}]'s: give each path another")
        seen[path.interface] = i
    return None


class AtsssSessionSpec(SessionDefinition):
    """An ATSSS session as a tenant states it (the body of POST and PUT /api/v1/atsss/sessions)."""

    name: SessionName


class AtsssSession(AtsssSessionSpec):
    """A stored session: its definition, owner, the path slots the node gave it, and the MTS session
    (MEC 015) steering it, whose mode then applies instead of `mode`."""

    tenant: str
    slots: list[int] = Field(description="each path's slot in the node's ATSSS maps, by position")
    mts_session: Optional[str] = Field(None, description="the MEC 015 MTS session steering it, if any")
    effective_mode: SteeringMode = Field(description="the mode the data path runs: the MTS session's, else mode")
    mts_flows: dict[str, SteeringMode] = Field(
        default_factory=dict, description="the MEC 015 MTS sessions with flow filters, by id, and the mode each "
        "runs the flows of the UE's downlink its filters select (the other flows run effective_mode)")
    revision: int = Field(description="bumped on every change")
    updated_at: datetime

    @property
    def sends_copies(self) -> bool:
        """Whether some of its frames run REDUNDANT (all, or the flows of an MTS session's filters):
        it then needs a group of ports for their copies (netapp.atsss.groups)."""
        return SteeringMode.REDUNDANT in (self.effective_mode, *self.mts_flows.values())


class PathPatch(BaseModel):
    """What the control plane learnt of one path: up or down, its RTT, its loss, its weight,
    congested or not."""

    model_config = ConfigDict(extra="forbid")

    index: PathIndex
    up: Optional[bool] = None
    rtt_us: Optional[RttMicroseconds] = None
    loss: Optional[LossRatio] = None
    weight: Optional[Weight] = None
    congested: Optional[bool] = None

    @model_validator(mode="after")
    def _something(self) -> "PathPatch":
        if all(value is None for value in (self.up, self.rtt_us, self.loss, self.weight, self.congested)):
            raise FieldError("index", "give up, rtt_us, loss, weight or congested for the path")
        return self


class AtsssSessionPatch(BaseModel):
    """A change of a running session (PATCH): its mode, and paths' state by index; the rest kept."""

    model_config = ConfigDict(extra="forbid")

    mode: Optional[SteeringMode] = None
    paths: list[PathPatch] = Field(default_factory=list, max_length=MAX_PATHS_PER_SESSION)

    @model_validator(mode="after")
    def _fields(self) -> "AtsssSessionPatch":
        if self.mode is None and not self.paths:
            raise FieldError("paths", "give mode, paths or both")
        indexes = [path.index for path in self.paths]
        if len(set(indexes)) != len(indexes):
            raise FieldError("paths", "each path index at most once")
        return self


class PathCounters(BaseModel):
    """What one path sent and received (what it received summed over the CPUs), and its state as the data
    path sees it."""

    index: int
    slot: int
    access: AccessType
    up: bool
    rtt_us: int
    weight: int = Field(description="its weight in weighted mode, as written to the data path")
    packets: int = Field(description="downlink packets sent on it")
    bytes: int = Field(description="their bytes (the UE's packets, before encapsulation)")
    rx_packets: int = Field(description="uplink packets received on it and decapsulated")
    rx_bytes: int = Field(description="their bytes (the UE's packets, after decapsulation)")
    rx_acks: int = Field(description="DCCP-Acks received on it from the UE")
    share: Optional[float] = Field(description="its part of the session's packets (null: none sent)")
    delivered: int = Field(description="DCCP numbers of the path the UE's Ack Vectors reported received")
    lost: int = Field(description="DCCP numbers of the path the UE's Ack Vectors reported not received")
    loss: Optional[float] = Field(description="lost / (delivered + lost) since the path got its slot, 0-1 (null: "
                                              "none judged yet; the telemetry has each poll's window)")


class SessionCounters(BaseModel):
    """A session's paths' counters on this node (no paths: not in a data path here)."""

    name: str
    tenant: str
    ue: Address
    paths: list[PathCounters]
