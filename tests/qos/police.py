"""The policers in the kernel, alone: dataplane/build/xdp_police.bpf.o loaded with libbpf, a policer
written into its dpp_policers, frames carrying their policer id and time run through xdp_police
(BPF_PROG_TEST_RUN), the CPUs' counters (a row each in dpp_policer_stats) summed; a rule slot's
policers (dpp_rule_policers) run through xdp_police_rule, frames carrying the slot instead of a
policer id."""

from __future__ import annotations

import contextlib
import os
import struct
from ctypes import c_uint32
from typing import Iterable, Iterator, Optional

from bench.libbpf import BpfObject, map_lookup, map_update, test_run
from bench.qos.run import read_shares, write_share
from netapp.dataplane.handle import possible_cpus
from netapp.dataplane.abi import CONSTANTS
from netapp.qos.abi import Algo, Clock, Policer, PolicerStats, RulePolice
from netapp.qos.applier import SUMMED
from netapp.qos.model import BUCKETS, PolicerConfig, gcra_interval
from tests.utils.kernel import build_artifact, require_kernel

XDP_DROP, XDP_PASS = 1, 2
ETH_LEN = 14
HEADER = struct.Struct("<4sIQ")  # struct police_test_hdr: policer (network order), jiffies, now_ns
MIN_FRAME = ETH_LEN + HEADER.size
SLOTS = CONSTANTS["DPP_MAX_POLICERS"]  # a CPU's row of dpp_policer_stats: the object's dpp_policers


def frame(policer: int, size: int, now_ns: int, jiffies: int = 0) -> bytes:
    """A frame of `size` bytes policed by `policer` at `now_ns` (0: the kernel's clock), with
    `jiffies` read just before it (0: the kernel's)."""
    head = b"\x02" * 12 + b"\x88\xb5" + HEADER.pack(policer.to_bytes(4, "big"), jiffies, now_ns)
    return head + bytes(size - len(head))


def policer_value(config: PolicerConfig, parent: int = 0, clock: Optional[Clock] = None) -> Policer:
    """The slot as the control plane writes it: the configuration (and its parent, its clock: the
    config's unless given), the state zeroed; a GCRA's interval, a ticked window's tick, a bucket's
    tick (previous)."""
    interval = gcra_interval(config.rate) if config.algo == Algo.GCRA else config.tick_ns
    return Policer(
        rate=config.rate, burst=config.burst, algo=config.algo, gate=config.gate, window_shift=config.window_shift,
        clock=config.clock if clock is None else clock, parent=parent,
        interval=0 if config.algo == Algo.TOKEN_BUCKET else interval,
        # a bucket's tick on either clock, where the applier writes one on the coarse clock only
        # (bucket_tick_for): the data path reads it on the coarse clock only (bucket.h's bucket_tick)
        previous=config.tick_ns if config.algo in BUCKETS else 0,
    )


class PoliceProgram:
    """xdp_police.bpf.o, loaded; closed with the object."""

    def __init__(self) -> None:
        require_kernel()
        self.obj = BpfObject(build_artifact("xdp_police.bpf.o"), {"dpp_policer_stats": possible_cpus() * SLOTS})
        self.prog = self.obj.program_fd("xdp_police")
        self.policers = self.obj.map_fd("dpp_policers")
        self.stats = self.obj.map_fd("dpp_policer_stats")
        self.rule_prog = self.obj.program_fd("xdp_police_rule")
        self.rule_slots = self.obj.map_fd("dpp_rule_policers")

    def close(self) -> None:
        self.obj.close()

    def configure(self, policer: int, config: Optional[PolicerConfig], parent: int = 0,
                  clock: Optional[Clock] = None, chunk: int = 0) -> None:
        """The policer and its CPUs' slots afresh (`chunk`: each CPU's credit's; `config.burst`
        then the bucket's, as netapp/qos/applier.py writes them)."""
        value = policer_value(config, parent, clock) if config is not None else Policer()
        map_update(self.policers, c_uint32(policer), value)
        write_share(self.stats, policer, SLOTS, PolicerStats(chunk=chunk))

    def write_share_of(self, policer: int, cpu: int, share: PolicerStats) -> None:
        """One CPU's slot of the policer, as given (a line prepared in some state)."""
        map_update(self.stats, c_uint32(cpu * SLOTS + policer), share)

    def rewrite(self, policer: int, config: PolicerConfig) -> None:
        """The policer's slot alone, its CPUs' slots (counters, credits) kept."""
        map_update(self.policers, c_uint32(policer), policer_value(config))

    def per_cpu(self, policer: int) -> list[PolicerStats]:
        return read_shares(self.stats, policer, SLOTS)

    def state(self, policer: int) -> Policer:
        value = Policer()
        map_lookup(self.policers, c_uint32(policer), value)
        return value

    def counters(self, policer: int) -> PolicerStats:
        """The counters of every CPU, added up."""
        total = PolicerStats()
        for cpu in self.per_cpu(policer):
            for name in SUMMED:
                setattr(total, name, getattr(total, name) + getattr(cpu, name))
        return total

    def passes(self, policer: int, size: int, now_ns: int, jiffies: int = 0) -> bool:
        verdict = test_run(self.prog, frame(policer, size, now_ns, jiffies), 1).retval
        assert verdict in (XDP_PASS, XDP_DROP), f"verdict {verdict}"
        return verdict == XDP_PASS

    def name_rule_policers(self, slot: int, own: int, shared: int) -> None:
        """The rule slot's policers, as the control plane writes them (netapp.qos.rules)."""
        map_update(self.rule_slots, c_uint32(slot), RulePolice(policer=own, shared=shared))

    def rule_passes(self, slot: int, size: int, now_ns: int) -> bool:
        """Whether the policers of rule slot `slot` let the frame through."""
        verdict = test_run(self.rule_prog, frame(slot, size, now_ns), 1).retval
        assert verdict in (XDP_PASS, XDP_DROP), f"verdict {verdict}"
        return verdict == XDP_PASS

    def decisions(self, policer: int, packets: Iterable[tuple[int, int]]) -> list[bool]:
        """Each (size, time) in turn, one run each."""
        return [self.passes(policer, size, now) for size, now in packets]

    def decisions_on(self, policer: int, packets: Iterable[tuple[int, ...]]) -> list[bool]:
        """Each (size, time, cpu[, jiffies]) in turn, one run each on that CPU."""
        decided = []
        for size, now, cpu, *jiffies in packets:
            with on_cpu(cpu):
                decided.append(self.passes(policer, size, now, *jiffies))
        return decided


@contextlib.contextmanager
def on_cpu(cpu: int) -> Iterator[None]:
    """This thread on `cpu` alone (BPF_PROG_TEST_RUN runs an XDP program on the caller's CPU)."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def counters_tuple(stats: PolicerStats) -> tuple[int, int, int, int]:
    return (stats.passed_packets, stats.passed_bytes, stats.dropped_packets, stats.dropped_bytes)

