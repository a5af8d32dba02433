"""MEC 015 MTS sessions with flow filters as rules of the NetApp's classifier: the flows of a UE's
downlink that a session's flowFilter selects run its steering mode, the UE's other flows the ATSSS
session's own (or that of the UE's MTS session without filters).

The rules are the classifier's (netapp.service.function_rules: the index, slots, shapes, per-rule
counters and one-write publication of the intents' and the UPF's rules), told apart by the key's
ATSSS bit, which every shape compares: ATSSS's stage sets it in the frames of a session marked
FLOW_RULES (dataplane/bpf/nf/atsss/flows.h says why there), so no intent's rule matches them and
no ATSSS rule matches any other frame. A rule's key is:

- the ATSSS bit, the UE's family and its whole address as the destination: a rule acts on the
  downlink of its MTS session's UE alone, which is the tenant's (Atsss.steer checks the owner);
- sourceIp (an address or a prefix, of the UE's family), protocol, dscp; sourcePort and dstPort,
  one rule per pair of their ports (at most MAX_RULES_PER_FILTER a filter), with protocol 6, 17
  or 132 (the key's ports of another protocol are other fields: ICMP's type and code) and only for
  a first fragment or a whole packet (a later fragment has no ports).

flowlabel is refused: the classifier's key holds no IPv6 flow label. The rule's action is ATSSS,
its arg the mode (enum dpp_atsss_mode) and the slot of its MTS session's scheduler state (abi.rule_arg).

The flows of an MTS session in round-robin or weighted (STATEFUL_MODES) schedule with a state of
their own, the running weights and turns of dpp_atsss_flow_state (nf/atsss/flows.h says why there),
whose slot the service gives the session (netapp.atsss.service: stored with it, zeroed in the map
before its rules name it, a new one each time the session is written) and writes into its rules
alone: a tenant's rule names no slot it was not given, so it moves no other session's state. Its
flows are split by the weights, or take the paths in turn, each MTS session's on its own, whatever
the UE's other flows and frames; the weights are the ATSSS session's paths' (MEC 015 gives an MTS
session none: its qosD.minTpt is a floor of throughput, which the node does not measure). The other
modes keep no state (slot 0).

Overlaps, among the UE's MTS sessions with filters: the most specific filter wins, by the bits it
compares (a prefix its length, a port 16, protocol 8, dscp 6), which is the rule's priority. Two
filters of two sessions that compare as many bits and can match one packet are refused (the
classifier would pick either), an exact duplicate among them, naming the field and the other
session.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import itertools
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from netapp.atsss import store as stored
from netapp.atsss.abi import rule_arg
from netapp.atsss.models import SteeringMode
from netapp.intents.compiler import MAX_SHAPES, CompiledRule, FieldValues, shape_of
from netapp.service.contract import InvalidInput, QuotaExceeded
from netapp.service.function_rules import FunctionRules, RuleClash
from netapp.service.store import Store

RULE_PREFIX = "atsss#"  # no '/': never the id of a tenant's intent (`<tenant>/<intent id>`)
MAX_RULES_PER_FILTER = 16
MAX_FLOW_FILTERS = 16  # an MTS session's flowFilter items
# The classifier's shapes one tenant's flow filters may take of the MAX_SHAPES every rule shares (every
# tenant's together: the node's setting function_shapes, netapp.service.function_rules).
MAX_TENANT_SHAPES = 4
PORT_PROTOCOLS = {6: "TCP", 17: "UDP", 132: "SCTP"}
# Each member of ETSI's FlowFilter the rules compare, and the bits it compares (its specificity).
MEMBER_BITS = {"protocol": 8, "dscp": 6, "sourcePort": 16, "dstPort": 16}
MAX_DSCP = 63
MAX_PROTOCOL = 255
MAX_PORT = 65535
# What the classifier takes of a filter's rules (netapp.intents.compiler.MAX_SHAPES, shared by every rule).
CLASSIFIER_ALLOWS = (f"a match no other rule has, of one of the {MAX_SHAPES} shapes the classifier searches (the "
                     "fields compared and sourceIp's prefix length)")
UNSERVED_MEMBERS = {"flowlabel": "the classifier's key holds no IPv6 flow label"}
# The modes whose flows schedule with their MTS session's own state (a slot of dpp_atsss_flow_state).
STATEFUL_MODES = frozenset({SteeringMode.ROUND_ROBIN, SteeringMode.WEIGHTED})
Rules = dict[str, CompiledRule]
NETWORKS = (ipaddress.IPv4Network, ipaddress.IPv6Network)  # a key's prefixes: compared by holding, not equality


def has_flow_members(given: Mapping[str, Any]) -> bool:
    """Whether a filter (its members given, as model_dump(exclude_none=True)) selects flows, not the
    UE's whole downlink: any member but dstIp."""
    return any(value not in (None, []) for member, value in given.items() if member != "dstIp")


