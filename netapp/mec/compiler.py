"""MEC 011 traffic rules as intents (pure): a rule's filter becomes a classifier match, its action
pass, drop, a redirect out of one of the node's interfaces, a tunnel action (decapsulated, moved
into a GTP-U tunnel, sent towards an address) or a duplicate out of two.

A rule compiles to the intents that do exactly what it asks, or is refused (IntentError) naming the
ETSI field (`trafficFilter[0].srcTunnelAddress`, `action`, `dstInterface.interfaceType`) and why the
data plane cannot do it; nothing is accepted and left undone:

| rule                                  | intents                                                        |
|---------------------------------------|----------------------------------------------------------------|
| filterType PACKET                     | one: the filter as written                                     |
| filterType FLOW (DROP, PASSTHROUGH)   | two: the filter and its reverse (addresses and ports swapped)  |
| action DROP                           | drop (no dstInterface, as ETSI says)                           |
| action PASSTHROUGH                    | pass; with a MAC dstInterface, redirect out of it              |
| FORWARD_DECAPSULATED, MAC             | tunnel: decapsulated, out of the interface whose MAC is srcMacAddress |
| FORWARD_DECAPSULATED, IP              | tunnel: decapsulated, towards dstIpAddress (next hop: the FIB)  |
| FORWARD_DECAPSULATED, TUNNEL          | refused: a decapsulated packet leaves its tunnel (FORWARD_ENCAPSULATED moves it) |
| FORWARD_ENCAPSULATED, MAC             | redirect out of the srcMacAddress interface, as the packet came |
| FORWARD_ENCAPSULATED, IP              | tunnel: as the packet came, towards dstIpAddress (next hop: the FIB) |
| FORWARD_ENCAPSULATED, TUNNEL GTP_U    | tunnel: moved into GTP-U to tunnelDstAddress (next hop: the FIB) |
| FORWARD_ENCAPSULATED, TUNNEL GRE      | tunnel: carried in GRE to tunnelDstAddress (next hop: the FIB)  |
| DUPLICATE_ENCAPSULATED                | duplicate out of the two MAC dstInterfaces, copies as they came |
| DUPLICATE_DECAPSULATED                | the same, dstInterface[0]'s copy of a GTP-U packet decapsulated |
| state INACTIVE                        | none installed (the rule is still checked, so it can be turned on) |

Decapsulated (FORWARD_DECAPSULATED): a GTP-U packet loses every header up to and including GTP-U and its
extension headers (the overlay it came in too: VXLAN, GENEVE, GRE), keeps the outermost Ethernet
header's addresses and gets its UE packet's EtherType; a packet that came without GTP-U leaves as it
came. Moved into a tunnel (FORWARD_ENCAPSULATED, TUNNEL GTP_U): the GTP-U packet's UE packet gets a new
outer IP/UDP/GTP-U header towards tunnelDstAddress, from tunnelSrcAddress (none: the address its own
tunnel was sent to), with the packet's own TEID, which says which PDU session it is (TS 29.281: the TEID is the receiving
endpoint's, which MEC 011 does not give; a tunnel endpoint that forwards a T-PDU unchanged keeps it),
and its PDU Session Container (QFI and direction) if it had one: none is added to a T-PDU that came
without. A packet that came without GTP-U has no TEID to keep: it is not moved (the default verdict,
counted as tunnel_not_gtpu). The frames are built by the UPF's code (netapp.mec.tunnels).

Carried in GRE (FORWARD_ENCAPSULATED, TUNNEL GRE): the IP packet, a GTP-U packet's UE packet (its
tunnel's headers gone, as FORWARD_DECAPSULATED takes them) or the innermost IP packet of one that
came without GTP-U, gets an outer IP and a GRE header (RFC 2784) towards tunnelDstAddress, from
tunnelSrcAddress (none: the address a GTP-U packet's tunnel was sent to; a packet without GTP-U then
gets the default verdict, counted as tunnel_no_source). The key (RFC 2890): tunnelSpecificData, an
integer 0 to 4294967295 (or its decimal string), the same for every packet of the rule, as a GRE
endpoint (a Linux gre device's ikey) expects one key per tunnel; none given: no key. MEC 011 v2.1.1's
TunnelInfo has no member for it; MEC 010-2's (the AppD's) has tunnelSpecificData, which ETSI leaves
unspecified, and MEC 011's document allows members it does not list. The packet's TEID is not carried:
GRE's far end is not a GTP-U endpoint.

The classifier holds one value per field, so a filter compiles when each of its lists holds at most
one value (an address or prefix, a port, a protocol), and a rule has exactly one filter. It matches
a GTP-U packet's TEID and inner headers, not its tunnel's outer addresses or ports, nor a 4G QCI:
those members are refused. dSCP (IPv4) and tC (IPv6) match the DSCP of the innermost header, which
is family-blind, so they need an address of their family.

DUPLICATE_*: MEC 011 gives two dstInterface values (a list of two, or v2.1.1's object with both in
dstInterfaces: netapp.mec.models.TrafficRule; one alone is refused). Each is a MAC interface named by
srcMacAddress, as for FORWARD_DECAPSULATED (the intent action `duplicate`: netapp.duplicate).
DUPLICATE_ENCAPSULATED: both copies leave as the packet came. DUPLICATE_DECAPSULATED: the first,
the application's, leaves decapsulated as FORWARD_DECAPSULATED's packet does (its interface's
copies run the egress program that removes the headers up to and including GTP-U), the second as
the packet came; MEC 011 does not say which value is the application's, so the first is. A GTP-U
copy whose payload is not IP cannot be decapsulated: dropped and counted (tunnel_copy_failed), the
other copy still sent; a packet without GTP-U leaves as it came out of both.

Priority: MEC's 0 (highest) to 255 (lowest) become intent priorities MEC_PRIORITY_BASE + 255 - p,
ordered as MEC orders them and above slices' (1001 to 1127): an application's rule on a slice's
traffic is what decides where the application's traffic goes.
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Any, Mapping, Optional

from pydantic import ValidationError

from netapp.intents.errors import IntentError
from netapp.intents.fields import PROTOCOL_NUMBERS
from netapp.intents.models import Intent, Match
from netapp.mec.models import (
    DestinationInterface,
    FilterType,
    InterfaceType,
    RuleAction,
    RuleState,
    TrafficFilter,
    TrafficRule,
    TunnelType,
)

MEC_SOURCE = "mec011"  # the source of the intents a traffic rule compiles to
MEC_PRIORITY_BASE = 2000
MAX_MEC_PRIORITY = 255
RULE_TAG_DIGITS = 16
FILTER = "trafficFilter[0]"

# Intent match fields -> the ETSI filter members they come from, for errors to name the latter.
_MATCH_TO_FILTER = {
    "src": "srcAddress",
    "dst": "dstAddress",
    "src_port": "srcPort",
    "dst_port": "dstPort",
    "protocol": "protocol",
    "dscp": "dSCP",
    "tunnel_src": "srcTunnelAddress",
    "tunnel_dst": "tgtTunnelAddress",
}
_UNMATCHED = {
    "token": "token-based rules are not matched: the classifier sees packet headers only",
    "srcTunnelPort": "the classifier matches a GTP-U tunnel's addresses, not its source port (any port may send "
    "GTP-U): match srcTunnelAddress",
    "qCI": "QCI is a 4G bearer class the packets do not carry; the classifier matches the 5G QFI",
}
GTPU_PORT = 2152  # the data plane recognises GTP-U on this UDP destination port only
_DUPLICATES = (RuleAction.DUPLICATE_DECAPSULATED.value, RuleAction.DUPLICATE_ENCAPSULATED.value)
DUPLICATE_COPIES = 2  # MEC 011: "two values shall be provided"
MAX_GRE_KEY = (1 << 32) - 1


def intent_ids(app_instance_id: str, traffic_rule_id: str) -> list[str]:
    """The ids of the (at most two) intents of a rule: a tag of both ids (they may hold any character)."""
    tag = hashlib.sha256(f"{app_instance_id}\0{traffic_rule_id}".encode()).hexdigest()[:RULE_TAG_DIGITS]
    return [f"mec-{tag}-0", f"mec-{tag}-1"]


def installed_intents(
    app_instance_id: str, rule: TrafficRule, interfaces_by_mac: Mapping[str, str]
) -> list[Intent]:
    """What a rule installs now: its intents when ACTIVE, none when INACTIVE (checked either way)."""
    intents = rule_intents(app_instance_id, rule, interfaces_by_mac)
    return intents if rule.state == RuleState.ACTIVE.value else []


def rule_intents(app_instance_id: str, rule: TrafficRule, interfaces_by_mac: Mapping[str, str]) -> list[Intent]:
    """The intents that do what `rule` asks; IntentError naming the ETSI field when none can.
    `interfaces_by_mac`: the node's interfaces by MAC (lower case, colons)."""
    priority = _priority(rule.priority)
    action = _action(rule, interfaces_by_mac)
    match = _match(_one_filter(rule.trafficFilter))
    matches = [match]
    if rule.filterType == FilterType.FLOW.value:
        matches = _both_directions(match, rule)
    ids = intent_ids(app_instance_id, rule.trafficRuleId)
    label = f"MEC 011 traffic rule {rule.trafficRuleId[:96]!r} of application {app_instance_id[:96]!r}"
    return [
        Intent(id=ids[n], priority=priority, match=one, action=action, label=label)
        for n, one in enumerate(matches)
    ]


