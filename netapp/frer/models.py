"""A protected stream as an operator states it, modelled on IEEE 802.1CB's YANG modules
(ieee802-dot1cb-stream-identification: stream identity, null and IP stream identification;
ieee802-dot1cb-frer: sequence generation, sequence recovery with its parameters, latent error
detection), with this project's field names: one stream handle, how its frames are recognised
(several identities may name one stream: e.g. its copies on two paths with different VLAN ids), and
what this node does with it, generate (tag and replicate to member ports) or recover (eliminate the
duplicates and deliver once). A tenant names its streams (FrerStreamSpec); the node gives each a
handle (FrerStream, what the compiler takes). Read back with the 802.1CB counters (StreamCounters,
PortCounters)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator

from netapp.frer.abi import HISTORY_DEFAULT, HISTORY_MAX, HISTORY_MIN, MAX_PORTS, MAX_STREAMS
from netapp.intents.errors import FieldError
from netapp.intents.fields import (PORT_PROTOCOLS, Dscp, InterfaceName, MacAddress, Port, Prefix, Protocol, Vlan,
                                  protocol_number)

StreamHandle = Annotated[int, Strict(), Field(ge=1, le=MAX_STREAMS - 1, description="the stream's handle")]
Milliseconds = Annotated[int, Strict(), Field(ge=0, le=3_600_000)]
StreamName = Annotated[str, Field(
    min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$", description="the stream's name, unique per tenant"
)]


Tagged = Literal["tagged", "priority", "all"]
TAGGED_DESCRIPTION = (
    "which frames the identity takes by their VLAN tag (802.1CB's tagged): tagged, those of the VLAN `vlan` "
    "names; priority, untagged or priority-tagged (VLAN id 0) frames only; all, frames of any VLAN, tagged "
    "or not. null: tagged when vlan is given, all when not"
)


def check_tagged(tagged: Optional[str], vlan: Optional[int]) -> None:
    """An identity's tagged and vlan together: only tagged names a VLAN, and it must."""
    if tagged == "tagged" and vlan is None:
        raise FieldError("vlan", "tagged 'tagged' takes the frames of one VLAN: give its id (1..4094)")
    if tagged in ("priority", "all") and vlan is not None:
        takes = "untagged and priority-tagged (VLAN id 0) frames" if tagged == "priority" else "frames of any VLAN"
        raise FieldError("vlan", f"tagged {tagged!r} takes {takes}: give no vlan, or tagged 'tagged'")


def tagged_of(tagged: Optional[str], vlan: Optional[int]) -> str:
    """What an identity takes: its tagged, or the default (tagged with a VLAN, all without)."""
    if tagged is not None:
        return tagged
    return "tagged" if vlan is not None else "all"


class NullStreamIdentification(BaseModel):
    """802.1CB 6.4: frames to a destination MAC address, in one VLAN, untagged (or priority-tagged)
    only, or in any VLAN tagged or not (the standard's tagged: tagged, priority, all); an identity of
    the frame's VLAN (or of none, priority) wins over one of any."""

    model_config = ConfigDict(extra="forbid")

    destination_mac: MacAddress
    tagged: Optional[Tagged] = Field(None, description=TAGGED_DESCRIPTION)
    vlan: Optional[Vlan] = Field(
        None, description="the VLAN id, with tagged 'tagged' (or no tagged); null: as tagged says"
    )

    @model_validator(mode="after")
    def _tagged(self) -> "NullStreamIdentification":
        check_tagged(self.tagged, self.vlan)
        return self