def refused(field: str, why: str, allowed: Optional[str] = None) -> InvalidInput:
    return InvalidInput(f"{field}: {why}", field=field, reason=why, allowed=allowed)


def _number(field: str, value: int, top: int) -> int:
    if not 0 <= value <= top:
        raise refused(field, f"{value} is out of range", allowed=f"0..{top}")
    return value


def _source(field: str, text: str, ue: ipaddress.IPv4Address | ipaddress.IPv6Address) -> Any:
    try:
        network = ipaddress.ip_network(text.strip(), strict=True)
    except ValueError:
        raise refused(field, _not_a_prefix(text)) from None
    if network.version != ue.version:
        raise refused(field, f"{text!r} is IPv{network.version}, the UE {ue} IPv{ue.version}: no packet has both")
    return network


def _not_a_prefix(text: str) -> str:
    try:
        prefix = ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return f"{text!r} is not an IPv4 or IPv6 address or prefix"
    return f"{text!r} has host bits set: the prefix is {prefix}"


def _ports(field: str, ports: Optional[list[int]], protocol: Optional[int]) -> list[Optional[int]]:
    if not ports:
        return [None]
    if protocol not in PORT_PROTOCOLS:
        raise refused(field, "ports need protocol 6 (TCP), 17 (UDP) or 132 (SCTP): the key's ports of another "
                      "protocol are other fields (ICMP's type and code)", allowed="with protocol 6, 17 or 132")
    return [_number(field, port, MAX_PORT) for port in dict.fromkeys(ports)]


def filter_values(index: int, given: Mapping[str, Any], ue: str) -> list[dict[str, Any]]:
    """The classifier's key values of one filter (flowFilter[index], its members `given`) of UE
    `ue`'s downlink: one a pair of its ports. InvalidInput naming the member it cannot serve."""
    where = f"flowFilter[{index}]"
    for member, why in UNSERVED_MEMBERS.items():
        if given.get(member) is not None:
            raise refused(f"{where}.{member}", f"{why}: leave it out", allowed="absent")
    address = ipaddress.ip_address(ue)
    base: dict[str, Any] = {"atsss": 1, "family": address.version,
                            "dst": ipaddress.ip_network(f"{address}/{address.max_prefixlen}")}
    if given.get("sourceIp") is not None:
        base["src"] = _source(f"{where}.sourceIp", given["sourceIp"], address)
    protocol = given.get("protocol")
    if protocol is not None:
        base["protocol"] = _number(f"{where}.protocol", protocol, MAX_PROTOCOL)
    if given.get("dscp") is not None:
        base["dscp"] = _number(f"{where}.dscp", given["dscp"], MAX_DSCP)
    sources = _ports(f"{where}.sourcePort", given.get("sourcePort"), protocol)
    destinations = _ports(f"{where}.dstPort", given.get("dstPort"), protocol)
    if len(sources) * len(destinations) > MAX_RULES_PER_FILTER:
        longer = "sourcePort" if len(sources) > len(destinations) else "dstPort"
        raise refused(f"{where}.{longer}", f"{len(sources)} source ports by {len(destinations)} destination ports "
                      f"are {len(sources) * len(destinations)} rules, more than {MAX_RULES_PER_FILTER} a filter",
                      allowed=f"at most {MAX_RULES_PER_FILTER} port pairs")
    found = []
    for sport, dport in itertools.product(sources, destinations):
        values = dict(base)
        if sport is not None or dport is not None:
            values["fragment"] = 0  # a later fragment has no ports: only a first one, or a whole packet
        if sport is not None:
            values["src_port"] = sport
        if dport is not None:
            values["dst_port"] = dport
        found.append(values)
    return found