def _priority(priority: int) -> int:
    if not 0 <= priority <= MAX_MEC_PRIORITY:
        raise IntentError.at("priority", f"{priority} is outside 0 (highest) to {MAX_MEC_PRIORITY} (lowest)")
    return MEC_PRIORITY_BASE + MAX_MEC_PRIORITY - priority


# --- the filter ----------------------------------------------------------------------------------


def _one_filter(filters: list[TrafficFilter]) -> TrafficFilter:
    if len(filters) != 1:
        raise IntentError.at(
            "trafficFilter",
            f"{len(filters)} filters: a rule compiles to one classifier match, so it takes exactly one filter",
        )
    return filters[0]


def _match(flt: TrafficFilter) -> Match:
    for member, why in _UNMATCHED.items():
        if _given(getattr(flt, member)):
            raise IntentError.at(f"{FILTER}.{member}", why)
    fields: dict[str, Any] = {}
    for member, name in (("srcAddress", "src"), ("dstAddress", "dst")):
        value = _single(flt, member)
        if value is not None:
            fields[name] = parse_address(value, f"{FILTER}.{member}[0]")
    for member, name in (("srcPort", "src_port"), ("dstPort", "dst_port")):
        value = _single(flt, member)
        if value is not None:
            fields[name] = parse_port(value, f"{FILTER}.{member}[0]")
    for member, name in (("srcTunnelAddress", "tunnel_src"), ("tgtTunnelAddress", "tunnel_dst")):
        value = _single(flt, member)
        if value is not None:
            fields[name] = parse_tunnel_address(value, f"{FILTER}.{member}[0]")
    _dst_tunnel_port(flt, fields)
    protocol = _single(flt, "protocol")
    if protocol is not None:
        fields["protocol"] = parse_protocol(protocol, f"{FILTER}.protocol[0]")
    _dscp(flt, fields)
    try:
        return Match.model_validate(fields)
    except ValidationError as exc:
        raise _renamed(IntentError.from_validation(exc)) from None


