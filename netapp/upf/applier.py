"""The UPF's data path side of a session change (the `Applier` of netapp.upf.sessions): the old and
the new session compiled (netapp.upf.compiler), and only their difference written to the maps,
through generic tables. Each write is made with its undo (netapp.service.transaction.SiteChange): if
one is refused, those made are undone and the maps are as before. The sessions a transaction changes
(a group of PFCP requests) are written together, one batch per table, where they touch no entry in
common (`apply_group`). The downlink of the UE IPv4 addresses the SMF gives goes in the ways of
dpp_upf_dl4 (netapp.upf.ways places them and says in what order they are written), a full bucket's
in dpp_upf_downlink.

It also owns what the compiler is given: the interface roles (written to dpp_upf_ifaces from the
settings when the applier starts; an N6 interface's pools of dpp_upf_ue4, when upf.ue_pools moved
them, once the reconcile has laid the array out anew) and network instance ids. The URRs' slots of
dpp_upf_usage are given by netapp.upf.sessions and stored with each session; the applier zeroes a
slot's counters when it is given, and when it is freed, after keeping its final counts for the
usage report (`final_usage`). The QERs' policers (netapp.upf.policing) are given ids likewise; the
applier writes a policer before the entries that name it, afresh whenever its QER changes, and empties
it once none does.
"""

from __future__ import annotations

import collections
import functools
import logging
import operator
from typing import Any, Callable, Iterable, Mapping, Optional, Protocol

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.tables import Table, summed
from netapp.intents.compiler import CompiledRule
from netapp.qos.applier import PolicerApplier, PolicerSpec
from netapp.qos.ids import upf_ids
from netapp.service.contract import DataplaneUnavailable, ServiceError
from netapp.service.function_rules import RuleClash
from netapp.service.transaction import SiteChange
from netapp.upf.abi import (
    MAX_UPF_IFACES,
    QFI_ANY,
    DownlinkKey,
    DownlinkState,
    Iface,
    PdrAction,
    PdrFlag,
    Role,
    UplinkKey,
    UplinkState,
    Usage,
)
from netapp.upf.compiler import Entries, Site, compile_session, words
from netapp.upf.leftout import LeftOut
from netapp.upf.models import RuleError, Session
from netapp.upf.pfcp.ies import Cause, IEType, RuleType
from netapp.upf.pdr_tables import (
    SlotTable,
    compiler_key,
    held_error,
    is_held,
    reconcile_table,
    refuse_held,
    refuse_held_ways,
    shared_keys,
    write_delta,
)
from netapp.upf.prepared import PreparedSession
from netapp.upf.sdf import is_upf_rule
from netapp.upf.ways import Ways

TableOf = Callable[[str], Table]
_ENTRY = int(PdrFlag.ENTRY)  # an int: IntFlag's operators cost microseconds a change
log = logging.getLogger("netapp.upf")


def iface_entries(
    roles: Mapping[int, tuple[Role, int]],
    n3_ipv4: Optional[str],
    n3_ipv6: Optional[str],
    ue4: Optional[Mapping[int, tuple[int, int, int]]] = None,
) -> dict[int, Iface]:
    """dpp_upf_ifaces' slots: ifindex -> (role, network instance id); an N6 one with its instance's
    pool of UE addresses in dpp_upf_ue4 (`ue4`: instance id -> (first address, addresses, first
    slot), netapp.upf.pools.Pools.layout). Two interfaces in one slot (ifindex % MAX_UPF_IFACES)
    cannot be told apart: ValueError."""
    slots: dict[int, Iface] = {}
    for ifindex, (role, instance) in sorted(roles.items()):
        slot = ifindex % MAX_UPF_IFACES
        if slot in slots:
            raise ValueError(f"interfaces {slots[slot].ifindex} and {ifindex} share UPF slot {slot}")
        iface = Iface(ifindex=ifindex, role=role, net_instance=instance)
        if role == Role.N6 and ue4 and instance in ue4:
            iface.ue4_base, iface.ue4_count, iface.ue4_first = ue4[instance]
        if role in (Role.N3, Role.N9):
            if n3_ipv4:
                iface.has_ip4, iface.addr4 = 1, words(n3_ipv4)[0]
            if n3_ipv6:
                iface.has_ip6, iface.addr6[:] = 1, words(n3_ipv6)
        slots[slot] = iface
    return slots