class IpStreamIdentification(BaseModel):
    """802.1CB 6.6: frames of IP flows (addresses, DSCP, protocol, ports, VLAN). A parameter left
    out (null) matches any value, as the standard lets an identity leave it out (no VLAN and no
    tagged: any VLAN, tagged or not); an address may be a prefix. One address at least fixes the IP
    family."""

    model_config = ConfigDict(extra="forbid")

    source: Optional[Prefix] = Field(None, description="source address or prefix; null: any")
    destination: Optional[Prefix] = Field(None, description="destination address or prefix; null: any")
    protocol: Optional[Protocol] = Field(None, description="next protocol: udp, tcp, sctp or a number; null: any")
    source_port: Optional[Port] = Field(None, description="null: any; needs protocol tcp, udp or sctp")
    destination_port: Optional[Port] = Field(None, description="null: any; needs protocol tcp, udp or sctp")
    dscp: Optional[Dscp] = Field(None, description="null: any")
    tagged: Optional[Tagged] = Field(None, description=TAGGED_DESCRIPTION)
    vlan: Optional[Vlan] = Field(
        None, description="the VLAN id, with tagged 'tagged' (or no tagged); null: as tagged says"
    )

    @model_validator(mode="after")
    def _fields(self) -> "IpStreamIdentification":
        check_tagged(self.tagged, self.vlan)
        if self.source is None and self.destination is None:
            raise FieldError("destination", "give source, destination or both: an address fixes the IP family")
        if self.source is not None and self.destination is not None and self.source.version != self.destination.version:
            raise FieldError("destination", "source and destination must be of one family (IPv4 or IPv6)")
        for name in ("source_port", "destination_port"):
            if getattr(self, name) is not None and protocol_number(self.protocol) not in PORT_PROTOCOLS:
                got = "no protocol" if self.protocol is None else f"protocol {self.protocol}"
                raise FieldError(name, f"{name} needs protocol tcp, udp or sctp (got {got})")
        return self

    @property
    def family(self) -> int:
        return (self.source or self.destination).version  # type: ignore[union-attr]


class StreamIdentity(BaseModel):
    """One way of recognising the stream's frames: null or IP stream identification."""

    model_config = ConfigDict(extra="forbid")

    null: Optional[NullStreamIdentification] = None
    ip: Optional[IpStreamIdentification] = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "StreamIdentity":
        if (self.null is None) == (self.ip is None):
            raise FieldError("null", "give exactly one of null and ip")
        return self


class MemberPort(BaseModel):
    """A port the stream is replicated to."""

    model_config = ConfigDict(extra="forbid")

    interface: InterfaceName
    vlan: Optional[Vlan] = Field(None, description="the VLAN id its copies get there; null: as they came")


class SequenceGeneration(BaseModel):
    """802.1CB 7.4.1 and 7.5 (frerSeqGen): an R-tag with the stream's next number, and a copy to each
    member port."""

    model_config = ConfigDict(extra="forbid")

    ports: list[MemberPort] = Field(min_length=1, max_length=MAX_PORTS)

    @model_validator(mode="after")
    def _distinct_ports(self) -> "SequenceGeneration":
        names = [port.interface for port in self.ports]
        if len(set(names)) != len(names):
            raise FieldError("ports", "each interface at most once")
        return self


class LatentErrorDetection(BaseModel):
    """802.1CB 7.4.4: the number of paths, how far passed and discarded frames may drift apart from
    what that many paths give, how often that is tested, and how often the base is reset."""

    model_config = ConfigDict(extra="forbid")

    paths: Annotated[int, Strict(), Field(ge=2, le=255)] = 2
    difference: Annotated[int, Strict(), Field(ge=0, le=(1 << 32) - 1)] = 0
    period_ms: Milliseconds = 2000
    reset_period_ms: Milliseconds = 30000


class SequenceRecovery(BaseModel):
    """802.1CB 7.4.3 (frerSeqRcvy): duplicates eliminated by the vector or match algorithm."""

    model_config = ConfigDict(extra="forbid")

    algorithm: Literal["vector", "match"] = "vector"
    history_length: Annotated[int, Strict(), Field(ge=HISTORY_MIN, le=HISTORY_MAX)] = HISTORY_DEFAULT
    reset_timeout_ms: Milliseconds = Field(
        1000, description="without a passed frame for this long, the next frame is taken whatever its number; 0: never"
    )
    take_no_sequence: Annotated[bool, Strict()] = Field(False, description="frames without an R-tag pass")
    individual_recovery: Annotated[bool, Strict()] = Field(False, description="discarded frames restart the timeout too")
    pop: Annotated[bool, Strict()] = Field(True, description="the R-tag is removed before delivery")
    deliver_interface: Optional[InterfaceName] = Field(None, description="where passed frames go; null: the node's stack")
    latent_error_detection: Optional[LatentErrorDetection] = None