def _given(value: Any) -> bool:
    return value is not None and value != []


def _single(flt: TrafficFilter, member: str) -> Optional[str]:
    values = getattr(flt, member)
    if not values:
        return None
    if len(values) > 1:
        raise IntentError.at(
            f"{FILTER}.{member}",
            f"{len(values)} values: the classifier holds one value per field (write one rule per value)",
        )
    return values[0]


def parse_address(text: str, field: str) -> str:
    """An ETSI address member (an address or a prefix) as a match prefix; IntentError at `field`."""
    if "-" in text:
        raise IntentError.at(field, f"{text!r}: ranges are not matched, give an address or a prefix")
    try:
        return str(ipaddress.ip_network(text.strip(), strict=False))
    except ValueError:
        raise IntentError.at(field, f"{text!r} is not an IPv4 or IPv6 address or prefix") from None


def parse_tunnel_address(text: str, field: str) -> str:
    """An ETSI tunnel address member as a match tunnel address (one host); IntentError at `field`."""
    value = text.strip()
    if "-" in value or "/" in value:
        raise IntentError.at(
            field, f"{text!r}: tunnel endpoints are matched exactly, give one address (no prefix or range)"
        )
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise IntentError.at(field, f"{text!r} is not an IPv4 or IPv6 address") from None


