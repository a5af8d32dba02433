"""A PFCP session to the UPF's map entries (netapp.upf.abi): pure, no map is touched.

Uplink PDRs (source interface ACCESS) go in the uplink table by their local TEID; downlink PDRs
(source interface CORE or SGi-LAN/N6) in the downlink table by (network instance, family, UE
address), one entry per address family of the UE. Each entry is the PDR's whole action, its FAR, QER
and URR folded in, so that a packet needs one lookup. Of several PDRs with one key the one of
highest precedence (the lowest value, 29.244 5.2.1) wins; PDRs of one TEID that differ by QFI get an
entry per QFI, found through the TEID's own entry (DPP_UPF_PDR_BY_QFI). PDRs with SDF filters
become classifier rules and a slot of dpp_upf_sdf_pdrs each (netapp.upf.sdf); the entry of their
TEID or UE address, marked DPP_UPF_PDR_SDF, holds what the PDRs without filters say. An entry counts
on one usage slot: its URR's, or for a PDR naming several URRs that of its set (models.UrrSet).

What the data path cannot do yet is refused, naming the PDR or FAR, with Rule creation/modification
failure: SDF filters the classifier cannot hold (netapp.upf.sdf), DUPL without a peer for the copies,
a network instance the settings do not name, and with output REDIRECT a FAR whose destination no
configured interface serves. BUFF and DUPL entries carry the SEID and PDR id, for the frames they punt.
A forwarding entry carries the policer of the QER that polices its PDR (netapp.upf.policing), whose
configuration the entries hold too (`Entries.policers`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
import struct
from typing import Mapping, Optional, Union

from netapp.intents.compiler import CompiledRule
from netapp.qos.applier import PolicerSpec
from netapp.upf import policing, sdf
from netapp.upf.abi import QFI_ANY, FarAction, Output, PdrAction, PdrFlag, Role
from netapp.upf.models import Far, Pdr, RuleError, Session
from netapp.upf.pfcp.ies import Cause, IEType, Interface, RuleType
from netapp.upf.policing import PoliceDefaults
from netapp.upf.pools import ue_instance

# Outer header removal values (29.244 8.2.64) that remove GTP-U/UDP/IPv4, IPv6, or IP.
GTPU_REMOVALS = (0, 1, 6)
UplinkKey = tuple[int, int]  # (TEID, QFI or QFI_ANY)
DownlinkKey = tuple[int, int, bytes]  # (network instance id, family, address packed into 16 bytes)
NO_URR = 0xFFFFFFFF  # struct dpp_upf_pdr.urr of a PDR without a URR (DPP_NONE)
# Flags as plain ints where an entry is built: an int and an IntFlag combined make an IntFlag, at
# some 1.5 us each.
_DECAP, _ENCAP, _DUPL = int(PdrFlag.DECAP), int(PdrFlag.ENCAP), int(PdrFlag.DUPL)


@dataclasses.dataclass(frozen=True)
class Port:
    """An interface of the UPF as an egress port (for output REDIRECT): its role, and for N6 the
    network instance it reaches."""

    ifindex: int
    role: Role
    net_instance: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Site:
    """What the compiler needs of the node: network instance ids by name (the default for PDRs that
    name none), our N3 addresses (the outer source of what we encapsulate), how packets leave, for
    REDIRECT the ports a FAR's destination is served by (the first that fits is its egress), and the
    network instances routed by their private table (with output FIB: upf.routing)."""

    net_instances: Mapping[str, int]
    default_instance: Optional[str] = None
    n3_ipv4: Optional[str] = None
    n3_ipv6: Optional[str] = None
    output: Output = Output.FIB
    ports: tuple[Port, ...] = ()
    police: PoliceDefaults = PoliceDefaults()  # what QERs do not say of their policers
    private_instances: frozenset[str] = frozenset()


@dataclasses.dataclass
class Entries:
    uplink: dict[UplinkKey, PdrAction] = dataclasses.field(default_factory=dict)
    downlink: dict[DownlinkKey, PdrAction] = dataclasses.field(default_factory=dict)
    sdf_pdrs: dict[int, PdrAction] = dataclasses.field(default_factory=dict)  # slot -> a PDR with SDF filters
    rules: dict[str, CompiledRule] = dataclasses.field(default_factory=dict)  # their classifier rules, by id
    policers: dict[int, PolicerSpec] = dataclasses.field(default_factory=dict)  # the QERs' policers, by id


Pdrs = list[tuple[Pdr, PdrAction]]


def compile_session(
    session: Session, site: Site, urr_slots: Mapping[int, int], sdf_slots: Mapping[int, int] = {}
) -> Entries:
    """The session's entries; `urr_slots` maps each URR id to its slot of dpp_upf_usage,
    `sdf_slots` each PDR with SDF filters to its slot of dpp_upf_sdf_pdrs (netapp.upf.sdf)."""
    entries = Entries()
    by_teid: dict[int, Pdrs] = {}
    by_ue: dict[DownlinkKey, Pdrs] = {}
    for pdr in sorted(session.pdrs.values(), key=lambda pdr: (pdr.precedence, pdr.id)):
        action = _action(session, pdr, site, urr_slots)
        if pdr.pdi.source_interface == Interface.ACCESS:
            if pdr.pdi.local_fteid is None or pdr.pdi.local_fteid.teid is None:
                raise _refused(pdr, "an uplink PDR needs a local F-TEID", IEType.F_TEID)
            by_teid.setdefault(pdr.pdi.local_fteid.teid, []).append((pdr, action))
        elif pdr.pdi.source_interface in (Interface.CORE, Interface.SGI_LAN_N6):
            for key in _downlink_keys(pdr, site):
                by_ue.setdefault(key, []).append((pdr, action))
        else:
            raise _refused(pdr, "only ACCESS and CORE source interfaces are served", IEType.SOURCE_INTERFACE)
    for teid, pdrs in by_teid.items():
        _uplink(entries, session.seid, teid, pdrs, sdf_slots)
    for key, pdrs in by_ue.items():
        _downlink(entries, session.seid, key, pdrs, site, sdf_slots)
    entries.policers = policing.session_policers(session, site.police)
    return entries


def _uplink(entries: Entries, seid: int, teid: int, pdrs: Pdrs, sdf_slots: Mapping[int, int]) -> None:
    """The TEID's entries and rules: those of its PDRs without SDF filters (_exact_uplink), marked
    SDF when some PDRs have filters, whose rules take the QFIs no PDR before them takes."""
    filtered = [(pdr, action) for pdr, action in pdrs if pdr.pdi.sdf_filters]
    unfiltered = [(pdr, action) for pdr, action in pdrs if not pdr.pdi.sdf_filters]
    own: dict[UplinkKey, PdrAction] = {}
    if unfiltered:
        _exact_uplink(own, teid, unfiltered)
    if filtered:
        sdf.check_ties([pdr for pdr, _ in filtered])
        for pdr, action in filtered:
            earlier = [other for other, _ in unfiltered if (other.precedence, other.id) < (pdr.precedence, pdr.id)]
            qfis = _untaken_qfis(pdr, earlier)
            if qfis:
                slot = _sdf_slot(entries, pdr, action, sdf_slots)
                entries.rules.update({rule.intent_id: rule for rule in sdf.uplink_rules(seid, pdr, teid, qfis, slot)})
        for key, value in list(own.items()) or [((teid, QFI_ANY), PdrAction(flags=PdrFlag.NO_MATCH))]:
            own[key] = PdrAction.from_buffer_copy(value)
            own[key].flags |= PdrFlag.SDF
    entries.uplink.update(own)


def _untaken_qfis(pdr: Pdr, earlier: list[Pdr]) -> list[Optional[int]]:
    """The QFIs (None: any) a PDR with SDF filters takes packets of: those no PDR without filters
    of higher precedence takes already (an earlier PDR of any QFI takes them all)."""
    if any(not other.pdi.qfis for other in earlier):
        return []
    taken = {qfi for other in earlier for qfi in other.pdi.qfis}
    if not pdr.pdi.qfis:
        if taken:
            raise _refused(pdr, "SDF filters of any QFI after a PDR of QFIs "
                           f"{sorted(taken)} of the TEID: give the PDR its QFIs", IEType.QFI)
        return [None]
    return [qfi for qfi in pdr.pdi.qfis if qfi not in taken]


def _sdf_slot(entries: Entries, pdr: Pdr, action: PdrAction, sdf_slots: Mapping[int, int]) -> int:
    if pdr.id not in sdf_slots:
        raise RuleError(Cause.NO_RESOURCES_AVAILABLE, "no slot of the data path for a PDR with SDF filters",
                        IEType.SDF_FILTER, (RuleType.PDR, pdr.id))
    entries.sdf_pdrs[sdf_slots[pdr.id]] = action
    return sdf_slots[pdr.id]


def _exact_uplink(table: dict[UplinkKey, PdrAction], teid: int, pdrs: Pdrs) -> None:
    """The TEID's entries, its PDRs in precedence order: one entry, or one per QFI and the TEID's."""
    if not any(pdr.pdi.qfis for pdr, _ in pdrs):
        table[(teid, QFI_ANY)] = pdrs[0][1]
        return
    for pdr, action in pdrs:
        for qfi in pdr.pdi.qfis:
            table.setdefault((teid, qfi), action)
    catch_all = next((action for pdr, action in pdrs if not pdr.pdi.qfis), None)
    own = PdrAction.from_buffer_copy(catch_all) if catch_all is not None else PdrAction(flags=PdrFlag.NO_MATCH)
    own.flags |= PdrFlag.BY_QFI
    table[(teid, QFI_ANY)] = own


def _downlink(entries: Entries, seid: int, key: DownlinkKey, pdrs: Pdrs, site: Site,
              sdf_slots: Mapping[int, int]) -> None:
    """A UE address's entry: its first PDR without SDF filters; marked SDF, with the rules of the
    PDRs with filters before that one, when there are some."""
    first = next((index for index, (pdr, _) in enumerate(pdrs) if not pdr.pdi.sdf_filters), len(pdrs))
    if first == 0:
        entries.downlink.setdefault(key, pdrs[0][1])
        return
    filtered = pdrs[:first]
    sdf.check_ties([pdr for pdr, _ in filtered])
    instance = key[0]
    ifindexes = [port.ifindex for port in site.ports
                 if port.role == Role.N6 and site.net_instances.get(port.net_instance or "") == instance]
    for pdr, action in filtered:
        if not ifindexes:
            raise _refused(pdr, "SDF filters need the N6 interfaces of the network instance (upf.n6_interfaces)",
                           IEType.NETWORK_INSTANCE)
        slot = _sdf_slot(entries, pdr, action, sdf_slots)
        entries.rules.update({rule.intent_id: rule for rule in sdf.downlink_rules(seid, pdr, ifindexes, slot)})
    value = PdrAction.from_buffer_copy(pdrs[first][1]) if first < len(pdrs) else PdrAction(flags=PdrFlag.NO_MATCH)
    value.flags |= PdrFlag.SDF
    entries.downlink[key] = value


def _downlink_keys(pdr: Pdr, site: Site) -> list[DownlinkKey]:
    ue = pdr.pdi.ue_ip
    if ue is None:
        raise _refused(pdr, "a downlink PDR needs a UE IP address", IEType.UE_IP_ADDRESS)
    name = ue_instance(pdr.pdi.network_instance, site.default_instance)
    if name is None or name not in site.net_instances:
        known = ", ".join(sorted(site.net_instances)) or "none (upf.n6_interfaces)"
        raise _refused(pdr, f"network instance {name!r} is not served here; known: {known}", IEType.NETWORK_INSTANCE)
    keys = []
    for address in (ue.ipv4, ue.ipv6):
        if address is not None:
            packed = _packed(address)
            keys.append((site.net_instances[name], 4 if len(packed) == 4 else 6, packed.ljust(16, b"\0")))
    return keys


def _action(session: Session, pdr: Pdr, site: Site, urr_slots: Mapping[int, int]) -> PdrAction:
    """The PDR's FAR, first QER with a QFI (and its gate) and its URR, as one entry value."""
    far = session.fars[pdr.far_id]  # type: ignore[index]
    uplink = pdr.pdi.source_interface == Interface.ACCESS
    # A URR whose quota is used up: the PDR drops, uncounted (its packets are no usage), until a new quota.
    exhausted = any(session.urrs[urr_id].quota_exhausted for urr_id in pdr.urr_ids)
    action = PdrAction(output=site.output, urr=NO_URR if exhausted else _usage_slot(session, pdr, urr_slots))
    if pdr.outer_header_removal is not None:
        if pdr.outer_header_removal not in GTPU_REMOVALS:
            raise _refused(pdr, "only GTP-U/UDP/IP outer header removal is supported", IEType.OUTER_HEADER_REMOVAL)
        action.flags |= PdrFlag.DECAP
    qers = [session.qers[qer_id] for qer_id in pdr.qer_ids]
    action.qfi = next((qer.qfi for qer in qers if qer.qfi is not None), 0)
    policer = _policer(session, pdr)
    gate_closed = not policer and any(not (qer.gate_ul_open if uplink else qer.gate_dl_open) for qer in qers)
    action.far = FarAction.DROP if exhausted else _far_action(far, gate_closed)
    if action.far == FarAction.FORWARD:
        _forwarding(action, far, pdr, site, uplink)
        action.policer = policer
    _punted(action, session, pdr, far)
    return action


