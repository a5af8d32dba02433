"""PFCP session state as typed models: a session and its rules (PDR, FAR, QER, URR), each checked
on its own here and against the others by `check_session`.

A rule that does not hold raises `RuleError` with the PFCP cause it earns, the rule (type and id)
and the IE at fault, so the endpoint answers with the cause, Failed Rule ID and Offending IE that
TS 29.244 asks for. Models are frozen: a change builds a new session (netapp.upf.sessions).
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Annotated, Iterable, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from netapp.upf.flows import FlowDescription
from netapp.upf.pfcp.ies import Cause, IEType, Interface, RuleType

UINT8, UINT16, UINT32 = (1 << 8) - 1, (1 << 16) - 1, (1 << 32) - 1
DOWNLINK = (Interface.CORE, Interface.SGI_LAN_N6)  # the PDRs the data path finds by UE address
APPLY_ACTIONS = ("DROP", "FORW", "BUFF", "NOCP", "DUPL")
MEASUREMENT_METHODS = ("DURAT", "VOLUM", "EVENT")
REPORTING_TRIGGERS = (
    "periodic_reporting",
    "volume_threshold",
    "time_threshold",
    "quota_holding_time",
    "start_of_traffic",
    "stop_of_traffic",
    "dropped_dl_traffic_threshold",
    "linked_usage_reporting",
    "volume_quota",
    "time_quota",
    "envelope_closure",
    "mac_addresses_reporting",
    "event_threshold",
    "event_quota",
)


class RuleError(Exception):
    """A request the UPF refuses: its PFCP `cause`, the IE at fault (`ie_type`, for Offending IE)
    and the rule (`rule`: its type and id, for Failed Rule ID) where there is one."""

    def __init__(
        self,
        cause: Cause,
        message: str,
        ie_type: Optional[int] = None,
        rule: Optional[tuple[RuleType, int]] = None,
    ):
        super().__init__(message)
        self.cause = cause
        self.ie_type = ie_type
        self.rule = rule

    def __str__(self) -> str:
        where = f"{self.rule[0].name} {self.rule[1]}: " if self.rule else ""
        return f"{where}{self.args[0]} ({self.cause.name})"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


@functools.lru_cache(maxsize=65536)  # peers' and UEs' addresses, again and again
def _version(value: str) -> int:
    return ipaddress.ip_address(value).version


def _address(value: str, version: int) -> str:
    if _version(value) != version:
        raise ValueError(f"{value}: not an IPv{version} address")
    return value


IPv4 = Annotated[str, AfterValidator(lambda value: _address(value, 4))]
IPv6 = Annotated[str, AfterValidator(lambda value: _address(value, 6))]


class _Addressed(_Model):
    """An IPv4 address, an IPv6 address, or both."""

    ipv4: Optional[IPv4] = None
    ipv6: Optional[IPv6] = None

    def _require_address(self, what: str) -> None:
        if self.ipv4 is None and self.ipv6 is None:
            raise ValueError(f"{what} needs an IPv4 or IPv6 address")


class FSeid(_Addressed):
    seid: int = Field(ge=0, le=(1 << 64) - 1)

    @model_validator(mode="after")
    def _addresses(self) -> "FSeid":
        self._require_address("an F-SEID")
        return self


class FTeid(_Addressed):
    """A local F-TEID: given by the CP function (teid and address), or chosen by the UPF (`choose`;
    with a `choose_id`, the PDRs of one request that share it share the TEID)."""

    choose: bool = False
    choose_id: Optional[int] = Field(None, ge=0, le=UINT8)
    teid: Optional[int] = Field(None, ge=1, le=UINT32)
    want_ipv4: bool = True  # with choose: the address families asked for
    want_ipv6: bool = False

    @model_validator(mode="after")
    def _given_or_chosen(self) -> "FTeid":
        if not self.choose:
            self._require_address("an F-TEID not chosen by the UPF")
            if self.teid is None:
                raise ValueError("an F-TEID not chosen by the UPF needs a TEID")
        if not self.choose and self.choose_id is not None:
            raise ValueError("a CHOOSE ID needs CHOOSE")
        return self


class UeIpAddress(_Addressed):
    """A UE's address: given by the CP function, or (`choose_ipv4`, CHV4) assigned by the UPF from
    its pool of the PDR's network instance (upf.ue_pools; `ipv4` then the address assigned)."""

    destination: bool = Field(False, description="the SD flag: the address is the packets' destination")
    choose_ipv4: bool = Field(False, description="CHV4: the UPF assigns the IPv4 address (ipv4: the one it did)")

    @model_validator(mode="after")
    def _one(self) -> "UeIpAddress":
        if not self.choose_ipv4:
            self._require_address("a UE IP address")
        return self


