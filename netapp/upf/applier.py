"""The UPF's data path side of a session change (the `Applier` of netapp.upf.sessions): the old and
the new session compiled (netapp.upf.compiler), and only their difference written to the maps,
through generic tables. Each write is made with its undo (netapp.service.transaction.SiteChange): if
one is refused, those made are undone and the maps are as before.

It also owns what the compiler is given: the interface roles (written to dpp_upf_ifaces from the
settings when the applier starts), network instance ids, and the URR slots of dpp_upf_usage.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from netapp.dataplane.tables import Table
from netapp.service.contract import ServiceError
from netapp.service.transaction import SiteChange
from netapp.upf.abi import MAX_UPF_IFACES, MAX_UPF_URRS, DownlinkKey, Iface, Role, UplinkKey
from netapp.upf.compiler import Entries, Site, compile_session, words
from netapp.upf.models import RuleError, Session
from netapp.upf.pfcp.ies import Cause

TableOf = Callable[[str], Table]


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


class UrrSlots:
    """Slots of dpp_upf_usage by (SEID, URR id). Slot 0 is never given: a zeroed entry means none."""

    def __init__(self) -> None:
        self._slots: dict[tuple[int, int], int] = {}
        self._free: list[int] = []
        self._next = 1

    def of(self, session: Session) -> dict[int, int]:
        """The session's URR id -> slot, giving slots to URRs that have none."""
        for urr_id in sorted(session.urrs):
            if (session.seid, urr_id) not in self._slots:
                self._slots[(session.seid, urr_id)] = self._take()
        return {urr_id: self._slots[(session.seid, urr_id)] for urr_id in session.urrs}

    def release(self, old: Session, new: Optional[Session]) -> None:
        """Give back the slots of the URRs `old` had and `new` has not."""
        kept = set(new.urrs) if new is not None else set()
        for urr_id in set(old.urrs) - kept:
            slot = self._slots.pop((old.seid, urr_id), None)
            if slot is not None:
                self._free.append(slot)

    def _take(self) -> int:
        if self._free:
            return self._free.pop()
        if self._next >= MAX_UPF_URRS:
            raise RuleError(Cause.NO_RESOURCES_AVAILABLE, "no URR slot is free")
        self._next += 1
        return self._next - 1


class BpfApplier:
    """Sessions into dpp_upf_uplink and dpp_upf_downlink, as deltas."""

    def __init__(self, table_of: TableOf, site: Site, ifaces: Mapping[int, Iface]):
        self._uplink = table_of("dpp_upf_uplink")
        self._downlink = table_of("dpp_upf_downlink")
        self._ifaces = table_of("dpp_upf_ifaces")
        self.site = site
        self.urrs = UrrSlots()
        self._write_ifaces(ifaces)

    def _write_ifaces(self, ifaces: Mapping[int, Iface]) -> None:
        """Every slot: the configured interfaces, and none elsewhere (left by an earlier run)."""
        stale = [slot for slot, value in self._ifaces.items() if value.ifindex and slot not in ifaces]
        self._ifaces.update({**{slot: Iface() for slot in stale}, **ifaces})

    def apply(self, old: Optional[Session], new: Optional[Session]) -> None:
        before = self._compile(old)
        after = self._compile(new)  # a RuleError here: nothing is written
        change = SiteChange()
        try:
            _write_delta(change, self._uplink, before.uplink, after.uplink, UplinkKey)
            _write_delta(change, self._downlink, before.downlink, after.downlink, DownlinkKey)
        except ServiceError:
            change.roll_back()
            if new is not None:
                self.urrs.release(new, old)
            raise
        if old is not None:
            self.urrs.release(old, new)

    def _compile(self, session: Optional[Session]) -> Entries:
        if session is None:
            return Entries()
        return compile_session(session, self.site, self.urrs.of(session))


def _write_delta(change: SiteChange, table: Table, before: dict, after: dict, key_type: Any) -> None:
    """Entries new or changed first (a session never lacks a rule it keeps), then the gone ones."""
    changed = {key: value for key, value in after.items() if key not in before or bytes(before[key]) != bytes(value)}
    gone = [key for key in before if key not in after]
    if changed:
        keys = [_key(key_type, key) for key in changed]
        restore = [(_key(key_type, key), before[key]) for key in changed if key in before]  # ctypes keys: no dict
        added = [_key(key_type, key) for key in changed if key not in before]
        change.write(
            lambda: table.update(zip(keys, changed.values())),
            lambda: (table.update(restore), table.delete(added)),
            lambda: (table.update(restore), table.delete(added)),
        )
    if gone:
        keys = [_key(key_type, key) for key in gone]
        change.write(lambda: table.delete(keys), lambda: table.update([(k, before[g]) for k, g in zip(keys, gone)]))


def _key(key_type: Any, key: tuple) -> Any:
    if key_type is UplinkKey:
        return UplinkKey(teid=key[0], qfi=key[1])
    instance, family, packed = key
    return DownlinkKey(net_instance=instance, family=family, addr=tuple(words(packed)))