def _policer(session: Session, pdr: Pdr) -> int:
    """The policer of the QER that polices the PDR (netapp.upf.policing; a closed gate's too), 0
    for none: without a data path that polices, a closed gate is a FAR that drops."""
    qer = policing.policing_qer(session, pdr)
    return session.qer_policers.get(qer.id, (0, 0))[policing.direction(pdr)] if qer is not None else 0


def _usage_slot(session: Session, pdr: Pdr, urr_slots: Mapping[int, int]) -> int:
    """The slot the PDR counts on: its URR's, or that of its set of URRs (models.UrrSet)."""
    urr_ids = set(pdr.urr_ids)
    slot = urr_slots.get(next(iter(urr_ids))) if len(urr_ids) == 1 else session.counting_slot(urr_ids)
    return NO_URR if slot is None else slot


def _punted(action: PdrAction, session: Session, pdr: Pdr, far: Far) -> None:
    """BUFF, DUPL: the frames go to user space (netapp.upf.buffering), named by SEID and PDR id."""
    if "DUPL" not in far.apply_action:
        pass
    elif any(each.outer_header_creation is None for each in far.duplicating):
        raise RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE,
                        "DUPL: duplicating parameters need an outer header creation (the copies' peer)",
                        IEType.DUPLICATING_PARAMETERS, (RuleType.FAR, far.id))
    elif action.far != FarAction.DROP:  # a dropped packet is not duplicated either
        action.flags |= _DUPL
    if action.far == FarAction.BUFFER or action.flags & _DUPL:
        action.seid, action.pdr_id = session.seid, pdr.id