class Pdi(_Model):
    source_interface: Interface
    local_fteid: Optional[FTeid] = None
    ue_ip: Optional[UeIpAddress] = None
    sdf_filters: tuple[FlowDescription, ...] = ()
    qfis: tuple[int, ...] = Field((), description="each 0..63")
    network_instance: Optional[str] = None

    @model_validator(mode="after")
    def _qfis(self) -> "Pdi":
        if any(not 0 <= qfi <= 63 for qfi in self.qfis):
            raise ValueError("a QFI is 0..63")
        return self


class Pdr(_Model):
    id: int = Field(ge=0, le=UINT16)
    precedence: int = Field(ge=0, le=UINT32)
    pdi: Pdi
    outer_header_removal: Optional[int] = Field(None, ge=0, le=UINT8, description="29.244 8.2.64 value")
    far_id: Optional[int] = Field(None, ge=1, le=UINT32)
    qer_ids: tuple[int, ...] = ()
    urr_ids: tuple[int, ...] = ()


class OuterHeaderCreation(_Model):
    kind: Literal["gtpu-ipv4", "gtpu-ipv6", "udp-ipv4", "udp-ipv6"]
    teid: Optional[int] = Field(None, ge=0, le=UINT32)
    address: str
    port: Optional[int] = Field(None, ge=0, le=UINT16)

    @model_validator(mode="after")
    def _fits(self) -> "OuterHeaderCreation":
        _address(self.address, 6 if self.kind.endswith("ipv6") else 4)
        if self.kind.startswith("gtpu") and self.teid is None:
            raise ValueError("GTP-U outer header creation needs a TEID")
        if self.kind.startswith("udp") and self.port is None:
            raise ValueError("UDP outer header creation needs a port")
        return self


class ForwardingParameters(_Model):
    destination_interface: Interface
    network_instance: Optional[str] = None
    outer_header_creation: Optional[OuterHeaderCreation] = None


class DuplicatingParameters(_Model):
    """Where a FAR with DUPL sends copies of its packets (29.244 7.5.2.3-3): the UPF sends each copy
    from user space to `outer_header_creation`'s peer (netapp.upf.buffering). The forwarding policy
    is kept, not acted on."""

    destination_interface: Interface
    outer_header_creation: Optional[OuterHeaderCreation] = None
    transport_level_marking: Optional[int] = Field(None, ge=0, le=UINT8, description="the ToS/Traffic Class octet")
    forwarding_policy: Optional[str] = None


class Far(_Model):
    id: int = Field(ge=1, le=UINT32)
    apply_action: frozenset[Literal["DROP", "FORW", "BUFF", "NOCP", "DUPL"]]
    forwarding: Optional[ForwardingParameters] = None
    duplicating: tuple[DuplicatingParameters, ...] = ()
    send_end_marker: bool = Field(
        False, description="set by the modification that changed the forwarding with SNDEM: an end marker "
        "goes to the old peer; cleared by the next modification"
    )

    @model_validator(mode="after")
    def _actions(self) -> "Far":
        exclusive = self.apply_action & {"DROP", "FORW", "BUFF"}
        if len(exclusive) != 1:
            raise ValueError("apply action: exactly one of DROP, FORW, BUFF")
        if "NOCP" in self.apply_action and "BUFF" not in self.apply_action:
            raise ValueError("apply action: NOCP only with BUFF")
        if "FORW" in self.apply_action and self.forwarding is None:
            raise ValueError("apply action FORW needs forwarding parameters")
        if "DUPL" in self.apply_action and not self.duplicating:
            raise ValueError("apply action DUPL needs duplicating parameters")
        return self


class Qer(_Model):
    id: int = Field(ge=1, le=UINT32)
    gate_ul_open: bool = True
    gate_dl_open: bool = True
    mbr_ul_kbps: Optional[int] = Field(None, ge=0, le=(1 << 40) - 1)
    mbr_dl_kbps: Optional[int] = Field(None, ge=0, le=(1 << 40) - 1)
    qfi: Optional[int] = Field(None, ge=0, le=63)


class Volume(_Model):
    """Bytes, per direction or in total; None: not given."""

    total: Optional[int] = Field(None, ge=0, le=(1 << 64) - 1)
    uplink: Optional[int] = Field(None, ge=0, le=(1 << 64) - 1)
    downlink: Optional[int] = Field(None, ge=0, le=(1 << 64) - 1)