def _dst_tunnel_port(flt: TrafficFilter, fields: dict[str, Any]) -> None:
    """dstTunnelPort: GTP-U's port, which every GTP-U packet the classifier sees is sent to, so it
    narrows nothing more than a tunnel address does; another port would never match."""
    value = _single(flt, "dstTunnelPort")
    if value is None:
        return
    field = f"{FILTER}.dstTunnelPort[0]"
    if parse_port(value, field) != GTPU_PORT:
        raise IntentError.at(field, f"{value!r}: the data plane recognises GTP-U on UDP port {GTPU_PORT} only")
    if "tunnel_src" not in fields and "tunnel_dst" not in fields:
        raise IntentError.at(
            field, f"dstTunnelPort {GTPU_PORT} alone is every GTP-U packet: give srcTunnelAddress or tgtTunnelAddress"
        )


def parse_port(text: str, field: str) -> int:
    """An ETSI port member (a decimal string) as a match port; IntentError at `field`."""
    value = text.strip()
    if not decimal(value) or not 0 <= int(value) <= 65535:
        why = "ranges are not matched, give one port" if "-" in value else "is not a port (0 to 65535)"
        raise IntentError.at(field, f"{text!r}: {why}")
    return int(value)


def parse_protocol(text: str, field: str) -> Any:
    """An ETSI protocol member (a name or a number) as a match protocol; IntentError at `field`."""
    value = text.strip().lower()
    if value in PROTOCOL_NUMBERS:
        return value
    if decimal(value) and int(value) <= 255:
        return int(value)
    known = ", ".join(name.upper() for name in PROTOCOL_NUMBERS)
    raise IntentError.at(field, f"{text!r} is not {known} or an IP protocol number (0 to 255)")


def decimal(text: str) -> bool:
    """ASCII digits only: str.isdigit() also takes digits int() does not read ("²")."""
    return text.isascii() and text.isdigit()


def _dscp(flt: TrafficFilter, fields: dict[str, Any]) -> None:
    """dSCP (IPv4) or tC (IPv6) as the DSCP match, which is family-blind: an address fixes the family."""
    if flt.dSCP is not None and flt.tC is not None:
        raise IntentError.at(f"{FILTER}.tC", "give dSCP (IPv4) or tC (IPv6), not both")
    if flt.dSCP is not None:
        if not 0 <= flt.dSCP <= 63:
            raise IntentError.at(f"{FILTER}.dSCP", f"{flt.dSCP} is not a DSCP (0 to 63)")
        _require_family(fields, 4, "dSCP")
        fields["dscp"] = flt.dSCP
    if flt.tC is not None:
        if not 0 <= flt.tC <= 255 or flt.tC & 3:
            raise IntentError.at(
                f"{FILTER}.tC", f"{flt.tC}: the traffic class's DSCP is matched, not its ECN bits (a multiple of 4, 0 to 252)"
            )
        _require_family(fields, 6, "tC")
        fields["dscp"] = flt.tC >> 2


