"""The GTP-U dispatcher ("XDP RSS", dataplane/bpf/nf/qos/rss.h): the CPU that receives N3 spreads
the tunnels over worker CPUs by a hash of (TEID, QFI), through CPUMAP queues whose program runs the
pipeline, the UPF first, on the worker. A NIC's RSS cannot: it sees one outer flow per gNB.

The maps are plain tables (ABI in netapp.qos.rss_abi). Written in an order that never hands a packet
to a missing queue: the workers' queues, then the worker slots, then the interfaces, which turn
dispatching on (off: the reverse). The program keeps a packet on its CPU when its worker has no
queue, so a set being rewritten loses nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from netapp.dataplane.tables import PerCpuTable, Table
from netapp.qos.rss_abi import MAX_RSS_IFACES, MAX_RSS_WORKERS, CpumapVal, RssIface, RssWorker, worker_slot

WORKER_PROG = "dpp_rss_worker"  # the CPUMAP program of the workers' queues (dpp.bpf.c)
DEFAULT_QUEUE_SIZE = 2048


@dataclass(frozen=True)
class DispatchPlan:
    """What the maps say: the worker CPUs in slot order, the dispatcher interfaces' ifindexes."""

    workers: tuple[int, ...]
    ifindexes: tuple[int, ...]
    queue_size: int = DEFAULT_QUEUE_SIZE


def worker_of(teid: int, qfi: int, workers: Sequence[int]) -> int:
    """The worker CPU the program picks for a tunnel (qfi 0: no PDU Session Container)."""
    return workers[worker_slot(teid, qfi, len(workers))]


def plan_refusal(plan: DispatchPlan) -> str | None:
    """Why the maps cannot hold `plan` (None: they can)."""
    if len(plan.workers) > MAX_RSS_WORKERS:
        return f"{len(plan.workers)} workers: at most {MAX_RSS_WORKERS}"
    if len(set(plan.workers)) != len(plan.workers):
        return f"workers {list(plan.workers)}: a CPU listed twice"
    slots: dict[int, int] = {}
    for ifindex in plan.ifindexes:
        other = slots.setdefault(ifindex % MAX_RSS_IFACES, ifindex)
        if other != ifindex:
            return f"interfaces {other} and {ifindex} share a slot of dpp_rss_ifaces (ifindex % {MAX_RSS_IFACES})"
    return None


class Dispatcher:
    """The dispatcher's maps of one instance (a netapp.dataplane.facade.Dataplane)."""

    def __init__(self, dataplane: Any):
        self._dp = dataplane
        self._ifaces = dataplane.table("dpp_rss_ifaces")
        self._workers: Table = dataplane.table("dpp_rss_workers")
        self._queues: Table = dataplane.table("dpp_rss_cpu_map")
        self._plan = self._pinned()

    def apply(self, plan: DispatchPlan) -> None:
        """Dispatch as `plan` says: its workers' queues, slots and interfaces; what the last plan had
        and this one has not, undone."""
        refusal = plan_refusal(plan)
        if refusal:
            raise ValueError(f"dispatch: {refusal}")
        old = self._plan
        if not (old.ifindexes or old.workers or plan.ifindexes):
            return  # off, and nothing to undo
        self._ifaces.update({i % MAX_RSS_IFACES: RssIface() for i in set(old.ifindexes) - set(plan.ifindexes)})
        if plan.ifindexes:
            self._queues.update({cpu: self._queue(plan.queue_size) for cpu in plan.workers})
            self._workers.update({slot: RssWorker(cpu) for slot, cpu in enumerate(plan.workers)})
        self._ifaces.update({i % MAX_RSS_IFACES: RssIface(i, len(plan.workers)) for i in plan.ifindexes})
        gone = set(old.workers) - (set(plan.workers) if plan.ifindexes else set())
        if gone:
            self._ifaces.wait_readers()  # no run still sends to a queue about to go
            self._queues.delete(sorted(gone))
        self._plan = plan if plan.ifindexes else DispatchPlan((), ())

    def requeue(self) -> None:
        """The queues run the instance's worker program again, after a reload replaced it (each
        queue's size kept): a CPUMAP entry holds the program it was written with."""
        queues = list(self._queues.items())
        if queues:
            fd = self._worker_fd()
            self._queues.update({cpu: CpumapVal(qsize=queue.qsize, bpf_prog=fd) for cpu, queue in queues})

    def clear(self) -> None:
        """Stop dispatching: every packet stays on the CPU that received it."""
        self.apply(DispatchPlan((), ()))

    def dispatched(self) -> dict[int, int]:
        """Worker CPU -> packets dispatched to it (by the hash or a steering rule), summed over CPUs."""
        return {cpu: packets for cpu, (packets, _) in worker_counters(self._dp).items()}

    def _pinned(self) -> DispatchPlan:
        """What the maps hold already (a restart finds the last run's): undone by the first apply."""
        ifindexes = tuple(value.ifindex for _, value in self._ifaces.items() if value.workers)
        return DispatchPlan(tuple(cpu for cpu, _ in self._queues.items()), ifindexes)

    def _queue(self, queue_size: int) -> CpumapVal:
        return CpumapVal(qsize=queue_size, bpf_prog=self._worker_fd())

    def _worker_fd(self) -> int:
        return self._dp.program_fd(WORKER_PROG)


def worker_counters(dataplane: Any) -> dict[int, tuple[int, int]]:
    """Worker CPU -> (packets, bytes) dispatched to it since the instance was loaded, summed over the
    CPUs that dispatched them; the workers given nothing left out (the telemetry's dpp_rss_worker)."""
    stats: PerCpuTable = dataplane.table("dpp_rss_stats")
    counts = stats.lookup(list(range(stats.max_entries)))
    summed = {cpu: (sum(c.packets for c in per_cpu), sum(c.bytes for c in per_cpu))
              for cpu, per_cpu in enumerate(counts) if per_cpu}
    return {cpu: values for cpu, values in summed.items() if values[0]}


def apply_settings(dataplane: Any, workers: Sequence[int], interfaces: Sequence[str],
                   ifindexes: Mapping[str, int], queue_size: int = DEFAULT_QUEUE_SIZE) -> Dispatcher:
    """The service's start: the settings' dispatcher written into the maps (interfaces by name)."""
    missing = [name for name in interfaces if name not in ifindexes]
    if missing:
        raise ValueError(f"dispatch.interfaces: {', '.join(missing)}: no such interface")
    dispatcher = Dispatcher(dataplane)
    dispatcher.apply(DispatchPlan(tuple(workers), tuple(ifindexes[name] for name in interfaces), queue_size))
    return dispatcher
