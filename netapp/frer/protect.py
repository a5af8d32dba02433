"""An intent's or a slice's protection of its flows (the action option `protect`): FRER on the
intent's flow, as one protected stream of its tenant that the intent owns. On the talker's edge the
flow is replicated here (role `replicate`: R-tagged, a copy to each member port); on the listener's
edge its duplicates are eliminated (role `eliminate`: the vector or match algorithm, 802.1CB 7.4.3).
The peer node takes the other role for the same flow.

The intent's match becomes the stream's IP stream identification (802.1CB 6.6). FRER identifies a
frame by the IP header behind its Ethernet header (and VLAN, R-tag), on every ingress interface, and
compares the VLAN when the match gives one (none: frames of any VLAN, as the intent's rules match
them): a match field that identification cannot express is refused, naming it (`stream_definition`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

from pydantic import (BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, Strict, model_serializer,
                      model_validator)

from netapp.frer.abi import HISTORY_DEFAULT, HISTORY_MAX, HISTORY_MIN, MAX_PORTS
from netapp.frer.models import (
    IpStreamIdentification,
    MemberPort,
    Milliseconds,
    SequenceGeneration,
    SequenceRecovery,
    StreamDefinition,
    StreamIdentity,
)
from netapp.intents.errors import FieldError, IntentError

if TYPE_CHECKING:  # native imports this module for its actions' option
    from netapp.intents.native import Match

# The recovery parameters, which only `eliminate` takes.
RECOVERY_FIELDS = ("algorithm", "history_length", "reset_timeout_ms")

# What SequenceRecovery takes when reset_timeout_ms is left out.
RESET_TIMEOUT_DEFAULT_MS = SequenceRecovery.model_fields["reset_timeout_ms"].default

# Match fields FRER's IP stream identification cannot compare, and why.
UNIDENTIFIABLE = {
    "interface": "an identity acts on frames of every ingress interface (FRER's identification has no port)",
    "overlay": "FRER identifies the IP header right behind the Ethernet header: it does not look inside an overlay",
    "vni": "FRER identifies the IP header right behind the Ethernet header: it does not look inside an overlay",
    "teid": "FRER identifies the IP header right behind the Ethernet header: it does not look inside GTP-U",
    "qfi": "FRER identifies the IP header right behind the Ethernet header: it does not look inside GTP-U",
}


class Protect(BaseModel):
    """Protect the flow with FRER (IEEE 802.1CB): replicate it here (the talker's edge) or eliminate
    its duplicates here (the listener's edge); the peer node takes the other role."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["replicate", "eliminate"] = Field(
        description="replicate: R-tag the flow's frames and send a copy out of each member port; "
        "eliminate: pass the first copy of each frame (R-tag removed) to the action, drop the others"
    )
    ports: list[MemberPort] = Field(
        default_factory=list, max_length=MAX_PORTS,
        description="replicate: the member ports (disjoint paths to the peer), each at most once; eliminate: none",
    )
    algorithm: Optional[Literal["vector", "match"]] = Field(
        None, description="eliminate: the recovery algorithm; null: vector"
    )
    history_length: Optional[Annotated[int, Strict(), Field(ge=HISTORY_MIN, le=HISTORY_MAX)]] = Field(
        None, description=f"eliminate, vector algorithm: how many sequence numbers it remembers; null: {HISTORY_DEFAULT}"
    )
    reset_timeout_ms: Optional[Milliseconds] = Field(
        None, description="eliminate: without a passed frame for this long, the next is taken whatever its number "
        f"(0: never); null: {RESET_TIMEOUT_DEFAULT_MS}"
    )

    @model_serializer(mode="wrap")
    def _without_unset_parameters(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Parameters left to their defaults are not written out (a replicating flow has none)."""
        data = handler(self)
        if isinstance(data, dict):
            for name in RECOVERY_FIELDS:
                if data.get(name) is None:
                    data.pop(name, None)
        return data

    @model_validator(mode="after")
    def _role_fields(self) -> "Protect":
        if self.role == "replicate":
            if not self.ports:
                raise FieldError("ports", "replicate needs the member ports its copies leave through (1 at least)")
            given = [name for name in RECOVERY_FIELDS if getattr(self, name) is not None]
            if given:
                raise FieldError(given[0], f"{given[0]} is a parameter of eliminate, not of replicate")
            names = [port.interface for port in self.ports]
            if len(set(names)) != len(names):
                raise FieldError("ports", "each interface at most once")
        elif self.ports:
            raise FieldError("ports", "eliminate takes no ports: the first copy of a frame goes on to the action")
        return self

    def generation(self) -> Optional[SequenceGeneration]:
        return SequenceGeneration(ports=self.ports) if self.role == "replicate" else None

    def recovery(self) -> Optional[SequenceRecovery]:
        if self.role != "eliminate":
            return None
        given = {name: getattr(self, name) for name in RECOVERY_FIELDS if getattr(self, name) is not None}
        return SequenceRecovery(**given)


def stream_identity(match: "Match") -> StreamIdentity:
    """The IP stream identity of an intent's match (netapp.intents.native.Match): IntentError naming
    the match field FRER cannot compare, and why."""
    for name, why in UNIDENTIFIABLE.items():
        if getattr(match, name) is not None:
            raise IntentError.at(f"match.{name}", f"protect cannot identify the flow by {name}: {why}")
    if match.src is None and match.dst is None:
        raise IntentError.at("match.dst", "protect needs match.src, match.dst or both: FRER's IP identification "
                                          "fixes the IP family by an address")
    return StreamIdentity(ip=IpStreamIdentification(
        source=match.src, destination=match.dst, protocol=match.protocol, source_port=match.src_port,
        destination_port=match.dst_port, dscp=match.dscp, vlan=match.vlan,
    ))


def stream_definition(match: "Match", protect: Protect) -> StreamDefinition:
    """The protected stream of an intent's flow: its match as the one identity, its role here."""
    return StreamDefinition(identification=[stream_identity(match)], generation=protect.generation(),
                            recovery=protect.recovery())