class Urr(_Model):
    id: int = Field(ge=1, le=UINT32)
    measurement_method: frozenset[Literal["DURAT", "VOLUM", "EVENT"]]
    reporting_triggers: frozenset[str] = frozenset()
    measurement_period_s: Optional[int] = Field(None, ge=1, le=UINT32)
    volume_threshold: Optional[Volume] = None
    volume_quota: Optional[Volume] = None
    time_threshold_s: Optional[int] = Field(None, ge=0, le=UINT32)
    time_quota_s: Optional[int] = Field(None, ge=0, le=UINT32)
    quota_exhausted: bool = Field(
        False, description="set by the UPF when the volume or time quota is used up: the URR's PDRs drop their "
        "packets (29.244 5.2.2.2); cleared by an Update URR with a new quota"
    )

    @model_validator(mode="after")
    def _conditions(self) -> "Urr":
        if not self.measurement_method:
            raise ValueError("measurement method: at least one of DURAT, VOLUM, EVENT")
        unknown = self.reporting_triggers - set(REPORTING_TRIGGERS)
        if unknown:
            raise ValueError(f"reporting triggers: unknown {sorted(unknown)}")
        return self


# The IE each trigger needs (29.244 7.5.2.4: conditional IEs of Create URR).
TRIGGER_NEEDS = {
    "periodic_reporting": ("measurement_period_s", IEType.MEASUREMENT_PERIOD),
    "volume_threshold": ("volume_threshold", IEType.VOLUME_THRESHOLD),
    "volume_quota": ("volume_quota", IEType.VOLUME_QUOTA),
    "time_threshold": ("time_threshold_s", IEType.TIME_THRESHOLD),
    "time_quota": ("time_quota_s", IEType.TIME_QUOTA),
}


class UrrSet(_Model):
    """The usage slot the PDRs naming several URRs count on: one per distinct set of URR ids. A URR's
    usage is that of its own slot (`Session.urr_slots`, which its PDRs naming it alone count on) and
    of the slots of the sets it is a member of. A URR removed leaves `members`; the slot is freed
    with the last one. Only a set whose members are all its URRs is counted on again: a URR created
    later than a set's slot (even with an id it had) starts from zero."""

    slot: int = Field(ge=1, le=UINT32)
    urr_ids: tuple[int, ...] = Field(description="the set, in increasing order")
    members: tuple[int, ...] = Field(description="its URRs still in the session, whose usage the slot holds")