def _far_action(far: Far, gate_closed: bool) -> FarAction:
    if "DROP" in far.apply_action or gate_closed:
        return FarAction.DROP
    return FarAction.BUFFER if "BUFF" in far.apply_action else FarAction.FORWARD


def _forwarding(action: PdrAction, far: Far, pdr: Pdr, site: Site, uplink: bool) -> None:
    """FORW: where to (the egress port for REDIRECT) and, with outer header creation, the tunnel."""
    forwarding = far.forwarding
    assert forwarding is not None  # FORW needs it (models.Far)
    if site.output == Output.REDIRECT:
        action.ifindex = egress_port(far, site)
    _private_routing(action, far, pdr, site)
    creation = forwarding.outer_header_creation
    if creation is None:
        if not action.flags & _DECAP and uplink:
            raise _refused(pdr, "an uplink PDR forwarded without a tunnel needs outer header removal",
                           IEType.OUTER_HEADER_REMOVAL)
        return
    family = 6 if creation.kind.endswith("ipv6") else 4
    local = site.n3_ipv6 if family == 6 else site.n3_ipv4
    if local is None:
        raise _far_refused(far, f"no N3 address of IPv{family} to send from (pfcp.n3_ipv{family})")
    if uplink and not action.flags & _DECAP:
        raise _refused(pdr, "re-encapsulation needs outer header removal", IEType.OUTER_HEADER_REMOVAL)
    action.flags |= _ENCAP
    action.family, action.teid, action.pdu_type = family, creation.teid or 0, 1 if uplink else 0
    if creation.kind.startswith("udp"):  # UDP/IP alone: the port where the TEID would be
        action.flags |= PdrFlag.UDP
        action.teid = creation.port or 0
    action.peer[:] = words(creation.address)
    action.local[:] = words(local)


