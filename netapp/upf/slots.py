"""The numbers the UPF gives a session (netapp.upf.sessions): its TEIDs (F-TEID with CHOOSE), and
its slots of the data path's per-session tables: of the usage counters (dpp_upf_usage; a URR's, and
one per set of URRs a PDR names: models.UrrSet), of the PDRs with SDF filters (dpp_upf_sdf_pdrs) and
of the QERs' policers (dpp_policers, netapp.upf.policing).
Who holds which is kept in memory from the stored sessions; a number is given from a cursor (the last
given), the first free one after it, 0 never: a search from 1 on every request would walk every
number held before it, as many as there are sessions."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from netapp.upf import policing
from netapp.upf.models import FTeid, RuleError, Session, UrrSet
from netapp.upf.pfcp.ies import Cause, IEType, RuleType

TEID_SPACE = 1 << 32


class Slots:
    """The slots sessions hold, by table; the cursors of the URR slots, of the policers and of the
    PDRs with SDF filters, which a change moves as it chooses (`begin` ... `settle` once committed:
    an undone change puts `cursor`, the three, back)."""

    def __init__(self, urr_count: int, sdf_count: int, policer_count: int = 0):
        self.urr_count, self.sdf_count = urr_count, sdf_count  # 0: the data path has none
        self.policer_count = policer_count
        self._urr_holders: dict[int, int] = {}  # URR slot -> the SEID of the session holding it
        self._sdf_holders: dict[int, int] = {}  # slot of dpp_upf_sdf_pdrs -> the SEID holding it
        self._policer_holders: dict[int, int] = {}  # policer id of dpp_policers -> the SEID holding it
        self.cursor = (0, 0, 0)  # the URR slot, the policer id and the SDF PDR slot last given, committed
        self._pending = self._pending_policer = self._pending_sdf = 0  # where the change in progress left them

    def hold(self, session: Session) -> None:
        # loops, not dict.fromkeys and update: a session holds one to a few of each (every new
        # session passes here), where two calls and a dict each cost more than the stores
        seid, urr_holders, sdf_holders, policer_holders = session.seid, self._urr_holders, self._sdf_holders, \
            self._policer_holders
        for slot in session.usage_slots():
            urr_holders[slot] = seid
        for slot in session.sdf_slots.values():
            sdf_holders[slot] = seid
        for policer_id in session.policer_ids():
            policer_holders[policer_id] = seid

    def release(self, session: Session) -> None:
        for slot in session.usage_slots():
            self._urr_holders.pop(slot, None)
        for slot in session.sdf_slots.values():
            self._sdf_holders.pop(slot, None)
        for policer_id in session.policer_ids():
            self._policer_holders.pop(policer_id, None)

    def begin(self) -> None:
        """A change starts choosing from the committed cursors."""
        self._pending, self._pending_policer, self._pending_sdf = self.cursor

    def settle(self) -> None:
        """The change that chose is committed: its cursors are the cursors."""
        self.cursor = (self._pending, self._pending_policer, self._pending_sdf)

    def choose_urr_slots(self, base: Session, urrs: dict[int, Any]) -> dict[int, int]:
        """The URRs' slots: those `base` gave them kept, a free one (after the cursor) for each new
        URR; none without a data path that counts."""
        slots, self._pending = choose_slots(
            base.seid, base.urr_slots, set(urrs), self._urr_holders, self.urr_count, self._pending,
            "URR slot", base.usage_slots(),
        )
        return slots

    def choose_new_urr_slots(self, seid: int, urr_ids: Iterable[int]) -> list[int]:
        """The slots of the URRs of the new session `seid`, in the order of `urr_ids` (increasing),
        as `choose_urr_slots` gives them: the fast path of establishments."""
        if not self.urr_count:
            return []
        slots, self._pending = free_numbers(self._pending, self._urr_holders, self.urr_count, len(urr_ids), "URR slot")
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
        """The slots of the PDRs with SDF filters: those `base` gave them kept, a free one (after
        the cursor) for each new one; none without a data path that takes them (the compiler then
        refuses)."""
        wanted = {pdr_id for pdr_id, pdr in pdrs.items() if pdr.pdi.sdf_filters}
        what = "slot for a PDR with SDF filters"
        slots, self._pending_sdf = choose_slots(
            base.seid, base.sdf_slots, wanted, self._sdf_holders, self.sdf_count, self._pending_sdf, what)
        return slots

    def choose_policers(self, base: Session, session: Session) -> dict[int, tuple[int, int]]:
        """The policers of the QERs' directions that police a PDR of `session` (netapp.upf.policing):
        those `base` gave them kept, a free one (after the cursor) for each new one; none without a
        data path that polices (the compiler then drops what a closed gate stops and polices nothing)."""
        kept = {(qer_id, way): policer_id for qer_id, pair in base.qer_policers.items()
                for way, policer_id in enumerate(pair) if policer_id}
        chosen, self._pending_policer = choose_slots(
            base.seid, kept, policing.wanted(session), self._policer_holders, self.policer_count,
            self._pending_policer, "policer", base.policer_ids(),
        )
        pairs: dict[int, list[int]] = {}
        for (qer_id, way), policer_id in chosen.items():
            pairs.setdefault(qer_id, [0, 0])[way] = policer_id
        return {qer_id: (pair[0], pair[1]) for qer_id, pair in sorted(pairs.items())}

    def choose_new_policers(self, seid: int, count: int) -> list[int]:
        """`count` policers for the new session `seid`, as `choose_policers` gives them (the free
        ones after the cursor, in turn): the fast path of establishments."""
        if not self.policer_count:
            return []
        chosen, self._pending_policer = free_numbers(self._pending_policer, self._policer_holders, self.policer_count,
                                                     count, "policer")
        return chosen


class Teids:
    """The TEIDs sessions hold, and the cursor CHOOSE gives them from: below `array` (the applier's
    `teid_slots`: the data path finds those in one array lookup, dpp_upf_teids) while fewer TEIDs are
    held than that, else anywhere. A change chooses from the committed `cursor`; `pending` is where
    it left it, the cursor once it is committed (netapp.upf.sessions)."""

    def __init__(self, array: int, n3_ipv4: Optional[str], n3_ipv6: Optional[str]):
        self._array = array
        self._n3 = (n3_ipv4, n3_ipv6)  # the addresses of the F-TEIDs the UPF chooses
        self.held: dict[int, int] = {}  # TEID -> the SEID of the session holding it
        self.cursor = self.pending = 0

    def hold(self, session: Session) -> None:
        seid, held = session.seid, self.held
        for teid in session.teids():  # a loop, as Slots.hold's
            held[teid] = seid

    def release(self, session: Session) -> None:
        for teid in session.teids():
            self.held.pop(teid, None)

    def choose(self, base: Session, pdrs: dict[int, Any]) -> list[tuple[int, FTeid]]:
        """Give every PDR of `pdrs` (the session `base` becomes, changed in place) whose F-TEID says
        CHOOSE (and has none yet) a TEID of ours; PDRs of the request with the same CHOOSE ID share
        one. A TEID given by the CP must be free. The (PDR id, F-TEID) chosen, for Created PDR."""
        self.pending = cursor = self.cursor
        by_choose_id: dict[int, FTeid] = {}
        taken = Taken(self.held, base.seid)
        created = []
        for pdr_id in sorted(pdrs):
            pdr = pdrs[pdr_id]
            fteid = pdr.pdi.local_fteid
            if fteid is None:
                continue
            if not fteid.choose or fteid.teid is not None:
                if fteid.teid in taken:
                    raise RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE, f"PDR {pdr_id} TEID {fteid.teid:#x} "
                                    "is in use", IEType.F_TEID, (RuleType.PDR, pdr_id))
                continue
            chosen = by_choose_id.get(fteid.choose_id) if fteid.choose_id is not None else None
            if chosen is None:
                cursor = self._free(cursor, taken)
                chosen = fteid.model_copy(update={"teid": cursor, **self._n3_addresses(fteid, pdr_id)})
                taken.add(cursor)
                if fteid.choose_id is not None:
                    by_choose_id[fteid.choose_id] = chosen
            pdrs[pdr_id] = pdr.model_copy(update={"pdi": pdr.pdi.model_copy(update={"local_fteid": chosen})})
            created.append((pdr_id, chosen))
        self.pending = cursor
        return created

    def choose_new(self, seid: int, count: int) -> list[int]:
        """`count` TEIDs for the new session `seid`, as `choose` gives them to its CHOOSE IDs (or
        PDRs without one) in turn: the fast path of establishments (netapp.upf.pfcp.templates). A new
        session holds no TEID, so every one held is another's: no `Taken` is asked (two calls a TEID)."""
        self.pending = cursor = self.cursor
        held = self.held
        if len(held) + count - 1 < self._array - 1:  # each below the array, as `_free` gives them: one call
            chosen, self.pending = free_numbers(cursor, held, self._array, count, "TEID")
            return chosen
        chosen = []
        for _ in range(count):
            space = self._array if len(held) + len(chosen) < self._array - 1 else TEID_SPACE  # as `_free`
            _, cursor = free_numbers(cursor, held, space, 1, "TEID", chosen)
        self.pending = cursor
        return chosen

    def _free(self, cursor: int, taken: Taken) -> int:
        if len(taken) < self._array - 1:
            return free_number(cursor, taken, self._array, "TEID")
        return free_number(cursor, taken, TEID_SPACE, "TEID")

    def _n3_addresses(self, fteid: FTeid, pdr_id: int) -> dict[str, Optional[str]]:
        ipv4 = self._n3[0] if fteid.want_ipv4 else None
        ipv6 = self._n3[1] if fteid.want_ipv6 else None
        if (fteid.want_ipv4 and ipv4 is None) or (fteid.want_ipv6 and ipv6 is None) or not (ipv4 or ipv6):
            raise RuleError(
                Cause.INVALID_F_TEID_ALLOCATION_OPTION,
                "CHOOSE asks for an address family the UPF has no N3 address of (pfcp.n3_ipv4, pfcp.n3_ipv6)",
                IEType.F_TEID,
                (RuleType.PDR, pdr_id),
            )
        return {"ipv4": ipv4, "ipv6": ipv6}


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


