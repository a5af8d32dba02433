"""Alternative node groups (admin): where overflow goes, and which of their members are alive.

A group's new members are checked against the destinations of the confined tenants whose intents
send to it, or, for the site's default group, overflow to it naming none (netapp.tenancy.destinations).
A group's members marked `probe` are watched by the liveness monitor (netapp.forwarding.liveness);
the maps hold only a group's alive members (all, when probing is off), republished when one changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import Any, Iterator, Optional

from netapp.forwarding.compiler import CompiledAltGroup, CompiledAltMember, compile_alternatives, rule_group
from netapp.forwarding.contract import AlternativesContract
from netapp.forwarding.liveness import GTPU_PORT, UNPROBED, LivenessMonitor, MemberLiveness, Target
from netapp.forwarding.models import AlternativeGroup, AlternativeGroupStatus, AlternativeMemberStatus
from netapp.intents.errors import CompileError
from netapp.service.contract import Conflict, NotFound, Principal, Scope
from netapp.service.rules import split_rule_id
from netapp.service.state import ServiceState
from netapp.service.transaction import SiteChange, invalid_input

log = logging.getLogger("netapp.service")


class AlternativesService(AlternativesContract):
    """The groups in the store and in the maps, and the monitor that probes their members.
    `echo_port`: our GTP-U echo port, `peer_echo_port` the peers' (None: the same)."""

    def __init__(self, state: ServiceState, echo_port: int = GTPU_PORT, peer_echo_port: Optional[int] = None):
        self._state = state
        self._echo_port, self._peer_echo_port = echo_port, peer_echo_port

    def list_alternatives(self, who: Principal) -> list[AlternativeGroup]:
        self._state.require(who, Scope.READ)
        return self._state.store.list_alternatives()

    def get_alternative(self, who: Principal, group_id: int) -> AlternativeGroupStatus:
        self._state.require(who, Scope.READ)
        group = self._state.store.get_alternative(group_id)
        if group is None:
            raise NotFound(f"no alternative group {group_id}")
        liveness = self._state.liveness
        views = (
            liveness.view(group_id, len(group.members))
            if liveness is not None
            else [MemberLiveness(UNPROBED, True, None, 0, None)] * len(group.members)
        )
        members = [
            AlternativeMemberStatus(**member.model_dump(), **dataclasses.asdict(view))
            for member, view in zip(group.members, views)
        ]
        return AlternativeGroupStatus(id=group.id, members=members, active=sum(view.alive for view in views))

    def put_alternative(self, who: Principal, group: AlternativeGroup) -> AlternativeGroup:
        self._state.require(who, Scope.ADMIN)
        try:
            (compiled,) = compile_alternatives([group], self._state.index.interfaces)
        except CompileError as exc:
            raise invalid_input(exc) from exc

        def work(change: SiteChange) -> None:
            store, dataplane = self._state.store, self._state.dataplane
            previous = store.get_alternative(group.id)
            store.put_alternative(group, self._state.now())
            tenancy = self._state.tenancy
            tenancy.check_group_users(group.id, map(split_rule_id, self._users(group.id)))
            if group.id == tenancy.default_group():  # it also takes the overflow of intents naming none
                tenancy.check_default_group(group.id)
            self.watch()  # new probed members start not alive: forwarded to once they answer
            change.write(
                lambda: dataplane.set_alternative(group.id, self.live(compiled).members),
                lambda: self._restore(group.id, previous),
            )

        with self._rewatching():
            self._state.site_change(who, work)
        return group

    def delete_alternative(self, who: Principal, group_id: int) -> None:
        """Refused while intents use the group: their overflow would have nowhere to go."""
        self._state.require(who, Scope.ADMIN)

        def work(change: SiteChange) -> None:
            store = self._state.store
            previous = store.get_alternative(group_id)
            if previous is None:
                raise NotFound(f"no alternative group {group_id}")
            self._require_unused(who, group_id)
            store.delete_alternative(group_id)
            change.write(
                lambda: self._state.dataplane.clear_alternative(group_id),
                lambda: self._restore(group_id, previous),
            )

        with self._rewatching():
            self._state.site_change(who, work)

    def _restore(self, group_id: int, previous: Optional[AlternativeGroup]) -> None:
        if previous is None:
            self._state.dataplane.clear_alternative(group_id)
            return
        (compiled,) = compile_alternatives([previous], self._state.index.interfaces)
        self._state.dataplane.set_alternative(group_id, self.live(compiled).members)

    def _users(self, group_id: int) -> list[str]:
        """The rules (`<tenant>/<intent id>`) that send to the group."""
        index = self._state.index
        rules = ((name, index.get(name)) for name in index.rule_ids())
        return [name for name, rule in rules if rule is not None and rule_group(rule) == group_id]

    def _require_unused(self, who: Principal, group_id: int) -> None:
        users = sorted(self._state.rules.display(who, name) for name in self._users(group_id))
        if users:
            listed = ", ".join(repr(name) for name in users[:5]) + (" ..." if len(users) > 5 else "")
            raise Conflict(
                f"alternative group {group_id} is used by {len(users)} intents ({listed})", field="id"
            )

    def compiled(self, uncompiled: dict[str, str]) -> list[CompiledAltGroup]:
        """Every stored group, compiled with its alive members, for a reconcile; a group that does
        not compile (an interface that went away) is left out and told in `uncompiled`."""
        groups = []
        for group in self._state.store.list_alternatives():
            try:
                groups.extend(map(self.live, compile_alternatives([group], self._state.index.interfaces)))
            except CompileError as exc:
                uncompiled[f"alternative group {group.id}"] = exc.line()
        return groups

    # --- liveness of the members (netapp.forwarding.liveness) ---------------------------------------

    def open_liveness(self) -> None:
        """Bind the GTP-U echo end point in the site's namespace (the caller is in it) and watch
        the stored groups, before the reconcile that publishes their active members."""
        settings, checks = self._state.settings.liveness, self._state.checks
        if not settings.enabled:
            checks["liveness"] = "off (settings): probed members are forwarded to unchecked"
            return
        monitor = LivenessMonitor(
            settings.interval_ms / 1000,
            settings.detect_multiplier,
            self._alternatives_changed,
            port=self._echo_port,
        )
        try:
            monitor.open()
        except OSError as exc:
            monitor.close()
            checks["liveness"] = (
                f"GTP-U echo port {self._echo_port} not bound ({exc.strerror}): "
                "probed members are forwarded to unchecked"
            )
            log.warning("liveness: %s", checks["liveness"])
            return
        self._state.liveness = monitor
        checks["liveness"] = "ok"
        self.watch()

    def close_liveness(self) -> None:
        """Before taking the lock: the monitor's thread takes it to write the maps."""
        if self._state.liveness is not None:
            self._state.liveness.close()
            self._state.liveness = None

    def watch(self) -> None:
        """Have the monitor probe the members marked `probe` of the groups the store holds."""
        liveness = self._state.liveness
        if liveness is None:
            return
        port = self._peer_echo_port if self._peer_echo_port is not None else liveness.port

        def target(member: Any) -> Optional[Target]:
            address = member.ip4 if member.ip4 is not None else member.ip6
            return (str(address), port) if member.probe else None

        stored = self._state.store.list_alternatives()
        groups = {group.id: [target(member) for member in group.members] for group in stored}
        liveness.watch(groups)

    @contextlib.contextmanager
    def _rewatching(self) -> Iterator[None]:
        """Watch what the store holds once a change is over, committed or undone."""
        try:
            yield
        finally:
            with self._state.exclusive():
                if self._state.started:
                    self.watch()

    def live(self, compiled: CompiledAltGroup) -> CompiledAltGroup:
        """The group with only its alive members (all, when probing is off); may be empty."""
        liveness = self._state.liveness
        if liveness is None:
            return compiled
        members: tuple[CompiledAltMember, ...] = tuple(
            compiled.members[i] for i in liveness.active(compiled.group_id) if i < len(compiled.members)
        )
        return dataclasses.replace(compiled, members=members)

    def _alternatives_changed(self, groups: frozenset[int]) -> None:
        """From the monitor's thread: members of `groups` became alive or dead; publish the groups'
        active sets (an empty one: their overflow takes the default verdict)."""
        with self._state.exclusive():
            if not self._state.started:
                return
            for group_id in sorted(groups):
                group = self._state.store.get_alternative(group_id)
                if group is None:
                    continue
                (compiled,) = compile_alternatives([group], self._state.index.interfaces)
                self._state.dataplane.set_alternative(group_id, self.live(compiled).members)