class Rules(Protocol):
    """Where the classifier rules of PDRs with SDF filters go: netapp.service.function_rules, the
    rule machinery of intents."""

    @property
    def rules(self) -> Mapping[str, CompiledRule]: ...

    @property
    def lock(self) -> Any:
        """The lock `change` takes: a transaction of the store takes it first (netapp.upf.sessions)."""

    def change(self, before: Mapping[str, CompiledRule], after: Mapping[str, CompiledRule]) -> Callable[[], None]: ...


class BpfApplier:
    """Sessions into dpp_upf_teids, dpp_upf_uplink, dpp_upf_ue4, dpp_upf_dl4 and dpp_upf_downlink, as
    deltas: a TEID's own entry in its slot of dpp_upf_teids when the TEID is below its size,
    `teid_slots` (the TEIDs the UPF chooses: netapp.upf.sessions), else in dpp_upf_uplink with the
    entries by QFI; a UE IPv4 address's downlink in its pool's slot of dpp_upf_ue4, or in a way of
    dpp_upf_dl4 (netapp.upf.ways), else in dpp_upf_downlink; their URRs' counters in dpp_upf_usage, whose size (setting dataplane.map_sizes) is `urr_slots`; their PDRs
    with SDF filters in dpp_upf_sdf_pdrs and, as rules, through `rules` (None: such PDRs are
    refused)."""

    FINAL_KEPT = 65536  # final counts kept for usage reports, the oldest forgotten first

    def __init__(self, table_of: TableOf, site: Site, ifaces: Mapping[int, Iface], rules: Optional[Rules] = None):
        self._rules = rules
        self._sdf_pdrs = table_of("dpp_upf_sdf_pdrs")
        self.sdf_slots = self._sdf_pdrs.max_entries if rules is not None else 0  # slot 0 is never given
        self._teids = SlotTable(table_of("dpp_upf_teids"))
        self._uplink = table_of("dpp_upf_uplink")
        self._uplink_state = table_of("dpp_upf_uplink_state")
        self._teids_hashed: Optional[bool] = None  # what dpp_upf_uplink_state says (None: not written yet)
        self._downlink = table_of("dpp_upf_downlink")
        self._downlink_state = table_of("dpp_upf_downlink_state")
        self._ue4_hashed: Optional[bool] = None  # what dpp_upf_downlink_state says (None: not written yet)
        self._dl4 = table_of("dpp_upf_dl4")
        self._ways = Ways(self._dl4)
        self._ue4 = SlotTable(table_of("dpp_upf_ue4"))
        # network instance id -> its pool in dpp_upf_ue4: (first address, addresses, first slot)
        self._pools = {iface.net_instance: (iface.ue4_base, iface.ue4_count, iface.ue4_first)
                       for iface in ifaces.values() if iface.role == Role.N6 and iface.ue4_count}
        self._ifaces = table_of("dpp_upf_ifaces")
        self._usage = table_of("dpp_upf_usage")
        self.policers = PolicerApplier(table_of, window_credit=False)  # dpp_upf_police: windows without
        self.teid_slots = self._teids.max_entries
        self.urr_slots = self._usage.max_entries  # slot 0 is never given
        self.policer_slots = upf_ids(self.policers.max_entries).stop  # ids 1 .. this - 1 (netapp.qos.ids)
        self.site = site
        self.stale: list[str] = []  # entries an undo could not put back: reconcile before the next change
        self._left_out = LeftOut()  # stored sessions the last reconcile left out of the maps
        # (SEID, URR id) -> the URR's counts when freed (the sum of its slots'), for its final report
        self._final: collections.OrderedDict[tuple[int, int], Usage] = collections.OrderedDict()
        # (SEID, slot) -> the counts it had when freed: given back to it should the change be undone
        self._freed: collections.OrderedDict[tuple[int, int], Usage] = collections.OrderedDict()
        self._withheld = self._write_ifaces(ifaces)  # N6 interfaces whose pools the next reconcile publishes

    def _write_ifaces(self, ifaces: Mapping[int, Iface]) -> dict[int, Iface]:
        """Every slot: the configured interfaces, and none elsewhere (left by an earlier run); an N6
        one with the buckets of dpp_upf_dl4 when it can hold its network instance's addresses. While
        dpp_upf_ue4 holds entries laid out otherwise (upf.ue_pools changed), an interface whose pools
        moved is written without them (its addresses miss meanwhile, rather than find another
        address's entry in their slot): those are returned, for the reconcile to publish."""
        current = dict(self._ifaces.items())
        stale = [slot for slot, value in current.items() if value.ifindex and slot not in ifaces]
        written = {slot: self._with_dl4(iface) for slot, iface in ifaces.items()}
        moved = {slot: iface for slot, iface in written.items() if _ue4_layout(current.get(slot)) != _ue4_layout(iface)}
        withheld = moved if moved and any(is_held(int, value) for _, value in self._ue4.items()) else {}
        self._ifaces.update({**{slot: Iface() for slot in stale}, **written,
                             **{slot: _without_pools(iface) for slot, iface in withheld.items()}})
        return withheld

    def _with_dl4(self, iface: Iface) -> Iface:
        """The interface as written: an N6 one with dpp_upf_dl4's buckets if its instance fits there."""
        written = Iface.from_buffer_copy(iface)
        if written.role == Role.N6 and self._ways.fits((written.net_instance, 4, b"")):
            written.dl4_bits = self._ways.bits
        return written

    def apply(self, old: Optional[Session], new: Optional[Session]) -> None:
        before = self._left_out.before(old, self._compile)
        after, out_again = self._left_out.after(new, self._compile)  # a RuleError here: nothing is written
        self._write(before, after, [(old, new)], [_slot_changes(old, new)])
        self._left_out.applied([(old, new)], [out_again])

    def apply_group(self, pairs: list[tuple[Optional[Session], Optional[Session]]]) -> bool:
        """The (old, new) pairs of a transaction, as `apply` of each in turn would leave the maps, in
        one write per table; False, with nothing written, when two pairs touch one entry or URR
        slot (one session twice, a TEID freed and taken again): the caller then applies them in turn."""
        left_out = self._left_out
        targets = [left_out.after(new, self._compile) for _, new in pairs]  # RuleError: nothing written
        compiled = [(left_out.before(old, self._compile), after) for (old, _), (after, _) in zip(pairs, targets)]
        slots = [_slot_changes(old, new) for old, new in pairs]
        joined = _joined_apart(compiled, slots)
        if joined is None:
            return False
        self._write(*joined, pairs, slots)
        left_out.applied(pairs, [again for _, again in targets])
        return True

    def committed(self) -> None:
        """The changes applied stand (netapp.upf.held.SessionChange)."""
        self._left_out.committed()

    def _write(self, before: Entries, after: Entries, pairs: list[tuple[Optional[Session], Optional[Session]]],
               slots: list[tuple[dict, dict]]) -> None:
        """The maps from `before` to `after`, the entries of the sessions' (old, new) `pairs`: the
        usage slots they give counting from zero, those they free zeroed (the final counts of the
        URRs that go kept; `slots`: each pair's `_slot_changes`)."""
        given, freed = {}, {}
        for gives, frees in slots:
            given.update(gives)
            freed.update(frees)
        (teids_before, uplink_before), (teids_after, uplink_after) = map(self._split, (before, after))
        (ue4_before, downlink_before), (ue4_after, downlink_after) = map(self._split_downlink, (before, after))
        refuse_held([(self._teids, teids_before, teids_after, int), (self._uplink, uplink_before, uplink_after, UplinkKey),
                      (self._ue4, ue4_before, ue4_after, int),
                      (self._downlink, downlink_before, self._hash_may_hold(downlink_after), DownlinkKey)])
        try:
            refuse_held_ways(self._ways, downlink_before, downlink_after)
            ways = self._ways.plan(downlink_before, downlink_after)  # may read and wait; writes nothing
        except DataplaneError as exc:
            raise DataplaneUnavailable(f"the data plane refused to read dpp_upf_dl4: {exc}") from exc
        self._start_counting(given, pairs)
        change, left = SiteChange(), []
        try:
            # the policers the entries name before the entries (and those none names after them)
            self._write_policers(change, before.policers, after.policers)
            # the slots the rules point at first (one no rule points at any more is left as it is)
            kept = {slot: value for slot, value in before.sdf_pdrs.items() if slot in after.sdf_pdrs}
            write_delta(change, self._sdf_pdrs, kept, after.sdf_pdrs, int, left)
            write_delta(change, self._teids, teids_before, teids_after, int, left)
            self._mark_hashed(uplink_after)
            write_delta(change, self._uplink, uplink_before, uplink_after, UplinkKey, left)
            write_delta(change, self._ue4, ue4_before, ue4_after, int, left)
            self._ways.publish(change, ways, left)
            self._mark_ue4_hashed(ways.hashed_after)
            write_delta(change, self._downlink, ways.hashed_before, ways.hashed_after, DownlinkKey, left)
            self._ways.retire(change, ways, left)
            self._change_rules(change, before.rules, after.rules)
            self._remove_policers(change, before.policers, after.policers)
        except RuleClash as exc:
            change.roll_back()
            raise _clash(exc) from exc
        except ServiceError as exc:
            change.roll_back()
            if not left:
                raise
            self.stale += left
            log.error("undoing a refused write to the UPF's maps left %d entries wrong: %s", len(left), left)
            raise DataplaneUnavailable(
                f"{exc}; undoing it left {len(left)} entries wrong ({'; '.join(left[:3])}): the next change "
                "reconciles the maps first"
            ) from exc
        slots_of = {(old.seid, urr_id): slots for old, _ in pairs if old is not None
                    for urr_id, slots in old.urr_usage_slots().items()}
        self._stop_counting(freed, slots_of, [key for old, new in pairs for key in _urr_changes(old, new)])

    def _write_policers(self, change: SiteChange, before: dict[int, PolicerSpec], after: dict[int, PolicerSpec]) -> None:
        """The policers new or changed (a QER's MBR or gate: Update QER), written afresh: their
        state and counters start from zero; the undo writes back those they replaced."""
        # none before (sessions established): all of them, without comparing a spec each
        changed = {policer_id: spec for policer_id, spec in after.items() if before.get(policer_id) != spec} if before \
            else after
        if not changed:
            return
        old = {policer_id: before[policer_id] for policer_id in changed if policer_id in before}

        def undo() -> None:
            self.policers.remove([policer_id for policer_id in changed if policer_id not in old])
            self.policers.apply(old)

        change.write(lambda: self.policers.apply(changed), undo, undo)

    def _remove_policers(self, change: SiteChange, before: dict[int, PolicerSpec], after: dict[int, PolicerSpec]) -> None:
        """The policers no entry names any more, emptied (QER removed, its MBR or its PDRs gone)."""
        gone = {policer_id: spec for policer_id, spec in before.items() if policer_id not in after}
        if gone:
            change.write(lambda: self.policers.remove(gone), lambda: self.policers.apply(gone))

    def _hash_may_hold(self, downlink: dict) -> dict:
        """The entries of `downlink` dpp_upf_downlink may hold: while dpp_upf_downlink_state says it
        holds no IPv4 address (they are in dpp_upf_dl4's ways), its IPv6 ones alone."""
        if self._ue4_hashed is not False:
            return downlink
        return {key: action for key, action in downlink.items() if key[1] != 4}

    def _change_rules(self, change: SiteChange, before: dict, after: dict) -> None:
        if before == after:
            return
        if self._rules is None:
            raise RuleError(Cause.SYSTEM_FAILURE, "the data path takes no rules of SDF filters here")
        undo = self._rules.change(before, after)
        change.write(lambda: None, undo)

    def reconcile(self, sessions: Iterable[Session]) -> dict[int, RuleError]:
        """Make the PDR tables hold exactly the sessions' entries (at start: sessions deleted while
        the service was down, or entries of a write cut short, are gone): each table read whole,
        what differs written, what no session has deleted. A session that no longer compiles (the
        settings changed) is left out, and so is one the last reconcile left out; the errors by SEID."""
        return self.reconcile_compiled(
            (session.seid, functools.partial(self._compile_unless_left_out, session)) for session in sessions
        )

    def _compile_unless_left_out(self, session: Session) -> Entries:
        if session.seid in self._left_out.seids:
            raise RuleError(Cause.SYSTEM_FAILURE, "left out of the maps at start (logged then)")
        return self._compile(session)

    def reconcile_compiled(self, compiled: Iterable[tuple[int, Callable[[], Entries]]]) -> dict[int, RuleError]:
        """`reconcile` of sessions by SEID, each with what gives its entries (compiled already at
        start-up, netapp.upf.runtime) or raises its RuleError."""
        desired, refused, rules_of = Entries(), {}, {}
        for seid, entries_of in compiled:
            try:
                entries = entries_of()
            except RuleError as exc:
                refused[seid] = exc
                continue
            shared = shared_keys(desired, entries)
            if shared:  # stored so by an earlier version: the session first reconciled keeps them
                refused[seid] = held_error(shared[0], "another stored session's")
                continue
            desired.uplink.update(entries.uplink)
            desired.downlink.update(entries.downlink)
            desired.sdf_pdrs.update(entries.sdf_pdrs)
            desired.rules.update(entries.rules)
            desired.policers.update(entries.policers)
            rules_of[seid] = entries.rules
        teids, uplink = self._split(desired)
        ue4, downlink = self._split_downlink(desired)
        self.policers.reconcile(desired.policers, upf_ids(self.policers.max_entries))
        self._mark_hashed(uplink)
        for table, want, key_type in (
            (self._teids, teids, int),
            (self._uplink, uplink, UplinkKey),
            (self._ue4, ue4, int),
        ):
            reconcile_table(table, want, key_type)
        self._reconcile_downlink(downlink)
        self._mark_hashed(uplink, exact=True)
        self._sdf_pdrs.update(list(desired.sdf_pdrs.items()))
        self._reconcile_rules(desired.rules, rules_of, refused)
        self._left_out.reconciled(refused)
        self.stale = []
        if self._withheld:  # dpp_upf_ue4 is laid out as they say
            self._ifaces.update(self._withheld)
            self._withheld = {}
        return refused

    def _reconcile_downlink(self, desired: dict) -> None:
        """dpp_upf_dl4 and dpp_upf_downlink holding exactly the `desired` entries (netapp.upf.ways:
        placed as a change places them, the hash's moved into free ways), written in a change's
        order, without undo."""
        hashed = {compiler_key(DownlinkKey, key): value for key, value in self._downlink.items()}
        plan = self._ways.reconcile(desired, hashed)  # the ways published
        self._mark_ue4_hashed(plan.hashed_after)
        reconcile_table(self._downlink, plan.hashed_after, DownlinkKey, have=hashed)
        self._ways.retire_now(plan)
        self._mark_ue4_hashed(plan.hashed_after, exact=True)

    def _reconcile_rules(self, desired: dict, rules_of: dict[int, dict], refused: dict[int, RuleError]) -> None:
        """The rules of every session, in one change; refused (a shape too many since), session by
        session: one whose rules cannot be installed is named, its packets get its PDRs without
        SDF filters (the exact entries)."""
        if self._rules is None:
            return
        try:
            self._rules.change(self._rules.rules, desired)
            return
        except (RuleClash, ServiceError) as exc:
            log.error("the rules of SDF filters could not be installed together (%s): session by session", exc)
        self._rules.change(self._rules.rules, {})
        for seid, rules in rules_of.items():
            try:
                self._rules.change({}, rules)
            except RuleClash as exc:
                refused[seid] = _clash(exc)
            except ServiceError as exc:
                refused[seid] = RuleError(Cause.SYSTEM_FAILURE, f"its SDF filters' rules: {exc}")

    def _split(self, entries: Entries) -> tuple[dict[int, PdrAction], dict]:
        """The uplink entries as written: TEIDs' own below `teid_slots` by TEID in dpp_upf_teids
        (marked as there), the others by (TEID, QFI) in dpp_upf_uplink."""
        slots, hashed = {}, {}
        for (teid, qfi), action in entries.uplink.items():
            if qfi == QFI_ANY and teid < self.teid_slots:
                slots[teid] = PdrAction.from_buffer_copy(action)
                slots[teid].flags |= _ENTRY
            else:
                hashed[(teid, qfi)] = action
        return slots, hashed

    def _split_downlink(self, entries: Entries) -> tuple[dict[int, PdrAction], dict]:
        """The downlink entries as written: the UE addresses of an N6 interface's pool by slot in
        dpp_upf_ue4 (marked as there; the data path looks nowhere else for them), the others by
        (network instance, family, address) in dpp_upf_downlink."""
        slots, hashed = {}, {}
        for key, action in entries.downlink.items():
            instance, family, packed = key
            pool = self._pools.get(instance) if family == 4 else None
            offset = int.from_bytes(packed[:4], "big") - pool[0] if pool else -1
            if pool and 0 <= offset < pool[1]:
                slot = pool[2] + offset
                slots[slot] = PdrAction.from_buffer_copy(action)
                slots[slot].flags |= _ENTRY
            else:
                hashed[key] = action
        return slots, hashed

    def _mark_hashed(self, uplink: dict, exact: bool = False) -> None:
        """dpp_upf_uplink_state: set before dpp_upf_uplink gets a TEID's own entry (only then does
        the data path look there for a TEID past dpp_upf_teids); cleared only when `exact`, once the
        entries written (`reconcile`'s whole table) hold none."""
        hashed = any(qfi == QFI_ANY for _, qfi in uplink)
        if hashed != self._teids_hashed and (hashed or exact):
            self._uplink_state.update({0: UplinkState(teids=int(hashed))})
            self._teids_hashed = hashed

    def _mark_ue4_hashed(self, downlink: dict, exact: bool = False) -> None:
        """dpp_upf_downlink_state, as dpp_upf_uplink_state: set before dpp_upf_downlink gets an IPv4
        entry (only then does the data path look there for an address dpp_upf_dl4 lacks); cleared
        only when `exact`, once the entries written (`reconcile`'s whole table) hold none."""
        hashed = any(family == 4 for _, family, _ in downlink)
        if hashed != self._ue4_hashed and (hashed or exact):
            self._downlink_state.update({0: DownlinkState(ue4=int(hashed))})
            self._ue4_hashed = hashed

    def usage(self, slots: Iterable[int]) -> dict[int, Usage]:
        """The counts of each slot."""
        slots = list(slots)
        return {slot: counts or Usage() for slot, counts in zip(slots, self._usage.lookup(slots))}

    def final_usage(self, seid: int) -> dict[int, Usage]:
        """The final counts of the session's URRs freed since last asked (deleted with the session or
        removed from it), by URR id; forgotten once given."""
        keys = [key for key in self._final if key[0] == seid]
        return {key[1]: self._final.pop(key) for key in keys}

    def _start_counting(self, given: dict[tuple[int, int], int],
                        pairs: list[tuple[Optional[Session], Optional[Session]]]) -> None:
        """Slots given start from zero; one given back (the change that freed it is being undone)
        starts from the counts it was freed with, and the URRs counting again in the pairs' new
        sessions (their deletion or removal undone) have no final counts."""
        restored = {key[1]: self._freed.pop(key) for key in given if key in self._freed} if self._freed else {}
        if self._final:  # else none to forget: the URRs are not looked at (most groups only establish)
            for key in [key for old, new in pairs for key in _urr_changes(new, old)]:
                self._final.pop(key, None)
        if restored:
            self._usage.update({**{slot: Usage() for slot in given.values()}, **restored})
        else:  # the usual: every slot zeroed, their values made at once (zeroed as made)
            self._usage.update_arrays(list(given.values()), (Usage * len(given))())

    def _stop_counting(self, freed: dict[tuple[int, int], int], slots_of: dict[tuple[int, int], list[int]],
                       gone: list[tuple[int, int]]) -> None:
        """The URRs `gone` (SEID, URR id; their entries gone): their final counts, the sum of their
        slots' (`slots_of` them before the change), kept; the freed slots' counts kept too (for an
        undo), then zeroed."""
        read = self.usage({slot for key in gone for slot in slots_of.get(key, ())} | set(freed.values()))
        for key in gone:
            self._final[key] = summed(Usage, (read[slot] for slot in slots_of.get(key, ())))
            self._final.move_to_end(key)
        for key in freed:
            self._freed[key] = read[key[1]]
            self._freed.move_to_end(key)
        for kept in (self._final, self._freed):
            while len(kept) > self.FINAL_KEPT:
                kept.popitem(last=False)
        self._usage.update({slot: Usage() for slot in freed.values()})

    def _compile(self, session: Optional[Session]) -> Entries:
        return Entries() if session is None else compile_stored(session, self.site)