def free_numbers(cursor: int, held: dict[int, int], space: int, count: int, what: str,
                 chosen: Optional[list[int]] = None) -> tuple[list[int], int]:
    """`count` numbers for a new session (it holds none), as `choose_slots` gives them: each the
    first after `cursor` in 1 .. space-1 that no session holds (`held`) and that is not given
    already (`chosen`: those given before, the new ones appended to it); and the cursor after them.
    Without `Taken` and `choose_slots`' dicts: the fast path of establishments takes a URR slot and
    two policers a session this way, and its TEIDs. The number after the cursor is asked first, alone:
    numbers are given in turn, so it is free unless the numbers have wrapped (`free_number` is the
    reference, a test compares the two)."""
    chosen = [] if chosen is None else chosen
    for _ in range(count):
        cursor = cursor % (space - 1) + 1
        if cursor in held or cursor in chosen:
            cursor = _free_after(cursor, held, space, chosen, what)
        chosen.append(cursor)
    return chosen, cursor


def _free_after(cursor: int, held: dict[int, int], space: int, chosen: list[int], what: str) -> int:
    """The first number after `cursor` (taken) that is neither held nor chosen: `free_numbers`' walk,
    its first step made; as many steps in all as `free_number` takes."""
    for _ in range(len(held) + len(chosen) + 1):
        cursor = cursor % (space - 1) + 1
        if cursor not in held and cursor not in chosen:
            return cursor
    raise RuleError(Cause.NO_RESOURCES_AVAILABLE, f"no {what} is free")


def free_number(cursor: int, taken: Taken, space: int, what: str) -> int:
    """The first number after `cursor` in 1 .. space-1 (0 is never given) that is not taken."""
    for _ in range(len(taken) + 2):
        cursor = cursor % (space - 1) + 1
        if cursor not in taken:
            return cursor
    raise RuleError(Cause.NO_RESOURCES_AVAILABLE, f"no {what} is free")