def specificity(given: Mapping[str, Any]) -> int:
    """The bits a filter compares beyond the UE: its rules' priority (the most specific wins)."""
    bits = sum(width for member, width in MEMBER_BITS.items() if given.get(member) not in (None, []))
    if given.get("sourceIp") is not None:
        bits += ipaddress.ip_network(given["sourceIp"].strip(), strict=False).prefixlen
    return bits


def rule_id(mts_id: str, index: int, number: int) -> str:
    return f"{RULE_PREFIX}{mts_id}#{index}#{number}"


def is_atsss_rule(rule_id_: str) -> bool:
    return rule_id_.startswith(RULE_PREFIX)


def session_rules(mts_id: str, ue: str, filters: Sequence[Mapping[str, Any]], mode: SteeringMode,
                  state: int = 0) -> Rules:
    """The rules of an MTS session with flow filters (each filter's members given), by id, naming
    its flow state slot `state` (0: none, the session's)."""
    rules: Rules = {}
    keys: set = set()  # the match keys taken: a duplicate is left out in one look-up
    for index, given in enumerate(filters):
        found = filter_values(index, given, ue)  # first: it refuses what specificity could not parse
        priority = specificity(given)
        for number, values in enumerate(found):
            rule = CompiledRule(intent_id=rule_id(mts_id, index, number), shape=shape_of(values),
                                values=FieldValues(values), priority=priority, action="atsss",
                                arg=rule_arg(mode.c_mode, state), arg_text=mode.value)
            if rule.match_key not in keys:
                keys.add(rule.match_key)
                rules[rule.intent_id] = rule
    return rules


def with_state(rules: Rules, state: int) -> Rules:
    """`rules` naming the flow state slot `state` (their MTS session's, which the service gives)."""
    return {rule_id: dataclasses.replace(rule, arg=rule_arg(SteeringMode(rule.arg_text).c_mode, state))
            for rule_id, rule in rules.items()}


def body_rules(mts_id: str, ue: str, body: Mapping[str, Any], state: int = 0) -> Rules:
    """The rules of a stored MTS session with flow filters (its body, as netapp.atsss.mts stores it),
    naming its flow state slot `state`."""
    filters = [{member: value for member, value in given.items() if value is not None} for given in body["flowFilter"]]
    return session_rules(mts_id, ue, filters, SteeringMode(body["mode"]), state)


def stored_rules(store: Store) -> Rules:
    """Every stored MTS session's rules, each naming its stored flow state slot: what start()'s first
    reconcile installs (NetAppService.load_function_rules), so that a restart leaves them in the
    maps, their flows on the state they had."""
    rules: Rules = {}
    states = stored.state_slots(store)
    for tenant, mts_id, ue, body in stored.load_mts_flows(store):
        rules.update(body_rules(mts_id, ue, body, states.get((tenant, mts_id), 0)))
    return rules


def _index_of_id(rule_id_: str) -> int:
    return int(rule_id_.split("#")[2])


def _index_of(rule: CompiledRule) -> int:
    return _index_of_id(rule.intent_id)


def _overlap(a: CompiledRule, b: CompiledRule) -> bool:
    """Whether one packet can match both: every field both compare agrees (prefixes: one holds the other)."""
    for field in a.values.keys() & b.values.keys():
        x, y = a.values[field], b.values[field]
        if isinstance(x, NETWORKS):
            if not (x.subnet_of(y) or y.subnet_of(x)):
                return False
        elif x != y:
            return False
    return True


class _Overlaps:
    """Another session's rules, found by the exact values (every field but a prefix) of each set of
    fields it compares at each priority: a rule meets only those it could overlap, not every rule."""

    def __init__(self, rules: Rules):
        self._groups: dict[tuple[int, frozenset[str]], list[CompiledRule]] = {}
        for rule in rules.values():
            self._groups.setdefault((rule.priority, frozenset(rule.values.keys())), []).append(rule)
        self._tables: dict[tuple, dict[tuple, list[CompiledRule]]] = {}

    def first(self, rule: CompiledRule) -> Optional[CompiledRule]:
        """The first rule one packet can match as well as `rule`, at its priority (any other is ordered)."""
        for (priority, fields), members in self._groups.items():
            if priority != rule.priority:
                continue
            exact = tuple(sorted(field for field in fields & rule.values.keys()
                                 if not isinstance(rule.values[field], NETWORKS)))
            table = self._tables.get((priority, fields, exact))
            if table is None:
                table = self._tables[(priority, fields, exact)] = {}
                for member in members:
                    table.setdefault(tuple(member.values[field] for field in exact), []).append(member)
            found = next((other for other in table.get(tuple(rule.values[field] for field in exact), ())
                          if _overlap(rule, other)), None)
            if found is not None:
                return found
        return None