def _require_family(fields: dict[str, Any], version: int, member: str) -> None:
    prefix = fields.get("src") or fields.get("dst")
    if prefix is None or ipaddress.ip_network(prefix).version != version:
        raise IntentError.at(
            f"{FILTER}.{member}",
            f"{member} matches IPv{version} packets only, and the DSCP match is family-blind: "
            f"it needs an IPv{version} srcAddress or dstAddress",
        )


def _renamed(error: IntentError) -> IntentError:
    """An intent match's field paths as the ETSI filter members they came from."""
    return IntentError([(filter_path(path), message) for path, message in error.problems])


def filter_path(path: str) -> str:
    """`dst_port` or `match.dst_port` -> `trafficFilter[0].dstPort`."""
    name = path.removeprefix("match.").split(".", 1)[0]
    member = _MATCH_TO_FILTER.get(name)
    return f"{FILTER}.{member}" if member else FILTER


def _both_directions(match: Match, rule: TrafficRule) -> list[Match]:
    """FLOW: the filter and its reverse, for actions that are the same both ways."""
    if rule.action != RuleAction.DROP.value and not (
        rule.action == RuleAction.PASSTHROUGH.value and rule.dstInterface is None
    ):
        raise IntentError.at(
            "filterType",
            f"FLOW with {rule.action} would send the reverse direction out of the same interface; the "
            "classifier acts per direction: use PACKET (and a rule for the reverse direction if it needs one)",
        )
    reverse = match.model_copy(
        update={
            "src": match.dst,
            "dst": match.src,
            "src_port": match.dst_port,
            "dst_port": match.src_port,
            "tunnel_src": match.tunnel_dst,
            "tunnel_dst": match.tunnel_src,
        }
    )
    return [match] if reverse == match else [match, reverse]


# --- the action ----------------------------------------------------------------------------------


def _action(rule: TrafficRule, interfaces_by_mac: Mapping[str, str]) -> dict[str, Any]:
    if rule.action in _DUPLICATES:
        return _duplicate(rule, interfaces_by_mac)
    if rule.action == RuleAction.DROP.value:
        if rule.dstInterface is not None:
            raise IntentError.at("dstInterface", "DROP takes no destination interface (MEC 011: none shall be given)")
        return {"type": "drop"}
    if rule.dstInterface is None:
        if rule.action == RuleAction.PASSTHROUGH.value:
            return {"type": "pass"}
        raise IntentError.at("dstInterface", f"{rule.action} needs a destination interface")
    return _forward(rule, _one_destination(rule), interfaces_by_mac)


def _one_destination(rule: TrafficRule) -> DestinationInterface:
    """FORWARD_* and PASSTHROUGH's one dstInterface, given as the object or as a list of one."""
    destinations = rule.destinations()
    if len(destinations) != 1:
        raise IntentError.at("dstInterface", f"{len(destinations)} values: {rule.action} sends a packet "
                                             "to one (MEC 011: one value shall be provided)")
    return destinations[0]


def _forward(rule: TrafficRule, destination: DestinationInterface, interfaces_by_mac: Mapping[str, str]) -> dict[str, Any]:
    """PASSTHROUGH and FORWARD_* with their destination interface (the module's table)."""
    kind = destination.interfaceType
    if rule.action == RuleAction.PASSTHROUGH.value and kind != InterfaceType.MAC.value:
        raise IntentError.at(
            "dstInterface.interfaceType",
            f"{kind}: PASSTHROUGH sends the packet on unchanged, out of an interface of the node; "
            "use MAC, with srcMacAddress naming one of them",
        )
    decapsulate = rule.action == RuleAction.FORWARD_DECAPSULATED.value
    if kind == InterfaceType.TUNNEL.value:
        return _into_tunnel(destination, decapsulate)
    if kind == InterfaceType.IP.value:
        return {"type": "tunnel", "decapsulate": decapsulate, "towards": _ip_destination(destination)}
    interface = _interface(destination, interfaces_by_mac)
    if decapsulate:
        return {"type": "tunnel", "decapsulate": True, "interface": interface}
    return {"type": "redirect", "interface": interface}