def _private_routing(action: PdrAction, far: Far, pdr: Pdr, site: Site) -> None:
    """Output FIB, and the packet's network instance routed privately: OUTPUT_PRIVATE, the instance's
    id in ifindex. The packet's instance is the FAR's (where it is forwarded to), else the PDR's, else
    the default."""
    if site.output != Output.FIB or not site.private_instances:
        return
    forwarding = far.forwarding
    assert forwarding is not None
    name = forwarding.network_instance or pdr.pdi.network_instance or site.default_instance
    if name in site.private_instances:
        action.output, action.ifindex = Output.PRIVATE, site.net_instances[name]


def egress_port(far: Far, site: Site) -> int:
    """The port a forwarding FAR leaves by: to ACCESS an N3 interface; to CORE or SGi-LAN/N6 an N9
    interface when it tunnels (N9), else an N6 interface of its network instance (the default
    instance when it names none). The first configured that fits; none: refused, naming the FAR."""
    forwarding = far.forwarding
    assert forwarding is not None
    destination = forwarding.destination_interface
    instance = forwarding.network_instance
    if destination == Interface.ACCESS:
        role, instance = Role.N3, None
    elif destination in (Interface.CORE, Interface.SGI_LAN_N6):
        role = Role.N9 if forwarding.outer_header_creation is not None else Role.N6
        instance = instance if instance is not None or role != Role.N6 else site.default_instance
        if role == Role.N6 and instance is None:
            raise RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE,
                            "several network instances are served: the FAR must name one (REDIRECT)",
                            IEType.NETWORK_INSTANCE, (RuleType.FAR, far.id))
    else:
        raise RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE,
                        f"destination interface {destination.name} is not served by the data path",
                        IEType.DESTINATION_INTERFACE, (RuleType.FAR, far.id))
    for port in site.ports:
        if port.role == role and (role != Role.N6 or port.net_instance == instance):
            return port.ifindex
    where = f"{role.name} interface" + (f" of network instance {instance!r}" if role == Role.N6 else "")
    setting = {Role.N3: "upf.n3_interfaces", Role.N9: "upf.n9_interfaces", Role.N6: "upf.n6_interfaces"}[role]
    named = role == Role.N6 and forwarding.network_instance is not None
    ie_type = IEType.NETWORK_INSTANCE if named else IEType.DESTINATION_INTERFACE
    raise RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE,
                    f"output REDIRECT: no {where} to send destination {destination.name} out of ({setting})",
                    ie_type, (RuleType.FAR, far.id))


