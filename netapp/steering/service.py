"""The CPU set (admin): the CPUs STEER hands traffic to, their capacity, meters and CPUMAP threads."""

from __future__ import annotations

import errno
import logging
from typing import Any, Optional

from netapp.dataplane import cpumap_threads
from netapp.dataplane.binding import DataplaneError
from netapp.service.contract import (
    DataplaneUnavailable,
    InvalidInput,
    NotFound,
    Principal,
    Scope,
    ServiceError,
)
from netapp.service.state import ServiceState
from netapp.service.transaction import SiteChange
from netapp.steering.contract import CpusContract
from netapp.steering.models import MAX_QUEUE_SIZE, CpuSpec

log = logging.getLogger("netapp.service")


class CpuService(CpusContract):
    """The CPUs in the store and in the CPUMAP, and the real-time priority of their threads."""

    def __init__(self, state: ServiceState):
        self._state = state
        self._thread_problems: dict[int, str] = {}  # CPU -> why its CPUMAP thread lacks the priority
        self._queue_limit = MAX_QUEUE_SIZE  # the running kernel's CPUMAP limit, once probed

    def list_cpus(self, who: Principal) -> list[dict[str, Any]]:
        self._state.require(who, Scope.READ)
        return [self.view(spec) for spec in self._state.store.list_cpus()]

    def put_cpu(self, who: Principal, spec: CpuSpec) -> CpuSpec:
        self._state.require(who, Scope.ADMIN)
        if spec.queue_size > self._queue_limit:
            raise self._queue_too_large(spec.queue_size)

        def work(change: SiteChange) -> None:
            store = self._state.store
            previous = store.get_cpu(spec.cpu)
            store.put_cpu(spec, self._state.now())
            undo = lambda: self._write(previous, spec.cpu)  # noqa: E731
            try:
                change.write(lambda: self._write(spec), undo, undo_refused=undo)
            except DataplaneUnavailable as exc:
                if _refused_with(exc) == errno.EINVAL:
                    raise InvalidInput(
                        f"CPU {spec.cpu} is not one of this machine's CPUs ({exc.__cause__})", field="cpu"
                    ) from exc
                if _refused_with(exc) == errno.EOVERFLOW:
                    raise self._queue_too_large(spec.queue_size) from exc
                raise

        self._state.site_change(who, work)
        return spec

    def delete_cpu(self, who: Principal, cpu: int) -> None:
        """The CPU leaves the store and the maps (its CPUMAP entry goes, its state is zeroed): steers
        to it then fall back as to any CPU outside the set (`cpu_unavailable`)."""
        self._state.require(who, Scope.ADMIN)

        def work(change: SiteChange) -> None:
            store = self._state.store
            previous = store.get_cpu(cpu)
            if previous is None:
                raise NotFound(f"CPU {cpu} is not in the CPU set", field="cpu")
            store.delete_cpu(cpu)
            try:
                restore = lambda: self._write(previous)  # noqa: E731
                change.write(lambda: self._write(None, cpu), restore, undo_refused=restore)
            except DataplaneUnavailable as exc:
                if _refused_with(exc) != errno.EINVAL:
                    raise
                # Not one of this machine's CPUs (the store came from another): no map holds it.

        self._state.site_change(who, work)

    def probe_queue_limit(self) -> None:
        """Learn the largest CPUMAP queue the running kernel takes, which put_cpu holds queue_size
        to (the schema's MAX_QUEUE_SIZE is the limit of kernels since 4.15; another may differ)."""
        try:
            limit = self._state.dataplane.cpu_queue_limit()
        except DataplaneError as exc:
            log.warning("CPUMAP queue limit not probed (%s): taking %d, the usual one", exc, MAX_QUEUE_SIZE)
            return
        if limit != MAX_QUEUE_SIZE:
            log.warning("this kernel takes CPUMAP queues of up to %d frames, not %d", limit, MAX_QUEUE_SIZE)
        self._queue_limit = min(limit, MAX_QUEUE_SIZE)

    def usable(self, uncompiled: dict[str, str]) -> list[CpuSpec]:
        """The stored CPUs the data plane can read, for a reconcile; the others told in `uncompiled`."""
        usable = []
        for spec in self._state.store.list_cpus():
            try:
                self._state.dataplane.cpu_state(spec.cpu)
            except DataplaneError as exc:
                uncompiled[f"cpu {spec.cpu}"] = str(exc)
                continue
            usable.append(spec)
        return usable

    def view(self, spec: CpuSpec, thread: bool = True) -> dict[str, Any]:
        """The CPU's spec, meter state and (unless `thread` is False: telemetry polls skip the
        search through /proc) its CPUMAP thread."""
        view: dict[str, Any] = spec.model_dump()
        try:
            view["state"] = self._state.dataplane.cpu_state(spec.cpu)
        except (DataplaneError, ServiceError) as exc:
            view["state"] = None
            view["problem"] = str(exc)
        if thread:
            view["thread"] = self._thread_view(spec.cpu)
        return view

    def _thread_view(self, cpu: int) -> Optional[dict[str, Any]]:
        """The CPUMAP thread's pid and scheduling, and why its priority is not the configured one."""
        view: dict[str, Any] = {}
        dataplane = self._state.dataplane
        pid = cpumap_threads.newest(cpumap_threads.find_threads(cpu, dataplane.map_id("dpp_cpu_map")))
        if pid is not None:
            try:
                view.update(cpumap_threads.scheduling(pid).as_dict())
            except OSError:  # replaced while we looked
                pass
        if cpu in self._thread_problems:
            view["problem"] = self._thread_problems[cpu]
        return view or None

    def _queue_too_large(self, queue_size: int) -> InvalidInput:
        return InvalidInput(
            f"queue_size {queue_size} is more than this kernel's CPUMAP takes ({self._queue_limit} frames)",
            field="queue_size",
            allowed=f"0 (the default, 2048 frames) to {self._queue_limit}",
        )

    def _write(self, spec: Optional[CpuSpec], cpu: Optional[int] = None) -> None:
        """Make the CPU set hold `spec` (None: CPU `cpu` leaves the set)."""
        dataplane = self._state.dataplane
        if spec is None:
            assert cpu is not None
            dataplane.disable_cpu(cpu)
            self._thread_problems.pop(cpu, None)
            return
        dataplane.enable_cpu(spec.cpu, spec.capacity_pps, spec.queue_size)
        dataplane.set_cpu_overloaded(spec.cpu, spec.overloaded)
        self.prioritise_thread(spec.cpu)

    def prioritise_thread(self, cpu: int) -> None:
        """Give the thread the kernel just made for the CPU's CPUMAP entry the configured
        real-time priority. A failure costs only the priority, so it is logged and shown in the
        CPU's status, never raised."""
        priority = self._state.settings.cpumap_priority
        if priority is None:
            return
        pids = cpumap_threads.find_threads(cpu, self._state.dataplane.map_id("dpp_cpu_map"))
        problem = "no CPUMAP thread found for it"
        for pid in pids:  # the old entry's thread too, if it is still stopping: harmless
            try:
                cpumap_threads.make_realtime(pid, priority)
                problem = ""
            except ProcessLookupError:  # that one has stopped
                continue
            except OSError as exc:
                problem = exc.strerror or str(exc)
                break
        if problem:
            self._thread_problems[cpu] = f"SCHED_FIFO {priority} not set: {problem}"
            log.warning("CPU %d: %s", cpu, self._thread_problems[cpu])
        else:
            self._thread_problems.pop(cpu, None)


def _refused_with(exc: DataplaneUnavailable) -> Optional[int]:
    """The errno of the libdpp call whose refusal `exc` reports, if one did."""
    cause = exc.__cause__
    return cause.errno if isinstance(cause, DataplaneError) else None
