"""PDRs with SDF filters as rules of the tuple-space classifier (the rules intents become too, through
the same index, slots and transaction: netapp.intents.index, netapp.dataplane.rules).

A PDR with SDF filters keeps the exact entry of its TEID (uplink) or UE address (downlink), marked
DPP_UPF_PDR_SDF: the UPF stage then marks the packet as the UPF's (DPP_KEY_UPF) and lets the
classifier choose. Each flow description becomes one rule per port pair (and per QFI of the PDI, per
N6 interface of the network instance, per UE address family), whose key is:

- uplink: the UPF bit, GTP-U, the TEID (and the QFI); the UE packet's source is the description's
  `to` end and its destination the `from` end (29.244 5.2.1A.2: a flow description is written for
  the downlink, the uplink swaps source and destination, addresses and ports);
- downlink: the UPF bit, the N6 interface, the UE address as the destination, the `from` end as the
  source;

and the protocol. `assigned` stands for the PDI's UE address of the family (no constraint without
one). The rule's action is DPP_ACTION_UPF, its arg the PDR's slot of dpp_upf_sdf_pdrs (its whole
action, the value its exact entry would hold), its priority 65535 - precedence: the lower the
precedence value, the higher the priority. The PDRs without SDF filters of the TEID or UE address
stay in the exact entry, which the data path takes when no rule matched.

The classifier compares exact ports (no port prefixes: each prefix length would be a shape of its
own, of the 16 it searches for every tenant), so ranges are expanded to their ports, at most
MAX_RULES_PER_FILTER rules per description; a description that needs more is refused, as is a
precedence above 65535 and two PDRs with SDF filters of one TEID or UE address with the same
precedence (29.244 leaves their order open; the classifier could not keep one).
"""

from __future__ import annotations

import ipaddress
import itertools
from typing import Any, Optional, Sequence

from netapp.intents.compiler import CompiledRule, FieldValues, shape_of
from netapp.upf.flows import FlowDescription, FlowEnd
from netapp.upf.models import Pdr, RuleError
from netapp.upf.pfcp.ies import Cause, IEType, RuleType

MAX_PRIORITY = 0xFFFF
MAX_RULES_PER_FILTER = 16
RULE_PREFIX = "upf#"  # no '/': never the id of a tenant's intent (`<tenant>/<intent id>`)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def rule_id(seid: int, pdr_id: int, number: int) -> str:
    """The index's id of one of a PDR's rules."""
    return f"{RULE_PREFIX}{seid:x}#{pdr_id}#{number}"


def is_upf_rule(rule_id_: str) -> bool:
    return rule_id_.startswith(RULE_PREFIX)


def priority(pdr: Pdr) -> int:
    if pdr.precedence > MAX_PRIORITY:
        raise refused(pdr, f"precedence {pdr.precedence}: a PDR with SDF filters takes 0..{MAX_PRIORITY}",
                      IEType.PRECEDENCE)
    return MAX_PRIORITY - pdr.precedence


def check_ties(pdrs: Sequence[Pdr]) -> None:
    """PDRs with SDF filters of one TEID or UE address, in (precedence, id) order: none may share a
    precedence."""
    for before, after in itertools.pairwise(pdrs):
        if before.precedence == after.precedence:
            raise refused(after, f"precedence {after.precedence} is PDR {before.id}'s too: PDRs with SDF filters "
                          "of one TEID or UE address need distinct precedences", IEType.PRECEDENCE)


def uplink_rules(seid: int, pdr: Pdr, teid: int, qfis: Sequence[Optional[int]], slot: int) -> list[CompiledRule]:
    """The rules of an uplink PDR: `qfis` those it takes (None: any)."""
    base: dict[str, Any] = {"upf": 1, "gtp": 1, "teid": teid}
    keys = []
    for qfi in qfis:
        where = base if qfi is None else {**base, "gtp_qfi": 1, "qfi": qfi}
        for flow in pdr.pdi.sdf_filters:
            keys += _flow_keys(pdr, flow, where, uplink=True)
    return _rules(seid, pdr, keys, slot)


def downlink_rules(seid: int, pdr: Pdr, ifindexes: Sequence[int], slot: int) -> list[CompiledRule]:
    """The rules of a downlink PDR, on each N6 interface of its network instance."""
    keys = []
    for ifindex in ifindexes:
        for flow in pdr.pdi.sdf_filters:
            keys += _flow_keys(pdr, flow, {"upf": 1, "interface": ifindex}, uplink=False)
    return _rules(seid, pdr, keys, slot)


def _rules(seid: int, pdr: Pdr, keys: list[dict[str, Any]], slot: int) -> list[CompiledRule]:
    level = priority(pdr)
    return [
        CompiledRule(intent_id=rule_id(seid, pdr.id, number), shape=shape_of(values), values=FieldValues(values),
                     priority=level, action="upf", arg=slot, arg_text=f"PDR {pdr.id}")
        for number, values in enumerate(keys)
    ]


