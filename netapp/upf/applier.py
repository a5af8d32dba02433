"""The UPF's data path side of a session change (the `Applier` of netapp.upf.sessions): the old and
the new session compiled (netapp.upf.compiler), and only their difference written to the maps,
through generic tables. Each write is made with its undo (netapp.service.transaction.SiteChange): if
one is refused, those made are undone and the maps are as before.

It also owns what the compiler is given: the interface roles (written to dpp_upf_ifaces from the
settings when the applier starts) and network instance ids. The URRs' slots of dpp_upf_usage are
given by netapp.upf.sessions and stored with each session; the applier zeroes a slot's counters when
it is given, and when it is freed, after keeping its final counts for the usage report
(`final_usage`).
"""

from __future__ import annotations

import collections
import errno
import functools
import logging
from typing import Any, Callable, Iterable, Mapping, Optional

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.tables import PerCpuTable, Table
from netapp.service.contract import DataplaneUnavailable, ServiceError
from netapp.service.transaction import SiteChange
from netapp.upf.abi import MAX_UPF_IFACES, DownlinkKey, Iface, Role, UplinkKey, Usage
from netapp.upf.compiler import Entries, Site, compile_session, words
from netapp.upf.models import RuleError, Session

TableOf = Callable[[str], Table]
log = logging.getLogger("netapp.upf")


def iface_entries(
    roles: Mapping[int, tuple[Role, int]], n3_ipv4: Optional[str], n3_ipv6: Optional[str]
) -> dict[int, Iface]:
    """dpp_upf_ifaces' slots: ifindex -> (role, network instance id). Two interfaces in one slot
    (ifindex % MAX_UPF_IFACES) cannot be told apart: ValueError."""
    slots: dict[int, Iface] = {}
    for ifindex, (role, instance) in sorted(roles.items()):
        slot = ifindex % MAX_UPF_IFACES
        if slot in slots:
            raise ValueError(f"interfaces {slots[slot].ifindex} and {ifindex} share UPF slot {slot}")
        iface = Iface(ifindex=ifindex, role=role, net_instance=instance)
        if role in (Role.N3, Role.N9):
            if n3_ipv4:
                iface.has_ip4, iface.addr4 = 1, words(n3_ipv4)[0]
            if n3_ipv6:
                iface.has_ip6, iface.addr6[:] = 1, words(n3_ipv6)
        slots[slot] = iface
    return slots


class BpfApplier:
    """Sessions into dpp_upf_uplink and dpp_upf_downlink, as deltas; their URRs' counters in
    dpp_upf_usage, whose size (setting dataplane.map_sizes) is `urr_slots`."""

    FINAL_KEPT = 65536  # final counts kept for usage reports, the oldest forgotten first

    def __init__(self, table_of: TableOf, site: Site, ifaces: Mapping[int, Iface]):
        self._uplink = table_of("dpp_upf_uplink")
        self._downlink = table_of("dpp_upf_downlink")
        self._ifaces = table_of("dpp_upf_ifaces")
        self._usage: PerCpuTable = table_of("dpp_upf_usage")  # type: ignore[assignment]
        self.urr_slots = self._usage.max_entries  # slot 0 is never given
        self.site = site
        self.stale: list[str] = []  # entries an undo could not put back: reconcile before the next change
        # (SEID, URR id) -> (slot, the counts it had when freed)
        self._final: collections.OrderedDict[tuple[int, int], tuple[int, Usage]] = collections.OrderedDict()
        self._write_ifaces(ifaces)

    def _write_ifaces(self, ifaces: Mapping[int, Iface]) -> None:
        """Every slot: the configured interfaces, and none elsewhere (left by an earlier run)."""
        stale = [slot for slot, value in self._ifaces.items() if value.ifindex and slot not in ifaces]
        self._ifaces.update({**{slot: Iface() for slot in stale}, **ifaces})

    def apply(self, old: Optional[Session], new: Optional[Session]) -> None:
        before = self._compile(old)
        after = self._compile(new)  # a RuleError here: nothing is written
        given, freed = _slot_changes(old, new)
        self._start_counting(given)
        change, left = SiteChange(), []
        try:
            _write_delta(change, self._uplink, before.uplink, after.uplink, UplinkKey, left)
            _write_delta(change, self._downlink, before.downlink, after.downlink, DownlinkKey, left)
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
        self._stop_counting(freed)

    def reconcile(self, sessions: Iterable[Session]) -> dict[int, RuleError]:
        """Make the PDR tables hold exactly the sessions' entries (at start: sessions deleted while
        the service was down, or entries of a write cut short, are gone): each table read whole,
        what differs written, what no session has deleted. A session that no longer compiles (the
        settings changed) is left out; the errors by SEID."""
        desired, refused = Entries(), {}
        for session in sessions:
            try:
                entries = self._compile(session)
            except RuleError as exc:
                refused[session.seid] = exc
                continue
            desired.uplink.update(entries.uplink)
            desired.downlink.update(entries.downlink)
        for table, want, key_type in (
            (self._uplink, desired.uplink, UplinkKey),
            (self._downlink, desired.downlink, DownlinkKey),
        ):
            have = {_tuple(key): bytes(value) for key, value in table.items()}
            table.update([(_key(key_type, key), value) for key, value in want.items() if have.get(key) != bytes(value)])
            table.delete([_key(key_type, key) for key in have if key not in want])
        self.stale = []
        return refused

    def usage(self, slots: Iterable[int]) -> dict[int, Usage]:
        """The counts of each slot, summed over the CPUs."""
        slots = list(slots)
        return {slot: _summed(values) for slot, values in zip(slots, self._usage.lookup(slots))}

    def final_usage(self, seid: int) -> dict[int, Usage]:
        """The final counts of the session's URRs freed since last asked (deleted with the session or
        removed from it), by URR id; forgotten once given."""
        keys = [key for key in self._final if key[0] == seid]
        return {key[1]: self._final.pop(key)[1] for key in keys}

    def _start_counting(self, given: dict[tuple[int, int], int]) -> None:
        """Slots given to URRs start from zero; one given back (the change that freed it is being
        undone) starts from the counts it was freed with."""
        back = [key for key, slot in given.items() if key in self._final and self._final[key][0] == slot]
        restored = {given[key]: self._final.pop(key)[1] for key in back}
        self._usage.fill([slot for slot in given.values() if slot not in restored])
        zeros = [Usage()] * (self._usage.cpus - 1)
        if restored:
            self._usage.update({slot: [counts, *zeros] for slot, counts in restored.items()})

    def _stop_counting(self, freed: dict[tuple[int, int], int]) -> None:
        """Freed slots (their entries gone): their final counts kept, then zeroed."""
        for (key, slot), counts in zip(freed.items(), self.usage(freed.values()).values()):
            self._final[key] = (slot, counts)
            self._final.move_to_end(key)
        while len(self._final) > self.FINAL_KEPT:
            self._final.popitem(last=False)
        self._usage.fill(list(freed.values()))

    def _compile(self, session: Optional[Session]) -> Entries:
        if session is None:
            return Entries()
        return compile_session(session, self.site, session.urr_slots)