def _unused(destination: DestinationInterface, members: tuple[str, ...], why: str) -> None:
    for member in members:
        if getattr(destination, member) is not None:
            raise IntentError.at(f"dstInterface.{member}", why)


def _interface(destination: DestinationInterface, interfaces_by_mac: Mapping[str, str]) -> str:
    _unused(destination, ("tunnelInfo", "dstIpAddress", "dstMacAddress"),
            "not used by a MAC interface: the frame's MAC addresses are kept")
    if destination.srcMacAddress is None:
        raise IntentError.at("dstInterface.srcMacAddress", "a MAC interface is named by its MAC address")
    return _interface_of(destination.srcMacAddress, interfaces_by_mac)


def _ip_destination(destination: DestinationInterface) -> str:
    _unused(destination, ("tunnelInfo", "srcMacAddress", "dstMacAddress"),
            "not used by an IP interface: the next hop and its MACs come from the FIB")
    if destination.dstIpAddress is None:
        raise IntentError.at("dstInterface.dstIpAddress", "an IP interface is named by the address to forward towards")
    return parse_host(destination.dstIpAddress, "dstInterface.dstIpAddress")


def _into_tunnel(destination: DestinationInterface, decapsulate: bool) -> dict[str, Any]:
    """FORWARD_ENCAPSULATED into a GTP-U or GRE tunnel (see the module's docstring for what it keeps)."""
    if decapsulate:
        raise IntentError.at(
            "dstInterface.interfaceType",
            "TUNNEL with FORWARD_DECAPSULATED: a decapsulated packet leaves its tunnel; to move it into another "
            "tunnel use FORWARD_ENCAPSULATED",
        )
    _unused(destination, ("srcMacAddress", "dstMacAddress", "dstIpAddress"),
            "not used by a TUNNEL interface: the tunnel goes to tunnelInfo.tunnelDstAddress")
    info = destination.tunnelInfo
    if info is None:
        raise IntentError.at("dstInterface.tunnelInfo", "a TUNNEL interface needs its tunnelInfo")
    if info.tunnelDstAddress is None:
        raise IntentError.at("dstInterface.tunnelInfo.tunnelDstAddress", "a tunnel needs its far end's address")
    tunnel: dict[str, Any] = {"peer": parse_host(info.tunnelDstAddress, "dstInterface.tunnelInfo.tunnelDstAddress")}
    if info.tunnelType == TunnelType.GRE.value:
        tunnel["protocol"] = "gre"
        key = gre_key(info.tunnelSpecificData)
        if key is not None:
            tunnel["key"] = key
    elif info.tunnelSpecificData is not None:
        raise IntentError.at("dstInterface.tunnelInfo.tunnelSpecificData",
                             "a GTP-U tunnel keeps the packet's own TEID and QFI: it takes no tunnelSpecificData")
    if info.tunnelSrcAddress is not None:
        tunnel["source"] = parse_host(info.tunnelSrcAddress, "dstInterface.tunnelInfo.tunnelSrcAddress")
        if ipaddress.ip_address(tunnel["source"]).version != ipaddress.ip_address(tunnel["peer"]).version:
            raise IntentError.at(
                "dstInterface.tunnelInfo.tunnelSrcAddress",
                f"{info.tunnelSrcAddress!r} is not of tunnelDstAddress's family",
            )
    return {"type": "tunnel", "encapsulate": tunnel}


