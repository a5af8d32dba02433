"""The installed keys of one rule shape, and how an overlap search (RuleIndex.overlaps) finds those
that may overlap a rule of another shape without looking at every one.

A key of shape S overlaps rule R when it agrees with R on the fields both compare (equal values;
prefixes one within the other; the implied fields -- flags and family -- hold one value in every
key, so they never tell keys apart). So:

- R compares every field S does and few keys can agree (its prefixes as long as S's, or a few bits
  shorter): those keys are built and probed;
- S shares no field with R: every key overlaps, and is counted, not looked at;
- S is small: its keys are examined;
- else per field both compare, S keeps a tally (value -> how many keys hold it) when its keys hold
  few distinct values there, and a posting (value -> the keys) when they hold many, each built the
  first time a search needs it and kept up to date from then on. A field where no key holds a
  value R agrees with rules S out; one where every key does needs no check; of the rest, the
  posting that yields the fewest keys gives the candidates, which are examined on the others.

Examining costs a search budget; what it leaves unexamined is counted, so that the caller can say
how many it did not check.
"""

from __future__ import annotations

import itertools
import math
from ipaddress import IPv4Network, IPv6Network
from typing import Any, Collection, Iterable, Mapping, NamedTuple, Optional

from netapp.intents.compiler import KEY_FIELD_NAMES, PREFIX_FIELDS, CompiledRule, FieldValues, RuleShape
from netapp.intents.overlap import IMPLIED_FIELDS, agree

# Keys a search examines at most (and the yield over which a posting is not good enough); keys of a
# shape it probes at most; shapes up to this size are examined rather than indexed; subnets of a
# shorter prefix it looks up at most.
OVERLAP_BUDGET = 1024
MAX_PROBES = 16
SMALL_SHAPE = 64
MAX_EXPANSION = 256
_SAMPLE = 64  # keys sampled to choose how to index a shape's field
_FEW_VALUES = 4  # distinct values among them up to which the field is tallied, not posted


class Candidates(NamedTuple):
    """Keys of a shape that may overlap a rule: how many, and the fields each must still be checked
    on (None: every one overlaps); cost: the keys probed to find them."""

    keys: Iterable[FieldValues]
    count: int
    check: Optional[frozenset[str]]
    cost: int = 0

    def examine(self, rule: CompiledRule, budget: int, limit: int) -> tuple[list[FieldValues], int, int]:
        """Check up to `budget` of them: the first `limit` that agree with `rule`, how many agree,
        how many were examined."""
        assert self.check is not None
        listed: list[FieldValues] = []
        matched = examined = 0
        for key in itertools.islice(self.keys, max(0, budget)):
            examined += 1
            if agree(rule.values, key, self.check):
                matched += 1
                if len(listed) < limit:
                    listed.append(key)
        return listed, matched, examined


class ShapeKeys:
    """The installed keys of one shape, in the order they came, with the tallies and postings the
    searches built. A posting maps a value held by one key to that key, by several to a dict of them
    (an ordered set: most values are held by one key, and a dict each would cost ten times the
    memory)."""

    def __init__(self, shape: RuleShape) -> None:
        self.shape = shape
        self.keys: dict[FieldValues, None] = {}
        self._tallies: dict[str, dict[Any, int]] = {}
        self._postings: dict[str, dict[Any, Any]] = {}

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: FieldValues) -> None:
        self.keys[key] = None
        for name, tally in self._tallies.items():
            value = _posted(key[name])
            tally[value] = tally.get(value, 0) + 1
        for name, posting in self._postings.items():
            _post(posting, _posted(key[name]), key)

    def remove(self, key: FieldValues) -> None:
        del self.keys[key]
        for name, tally in self._tallies.items():
            value = _posted(key[name])
            tally[value] -= 1
            if not tally[value]:
                del tally[value]
        for name, posting in self._postings.items():
            _unpost(posting, _posted(key[name]), key)

    def candidates(self, rule: CompiledRule, budget: int) -> Candidates:
        """The keys that may overlap `rule`, of another shape (see the module's docstring)."""
        shape = self.shape
        if rule.shape.family and shape.family and rule.shape.family != shape.family:
            return Candidates((), 0, None)
        common = frozenset(rule.shape.fields & shape.fields) - IMPLIED_FIELDS
        if not common:
            return Candidates(self.keys, len(self), None)
        choices = {name: _key_values(rule, shape, name) for name in KEY_FIELD_NAMES if name in common}
        usable = {name: values for name, values in choices.items() if values is not None}
        compares_all = not (shape.fields - rule.shape.fields - IMPLIED_FIELDS)
        probes = math.prod(len(values) for values in usable.values())
        if compares_all and len(usable) == len(choices) and probes <= min(MAX_PROBES, budget):
            hits = [key for key in _probe_keys(next(iter(self.keys)), usable) if key in self.keys]
            return Candidates(hits, len(hits), None, cost=probes)
        if len(self) <= SMALL_SHAPE:
            return Candidates(self.keys, len(self), common)
        return self._narrowed(usable, common)

    def _narrowed(self, choices: Mapping[str, Collection[Any]], check: frozenset[str]) -> Candidates:
        """The keys that may agree with a rule on `check`, through tallies and postings of the fields
        of `choices` (field -> the values a key must hold there to agree)."""
        self._index(choices)
        rest = set(check)
        for name in choices:
            held = self._held(name, choices[name])
            if held == 0:
                return Candidates((), 0, None)
            if held is not None and held == len(self):
                rest.discard(name)
        if not rest:
            return Candidates(self.keys, len(self), None)
        # Only a field this rule names values for can be looked up (a shorter prefix names none);
        # another search may have posted the others.
        posted = [name for name in rest if name in self._postings and name in choices]
        if not posted:
            return Candidates(self.keys, len(self), frozenset(rest))
        name = min(posted, key=lambda field: self._holding(field, choices[field])[1])
        found, count = self._holding(name, choices[name])
        return Candidates(found, count, frozenset(rest - {name}) or None)

    def _held(self, name: str, values: Iterable[Any]) -> Optional[int]:
        """How many keys hold one of `values` in field `name`; None when the field is not indexed."""
        if name in self._tallies:
            tally = self._tallies[name]
            return sum(tally.get(value, 0) for value in values)
        if name in self._postings:
            return self._holding(name, values)[1]
        return None

    def _holding(self, name: str, values: Iterable[Any]) -> tuple[Iterable[FieldValues], int]:
        posting = self._postings[name]
        held = [keys for keys in map(posting.get, values) if keys is not None]
        groups = [(keys,) if isinstance(keys, FieldValues) else keys for keys in held]
        return itertools.chain.from_iterable(groups), sum(map(len, groups))

    def _index(self, choices: Mapping[str, Collection[Any]]) -> None:
        """Tally every field of `choices` whose first keys hold few distinct values; when no posting
        of the others yields under a budget's worth of keys, post the one with the most."""
        unindexed = [name for name in choices if name not in self._tallies and name not in self._postings]
        if not unindexed:
            return
        sample = list(itertools.islice(self.keys, _SAMPLE))
        spread = {name: len({key[name] for key in sample}) for name in unindexed}
        for name in unindexed:
            if spread[name] <= _FEW_VALUES:
                self._tallies[name] = _tally(self.keys, name)
        wide = [name for name in unindexed if name not in self._tallies]
        yields = [self._holding(name, choices[name])[1] for name in choices if name in self._postings]
        if wide and min(yields, default=OVERLAP_BUDGET + 1) > OVERLAP_BUDGET:
            name = max(wide, key=spread.__getitem__)
            self._postings[name] = _posting(self.keys, name)


