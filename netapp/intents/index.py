"""An incremental rule index: the ruleset of a set of intents that changes one intent at a time.

compile_intents compiles a whole set. The service changes one intent (or a slice's few) among
thousands, and recompiling and re-diffing all of them per change would cost O(n) where the latency
target allows O(1). The index keeps what compile_intents computes -- per match key the rules that
have it (the first installed, the rest colliding), the shapes of installed rules with their max
priority -- and updates it per rule, using the compiler's own pieces (compile_intent, winner_order,
collision, order_shapes), so both agree by construction; a property test checks that they do.

A change goes through `track()`: it records the keys it touched, so it can say what the maps must
do (`delta()`), what would undo that in the maps (`inverse()`), and put the index back (`roll_back()`),
wholly or back to a `mark()`: the service's group transaction undoes one caller's part that way.

It also keeps the installed keys of each shape (netapp.intents.shape_keys), so that `overlaps()` can
say which installed rules of other shapes match some of the packets a rule matches
(netapp.intents.overlap) without looking at every rule.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from netapp.intents.compiler import (
    MAX_SHAPES,
    CompiledRule,
    CompiledRuleset,
    CompileError,
    Conflict,
    FieldValues,
    RuleShape,
    check_shape_count,
    collision,
    compile_intent,
    conflict_order,
    order_shapes,
    sort_rules,
    winner_order,
)
from netapp.intents.models import Intent
from netapp.intents.overlap import Overlap, ShapeOrder, ShapeRanks, overlap
from netapp.intents.shape_keys import OVERLAP_BUDGET, ShapeKeys

MatchKey = tuple[RuleShape, FieldValues]

# An overlap search (RuleIndex.overlaps) lists this many overlapping rules, and counts the rest.
OVERLAP_LIMIT = 10
# The key bits that set a function's rules apart (netapp.dataplane.convert: every shape compares them).
FUNCTION_BITS = ("upf", "atsss")


def _function_of(shape: RuleShape) -> Optional[str]:
    """Whose rules the shape's are: the UPF's, ATSSS's, or (None) the intents'."""
    return next((bit for bit in FUNCTION_BITS if bit in shape.fields), None)


@dataclass(frozen=True)
class RuleDelta:
    """What the maps must do to follow a change.

    upserts: rules to install, or to replace the rule at their match key; removes: rules that are no
    longer installed (their key goes unless an upsert takes it over, and their intent gives back
    its stat slot unless it is upserted elsewhere); shapes: the shape set afterwards, in search order.
    """

    upserts: tuple[CompiledRule, ...] = ()
    removes: tuple[CompiledRule, ...] = ()
    shapes: tuple[RuleShape, ...] = ()
    max_priorities: tuple[int, ...] = ()

    @property
    def empty(self) -> bool:
        """Nothing to write (the shape set only changes when installed rules do)."""
        return not self.upserts and not self.removes


@dataclass(frozen=True)
class OverlapSearch:
    """What an overlap search found: up to its limit of overlaps, and how many more.

    more: further installed rules that overlap, not listed; unchecked: rules the search did not
    examine once its budget ran out, so that `more` is then a lower bound.
    """

    overlaps: tuple[Overlap, ...] = ()
    more: int = 0
    unchecked: int = 0


class _PriorityCounts:
    """How many installed rules of one shape have each priority, and the highest of them.

    A max-heap with lazy deletion: a priority whose count drops to zero stays in the heap until it
    reaches the top, and is pushed at most once at a time, so the heap never outgrows the number
    of distinct priorities (<= 65536) however much the rules churn.
    """

    def __init__(self) -> None:
        self._counts: dict[int, int] = {}
        self._heap: list[int] = []  # negated priorities
        self._in_heap: set[int] = set()
        self.total = 0

    def add(self, priority: int) -> None:
        self._counts[priority] = self._counts.get(priority, 0) + 1
        self.total += 1
        if priority not in self._in_heap:
            heapq.heappush(self._heap, -priority)
            self._in_heap.add(priority)

    def remove(self, priority: int) -> None:
        left = self._counts[priority] - 1
        if left:
            self._counts[priority] = left
        else:
            del self._counts[priority]
        self.total -= 1

    def max(self) -> int:
        while -self._heap[0] not in self._counts:
            self._in_heap.discard(-heapq.heappop(self._heap))
        return -self._heap[0]


class RuleIndex:
    """The rules of a set of intents, kept as compile_intents would compile them, per-rule updates."""

    def __init__(self, interfaces: Mapping[str, int], max_shapes: int = MAX_SHAPES):
        self.interfaces = dict(interfaces)
        self.max_shapes = max_shapes
        self._rules: dict[str, CompiledRule] = {}
        # Per match key, its rules in winner order: [0] is installed, the rest collide with it.
        self._groups: dict[MatchKey, list[CompiledRule]] = {}
        self._colliding: set[MatchKey] = set()
        self._shape_priorities: dict[RuleShape, _PriorityCounts] = {}
        self._shape_keys: dict[RuleShape, ShapeKeys] = {}  # installed keys per shape (overlaps)
        self._order: Optional[ShapeOrder] = None  # cached until the installed rules change

    # --- reading ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._rules)

    def __contains__(self, rule_id: object) -> bool:
        return rule_id in self._rules

    def get(self, rule_id: str) -> Optional[CompiledRule]:
        return self._rules.get(rule_id)

    def rule_ids(self) -> list[str]:
        return list(self._rules)

    def winner(self, key: MatchKey) -> Optional[CompiledRule]:
        """The rule installed for a match key, if any."""
        group = self._groups.get(key)
        return group[0] if group else None

    def is_installed(self, rule_id: str) -> bool:
        rule = self._rules.get(rule_id)
        return rule is not None and self._groups[rule.match_key][0] is rule

    def installed_rules(self) -> list[CompiledRule]:
        return [group[0] for group in self._groups.values()]

    def collisions(self, rule_id: str) -> list[Conflict]:
        """The conflicts this rule is part of (as winner or as loser)."""
        rule = self._rules[rule_id]
        group = self._groups[rule.match_key]
        winner = group[0]
        if winner is rule:
            return [collision(winner, loser) for loser in group[1:]]
        return [collision(winner, rule)]

    def conflicts(self) -> tuple[Conflict, ...]:
        found = []
        for key in self._colliding:
            winner, *losers = self._groups[key]
            found.extend(collision(winner, loser) for loser in losers)
        return tuple(sorted(found, key=conflict_order))

    def shape_order(self) -> ShapeOrder:
        """Shapes of installed rules in search order, and their max priorities."""
        if self._order is None:
            maxima = {shape: counts.max() for shape, counts in self._shape_priorities.items()}
            self._order = order_shapes(maxima)
        return self._order

    def ruleset(self) -> CompiledRuleset:
        """Everything, as compile_intents returns it (O(n log n): for full reconciles and tests)."""
        shapes, max_priorities = self.shape_order()
        rules = sort_rules(self.installed_rules(), shapes)
        return CompiledRuleset(rules, shapes, max_priorities, self.conflicts())

    def overlaps(
        self, rule_id: str, limit: int = OVERLAP_LIMIT, budget: int = OVERLAP_BUDGET
    ) -> OverlapSearch:
        """Installed rules of other shapes that match some packets this installed rule matches (none
        for a rule that is not installed): the first `limit`, and a count of the others.

        Shapes are taken in search order; within one, ShapeKeys.candidates finds the keys that may
        overlap without looking at every key, and at most `budget` keys are examined in all.
        """
        rule = self._rules.get(rule_id)
        if rule is None or not self.is_installed(rule_id):
            return OverlapSearch()
        order = self.shape_order()
        ranks = ShapeRanks.of(order)
        found: list[Overlap] = []
        total = unchecked = 0
        for shape in order[0]:
            if shape == rule.shape or _function_of(shape) != _function_of(rule.shape):
                continue  # the UPF's, ATSSS's and the intents' rules never match one packet (the key's bits)
            candidates = self._shape_keys[shape].candidates(rule, budget)
            budget -= candidates.cost
            if candidates.check is None:  # every candidate overlaps: nothing to examine
                total += candidates.count
                listed: Iterable[FieldValues] = itertools.islice(candidates.keys, max(0, limit - len(found)))
            else:
                listed, matched, examined = candidates.examine(rule, budget, limit - len(found))
                total += matched
                budget -= examined
                unchecked += candidates.count - examined
            found.extend(self._overlap(rule, shape, key, ranks) for key in listed)
        return OverlapSearch(tuple(found), total - len(found), unchecked)

    def _overlap(self, rule: CompiledRule, shape: RuleShape, key: FieldValues, ranks: ShapeRanks) -> Overlap:
        found = overlap(rule, self._groups[(shape, key)][0], ranks)
        assert found is not None, "a candidate the search found does not overlap"
        return found

    # --- changing ----------------------------------------------------------------------------------

    def compile(self, intent: Intent, rule_id: Optional[str] = None) -> CompiledRule:
        """An intent as a rule against this index's interface table (not added)."""
        return compile_intent(intent, self.interfaces, rule_id)

    def add(self, rule: CompiledRule) -> None:
        """Add one rule; CompileError on a duplicate id or when its shape would be one too many."""
        if rule.intent_id in self._rules:
            raise CompileError("id", "duplicate intent id", rule.intent_id)
        group = self._groups.get(rule.match_key)
        if group is None:
            self._check_room_for(rule)
            group = self._groups[rule.match_key] = []
        before = group[0] if group else None
        bisect.insort(group, rule, key=winner_order)
        self._rules[rule.intent_id] = rule
        if len(group) > 1:
            self._colliding.add(rule.match_key)
        self._replace_installed(before, group[0])

    def remove(self, rule_id: str) -> CompiledRule:
        """Remove one rule by id (KeyError when absent); a rule it shadowed may become installed."""
        rule = self._rules.pop(rule_id)
        key = rule.match_key
        group = self._groups[key]
        before = group[0]
        del group[next(i for i, member in enumerate(group) if member.intent_id == rule_id)]
        if len(group) < 2:
            self._colliding.discard(key)
        if not group:
            del self._groups[key]
        self._replace_installed(before, group[0] if group else None)
        return rule

    def track(self) -> "IndexChange":
        """Begin a change that can report its delta and be rolled back."""
        return IndexChange(self)

    def _check_room_for(self, rule: CompiledRule) -> None:
        """A rule with a new key is installed; if its shape is new too, it must fit in the set."""
        if rule.shape in self._shape_priorities or len(self._shape_priorities) < self.max_shapes:
            return
        maxima = {shape: counts.max() for shape, counts in self._shape_priorities.items()}
        maxima[rule.shape] = rule.priority
        try:
            check_shape_count(order_shapes(maxima)[0], self.max_shapes)
        except CompileError as exc:
            exc.intent_id = rule.intent_id
            raise

    def _replace_installed(self, before: Optional[CompiledRule], after: Optional[CompiledRule]) -> None:
        if before is after:
            return
        if before is not None:
            counts = self._shape_priorities[before.shape]
            counts.remove(before.priority)
            self._shape_keys[before.shape].remove(before.values)
            if not counts.total:
                del self._shape_priorities[before.shape]
                del self._shape_keys[before.shape]
        if after is not None:
            self._shape_priorities.setdefault(after.shape, _PriorityCounts()).add(after.priority)
            self._shape_keys.setdefault(after.shape, ShapeKeys(after.shape)).add(after.values)
        self._order = None