def compile_stored(session: Session, site: Site) -> Entries:
    """The session's entries with the slots stored with it (RuleError: it does not compile); of a
    session the fast path of establishments made, those made with it (netapp.upf.prepared)."""
    made = session.entries_for(site) if isinstance(session, PreparedSession) else None
    return made if made is not None else compile_session(session, site, session.urr_slots, session.sdf_slots)


_TABLES = ("uplink", "downlink", "sdf_pdrs", "rules", "policers")  # the tables of netapp.upf.compiler.Entries


def _joined(parts: list[Entries]) -> Optional[Entries]:
    """The entries of several sessions in one; None when two hold one key of a table (a joined
    table is then shorter than theirs together). Each table is joined and counted apart, its dicts
    gathered once; empty ones (the `before` of sessions established) are passed over."""
    joined = Entries()
    for table in _TABLES:
        tables = list(map(operator.attrgetter(table), parts))
        into = getattr(joined, table)
        for each in tables:
            if each:
                into.update(each)
        if len(into) != sum(map(len, tables)):
            return None
    return joined


def _joined_apart(compiled: list[tuple[Entries, Entries]],
                  slots: list[tuple[dict, dict]]) -> Optional[tuple[Entries, Entries]]:
    """The pairs' entries joined, before and after; None when two pairs touch one entry (by table
    and key) or URR slot. A key two pairs hold on one side shows as a joined table shorter than
    theirs together (`_joined`); a key held before by one pair and after by another is looked for
    only among the keys both joined sides hold (those a modification keeps; none when sessions are
    only established). No set or tuple is made per entry of the group."""
    usage: set[int] = set()
    for given, freed in slots:
        own = {*given.values(), *freed.values()}
        if not usage.isdisjoint(own):
            return None
        usage |= own
    before, after = _joined([was for was, _ in compiled]), _joined([now for _, now in compiled])
    if before is None or after is None:
        return None
    for table in _TABLES:
        was, now = getattr(before, table), getattr(after, table)
        both = was.keys() & now.keys()
        if both and any(both & getattr(old, table).keys() != both & getattr(new, table).keys()
                        for old, new in compiled):
            return None
    return before, after