def _slot_changes(old: Optional[Session], new: Optional[Session]) -> tuple[dict, dict]:
    """The URR slots `new` gives and those it frees, each by (SEID, URR id)."""
    before = {(old.seid, urr_id): slot for urr_id, slot in old.urr_slots.items()} if old else {}
    after = {(new.seid, urr_id): slot for urr_id, slot in new.urr_slots.items()} if new else {}
    given = {key: slot for key, slot in after.items() if before.get(key) != slot}
    freed = {key: slot for key, slot in before.items() if after.get(key) != slot}
    return given, freed


def _summed(per_cpu: Any) -> Usage:
    total = Usage()
    for counts in per_cpu:
        for name, _ in Usage._fields_:
            setattr(total, name, getattr(total, name) + getattr(counts, name))
    return total


def _write_delta(change: SiteChange, table: Table, before: dict, after: dict, key_type: Any, left: list[str]) -> None:
    """Entries new or changed first (a session never lacks a rule it keeps), then the gone ones.
    Each write's undo (also of a write refused half-way) puts back every entry it can, and names
    in `left` those it cannot."""
    changed = [key for key, value in after.items() if key not in before or bytes(before[key]) != bytes(value)]
    gone = [key for key in before if key not in after]
    if changed:
        writes = [(_key(key_type, key), after[key]) for key in changed]
        restore = [(_key(key_type, key), before[key]) for key in changed if key in before]
        added = [_key(key_type, key) for key in changed if key not in before]
        undo = functools.partial(_put_back, table, restore, added, left)
        change.write(lambda: table.update(writes), undo, undo)
    if gone:
        keys = [_key(key_type, key) for key in gone]
        undo = functools.partial(_put_back, table, [(key, before[old]) for key, old in zip(keys, gone)], [], left)
        change.write(lambda: table.delete(keys), undo, undo)


def _put_back(table: Table, restore: list[tuple[Any, Any]], added: list[Any], left: list[str]) -> None:
    """Write `restore` back and delete `added` (one absent already is as wanted), every entry tried
    whatever the others do; those refused are named in `left`."""
    for key, exc in _each(table.update, restore):
        left.append(f"{table.name} {_tuple(key[0])}: not restored ({exc})")
    for key, exc in _each(table.delete, added):
        if exc.errno != errno.ENOENT:
            left.append(f"{table.name} {_tuple(key)}: not deleted ({exc})")


def _each(batch: Callable[[list[Any]], None], items: list[Any]) -> list[tuple[Any, DataplaneError]]:
    """`batch` over the items, past each one it refuses (a DataplaneError's `done` says which): the
    refused items with their errors."""
    refused = []
    while items:
        try:
            batch(items)
            return refused
        except DataplaneError as exc:
            done = min(getattr(exc, "done", 0), len(items) - 1)
            refused.append((items[done], exc))
            items = items[done + 1 :]
    return refused


def _tuple(key: Any) -> tuple:
    """A map key as the compiler's tuple (netapp.upf.compiler.UplinkKey, DownlinkKey)."""
    if isinstance(key, UplinkKey):
        return (key.teid, key.qfi)
    return (key.net_instance, key.family, bytes(key.addr))


def _key(key_type: Any, key: tuple) -> Any:
    if key_type is UplinkKey:
        return UplinkKey(teid=key[0], qfi=key[1])
    instance, family, packed = key
    return DownlinkKey(net_instance=instance, family=family, addr=tuple(words(packed)))
