"""The kernel threads behind CPUMAP entries, and their scheduling.

Every CPUMAP entry has a kernel thread bound to its CPU, ``cpumap/<cpu>/map:<map id>``, that
dequeues the redirected frames, builds their skbs and runs the stack for them. It runs as a normal
(SCHED_OTHER) task, so any busy process on that CPU delays it; its queue (``queue_size`` frames)
then fills and the kernel drops steered frames (tracepoint ``xdp:xdp_cpumap_enqueue``). A
SCHED_FIFO priority puts it ahead of every normal task there. The kernel's RT throttling (95 % by
default) still leaves the other tasks some time.

The kernel creates a new thread on every write of an entry, so the priority is set again after
each one. The old entry's thread keeps its name until the kernel stops it, after an RCU grace
period (queue_rcu_work, then kthread_stop: some 15 ms, longer on a loaded machine): for that long
two threads match, and the one started last is the entry's. Kernels before 6.4 cut task names at
15 characters; a cut name is accepted only when one thread matches it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

PROC = Path("/proc")
COMM_LEN = 15  # TASK_COMM_LEN - 1: what kernels before 6.4 show of a kernel thread's name
PID_MAX_LIMIT = 1 << 22  # the most pid_max can be (64-bit): pids below it never wrap


@dataclass(frozen=True)
class ThreadScheduling:
    pid: int
    policy: str  # "fifo", "rr" or "other" (normal, batch and idle are all not real-time)
    priority: int

    def as_dict(self) -> dict[str, object]:
        return {"pid": self.pid, "policy": self.policy, "priority": self.priority}


def thread_name(cpu: int, map_id: int) -> str:
    return f"cpumap/{cpu}/map:{map_id}"


def find_threads(cpu: int, map_id: int, proc: Path = PROC) -> list[int]:
    """The pids of CPUMAP `map_id`'s threads for `cpu`: one, or, right after the entry was
    rewritten, also the old one, which the kernel stops a little later. A cut name counts only when
    no thread has the full one and only one thread has the cut one."""
    name = thread_name(cpu, map_id)
    exact, cut = [], []
    for comm_file in proc.glob("[0-9]*/comm"):
        try:
            comm = comm_file.read_text().rstrip("\n")
        except OSError:  # the task ended while we looked
            continue
        if comm == name:
            exact.append(int(comm_file.parent.name))
        elif len(comm) == COMM_LEN and name.startswith(comm):
            cut.append(int(comm_file.parent.name))
    return exact or (cut if len(cut) == 1 else [])


def newest(pids: list[int], proc: Path = PROC) -> Optional[int]:
    """The thread started last (the live entry's), by the start time in /proc/<pid>/stat; within
    one clock tick (the start time counts ticks: a rewrite can make two threads in one), the pid
    handed out last. Pids grow until they wrap at pid_max, so that is the one that follows the
    others going round: a tick hands out far fewer than half of them."""
    started = {}
    for pid in pids:
        try:
            stat = (proc / str(pid) / "stat").read_text()
        except OSError:
            continue
        # Field 22, counted after the parenthesised name, which may itself hold spaces.
        started[pid] = int(stat[stat.rindex(")") + 2 :].split()[19])
    if not started:
        return None
    last_tick = max(started.values())
    tied = [pid for pid, tick in started.items() if tick == last_tick]
    pid_max = _pid_max(proc)

    def follows(pid: int, other: int) -> bool:
        return 0 < (pid - other) % pid_max < pid_max // 2

    return max(tied, key=lambda pid: (sum(follows(pid, other) for other in tied), pid))


def _pid_max(proc: Path) -> int:
    try:
        return int((proc / "sys" / "kernel" / "pid_max").read_text())
    except (OSError, ValueError):
        return PID_MAX_LIMIT


def scheduling(pid: int) -> ThreadScheduling:
    policy = os.sched_getscheduler(pid)
    names = {os.SCHED_FIFO: "fifo", os.SCHED_RR: "rr"}
    return ThreadScheduling(pid, names.get(policy, "other"), os.sched_getparam(pid).sched_priority)


def make_realtime(pid: int, priority: int) -> None:
    """SCHED_FIFO at `priority` (1-99). Raises OSError (ESRCH: the thread is gone; EPERM: no
    CAP_SYS_NICE)."""
    os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