def _ue4_layout(iface: Optional[Iface]) -> tuple[int, int, int]:
    """Where an interface finds its instance's pool in dpp_upf_ue4 (none: zeros)."""
    return (iface.ue4_base, iface.ue4_count, iface.ue4_first) if iface is not None else (0, 0, 0)


def _without_pools(iface: Iface) -> Iface:
    """The interface, its addresses looked up in dpp_upf_downlink alone."""
    bare = Iface.from_buffer_copy(iface)
    bare.ue4_base = bare.ue4_count = bare.ue4_first = 0
    return bare


def _slot_changes(old: Optional[Session], new: Optional[Session]) -> tuple[dict, dict]:
    """The usage slots `new` gives and those it frees, each by (SEID, slot)."""
    before = {(old.seid, slot): slot for slot in old.usage_slots()} if old else {}
    after = {(new.seid, slot): slot for slot in new.usage_slots()} if new else {}
    if not before or not after:  # a session established or deleted: nothing kept to leave out
        return after, before
    return {key: slot for key, slot in after.items() if key not in before}, {
        key: slot for key, slot in before.items() if key not in after}


def _urr_changes(old: Optional[Session], new: Optional[Session]) -> list[tuple[int, int]]:
    """The URRs (SEID, URR id) that counted in `old` and do not in `new` (removed, session deleted)."""
    if old is None:
        return []
    kept = new.urr_slots if new is not None else {}
    return [(old.seid, urr_id) for urr_id, slot in old.urr_slots.items() if kept.get(urr_id) != slot]


def _clash(exc: RuleClash) -> RuleError:
    """A rule of a PDR that cannot be installed: refused, naming the PDR (from the rule's id)."""
    pdr_id = int(exc.rule_id.split("#")[2]) if is_upf_rule(exc.rule_id) else 0
    return RuleError(Cause.RULE_CREATION_MODIFICATION_FAILURE, f"an SDF filter's rule: {exc}", IEType.SDF_FILTER,
                     (RuleType.PDR, pdr_id))
