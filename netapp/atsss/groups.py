"""REDUNDANT sessions' groups of ports (dpp_atsss_tx, a map of maps): a session's copies leave by
its paths' interfaces, one per position, so the sessions that name the same interfaces at the
same positions share a group, and a session of other interfaces (maybe another tenant's) gets a
group of its own: no session's copies leave by another's ports.

A group is known by the interface names of its positions (what the sessions store); the ifindexes
its entry holds are those names' on the node when it was written. Planning a change keeps the
groups of the sets still named, gives the new sets free entries (never one another set held in the
same change: a session not yet rewritten may still lead to it), and tells which entries to empty
once the sessions that led to them are rewritten.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Mapping, Optional

from netapp.atsss.abi import TX_GROUPS
from netapp.atsss.models import AtsssSession
from netapp.atsss.table import AtsssMaps, ProgramFd
from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.groups import GroupPlan, GroupsFull, plan_groups
from netapp.service.contract import DataplaneFull

log = logging.getLogger(__name__)

PortNames = tuple[str, ...]  # the interface of each position ("": none)


def port_names(session: AtsssSession) -> Optional[PortNames]:
    """The interfaces a session's REDUNDANT copies leave by (its own mode's, or a flow's of an MTS
    session with filters), by position; None when none of its frames runs REDUNDANT."""
    if not session.sends_copies:
        return None
    return tuple(path.interface or "" for path in session.paths)


def wanted_groups(sessions: Iterable[AtsssSession]) -> set[PortNames]:
    return {names for session in sessions if (names := port_names(session)) is not None}


class TxGroups:
    """The node's groups of redundant ports: which set of interfaces each is (`assigned`), and the
    ports each entry was written with (the interfaces' ifindexes then, looked up by `ifindex` in
    the caller's namespace)."""

    def __init__(self, ifindex: Callable[[str], Optional[int]]):
        self.assigned: dict[PortNames, int] = {}
        self._written: dict[int, dict[int, int]] = {}  # group -> position -> ifindex
        self._ifindex = ifindex

    def plan(self, sessions: Iterable[AtsssSession]) -> GroupPlan:
        """The groups after a change whose stored sessions (every tenant's) are `sessions`;
        DataplaneFull when a new set of ports finds no free group."""
        try:
            return plan_groups(self.assigned, wanted_groups(sessions), TX_GROUPS)
        except GroupsFull as exc:
            raise DataplaneFull(f"paths: the node's {TX_GROUPS} groups of redundant ports each hold another set of "
                                f"interfaces; the interfaces {list(exc.args[0])} need one: give the paths the "
                                "interfaces of another redundant session, or delete one", field="paths") from None

    def adopt(self, maps: AtsssMaps, sessions: Iterable[AtsssSession]) -> GroupPlan:
        """At a reconcile (a start's, or a change's after a refused put back): each set of ports
        keeps the group the maps hold it in (its sessions' entries then stay as they are), the
        others get groups the maps hold none in; the rest is stale."""
        held = {group: {position: ifindex for position, (ifindex, _) in ports.items()}
                for group, ports in maps.groups_ports().items()}
        self._written = dict(held)
        wanted = wanted_groups(sessions)
        adopted: dict[PortNames, int] = {}
        for names in sorted(wanted):
            group = next((group for group, ports in held.items()
                          if ports == self.ports(names) and group not in adopted.values()), None)
            if group is not None:
                adopted[names] = group
        self.assigned = adopted
        try:
            return plan_groups(adopted, wanted, TX_GROUPS, held=held)
        except GroupsFull as exc:  # interfaces made again under a full node: those sessions wait
            log.error("ATSSS: no group of redundant ports is free for interfaces %s", list(exc.args[0]))
            return GroupPlan(adopted, stale=sorted(set(held) - set(adopted.values())))

    def ports(self, names: PortNames) -> dict[int, int]:
        """Position -> the ifindex of its interface, for those on this node."""
        found = {position: self._ifindex(name) if name else None for position, name in enumerate(names)}
        return {position: ifindex for position, ifindex in found.items() if ifindex is not None}

    def write(self, plan: GroupPlan, maps: Optional[AtsssMaps], program_fd: Optional[ProgramFd]) -> None:
        """The plan's groups whose ports are new or changed (an interface made again) written; none
        without maps or a loaded program (the groups are still planned)."""
        self.assigned = dict(plan.assigned)
        if maps is None or program_fd is None:
            return
        for names, group in sorted(plan.assigned.items(), key=lambda item: item[1]):
            ports = self.ports(names)
            if self._written.get(group) != ports:
                maps.group_set(group, ports, program_fd)
                self._written[group] = ports

    def clear(self, plan: GroupPlan, maps: Optional[AtsssMaps]) -> None:
        """The groups no session names any more emptied (after the sessions that led to them)."""
        stale = [group for group in plan.stale if group in self._written]
        if maps is not None and stale:
            maps.groups_clear(stale)
        for group in stale:
            self._written.pop(group, None)

    def clear_stale(self, plan: GroupPlan, maps: AtsssMaps) -> None:
        """The groups a synced change left unnamed emptied. The maps refusing is logged, the change
        kept: no session leads to a stale group, so no packet goes through it, and the next
        redundant change's plan finds it held and named by none, and empties it."""
        try:
            self.clear(plan, maps)
        except DataplaneError as exc:
            log.warning("ATSSS's stale groups of redundant ports %s could not be emptied (%s): the next change "
                        "empties them", plan.stale, exc)

    def group_of(self, session: AtsssSession, assigned: Optional[Mapping[PortNames, int]] = None) -> int:
        """The group the session names (a planned `assigned`, else the current); 0 if not redundant."""
        names = port_names(session)
        return (assigned if assigned is not None else self.assigned).get(names, 0) if names is not None else 0