class Session(_Model):
    """A PFCP session: ours (`seid`) and the CP function's (`remote`), the association it belongs
    to (`node_id`: the tenant), its rules by id, and the data path's usage slots of its URRs, slot
    of each PDR with SDF filters and policers of its QERs (given by the UPF, like its TEIDs, and
    stored with the session)."""

    seid: int = Field(ge=1, le=(1 << 64) - 1)
    node_id: str
    remote: FSeid
    pdrs: dict[int, Pdr] = Field(default_factory=dict)
    fars: dict[int, Far] = Field(default_factory=dict)
    qers: dict[int, Qer] = Field(default_factory=dict)
    urrs: dict[int, Urr] = Field(default_factory=dict)
    urr_slots: dict[int, int] = Field(
        default_factory=dict, description="URR id -> its slot of the data path's usage counters (dpp_upf_usage)"
    )
    urr_sets: tuple[UrrSet, ...] = Field(
        (), description="the usage slots of the PDRs that name several URRs, one per set of URRs"
    )
    sdf_slots: dict[int, int] = Field(
        default_factory=dict, description="PDR id (with SDF filters) -> its slot of dpp_upf_sdf_pdrs"
    )
    qer_policers: dict[int, tuple[int, int]] = Field(
        default_factory=dict,
        description="QER id -> its policers of dpp_policers (uplink, downlink; 0: that direction is not policed)",
    )

    def stored_json(self) -> str:
        """The session as its row holds it: only the fields that differ from their defaults (read
        back, a field left out is its default), 1.4 kB for the 4 PDRs, 2 FARs, QER and URR of the
        tests' establishment instead of 2.3 kB: fewer WAL pages a transaction. A row written whole
        reads the same."""
        return self.model_dump_json(exclude_defaults=True)

    def usage_slots(self) -> list[int]:
        """Every slot of dpp_upf_usage the session holds."""
        return [*self.urr_slots.values(), *(each.slot for each in self.urr_sets)]

    def policer_ids(self) -> list[int]:
        """Every policer of dpp_policers the session holds."""
        return [policer_id for pair in self.qer_policers.values() for policer_id in pair if policer_id]

    def urr_usage_slots(self) -> dict[int, list[int]]:
        """The slots each URR's usage is the sum of (those of the URRs with a slot): its own, and
        those of the sets it is a member of."""
        slots = {urr_id: [slot] for urr_id, slot in self.urr_slots.items() if urr_id in self.urrs}
        for each in self.urr_sets:
            for urr_id in each.members:
                if urr_id in slots:
                    slots[urr_id].append(each.slot)
        return slots

    def counting_slot(self, urr_ids: Iterable[int]) -> Optional[int]:
        """The slot a PDR naming the URRs counts on: the URR's own, or that of the set (None: none)."""
        wanted = tuple(sorted(set(urr_ids)))
        if len(wanted) == 1:
            return self.urr_slots.get(wanted[0])
        return next((each.slot for each in self.urr_sets if each.urr_ids == wanted == each.members), None)

    def teids(self) -> set[int]:
        fteids = [pdr.pdi.local_fteid for pdr in self.pdrs.values()]
        return {fteid.teid for fteid in fteids if fteid is not None and fteid.teid is not None}

    def ue_ipv4(self) -> set[str]:
        """The IPv4 UE addresses the session's PDRs name (those the UPF assigned it with CHV4 among
        them): netapp.upf.pools holds those of its pools for the session."""
        ues = [pdr.pdi.ue_ip for pdr in self.pdrs.values()]
        return {ue.ipv4 for ue in ues if ue is not None and ue.ipv4 is not None}

    def downlink_ues(self) -> list[tuple[int, Optional[str], str, bool]]:
        """(PDR id, the network instance it names, UE address, assigned by the UPF (CHV4)) of each
        address the downlink PDRs (source interface CORE, SGi-LAN/N6) match packets by."""
        ues = []
        for pdr in self.pdrs.values():
            ue = pdr.pdi.ue_ip
            if ue is not None and pdr.pdi.source_interface in DOWNLINK:
                ues += [(pdr.id, pdr.pdi.network_instance, address, ue.choose_ipv4)
                        for address in (ue.ipv4, ue.ipv6) if address is not None]
        return ues

    def tunnels(self) -> list[tuple[int, str, IEType]]:
        """(FAR id, peer address, the IE that names it) of each tunnel the FARs send into, by FAR id:
        the forwarding parameters' outer header creation (OUTER_HEADER_CREATION), then each
        duplicating parameters' (DUPLICATING_PARAMETERS)."""
        tunnels = []
        for far_id in sorted(self.fars):
            far = self.fars[far_id]
            creation = far.forwarding.outer_header_creation if far.forwarding is not None else None
            if creation is not None and creation.address is not None:
                tunnels.append((far_id, creation.address, IEType.OUTER_HEADER_CREATION))
            tunnels += [(far_id, each.outer_header_creation.address, IEType.DUPLICATING_PARAMETERS)
                        for each in far.duplicating
                        if each.outer_header_creation is not None and each.outer_header_creation.address is not None]
        return tunnels

    def punting(self) -> dict[int, Far]:
        """PDR id -> its FAR, for the PDRs whose FAR buffers or duplicates (their frames go to user
        space: netapp.upf.buffering)."""
        fars = {pdr.id: self.fars.get(pdr.far_id) for pdr in self.pdrs.values() if pdr.far_id is not None}
        return {pdr_id: far for pdr_id, far in fars.items() if far is not None and far.apply_action & {"BUFF", "DUPL"}}


def check_session(session: Session) -> None:
    """The rules against each other: every id a PDR names exists, every trigger has its IE."""
    for pdr in session.pdrs.values():
        failed = (RuleType.PDR, pdr.id)
        if pdr.far_id is None:
            raise RuleError(Cause.MANDATORY_IE_MISSING, "a PDR needs a FAR ID", IEType.FAR_ID, failed)
        if pdr.far_id not in session.fars:
            raise RuleError(
                Cause.RULE_CREATION_MODIFICATION_FAILURE, f"FAR {pdr.far_id} does not exist", IEType.FAR_ID, failed
            )
        for ids, table, ie_type, name in (
            (pdr.qer_ids, session.qers, IEType.QER_ID, "QER"),
            (pdr.urr_ids, session.urrs, IEType.URR_ID, "URR"),
        ):
            for missing in [rule_id for rule_id in ids if rule_id not in table]:
                raise RuleError(
                    Cause.RULE_CREATION_MODIFICATION_FAILURE, f"{name} {missing} does not exist", ie_type, failed
                )
    for urr in session.urrs.values():
        for trigger in sorted(urr.reporting_triggers):
            if trigger in TRIGGER_NEEDS and getattr(urr, TRIGGER_NEEDS[trigger][0]) is None:
                raise RuleError(
                    Cause.CONDITIONAL_IE_MISSING,
                    f"reporting trigger {trigger} needs its IE",
                    TRIGGER_NEEDS[trigger][1],
                    (RuleType.URR, urr.id),
                )