def _flow_keys(pdr: Pdr, flow: FlowDescription, where: dict[str, Any], *, uplink: bool) -> list[dict[str, Any]]:
    """The keys of one flow description (its `to` end the UE's, its `from` end the remote's), each
    family it can match."""
    ue, remote = flow.destination, flow.source
    ue_side, remote_side = ("src", "dst") if uplink else ("dst", "src")
    keys = []
    for family in _families(pdr, flow, ue, remote, uplink):
        ue_net, remote_net = _network(pdr, ue, family), _network(pdr, remote, family)
        if not uplink:  # the UE address is the destination: the exact entry's key
            ue_address = _ue_network(pdr, family)
            if ue_net is not None and ue_address is not None and not _within(ue_address, ue_net):
                continue  # the description never matches this UE address
            ue_net = ue_address
        values = dict(where)
        if flow.protocol is not None:
            values["protocol"] = flow.protocol
        if family:
            values["family"] = family
        for side, network in ((ue_side, ue_net), (remote_side, remote_net)):
            if network is not None and network.prefixlen > 0:
                values[side] = network
        keys += _with_ports(pdr, flow, values, ue.ports, remote.ports, uplink)
    return keys


def _within(inner: Network, outer: Network) -> bool:
    return inner.subnet_of(outer)  # type: ignore[arg-type]


def _families(pdr: Pdr, flow: FlowDescription, ue: FlowEnd, remote: FlowEnd, uplink: bool) -> list[int]:
    """The families the description is matched in (0: either, no address compared)."""
    named = {ipaddress.ip_network(end.network).version for end in (ue, remote) if end.network is not None}
    if len(named) > 1:
        raise refused(pdr, f"flow description {flow.text!r} mixes IPv4 and IPv6", IEType.SDF_FILTER)
    ue_ip = pdr.pdi.ue_ip
    have = [family for family, address in ((4, ue_ip and ue_ip.ipv4), (6, ue_ip and ue_ip.ipv6)) if address]
    if not uplink:  # the UE address is the destination
        return [family for family in have if not named or family in named]
    if named:
        return [*named]
    return have if have and (ue.assigned or remote.assigned) else [0]


def _network(pdr: Pdr, end: FlowEnd, family: int) -> Optional[Network]:
    if end.assigned:
        return _ue_network(pdr, family)
    return ipaddress.ip_network(end.network) if end.network is not None else None


def _ue_network(pdr: Pdr, family: int) -> Optional[Network]:
    ue_ip = pdr.pdi.ue_ip
    address = None if ue_ip is None else ue_ip.ipv4 if family == 4 else ue_ip.ipv6 if family == 6 else None
    return ipaddress.ip_network(address) if address else None


def _with_ports(pdr: Pdr, flow: FlowDescription, values: dict[str, Any], ue_ports: tuple, remote_ports: tuple,
                uplink: bool) -> list[dict[str, Any]]:
    """One key per (source port, destination port) the ranges hold; a range of every port compares
    none."""
    count = _count(ue_ports) * _count(remote_ports)
    if count > MAX_RULES_PER_FILTER:
        raise refused(pdr, f"flow description {flow.text!r} needs {count} rules (the classifier matches exact "
                      f"ports): at most {MAX_RULES_PER_FILTER}", IEType.SDF_FILTER)
    ue_list, remote_list = _ports(ue_ports), _ports(remote_ports)
    src_list, dst_list = (ue_list, remote_list) if uplink else (remote_list, ue_list)
    keys = []
    for src, dst in itertools.product(src_list, dst_list):
        key = dict(values)
        for field, port in (("src_port", src), ("dst_port", dst)):
            if port is not None:
                key[field] = port
                key["fragment"] = 0  # a non-first fragment has no ports (as intents)
        keys.append(key)
    return keys


def _any_port(ranges: tuple[tuple[int, int], ...]) -> bool:
    return not ranges or any(first == 0 and last == 0xFFFF for first, last in ranges)


def _count(ranges: tuple[tuple[int, int], ...]) -> int:
    return 1 if _any_port(ranges) else len(set().union(*(range(first, last + 1) for first, last in ranges)))


def _ports(ranges: tuple[tuple[int, int], ...]) -> list[Optional[int]]:
    """Every port of the ranges, in order; [None]: any port."""
    if _any_port(ranges):
        return [None]
    return sorted(set().union(*(range(first, last + 1) for first, last in ranges)))


def refused(pdr: Pdr, what: str, ie_type: IEType) -> RuleError:
    return RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE, what, ie_type, (RuleType.PDR, pdr.id))
