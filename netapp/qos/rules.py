"""The policers of rules: an intent's own (its police option) and a slice's, shared by the slice's
rules (its MBR), written by the facade's rule writer (netapp.dataplane.rules) with the rules.

A policed rule (DPP_RULE_POLICED) names its policers through its stat slot: dpp_rule_policers[slot]
holds their ids (dataplane/include/dpp/nf/qos.h). Ids come from the rules' half of dpp_policers
(netapp.qos.ids), one per owner (`owner_name`): "intent <rule id>" for an intent's own (the rule id
holds its tenant), a shared one's as the compiler names it (a slice's: "slice <tenant>/<slice id>"),
so that no two tenants' rules ever share a policer. Order: a policer and the slot's ids are written
before the rule that names them; a policer no rule names any more is emptied after the rules are
(`settle`). A policer keeps its id, state and counters while its owner keeps it and its
configuration; a new configuration writes it afresh.
"""

from __future__ import annotations

import errno
from typing import Callable, Iterable, Optional

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.tables import Table
from netapp.intents.compiler import SharedPolice
from netapp.qos.abi import RulePolice
from netapp.qos.applier import PolicerApplier
from netapp.qos.ids import rule_ids
from netapp.qos.spec import PolicerSpec

# What a rule asks of its policers: its own, and the one it shares.
Policing = tuple[Optional[PolicerSpec], Optional[SharedPolice]]


INTENT, SLICE = "intent", "slice"  # the kinds of owner


def owner_name(kind: str, qualified: str) -> str:
    """The owner of an intent's own policer (kind INTENT, its rule id) or of a slice's (SLICE,
    `<tenant>/<slice id>`)."""
    return f"{kind} {qualified}"


def owner_parts(owner: str) -> tuple[str, str]:
    """(kind, `<tenant>/<id>`) of an owner's name."""
    kind, _, qualified = owner.partition(" ")
    return kind, qualified


def own_owner(rule_id: str) -> str:
    return owner_name(INTENT, rule_id)