def check_overlaps(mts_id: str, rules: Rules, others: Iterable[tuple[str, Rules]]) -> None:
    """InvalidInput naming the first filter of `rules` that the filter of another MTS session of the
    UE (`others`: (id, rules)) matches as specifically: the classifier could not order them."""
    for other_id, other_rules in others:
        if other_id == mts_id:
            continue
        overlaps = _Overlaps(other_rules)
        for rule in rules.values():
            other = overlaps.first(rule)
            if other is None:
                continue
            field = f"flowFilter[{_index_of(rule)}]"
            same = "selects the same flows as" if rule.values == other.values else "matches packets as specifically as"
            raise refused(field, f"{same} flowFilter[{_index_of(other)}] of MTS session {other_id!r} of the same UE: "
                          "the more specific filter wins, two alike cannot be ordered; make one more specific, or "
                          "merge them", allowed="a filter more or less specific than the UE's others")


def check_tenant_room(store: Store, tenant: str, mts_id: str, rules: Rules, quota: int) -> None:
    """QuotaExceeded when the tenant's MTS sessions' flow rules, `rules` for `mts_id`'s, would be
    more than `quota` (quotas.atsss_flow_rules); InvalidInput naming the first filter whose rules
    would take the tenant's rules over MAX_TENANT_SHAPES of the classifier's shapes, which every
    tenant's intents and the UPF's rules share."""
    held = [rule for other_id, ue, body in stored.mts_flows_of_tenant(store, tenant) if other_id != mts_id
            for rule in body_rules(other_id, ue, body).values()]
    if len(held) + len(rules) > quota:
        raise QuotaExceeded(f"tenant {tenant!r} may hold {quota} ATSSS flow rules (quotas.atsss_flow_rules), a rule "
                            f"a pair of a filter's ports: this session's {len(rules)} would make it "
                            f"{len(held) + len(rules)}", quota="atsss_flow_rules", limit=quota,
                            used=len(held) + len(rules))
    shapes = {rule.shape for rule in held}
    for rule in rules.values():
        shapes.add(rule.shape)
        if len(shapes) > MAX_TENANT_SHAPES:
            raise refused(f"flowFilter[{_index_of(rule)}]", f"the tenant's flow filters would compare "
                          f"{len(shapes)} sets of members (a sourceIp prefix length a set of its own), more than "
                          f"{MAX_TENANT_SHAPES} of the {MAX_SHAPES} the classifier searches for every tenant",
                          allowed=f"the members (and sourceIp prefix lengths) of the tenant's other filters, at most "
                          f"{MAX_TENANT_SHAPES} sets")


def ue_rules(store: Store, ue: str) -> list[tuple[str, Rules]]:
    """(id, rules) of each stored MTS session with flow filters of the UE `ue`."""
    return [(mts_id, body_rules(mts_id, ue, body)) for _, mts_id, body in stored.mts_flows_of_ue(store, ue)]


def stored_rules_of(mts_id: str, stored_mts: Optional[tuple[str, dict]], state: int) -> Rules:
    """The rules of a stored MTS session ((UE, body), None: not stored) naming its flow state slot
    `state`: none when its filter takes the UE's whole downlink."""
    if stored_mts is None:
        return {}
    ue, body = stored_mts
    if not any(has_flow_members(given) for given in body["flowFilter"]):
        return {}
    return body_rules(mts_id, ue, body, state)


def _nothing() -> None:
    return None


def apply_rules(rules: Optional[FunctionRules], old: Rules, new: Rules) -> Callable[[], None]:
    """`old` replaced by `new` in the classifier's maps in one write (none without a data plane, or
    when both are empty); the undo of it. A rule the index refuses (its key another's, a shape too
    many) is an InvalidInput naming flowFilter."""
    if rules is None or (not old and not new):
        return _nothing
    try:
        return rules.change(old, new)
    except RuleClash as exc:
        raise refused(f"flowFilter[{_index_of_id(exc.rule_id)}]", f"{exc}", allowed=CLASSIFIER_ALLOWS) from None