def _key_values(rule: CompiledRule, shape: RuleShape, name: str) -> Optional[Collection[Any]]:
    """The values a key of `shape` must hold in field `name` to agree with `rule` there, a prefix
    by its network address (see _posted); None when there are too many (a prefix of `rule` more
    than log2(MAX_EXPANSION) bits shorter than the shape's)."""
    value = rule.values[name]
    if name not in PREFIX_FIELDS:
        return [value]
    length = shape.src_len if name == "src" else shape.dst_len
    host_bits = value.max_prefixlen - length
    address = int(value.network_address)
    if value.prefixlen >= length:
        return [address >> host_bits << host_bits]
    if 1 << (length - value.prefixlen) > MAX_EXPANSION:
        return None
    return range(address, address + (1 << (value.max_prefixlen - value.prefixlen)), 1 << host_bits)


def _probe_keys(sample: FieldValues, choices: Mapping[str, Collection[Any]]) -> list[FieldValues]:
    """Every key of the sample's shape that holds one of `choices` in each of their fields (the
    shape's other fields are implied ones, whose values every key of the shape shares)."""
    implied = {name: value for name, value in sample.items() if name not in choices}
    names = list(choices)
    keys = []
    for combination in itertools.product(*(choices[name] for name in names)):
        values = dict(zip(names, combination))
        for name in PREFIX_FIELDS & values.keys():
            prefix = sample[name]
            values[name] = type(prefix)((values[name], prefix.prefixlen))
        keys.append(FieldValues({**implied, **values}))
    return keys


def _posted(value: Any) -> Any:
    """What tallies and postings hold a value by: a prefix by its network address (the prefixes of
    one shape have one length), as an int, so that a shorter prefix's subnets are a range."""
    return int(value.network_address) if isinstance(value, (IPv4Network, IPv6Network)) else value


def _tally(keys: Iterable[FieldValues], name: str) -> dict[Any, int]:
    tally: dict[Any, int] = {}
    for key in keys:
        value = _posted(key[name])
        tally[value] = tally.get(value, 0) + 1
    return tally


def _posting(keys: Iterable[FieldValues], name: str) -> dict[Any, Any]:
    posting: dict[Any, Any] = {}
    for key in keys:
        _post(posting, _posted(key[name]), key)
    return posting


def _post(posting: dict[Any, Any], value: Any, key: FieldValues) -> None:
    held = posting.get(value)
    if held is None:
        posting[value] = key
    elif isinstance(held, FieldValues):
        posting[value] = {held: None, key: None}
    else:
        held[key] = None


def _unpost(posting: dict[Any, Any], value: Any, key: FieldValues) -> None:
    held = posting[value]
    if isinstance(held, FieldValues):
        del posting[value]
        return
    del held[key]
    if len(held) == 1:
        posting[value] = next(iter(held))