class RulePolicers:
    """The rules' policers by owner, and which rules name them."""

    def __init__(self, table: Callable[[str], Table]):
        self.policers = PolicerApplier(table)
        self._slots = table("dpp_rule_policers")
        self._ids = rule_ids(self.policers.max_entries)
        self._by_owner: dict[str, int] = {}  # owner -> policer id
        self._owners: dict[int, str] = {}
        self._specs: dict[int, PolicerSpec] = {}  # policer id -> as written
        self._users: dict[int, set[str]] = {}  # policer id -> the rules naming it
        self._of_rule: dict[str, tuple[int, int]] = {}  # rule id -> its (own, shared) ids
        self._cursor = self._ids.start

    # --- what the API shows ----------------------------------------------------------------------

    def of_rule(self, rule_id: str) -> tuple[int, int]:
        """The rule's (own, shared) policer ids; 0: none."""
        return self._of_rule.get(rule_id, (0, 0))

    def owned(self) -> dict[str, int]:
        """Owner -> its policer id, for every policer in use."""
        return dict(self._by_owner)

    # --- written with the rules ------------------------------------------------------------------

    def place(self, rules: Iterable[tuple[str, int, Policing]]) -> Callable[[], None]:
        """Before the rules (rule id, slot, what it asks) are written: their policers and their slots'
        ids. A rule that asks for none keeps nothing; what it had is emptied by `settle`. Returns
        what puts the policers and the slots back as they were, should the rules not be written."""
        rules = [(rule_id, self._check_slot(rule_id, slot), policing) for rule_id, slot, policing in rules]
        prior = {rule_id: (slot, self.of_rule(rule_id)) for rule_id, slot, _ in rules}
        wanted: dict[int, PolicerSpec] = {}
        slots: dict[int, RulePolice] = {}
        for rule_id, slot, (own, shared) in rules:
            own_id = self._give(own_owner(rule_id), own, wanted)
            shared_id = self._give(shared.owner, shared.spec, wanted) if shared is not None else 0
            self._name(rule_id, (own_id, shared_id))
            if own_id or shared_id:
                slots[slot] = RulePolice(policer=own_id, shared=shared_id)
        rewritten = {policer_id: self._specs[policer_id] for policer_id in wanted if policer_id in self._specs}
        try:
            self.policers.apply(wanted, self._pairs(wanted))
            self._specs.update(wanted)
            self._slots.update(slots)
        except DataplaneError:
            self._put_back(prior, rewritten)
            raise
        return lambda: self._put_back(prior, rewritten)

    def _put_back(self, prior: dict[str, tuple[int, tuple[int, int]]], rewritten: dict[int, PolicerSpec]) -> None:
        """Undo a `place`: the rules name what they named, the policers it rewrote are as they were,
        the ones it gave are emptied."""
        for rule_id, (_, ids) in prior.items():
            self._name(rule_id, ids)
        self.policers.apply(rewritten, self._pairs(rewritten))
        self._specs.update(rewritten)
        self._slots.update({slot: RulePolice(*ids) for slot, ids in prior.values() if any(ids)})
        self.settle()

    def leave(self, rule_ids_: Iterable[str]) -> None:
        """The rules are gone (or their policing): their policers lose them as users."""
        for rule_id in rule_ids_:
            self._name(rule_id, (0, 0))

    def settle(self) -> None:
        """After the rules are written: the policers no rule names, emptied, their ids free."""
        unused = [policer_id for policer_id, users in self._users.items() if not users]
        if not unused:
            return
        self.policers.remove(unused)
        for policer_id in unused:
            del self._users[policer_id]
            self._specs.pop(policer_id, None)
            self._by_owner.pop(self._owners.pop(policer_id), None)

    def reconcile(self, rules: Iterable[tuple[str, int, Policing]]) -> None:
        """The whole of the rules' range as `rules` ask, each policer configured so kept as it is,
        the others of the range emptied (a start, a full apply). A rule whose slot already names a
        policer (the maps of an earlier run, pinned) keeps that id where it is free, and so the
        policer's state and counters when its configuration is the same."""
        rules = [(rule_id, self._check_slot(rule_id, slot), policing) for rule_id, slot, policing in rules]
        named = self._named_in_slots([slot for _, slot, (own, shared) in rules if own or shared])
        self.leave(list(self._of_rule))
        for rule_id, slot, (own, shared) in rules:
            had = named.get(slot, (0, 0))
            own_id = self._id_for(own_owner(rule_id), had[0]) if own is not None else 0
            shared_id = self._id_for(shared.owner, had[1]) if shared is not None else 0
            self._name(rule_id, (own_id, shared_id))
            if own is not None:
                self._specs[own_id] = own
            if shared is not None:
                self._specs[shared_id] = shared.spec
        self.settle()
        self.policers.reconcile(self._specs, self._ids, self._pairs(self._specs))
        self._slots.update({slot: RulePolice(*self._of_rule[rule_id]) for rule_id, slot, _ in rules
                            if rule_id in self._of_rule})

    def _pairs(self, policer_ids: Iterable[int]) -> dict[int, int]:
        """A rule's own policer -> its slice policer, for the rules naming one of `policer_ids`: the two
        share the own one's clock reading (nf/qos/rule.h), so the applier chooses their clocks together."""
        rules = {rule_id for policer_id in policer_ids for rule_id in self._users.get(policer_id, ())}
        return {own: shared for own, shared in map(self.of_rule, rules) if own and shared}

    def _named_in_slots(self, slots: list[int]) -> dict[int, tuple[int, int]]:
        """slot -> the (own, shared) ids dpp_rule_policers holds for it now."""
        return {slot: (value.policer, value.shared)
                for slot, value in zip(slots, self._slots.lookup(slots)) if value is not None}

    # --- bookkeeping -----------------------------------------------------------------------------

    def _give(self, owner: str, spec: Optional[PolicerSpec], wanted: dict[int, PolicerSpec]) -> int:
        if spec is None:
            return 0
        policer_id = self._id_for(owner)
        if self._specs.get(policer_id) != spec:
            wanted[policer_id] = spec
        return policer_id

    def _name(self, rule_id: str, ids: tuple[int, int]) -> None:
        for old in self._of_rule.pop(rule_id, (0, 0)):
            if old:
                self._users[old].discard(rule_id)
        if any(ids):
            self._of_rule[rule_id] = ids
        for new in ids:
            if new:
                self._users.setdefault(new, set()).add(rule_id)

    def _id_for(self, owner: str, hint: int = 0) -> int:
        """The owner's policer id: the one it has, else `hint` if free, else the next free one."""
        found = self._by_owner.get(owner)
        if found is not None:
            return found
        if hint in self._ids and hint not in self._owners:
            self._by_owner[owner], self._owners[hint] = hint, owner
            self._users.setdefault(hint, set())
            return hint
        for _ in range(len(self._ids)):
            candidate = self._cursor
            self._cursor = candidate + 1 if candidate + 1 < self._ids.stop else self._ids.start
            if candidate not in self._owners:
                self._by_owner[owner], self._owners[candidate] = candidate, owner
                self._users.setdefault(candidate, set())
                return candidate
        raise DataplaneError(errno.ENOSPC, "give a policer", f"all {len(self._ids)} policers of rules and slices "
                             "are in use (setting dataplane.map_sizes.dpp_policers: half of it are theirs)")

    def _check_slot(self, rule_id: str, slot: int) -> int:
        if slot >= self._slots.max_entries:
            raise DataplaneError(errno.ENOSPC, f"police {rule_id}", f"its rule slot {slot} is past the "
                                 f"{self._slots.max_entries} of dpp_rule_policers (setting "
                                 "dataplane.map_sizes.dpp_rule_policers)")
        return slot