_WORDS = struct.Struct("=4I")  # a __u32[4] of network-order words, read in the host's order


def words(address: Union[str, bytes]) -> list[int]:
    """An address (text, or packed into 16 bytes) as the four network-order words of a __u32[4]
    (IPv4 in the first)."""
    packed = address if isinstance(address, bytes) else _packed(address).ljust(16, b"\0")
    return list(_WORDS.unpack(packed))


def _packed(address: str) -> bytes:
    """An address the models have checked (netapp.upf.models), packed (4 or 16 bytes): by the C
    library's parser, a fraction of `ipaddress`'s cost (a session's addresses are packed on every
    change); by `ipaddress` what that one does not take (an IPv6 scope)."""
    try:
        return socket.inet_pton(socket.AF_INET6 if ":" in address else socket.AF_INET, address)
    except OSError:
        return ipaddress.ip_address(address).packed


def _refused(pdr: Pdr, what: str, ie_type: IEType) -> RuleError:
    return RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE, what, ie_type, (RuleType.PDR, pdr.id))


def _far_refused(far: Far, what: str) -> RuleError:
    return RuleError(
        Cause.RULE_CREATION_MODIFICATION_FAILURE, what, IEType.OUTER_HEADER_CREATION, (RuleType.FAR, far.id)
    )