class IndexChange:
    """A change of a RuleIndex in progress: what it touched, its delta, its undo."""

    def __init__(self, index: RuleIndex):
        self.index = index
        self._journal: list[tuple[bool, CompiledRule]] = []  # (added, rule), in order
        self._before: dict[MatchKey, Optional[CompiledRule]] = {}
        self._shapes_before = index.shape_order()

    def add(self, rule: CompiledRule) -> None:
        self._remember(rule.match_key)
        self.index.add(rule)
        self._journal.append((True, rule))

    def remove(self, rule_id: str) -> CompiledRule:
        rule = self.index.get(rule_id)
        if rule is None:
            raise KeyError(rule_id)
        self._remember(rule.match_key)
        self.index.remove(rule_id)
        self._journal.append((False, rule))
        return rule

    def mark(self) -> int:
        """Where the change is now: `added` and `roll_back` take it to mean the steps after it."""
        return len(self._journal)

    def added(self, since: int = 0) -> list[CompiledRule]:
        """Rules this change added (after mark `since`) that are still in the index."""
        return [
            rule for added, rule in self._journal[since:] if added and self.index.get(rule.intent_id) is rule
        ]

    def delta(self) -> RuleDelta:
        """What the maps must do to go from before this change to now."""
        after = {key: self.index.winner(key) for key in self._before}
        return _delta(self._before, after, self.index.shape_order())

    def inverse(self) -> RuleDelta:
        """What the maps must do to go back from now to before (call before roll_back)."""
        after = {key: self.index.winner(key) for key in self._before}
        return _delta(after, self._before, self._shapes_before)

    def roll_back(self, to: int = 0) -> None:
        """Undo the steps after mark `to`, newest first; by default every step, so the index is as it
        was when the change began. Keys touched only by undone steps stay remembered, with their
        winner as before: the delta leaves them out."""
        while len(self._journal) > to:
            added, rule = self._journal.pop()
            if added:
                self.index.remove(rule.intent_id)
            else:
                self.index.add(rule)
        if not to:
            self._before.clear()

    def _remember(self, key: MatchKey) -> None:
        if key not in self._before:
            self._before[key] = self.index.winner(key)


def _delta(
    before: Mapping[MatchKey, Optional[CompiledRule]],
    after: Mapping[MatchKey, Optional[CompiledRule]],
    shape_order: ShapeOrder,
) -> RuleDelta:
    upserts, removes = [], []
    for key, old in before.items():
        new = after[key]
        if new == old:
            continue
        if new is not None:
            upserts.append(new)
        if old is not None:
            removes.append(old)
    shapes, max_priorities = shape_order
    return RuleDelta(tuple(upserts), tuple(removes), shapes, max_priorities)