def gre_key(data: Any) -> Optional[int]:
    """tunnelSpecificData as a GRE key: an integer 0 to 4294967295 or its decimal string, or none."""
    if data is None:
        return None
    text = data.strip() if isinstance(data, str) else None
    if text is not None and decimal(text):
        data = int(text)
    if isinstance(data, bool) or not isinstance(data, int) or not 0 <= data <= MAX_GRE_KEY:
        raise IntentError.at("dstInterface.tunnelInfo.tunnelSpecificData",
                             f"{data!r}: a GRE tunnel's tunnelSpecificData is its key, an integer 0 to {MAX_GRE_KEY}")
    return data


def parse_host(text: str, field: str) -> str:
    """An ETSI address member that names one host (not a prefix); IntentError at `field`."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise IntentError.at(field, f"{text!r} is not an IPv4 or IPv6 address") from None


def _interface_of(text: str, interfaces_by_mac: Mapping[str, str]) -> str:
    mac = mac_key(text)
    if mac in interfaces_by_mac:
        return interfaces_by_mac[mac]
    known = ", ".join(f"{address} ({name})" for address, name in sorted(interfaces_by_mac.items())) or "none"
    raise IntentError.at(
        "dstInterface.srcMacAddress", f"{text!r} is not the MAC of an interface of the data plane (known: {known})"
    )


def mac_key(mac: str) -> str:
    """A MAC as `interfaces_by_mac` keys it."""
    return mac.strip().lower().replace("-", ":")


# --- DUPLICATE_* ---------------------------------------------------------------------------------


def _duplicate(rule: TrafficRule, interfaces_by_mac: Mapping[str, str]) -> dict[str, Any]:
    """DUPLICATE_*: a copy out of each of the two MAC interfaces (the intent action `duplicate`), the
    first's decapsulated for DUPLICATE_DECAPSULATED."""
    destinations = rule.destinations()
    if len(destinations) != DUPLICATE_COPIES:
        raise IntentError.at("dstInterface", f"{len(destinations)} values: {rule.action} sends a copy out of each "
                                             f"of {DUPLICATE_COPIES} (MEC 011: two values shall be provided, as a "
                                             "list, or in dstInterfaces)")
    names = [_copy_interface(destination, f"dstInterface[{n}]", interfaces_by_mac)
             for n, destination in enumerate(destinations)]
    if names[0] == names[1]:
        raise IntentError.at("dstInterface[1].srcMacAddress", f"{names[1]} is dstInterface[0]'s interface too: "
                                                              "each copy leaves by its own")
    decapsulate = names[:1] if rule.action == RuleAction.DUPLICATE_DECAPSULATED.value else []
    return {"type": "duplicate", "interfaces": names, "decapsulate": decapsulate}


def _copy_interface(destination: DestinationInterface, where: str, interfaces_by_mac: Mapping[str, str]) -> str:
    """A copy's interface: a MAC interface named by srcMacAddress; IntentError at `where`."""
    if destination.interfaceType != InterfaceType.MAC.value:
        raise IntentError.at(f"{where}.interfaceType", f"{destination.interfaceType}: a copy leaves by one of the "
                                                       "node's interfaces as it came; use MAC, with srcMacAddress")
    for member in ("tunnelInfo", "dstIpAddress", "dstMacAddress"):
        if getattr(destination, member) is not None:
            raise IntentError.at(f"{where}.{member}", "not used by a copy: it leaves as the packet came, unrewritten")
    if destination.srcMacAddress is None:
        raise IntentError.at(f"{where}.srcMacAddress", "a MAC interface is named by its MAC address")
    try:
        return _interface_of(destination.srcMacAddress, interfaces_by_mac)
    except IntentError as exc:
        raise IntentError([(path.replace("dstInterface", where, 1), message)
                           for path, message in exc.problems]) from None
