"""Compile intents into tuple-space rules. Pure: intents and an interface table in, rules out.

A rule compares a set of key fields (its shape) with masked values. The data plane searches a small,
bounded number of shapes, each an exact hash, highest max priority first; so the compiler groups
rules by shape, orders the shapes, and reports intents whose masked keys collide (the data plane
keys rules by match, so two intents with the same key cannot both be installed).

The compiler says *which* key fields a rule compares and with which values;
netapp.dataplane.binding.KEY_FIELDS (the one per-field table) turns them into key members and masks.
What a rule does comes from its action's entry in RULE_ACTIONS, which each network function's
compiler (netapp/<function>/compiler.py) provides: the C action, the rule's argument, its overflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Optional

from netapp.forwarding.compiler import (  # noqa: F401 - CompiledAlt* re-exported
    FORWARD,
    CompiledAltGroup,
    CompiledAltMember,
    compile_alternatives,
)
from netapp.duplicate.compiler import DUPLICATE
from netapp.intents.actions import RuleAction, RuleArgument, resolve_interface
from netapp.intents.errors import CompileError  # noqa: F401 - re-exported
from netapp.intents.models import CpuSpec, Intent, IntentDocument, Match, Police, RedirectAction
from netapp.mec.tunnels import TUNNEL, TunnelEntry, tunnel_entries
from netapp.qos.abi import Algo
from netapp.qos.spec import PoliceDefaults, PolicerSpec
from netapp.steering.compiler import STEER

# DPP_MAX_SHAPES in dpp_consts.h (checked by tests/dataplane/test_abi.py).
MAX_SHAPES = 16

# The key fields a rule may compare, in key order. "upf" (the UPF's rules only, netapp.upf.compiler),
# "atsss" (ATSSS's rules only, netapp.atsss.flows), "has_vni", "gtp", "gtp_qfi" and "fragment" are
# single bits of the key's flags: a VNI is only valid when the overlay header carries one (VXLAN with
# the I flag, GENEVE, GRE with a key: "no key" is not key 0), a TEID or QFI only in a GTP-U packet (and
# a QFI only with a PDU Session Container), and a non-first fragment has no ports, so rules on those
# fields also require the bit.
KEY_FIELD_NAMES = (
    "interface",
    "vlan",
    "overlay",
    "vni",
    "has_vni",
    "gtp",
    "gtp_qfi",
    "upf",
    "atsss",
    "teid",
    "qfi",
    "family",
    "protocol",
    "fragment",
    "src_port",
    "dst_port",
    "dscp",
    "src",
    "dst",
    "tunnel_src",
    "tunnel_dst",
)
PREFIX_FIELDS = frozenset({"src", "dst"})
# Addresses the data plane compares by a small id it gives each (dpp_tunnel_ends), never by bits.
TUNNEL_FIELDS = frozenset({"tunnel_src", "tunnel_dst"})


def _redirect_argument(intent: Intent, interfaces: Mapping[str, int]) -> RuleArgument:
    assert isinstance(intent.action, RedirectAction)
    name = intent.action.interface
    return RuleArgument(resolve_interface(name, interfaces, "action.interface", intent.id), f"to {name}")


# The one registry of intent actions: intent action type -> its C action and rule argument. A network
# function's compiler (netapp/<function>/compiler.py) defines its entries; redirect, which only names
# an interface (dpp_ports), is the core's, as pass and drop are.
RULE_ACTIONS: Mapping[str, RuleAction] = {
    "pass": RuleAction("PASS"),
    "drop": RuleAction("DROP"),
    "steer": STEER,
    "forward": FORWARD,
    "redirect": RuleAction("REDIRECT", _redirect_argument),
    "tunnel": TUNNEL,
    "duplicate": DUPLICATE,
}
ACTIONS = tuple(RULE_ACTIONS)
# Every action a rule of the index may carry: the intents', the UPF's (netapp.upf.compiler: a PDR
# with SDF filters) and ATSSS's (netapp.atsss.flows: an MTS session's flow filters), whose rules no
# intent can name.
INSTALLED_ACTIONS: Mapping[str, RuleAction] = {**RULE_ACTIONS, "upf": RuleAction("UPF"), "atsss": RuleAction("ATSSS")}


class FieldValues(Mapping[str, Any]):
    """An immutable, hashable mapping of key field -> masked value."""

    __slots__ = ("_items", "_map")

    def __init__(self, values: Mapping[str, Any] = ()):  # type: ignore[assignment]
        self._map = dict(values)
        self._items = tuple(sorted(self._map.items(), key=lambda item: item[0]))

    def __getitem__(self, name: str) -> Any:
        return self._map[name]

    def __iter__(self) -> Iterator[str]:
        return iter(name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FieldValues):
            return self._items == other._items
        return isinstance(other, Mapping) and self._map == dict(other)

    def __repr__(self) -> str:
        return f"FieldValues({self._map!r})"

    def as_dict(self) -> dict[str, Any]:
        """A plain dict copy (much faster than dict(values), which goes through the Mapping API)."""
        return dict(self._map)


@dataclass(frozen=True)
class RuleShape:
    """Which key fields a rule compares, and the prefix lengths (and their family) of src/dst."""

    fields: frozenset[str]
    src_len: int = 0
    dst_len: int = 0
    family: int = 0

    def describe(self) -> str:
        parts = []
        for name in KEY_FIELD_NAMES:
            if name not in self.fields:
                continue
            length = {"src": self.src_len, "dst": self.dst_len}.get(name)
            parts.append(f"{name}/{length}" if length is not None else name)
        suffix = f" (IPv{self.family})" if self.family else ""
        return ("{" + ", ".join(parts) + "}" if parts else "{catch-all}") + suffix

    def tie_break_key(self) -> tuple[Any, ...]:
        """Among shapes of equal max priority: more specific first, then a stable textual order."""
        ordered_fields = tuple(name for name in KEY_FIELD_NAMES if name in self.fields)
        specificity = (len(self.fields), self.src_len + self.dst_len)
        return (-specificity[0], -specificity[1], ordered_fields, self.family, self.src_len, self.dst_len)


class SharedPolice(NamedTuple):
    """A policer several rules go through together (a slice's MBR): `owner` names it (tenant
    included, so that two tenants' rules never share one), `spec` is what it enforces."""

    owner: str
    spec: PolicerSpec


@dataclass(frozen=True)
class CompiledRule:
    """One intent as a data-plane rule: masked values of its shape's fields, and what to do: the
    action, its argument (an index into the action's table, e.g. a CPU) and where overflow goes."""

    intent_id: str
    shape: RuleShape
    values: FieldValues
    priority: int
    action: str
    arg: Optional[int] = None  # None: DPP_NONE (no argument)
    overflow_group: Optional[int] = None  # None: the site's default group (DPP_NONE)
    best_effort: bool = False
    arg_text: str = ""  # the argument as messages name it
    police: Optional[PolicerSpec] = None  # its own policer, before the action (an intent's police option)
    shared_police: Optional[SharedPolice] = None  # then the one it shares (its slice's MBR)
    arg_entry: Any = None  # the table entry arg names, written with the rule (tunnel: netapp.mec.tunnels)
    copies: tuple[tuple[int, bool], ...] = ()  # duplicate: its group (arg), (ifindex, decapsulated) each, written first

    @property
    def match_key(self) -> tuple[RuleShape, FieldValues]:
        """What the data plane keys the rule by."""
        return self.shape, self.values

    def outcome(self) -> tuple[Any, ...]:
        """Everything that decides what happens to a matching packet."""
        return (self.action, self.arg, self.overflow_group, self.best_effort, self.police, self.shared_police)

    @property
    def policed(self) -> bool:
        return self.police is not None or self.shared_police is not None

    def describe_action(self) -> str:
        text = f"{self.action} {self.arg_text}" if self.arg_text else self.action
        return text + (" best-effort" if self.best_effort else "")


@dataclass(frozen=True)
class Conflict:
    """Two intents with the same match key: intent_a is installed, intent_b is not."""

    intent_a: str
    intent_b: str
    reason: str
    kind: str = "conflict"  # "conflict" (same priority, other action), "duplicate", "shadowed"


@dataclass(frozen=True)
class CompiledRuleset:
    """Installable rules, their shapes in search order, and the collisions that were left out."""

    rules: tuple[CompiledRule, ...] = ()
    shapes: tuple[RuleShape, ...] = ()
    max_priorities: tuple[int, ...] = ()
    conflicts: tuple[Conflict, ...] = ()

    def shape_index(self, shape: RuleShape) -> int:
        return self.shapes.index(shape)

    def rule_for(self, intent_id: str) -> Optional[CompiledRule]:
        return next((rule for rule in self.rules if rule.intent_id == intent_id), None)


@dataclass(frozen=True)
class CompiledDocument:
    """Everything an intent document asks of the data plane."""

    ruleset: CompiledRuleset
    alternatives: tuple[CompiledAltGroup, ...] = ()
    cpus: tuple[CpuSpec, ...] = ()
    default_verdict: str = "pass"
    default_alternative: Optional[int] = None
    redirect_ifindexes: frozenset[int] = field(default_factory=frozenset)
    tunnels: Mapping[int, TunnelEntry] = field(default_factory=dict)  # dpp_tunnels: entry id -> entry


# --- Intents -> rules --------------------------------------------------------------------------


def compile_intents(
    intents: Iterable[Intent], interfaces: Mapping[str, int], max_shapes: int = MAX_SHAPES
) -> CompiledRuleset:
    """Compile intents into a ruleset; CompileError names the intent and field that cannot be."""
    intents = list(intents)
    _reject_duplicate_ids(intents)
    compiled = [compile_intent(intent, interfaces) for intent in intents]
    installed, conflicts = _resolve_collisions(compiled)
    shapes, max_priorities = order_shapes(shape_maxima(installed))
    check_shape_count(shapes, max_shapes)
    return CompiledRuleset(sort_rules(installed, shapes), shapes, max_priorities, tuple(conflicts))


def overflows(intent: Intent) -> bool:
    """The intent's flows overflow to an alternative group: its action's do, or it is best-effort."""
    return RULE_ACTIONS[intent.action.type].overflows or intent.best_effort


def uses_default_group(intent: Intent) -> bool:
    """The intent's flows overflow to the site's default group: they overflow and it names none."""
    return overflows(intent) and RULE_ACTIONS[intent.action.type].overflow_group(intent) is None


def compile_intent(
    intent: Intent, interfaces: Mapping[str, int], rule_id: Optional[str] = None
) -> CompiledRule:
    """One intent as a rule (not yet placed among shapes): the one per-intent step that both
    compile_intents and the incremental index (netapp.intents.index) take.

    rule_id: the id the rule carries instead of the intent's own (the service namespaces intents
    by tenant); errors still name the intent's own id, which is what its author knows.
    """
    values = match_values(intent.match, interfaces, intent.id)
    action = RULE_ACTIONS[intent.action.type]
    argument = action.argument(intent, interfaces)
    return CompiledRule(
        intent_id=intent.id if rule_id is None else rule_id,
        shape=shape_of(values),
        values=FieldValues(values),
        priority=intent.priority,
        action=intent.action.type,
        arg=argument.index,
        overflow_group=action.overflow_group(intent) if overflows(intent) else None,
        best_effort=intent.best_effort,
        arg_text=argument.text,
        police=police_spec(getattr(intent.action, "police", None)),
        arg_entry=argument.entry,
        copies=argument.copies,
    )


def police_spec(police: Optional[Police], defaults: PoliceDefaults = PoliceDefaults()) -> Optional[PolicerSpec]:
    """An intent's police option as its policer; what it leaves unset, `defaults` (the service
    fills in the settings' when it stores the intent: `with_police_defaults`)."""
    if police is None:
        return None
    algo = Algo[police.algorithm.upper()] if police.algorithm else defaults.algo
    burst = police.burst_bytes if police.burst_bytes is not None else defaults.burst(police.rate_bps)
    return PolicerSpec(rate=police.rate_bps, burst=burst, algo=algo)


def with_police_defaults(intent: Intent, defaults: PoliceDefaults) -> Intent:
    """The intent with its police option's unset burst and algorithm given (as it is stored)."""
    police = getattr(intent.action, "police", None)
    spec = police_spec(police, defaults)
    if police is None or spec is None:
        return intent
    filled = police.model_copy(update={"burst_bytes": spec.burst, "algorithm": spec.algo.name.lower()})
    return intent.model_copy(update={"action": intent.action.model_copy(update={"police": filled})})


def match_values(
    match: Match, interfaces: Mapping[str, int], intent_id: Optional[str] = None
) -> dict[str, Any]:
    """Key field -> value a matching packet has, for every field the match constrains."""
    values: dict[str, Any] = {}
    if match.interface is not None:
        values["interface"] = resolve_interface(match.interface, interfaces, "match.interface", intent_id)
    _copy_present(match, values, ("vlan", "overlay", "vni", "teid", "qfi", "src_port", "dst_port", "dscp"))
    if match.vni is not None:
        values["has_vni"] = 1
    _copy_present(match, values, ("tunnel_src", "tunnel_dst"))
    if match.teid is not None or match.qfi is not None or values.keys() & TUNNEL_FIELDS:
        values["gtp"] = 1
    if match.qfi is not None:
        values["gtp_qfi"] = 1
    if match.protocol is not None:
        values["protocol"] = match.protocol_number
    if match.src_port is not None or match.dst_port is not None:
        values["fragment"] = 0
    _add_prefixes(match, values)
    return values


def _copy_present(match: Match, values: dict[str, Any], names: Iterable[str]) -> None:
    for name in names:
        value = getattr(match, name)
        if value is not None:
            values[name] = value


def _add_prefixes(match: Match, values: dict[str, Any]) -> None:
    """A prefix fixes the family; a /0 prefix compares nothing but the family."""
    for name in ("src", "dst"):
        prefix = getattr(match, name)
        if prefix is None:
            continue
        values["family"] = prefix.version
        if prefix.prefixlen > 0:
            values[name] = prefix


def shape_of(values: Mapping[str, Any]) -> RuleShape:
    src, dst = values.get("src"), values.get("dst")
    return RuleShape(
        fields=frozenset(values),
        src_len=src.prefixlen if src is not None else 0,
        dst_len=dst.prefixlen if dst is not None else 0,
        family=values.get("family", 0),
    )


def _reject_duplicate_ids(intents: list[Intent]) -> None:
    seen: set[str] = set()
    for intent in intents:
        if intent.id in seen:
            raise CompileError("id", "duplicate intent id", intent.id)
        seen.add(intent.id)


def _resolve_collisions(rules: list[CompiledRule]) -> tuple[list[CompiledRule], list[Conflict]]:
    """One rule per match key: the highest priority (then the smallest id) wins; the rest are reported."""
    groups: dict[tuple[RuleShape, FieldValues], list[CompiledRule]] = {}
    for rule in rules:
        groups.setdefault(rule.match_key, []).append(rule)
    installed, conflicts = [], []
    for group in groups.values():
        group.sort(key=winner_order)
        winner = group[0]
        installed.append(winner)
        conflicts.extend(collision(winner, loser) for loser in group[1:])
    conflicts.sort(key=conflict_order)
    return installed, conflicts


def winner_order(rule: CompiledRule) -> tuple[int, str]:
    """Among rules with one match key, the first in this order is installed."""
    return (-rule.priority, rule.intent_id)


def conflict_order(conflict: Conflict) -> tuple[str, str]:
    return (conflict.intent_a, conflict.intent_b)


def collision(winner: CompiledRule, loser: CompiledRule) -> Conflict:
    """What it means that `loser` has the same match key as the installed `winner`."""
    if loser.priority < winner.priority:
        return Conflict(
            winner.intent_id,
            loser.intent_id,
            f"same match; {loser.intent_id!r} (priority {loser.priority}) is shadowed by "
            f"{winner.intent_id!r} (priority {winner.priority}) and never matches",
            "shadowed",
        )
    if loser.outcome() == winner.outcome():
        return Conflict(
            winner.intent_id,
            loser.intent_id,
            f"duplicate: same match, priority {winner.priority} and action ({winner.describe_action()})",
            "duplicate",
        )
    return Conflict(
        winner.intent_id,
        loser.intent_id,
        f"same match and priority {winner.priority} but different actions ({winner.describe_action()} vs "
        f"{loser.describe_action()}); only {winner.intent_id!r} is installed",
        "conflict",
    )


def shape_maxima(rules: Iterable[CompiledRule]) -> dict[RuleShape, int]:
    """The highest priority among the rules of each shape."""
    max_priority: dict[RuleShape, int] = {}
    for rule in rules:
        max_priority[rule.shape] = max(rule.priority, max_priority.get(rule.shape, rule.priority))
    return max_priority


def order_shapes(max_priority: Mapping[RuleShape, int]) -> tuple[tuple[RuleShape, ...], tuple[int, ...]]:
    """Shapes by max priority, highest first, so the search can stop early."""
    ordered = sorted(max_priority, key=lambda shape: (-max_priority[shape], shape.tie_break_key()))
    return tuple(ordered), tuple(max_priority[shape] for shape in ordered)


def sort_rules(rules: Iterable[CompiledRule], shapes: tuple[RuleShape, ...]) -> tuple[CompiledRule, ...]:
    """Rules in shape order, then by priority (highest first), then by id."""
    position = {shape: index for index, shape in enumerate(shapes)}
    return tuple(sorted(rules, key=lambda rule: (position[rule.shape], -rule.priority, rule.intent_id)))


def check_shape_count(shapes: tuple[RuleShape, ...], max_shapes: int = MAX_SHAPES) -> None:
    if len(shapes) > max_shapes:
        raise CompileError("match", _too_many_shapes(shapes, max_shapes))


def _too_many_shapes(shapes: tuple[RuleShape, ...], max_shapes: int) -> str:
    listed = ", ".join(shape.describe() for shape in shapes)
    return (
        f"{len(shapes)} distinct rule shapes, the data plane searches at most {max_shapes}: "
        f"make intents compare the same fields and prefix lengths ({listed})"
    )


# --- Documents ---------------------------------------------------------------------------------


def compile_document(
    document: IntentDocument, interfaces: Mapping[str, int], max_shapes: int = MAX_SHAPES
) -> CompiledDocument:
    """Rules, alternative groups, CPUs and defaults of a document, ready for the data plane."""
    ruleset = compile_intents(document.intents, interfaces, max_shapes)
    return CompiledDocument(
        ruleset=ruleset,
        alternatives=compile_alternatives(document.alternatives, interfaces),
        cpus=tuple(document.cpus),
        default_verdict=document.default_verdict,
        default_alternative=document.default_alternative,
        redirect_ifindexes=redirect_ports(ruleset.rules),
        tunnels=rule_tunnels(ruleset.rules),
    )


def redirect_ports(rules: Iterable[CompiledRule]) -> frozenset[int]:
    """The interfaces redirect rules, and tunnel rules out of an interface, send out of (dpp_ports)."""
    rules = list(rules)
    tunnelled = (entry.ifindex for entry in rule_tunnels(rules).values())
    return frozenset(rule.arg for rule in rules if rule.action == "redirect" and rule.arg) | frozenset(
        ifindex for ifindex in tunnelled if ifindex
    )


def rule_tunnels(rules: Iterable[CompiledRule]) -> dict[int, TunnelEntry]:
    """The entries of dpp_tunnels tunnel rules name, by id."""
    return tunnel_entries(rule.arg_entry for rule in rules if rule.action == "tunnel")
