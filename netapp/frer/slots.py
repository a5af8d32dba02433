"""The slots of FRER's maps as the control plane writes them, and a recovery slot's counters as
802.1CB gives them (the slot's and its CPUs' added).

What a reader gets while frames flow. A slot read with BPF_F_LOCK (FrerCalls.recovery_read) is
copied under the slot's bpf_spin_lock: the counters only the lock's way moves (rogue, tagless,
resets, latent error detection's, and the passed and discarded of the frames decided under the lock)
are those of one instant. It is no longer the whole slot's instant: frames decided without the lock
(nf/frer/recover.h, frer_fast) change the state word by compare-and-swap and add to out_of_order and
lost atomically while the copy is made, and count their passed and discarded in their CPU's
dpp_frer_cpu_counts, read by a second syscall after the slot. So, under traffic:
  - each counter is a value it held between the start of the first read and the end of the second,
    and, until the stream's slot is written anew, never goes back from one read to the next;
  - passed and discarded (slot plus CPUs) may include frames decided after the slot was copied, so
    out_of_order and lost (counted with those frames) can lag them by the frames of that interval;
  - the state word (history, sequence number) may mix two values (the copy is not one 8-byte load
    against the swaps): for display, not for deciding anything.
Once the stream's frames have stopped (a test after its traffic) every counter is exact."""

from __future__ import annotations

from typing import Iterable, Optional

from netapp.frer.abi import SEQ_SPACE, CpuCounts, Flags, Recovery

# What each CPU counts for a stream, without the slot's lock, beside the slot's own counters.
CPU_COUNTED = tuple(name for name, _ in CpuCounts._fields_)
from netapp.frer.model import RecoveryConfig


def recovery_value(config: RecoveryConfig, pop: bool = False) -> Recovery:
    """A recovery function's slot: its parameters, and the state SequenceRecoveryReset leaves
    (take any), its counters zero."""
    flags = (
        (Flags.INDIVIDUAL if config.individual else 0)
        | (Flags.TAKE_NO_SEQUENCE if config.take_no_sequence else 0)
        | (Flags.POP if pop else 0)
        | (Flags.LATENT if config.latent else 0)
    )
    return Recovery(
        algo=config.algo,
        history_len=config.history_len,
        flags=int(flags),
        latent_paths=config.latent_paths,
        latent_difference=config.latent_difference,
        reset_ns=config.reset_ns,
        latent_period_ns=config.latent_period_ns,
        latent_reset_period_ns=config.latent_reset_period_ns,
        take_any=1,
        seq=SEQ_SPACE - 1,
    )


def with_cpu_counts(slot: Optional[Recovery], cpus: Optional[Iterable[CpuCounts]]) -> Recovery:
    """A recovery slot (an empty one for None) whose passed and discarded are its stream's whole
    counts: the frames decided under the slot's lock (counted in it) and those the CPUs decided
    without it (dpp_frer_cpu_counts, `cpus` its value on each CPU)."""
    whole = Recovery.from_buffer_copy(slot) if slot is not None else Recovery()
    for cpu in cpus or ():
        for name in CPU_COUNTED:
            setattr(whole, name, getattr(whole, name) + getattr(cpu, name))
    return whole