class StreamDefinition(BaseModel):
    """What a stream is on this node: its identities and its one role here."""

    model_config = ConfigDict(extra="forbid")

    identification: list[StreamIdentity] = Field(min_length=1, max_length=16)
    generation: Optional[SequenceGeneration] = None
    recovery: Optional[SequenceRecovery] = None

    @model_validator(mode="after")
    def _one_role(self) -> "StreamDefinition":
        if (self.generation is None) == (self.recovery is None):
            raise FieldError("generation", "give exactly one of generation (talker side) and recovery (listener side)")
        return self

    @property
    def role(self) -> Literal["generation", "recovery"]:
        return "generation" if self.generation is not None else "recovery"


class FrerStream(StreamDefinition):
    """A protected stream as the compiler takes it: its definition at its handle (the slot of
    dpp_frer_streams and dpp_frer_recovery)."""

    handle: StreamHandle


class FrerStreamSpec(StreamDefinition):
    """A protected stream as a tenant states it (the body of POST and PUT /api/v1/frer/streams): named,
    unique per tenant. The node gives it its handle: handles are slots of the node's maps, shared by
    every tenant, and mean nothing on the wire or on the peer node."""

    name: StreamName


class StreamStatus(FrerStreamSpec):
    """A stored stream: its definition, its owner and the handle the node gave it."""

    tenant: str
    handle: int = Field(description="its slot in the node's FRER maps, given by the node")
    revision: int = Field(description="bumped on every replace")
    updated_at: datetime
    intent: Optional[str] = Field(
        None, description="the intent whose action.protect this stream is (named as it is, changed and deleted "
        "with it, not through /api/v1/frer); null: made through /api/v1/frer"
    )


class SequenceRecoveryCounters(BaseModel):
    """802.1CB 10.8's counters of a sequence recovery function, by their managed objects' names."""

    frerCpsSeqRcvyPassedPackets: int
    frerCpsSeqRcvyDiscardedPackets: int
    frerCpsSeqRcvyOutOfOrderPackets: int
    frerCpsSeqRcvyRoguePackets: int
    frerCpsSeqRcvyLostPackets: int
    frerCpsSeqRcvyTaglessPackets: int
    frerCpsSeqRcvyResets: int
    frerCpsSeqRcvyLatentErrorResets: int
    latentErrors: int = Field(description="SIGNAL_LATENT_ERROR (7.4.4.2): 10.8 has no managed object counting it")

    @classmethod
    def of(cls, counters: dict[str, int]) -> "SequenceRecoveryCounters":
        """From the data path's counter names (netapp.frer.abi.COUNTERS)."""
        return cls(**{RECOVERY_COUNTER_NAMES[name]: value for name, value in counters.items()})


# The data path's counters (struct dpp_frer_recovery) by 802.1CB 10.8's names.
RECOVERY_COUNTER_NAMES = {
    "passed": "frerCpsSeqRcvyPassedPackets",
    "discarded": "frerCpsSeqRcvyDiscardedPackets",
    "out_of_order": "frerCpsSeqRcvyOutOfOrderPackets",
    "rogue": "frerCpsSeqRcvyRoguePackets",
    "lost": "frerCpsSeqRcvyLostPackets",
    "tagless": "frerCpsSeqRcvyTaglessPackets",
    "resets": "frerCpsSeqRcvyResets",
    "latent_resets": "frerCpsSeqRcvyLatentErrorResets",
    "latent_errors": "latentErrors",
}


class StreamCounters(BaseModel):
    """A stream's counters on this node: a recovered stream's recovery function's, a generated
    stream's next sequence number (GenSeqNum). Null where the node has no data path."""

    name: str
    tenant: str
    handle: int
    role: Literal["generation", "recovery"]
    recovery: Optional[SequenceRecoveryCounters] = None
    next_sequence_number: Optional[int] = Field(None, description="generation: the number the next frame gets")


class PortCounters(BaseModel):
    """A port's counter of 802.1CB 10.8, summed over the CPUs."""

    interface: Optional[str] = Field(description="its name on this node; null: no interface has its index now")
    ifindex: int
    frerCpsSeqEncErroredPackets: int = Field(description="frames whose R-tag could not be read, received here")
    ungroupedPackets: int = Field(
        description="frames of a stream generated on this node, received here, that had no group of ports to be "
        "replicated to (dropped, or the pipeline's default verdict): 802.1CB 10.8 has no managed object counting them"
    )
