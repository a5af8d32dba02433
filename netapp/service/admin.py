"""The data plane itself: its interfaces (attach, detach), its program (reload), status and statistics."""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import time
from typing import Any, Callable, Optional

from netapp.dataplane.binding import DataplaneError
from netapp.dataplane.facade import host_interfaces, mode_refused
from netapp.frer.dataplane import FrerDataplane
from netapp.qos.dispatch import Dispatcher
from netapp.service.contract import (
    Conflict,
    DataplaneContract,
    DataplaneUnavailable,
    InvalidInput,
    NotFound,
    Principal,
    Scope,
    ServiceError,
)
from netapp.service.rules import rule_id, split_rule_id
from netapp.service.state import ServiceState, ifindex, namespace
from netapp.service.store import Attachment
from netapp.service.transaction import SiteChange
from netapp.steering.service import CpuService

log = logging.getLogger("netapp.service")


class AdminService(DataplaneContract):
    """Interfaces in the store and attached, the program, and what the maps count. `left_out`: what
    the store holds and the maps do not, and why (shown to admins)."""

    def __init__(self, state: ServiceState, cpus: CpuService, left_out: Callable[[], dict[str, str]]):
        self._state = state
        self._cpus = cpus
        self._left_out = left_out

    # --- interfaces ------------------------------------------------------------------------------

    def refresh_interfaces(self) -> None:
        """Interface names the compiler resolves: the site namespace's, then those of interfaces
        configured in another namespace."""
        settings, checks = self._state.settings, self._state.checks
        with namespace(settings.netns):
            table = host_interfaces()
        for name, netns in self.wanted_attachments().items():
            if netns is None or netns == settings.netns:
                continue
            try:
                table[name] = ifindex(name, netns)
            except OSError as exc:
                checks[f"interface {name}"] = f"not found in netns {netns}: {exc}"
        self._state.index.interfaces = table

    def wanted_attachments(self) -> dict[str, Optional[str]]:
        """Interface -> its namespace, for the configured interfaces and those attached through us."""
        wanted = {setting.name: setting.netns for setting in self._state.settings.interfaces}
        for attachment in self._state.store.list_attachments():
            wanted.setdefault(attachment.interface, attachment.netns)
        return wanted

    def attach_interfaces(self) -> None:
        """Attach the wanted interfaces the pinned links do not hold already (a restart)."""
        checks = self._state.checks
        for name, (mode, netns) in self._wanted_modes().items():
            try:
                with namespace(netns):
                    if socket.if_nametoindex(name) not in self._state.dataplane.attached():
                        self._state.dataplane.attach(name, mode)
            except (DataplaneError, OSError) as exc:
                checks[f"interface {name}"] = str(exc)
                log.error("attach %s: %s", name, exc)
                continue
            checks[f"interface {name}"] = "ok"

    def _wanted_modes(self) -> dict[str, tuple[str, Optional[str]]]:
        """Interface -> (its mode, its namespace)."""
        modes = {setting.name: setting.mode for setting in self._state.settings.interfaces}
        modes.update({a.interface: a.mode for a in self._state.store.list_attachments()})
        return {name: (modes[name], netns) for name, netns in self.wanted_attachments().items()}

    def attach(self, who: Principal, interface: str, mode: str) -> dict[str, Any]:
        self._state.require(who, Scope.ADMIN)
        netns = self._netns_of(interface)

        def work(change: SiteChange) -> None:
            self._state.store.put_attachment(Attachment(interface, mode, netns), self._state.now())
            change.write(
                lambda: self._attach_now(interface, mode, netns), lambda: self._detach_now(interface, netns)
            )

        try:
            self._state.site_change(who, work)
        except DataplaneUnavailable as exc:
            raise _interface_error(interface, exc, mode) from exc
        return {
            "interface": interface,
            "mode": mode,
            "netns": netns,
            "ifindex": self._state.index.interfaces[interface],
        }

    def detach(self, who: Principal, interface: str) -> None:
        self._state.require(who, Scope.ADMIN)
        netns = self._netns_of(interface)

        def work(change: SiteChange) -> None:
            store = self._state.store
            mode = next((a.mode for a in store.list_attachments() if a.interface == interface), "native")
            store.delete_attachment(interface)
            change.write(
                lambda: self._detach_now(interface, netns), lambda: self._attach_now(interface, mode, netns)
            )

        try:
            self._state.site_change(who, work)
        except DataplaneUnavailable as exc:
            raise _interface_error(interface, exc) from exc

    def _attach_now(self, interface: str, mode: str, netns: Optional[str]) -> None:
        with namespace(netns):
            self._state.index.interfaces[interface] = self._state.dataplane.attach(interface, mode)
        self._state.checks[f"interface {interface}"] = "ok"

    def _detach_now(self, interface: str, netns: Optional[str]) -> None:
        with namespace(netns):
            self._state.dataplane.detach(interface)
        self._state.checks.pop(f"interface {interface}", None)

    def _netns_of(self, interface: str) -> Optional[str]:
        for setting in self._state.settings.interfaces:
            if setting.name == interface:
                return setting.netns
        return None

    def interface_views(self) -> list[dict[str, Any]]:
        attached = set(self._state.dataplane.attached())
        views = []
        for name, (mode, netns) in self._wanted_modes().items():
            ifindex_ = self._state.index.interfaces.get(name)
            views.append(
                {"name": name, "netns": netns, "mode": mode, "ifindex": ifindex_, "attached": ifindex_ in attached}
            )
        return views

    # --- the program -----------------------------------------------------------------------------

    def reload_dataplane(self, who: Principal) -> dict[str, Any]:
        """Swap in the program this build carries (an upgrade, or after a settings change of the
        flow cache). Maps are kept, so the store, the index and the maps stay in step and nothing
        is written to the store; the telemetry sees a new program id and restarts its rates."""
        self._state.require(who, Scope.ADMIN)
        functions = list(self._state.own_locked.values())
        with contextlib.ExitStack() as locks:
            for before in (function.lock for function in functions if function.lock is not None):
                locks.enter_context(before)  # before ours, as their changes take them
            locks.enter_context(self._state.exclusive())
            for after in (function.program_lock for function in functions if function.program_lock is not None):
                locks.enter_context(after)  # after ours: held around a run of the program alone
            return self._reload()

    def _reload(self) -> dict[str, Any]:
        """reload_dataplane, every lock held: no change writes a DEVMAP entry with a program's fd that
        the reload closes, nor between the reload and the requeue that gives the entry the new one."""
        self._state.require_started()
        started = time.monotonic()
        try:
            before, after = self._state.dataplane.reload(flow_cache=self._state.settings.flow_cache)
        except DataplaneError as exc:
            raise DataplaneUnavailable(
                f"the program was not replaced, the previous one still runs: {exc}"
            ) from exc
        log.info("data plane program replaced: id %d -> %d", before, after)
        try:
            Dispatcher(self._state.dataplane).requeue()  # the new worker program in its queues
            FrerDataplane(self._state.dataplane).requeue()  # the new egress program on FRER's ports
            self._state.dataplane.copy_groups.requeue()  # and on the ports that decapsulate copies
            for function in self._state.own_locked.values():  # ATSSS's copy programs
                function.requeue()
        except DataplaneError as exc:  # the old programs run on where this stopped: a reload again retries
            raise DataplaneUnavailable(
                f"the program was replaced (id {before} -> {after}), but not every queue and port runs the "
                f"new one: {exc}; reload again"
            ) from exc
        return {
            "previous_program_id": before,
            "program_id": after,
            "interfaces": [view["name"] for view in self.interface_views() if view["attached"]],
            "duration_ms": round((time.monotonic() - started) * 1000, 3),
        }

    # --- status and statistics -------------------------------------------------------------------

    def dataplane_status(self, who: Principal) -> dict[str, Any]:
        self._state.require(who, Scope.READ)
        state = self._state
        with state.exclusive():
            state.require_started()
            status = state.dataplane.status()
            status["instance"] = state.settings.instance
            status["interfaces"] = self.interface_views()
            status["cpus"] = [self._cpus.view(spec) for spec in state.store.list_cpus()]
            status["reconciled"] = state.maps_stale is None
            status["defaults"] = {
                "verdict": state.settings.default_verdict,
                "alternative": state.settings.default_alternative,
            }
            if who.is_admin:
                status["not_installed"] = self._left_out()
            return status

    def stats(self, who: Principal) -> dict[str, Any]:
        self._state.require(who, Scope.READ)
        with self._state.exclusive():
            self._state.require_started()
            dataplane = self._state.dataplane
            counters = dataplane.rule_stats()
            result: dict[str, Any] = {
                "intents": _intent_stats(who, counters),
                "slices": self._slice_stats(who, counters),
            }
            if who.is_admin:
                result["cpus"] = self._cpu_stats()
                result["verdicts"] = _counter_views(dataplane.verdict_stats())
                result["actions"] = _counter_views(dataplane.action_stats())
                result["reasons"] = _counter_views(dataplane.reason_stats())
            return result

    def _cpu_stats(self) -> dict[str, Optional[dict[str, Any]]]:
        """CPU of the set -> its state with what STEER handed it (packets, bytes) added; None, as
        before, when the state cannot be read."""
        steered = self._state.dataplane.cpu_stats()
        views: dict[str, Optional[dict[str, Any]]] = {}
        for spec in self._state.store.list_cpus():
            state = self._cpus.view(spec, thread=False).get("state")
            packets, size = steered.get(spec.cpu, (0, 0))
            views[str(spec.cpu)] = None if state is None else {**state, "packets": packets, "bytes": size}
        return views

    def _slice_stats(self, who: Principal, counters: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
        totals: dict[tuple[str, str], list[int]] = {}
        for (tenant, intent_id), slice_id in self._state.store.intent_slices(
            None if who.is_admin else who.tenant
        ).items():
            total = totals.setdefault((tenant, slice_id), [0, 0])
            packets, size = counters.get(rule_id(tenant, intent_id), (0, 0))
            total[0] += packets
            total[1] += size
        return [
            {"tenant": tenant, "id": slice_id, "packets": packets, "bytes": size}
            for (tenant, slice_id), (packets, size) in sorted(totals.items())
        ]


def _intent_stats(who: Principal, counters: dict[str, tuple[int, int]]) -> list[dict[str, Any]]:
    views = []
    for qualified, (packets, size) in counters.items():
        tenant, intent_id = split_rule_id(qualified)
        if who.is_admin or tenant == who.tenant:
            views.append({"tenant": tenant, "id": intent_id, "packets": packets, "bytes": size})
    return views


def _counter_views(counters: dict[str, tuple[int, int]]) -> dict[str, dict[str, int]]:
    return {name: {"packets": packets, "bytes": size} for name, (packets, size) in counters.items()}


def _interface_error(interface: str, exc: DataplaneUnavailable, mode: Optional[str] = None) -> ServiceError:
    """Name what the caller can fix: a missing interface, one taken, one not attached, a mode its
    driver does not run."""
    cause = exc.__cause__
    code = cause.errno if isinstance(cause, DataplaneError) else None
    if mode is not None and code is not None and mode_refused(code, mode):
        return InvalidInput(str(cause), field="mode")
    if code == errno.ENODEV or (isinstance(cause, DataplaneError) and cause.op.startswith("enter netns")):
        return NotFound(f"no interface {interface!r} ({cause})", field="interface")
    if code == errno.ENOENT:
        return NotFound(f"the pipeline is not attached to {interface!r}", field="interface")
    if code == errno.EEXIST:
        return Conflict(str(cause), field="interface")
    return exc
