"""The numbers the UPF gives a session out of the data path's per-session tables, as it gives
TEIDs (netapp.upf.sessions): slots of the usage counters (dpp_upf_usage; a URR's, and one per set
of URRs a PDR names: models.UrrSet) and of the PDRs with SDF filters (dpp_upf_sdf_pdrs). Who holds
which is kept in memory from the stored sessions; a number is given from a cursor (the last given),
the first free one after it, 0 never."""

from __future__ import annotations

from typing import Any, Iterable

from netapp.upf.models import RuleError, Session, UrrSet
from netapp.upf.pfcp.ies import Cause


class Slots:
    """The slots sessions hold, by table; the URR slots' cursor, which a change moves as it chooses
    (`begin` ... `settle` once committed: an undone change puts `cursor` back)."""

    def __init__(self, urr_count: int, sdf_count: int):
        self.urr_count, self.sdf_count = urr_count, sdf_count  # 0: the data path has none
        self._urr_holders: dict[int, int] = {}  # URR slot -> the SEID of the session holding it
        self._sdf_holders: dict[int, int] = {}  # slot of dpp_upf_sdf_pdrs -> the SEID holding it
        self.cursor = self._pending = 0

    def hold(self, session: Session) -> None:
        self._urr_holders.update(dict.fromkeys(session.usage_slots(), session.seid))
        self._sdf_holders.update(dict.fromkeys(session.sdf_slots.values(), session.seid))

    def release(self, session: Session) -> None:
        for slot in session.usage_slots():
            self._urr_holders.pop(slot, None)
        for slot in session.sdf_slots.values():
            self._sdf_holders.pop(slot, None)

    def begin(self) -> None:
        """A change starts choosing from the committed cursor."""
        self._pending = self.cursor

    def settle(self) -> None:
        """The change that chose is committed: its cursor is the cursor."""
        self.cursor = self._pending

    def choose_urr_slots(self, base: Session, urrs: dict[int, Any]) -> dict[int, int]:
        """The URRs' slots: those `base` gave them kept, a free one (after the cursor) for each new
        URR; none without a data path that counts."""
        slots, self._pending = choose_slots(
            base.seid, base.urr_slots, set(urrs), self._urr_holders, self.urr_count, self._pending,
            "URR slot", base.usage_slots(),
        )
        return slots

    def choose_urr_sets(
        self, base: Session, pdrs: dict[int, Any], urrs: dict[int, Any], urr_slots: dict[int, int]
    ) -> tuple[UrrSet, ...]:
        """The slots of the sets of URRs the PDRs name (several each): `base`'s kept while a member
        is left (the URRs removed leave them), a free one for each set no slot counts whole."""
        if not self.urr_count:
            return ()
        kept = []
        for each in base.urr_sets:
            members = tuple(urr_id for urr_id in each.members if urr_id in urrs)
            if members:
                kept.append(each if members == each.members else each.model_copy(update={"members": members}))
        whole = {each.urr_ids for each in kept if each.urr_ids == each.members}
        wanted = {tuple(sorted(set(pdr.urr_ids))) for pdr in pdrs.values() if len(set(pdr.urr_ids)) > 1}
        taken = Taken(self._urr_holders, base.seid)
        for slot in [*base.usage_slots(), *urr_slots.values()]:  # freed ones too: their final counts are read after
            taken.add(slot)
        for urr_ids in sorted(wanted - whole):
            slot = self._pending = free_number(self._pending, taken, self.urr_count, "URR slot")
            taken.add(slot)
            kept.append(UrrSet(slot=slot, urr_ids=urr_ids, members=urr_ids))
        return tuple(kept)

    def choose_sdf_slots(self, base: Session, pdrs: dict[int, Any]) -> dict[int, int]:
        """The slots of the PDRs with SDF filters: those `base` gave them kept, the first free one
        for each new one; none without a data path that takes them (the compiler then refuses)."""
        wanted = {pdr_id for pdr_id, pdr in pdrs.items() if pdr.pdi.sdf_filters}
        what = "slot for a PDR with SDF filters"
        return choose_slots(base.seid, base.sdf_slots, wanted, self._sdf_holders, self.sdf_count, 0, what)[0]


class Taken:
    """The numbers (TEIDs, slots) another session holds, and those this change has chosen so far: a
    view of the holders' table, not a copy (a copy costs a walk of every session's, per request)."""

    def __init__(self, teids: dict[int, int], seid: int):
        self._teids, self._seid, self._chosen = teids, seid, set()

    def __contains__(self, teid: object) -> bool:
        return teid in self._chosen or self._teids.get(teid, self._seid) != self._seid  # type: ignore[call-overload]

    def __len__(self) -> int:
        return len(self._teids) + len(self._chosen)

    def add(self, teid: int) -> None:
        self._chosen.add(teid)


def choose_slots(
    seid: int, kept: dict[int, int], wanted: set[int], held: dict[int, int], count: int, cursor: int, what: str,
    had: Iterable[int] = (),
) -> tuple[dict[int, int], int]:
    """Slots for the `wanted` ids of session `seid`: those it `kept` stay, each other id the first
    free one after `cursor` among `count` (`held`: slot -> the SEID holding it); and the cursor
    after them. A slot the session had (`kept`'s, `had`) is not given to another id in this change:
    were it, the applier would see it neither freed nor given, and the new id would inherit the old
    one's counts. None at all when the data path has no such slots (count 0)."""
    if not count:
        return {}, cursor
    slots = {rule_id: slot for rule_id, slot in kept.items() if rule_id in wanted}
    taken = Taken(held, seid)
    for slot in [*kept.values(), *had]:
        taken.add(slot)
    for rule_id in sorted(wanted - set(slots)):
        cursor = slots[rule_id] = free_number(cursor, taken, count, what)
        taken.add(cursor)
    return slots, cursor


def free_number(cursor: int, taken: Taken, space: int, what: str) -> int:
    """The first number after `cursor` in 1 .. space-1 (0 is never given) that is not taken."""
    for _ in range(len(taken) + 2):
        cursor = cursor % (space - 1) + 1
        if cursor not in taken:
            return cursor
    raise RuleError(Cause.NO_RESOURCES_AVAILABLE, f"no {what} is free")
