"""Policers written into the data plane and read back, through the generic tables (no libdpp call
of their own): dpp_policers (configuration and state) and dpp_policer_stats (counters, a row per CPU).

A policer is written whole, its state zeroed: a token bucket then starts empty and fills from time 0
(full at once on a running system), a GCRA full, a window with nothing counted. The windows' length comes
from the burst: the longest power-of-two window (in ns) whose allowance, rate x window / 8, is no
more than the burst, so that any stretch of a window's length passes at most rate x window + burst
(dataplane/bpf/nf/qos/police.h). A policer may name a parent (a session's AMBR): a batch writes parents first.

The clock a policer decides on is chosen here, where the machine is known (`clock_for`): the coarse
one (CLOCK_MONOTONIC as of the kernel's tick, or as a timer keeps it in a word, nf/qos/clock.h: cheaper)
where police.h's bounds for it hold, the precise one elsewhere, and coarse only when every policer deciding on its reading is too
(a chain's parent, a rule's slice policer), which a rewrite of those keeps true; the API shows the
choice (netapp.qos.views).

A policer's CPUs carve their credit out of its bucket or current window a chunk at a time
(`chunk_for`, police.h "The CPUs' credit"): the chunk is written into each CPU's counters' slot with
the policer; a token bucket's or GCRA's burst less what the CPUs' chunks may hold, so that together
they keep the burst asked (the API shows that one: netapp.qos.views); a window's carves are counted
in the window, which keeps its allowance.

A policer's CPUs' slots are written twice around its own slot (`_write_shares`): zeroed with no
chunk before it, afresh with the chunk after it. Packets go on deciding on the slot while it is
written, on whichever policer it holds, and a CPU's slot keeps what they leave: written once, with
the chunk, before the policer (the order this replaced), it let a packet of the old policer carve a
credit out of the old bucket or window into the new chunk, stamped with the old window, and the new
policer's packets then spend it unchecked, bytes its bucket or window never counted; written once
after the policer, it let the new policer's packets spend the old credits until then. Zeroed with no
chunk first, the old policer's packets find no credit and carve none (a chunk of 0 asks for none)
until the new policer is in; the new policer's packets, until the second write, find no credit
either, and what the old one's may have left (a stamp of its window, a room seen full, a bucket's
bound) can only drop a packet, never pass one; the second write, once the new policer is in, clears
that too. What is left: a packet that began on the old policer and writes its CPU's slot after the
second write, its program run spanning two system calls of another CPU. The cost: one batch write
more for each `apply`, and the counts of the packets decided between the two writes (zeroed by the
second, which is kept even where no chunk is given: it also clears what the old policer's packets
left).

A parent rewritten from coarse to precise takes its coarse children along: the applier finds them in
its index of children by parent (`ChildIndex`), made from one read of every slot the first time it is
needed (or from `reconcile`'s, which reads them all anyway) and kept as it writes, so that such a
rewrite reads only the parent's children's slots, not the map's every one."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import time
from typing import Callable, Iterable, Iterator, Mapping, Optional

from netapp.dataplane.tables import Table
from netapp.dataplane.handle import possible_cpus
from netapp.qos.abi import (
    BURST_MAX,
    CHUNK_MAX,
    DEPTH,
    RATE_MAX,
    RATE_MIN,
    WINDOW_BYTES_MAX,
    WINDOW_SHIFT_MAX,
    WINDOW_SHIFT_MIN,
    COUNTERS,
    Algo,
    Clock,
    Gate,
    Policer,
    PolicerStats,
)
from netapp.qos.model import STAMP_MARGIN, gcra_interval
from netapp.qos.spec import MTU, PolicerSpec

# What `counters` adds up over the CPUs: the counters, and the credits and chunks they hold.
SUMMED = (*COUNTERS, "credit", "chunk")

__all__ = ["NANOBITS_PER_BYTE", "ChildIndex", "PolicerApplier", "PolicerSpec", "chunk_for", "clock_for",
           "coarse_tick_ns", "cpu_share", "policer_value", "window_shift_for"]

NANOBITS_PER_BYTE = 8 * 10**9  # rate (bit/s) x time (ns) = nanobits
CLOCK_MONOTONIC_COARSE = getattr(time, "CLOCK_MONOTONIC_COARSE", 6)  # Linux's id (Python names it on few builds)
# police.h's bounds for the coarse clock: its lag allowed for (a tick, and one late tick), and the
# ticks a window must last (so that a window is within L / W = 1/16 of its length).
COARSE_LAG_TICKS = 2
COARSE_WINDOW_TICKS = 32
# police.h's CPUs' credit: the chunks of all the CPUs together take at most this share of the burst
# (token bucket, GCRA), or of a window's allowance (windows: what they may leave unspent at its end)
CHUNK_SHARE = 8
WINDOW_CHUNK_SHARE = 16
BUCKETS = (Algo.TOKEN_BUCKET, Algo.GCRA)
WINDOWS = (Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW)
# The most bytes a policer is asked for at once: the frame's linear part (data_end - data), which
# XDP keeps within a page (its headroom and shared info taken off it).
FRAME_MAX = 4096


@functools.lru_cache(maxsize=1)
def coarse_tick_ns() -> int:
    """The coarse clock's step on this kernel (bpf_ktime_get_coarse_ns is CLOCK_MONOTONIC_COARSE):
    1/CONFIG_HZ, as clock_getres says; 0 where there is no such clock (every policer precise)."""
    try:
        return round(time.clock_getres(CLOCK_MONOTONIC_COARSE) * 10**9)
    except OSError:
        return 0


def clock_for(algo: Algo, rate: int, burst: int, window_shift: int, gate: Gate, tick_ns: int) -> Clock:
    """The clock a policer decides on (dataplane/bpf/nf/qos/police.h, "The clock"): coarse where its
    tick-sized steps cost the algorithm nothing over time, precise elsewhere. Token bucket and GCRA:
    the burst holds two ticks' refill and a packet (B >= 2 R tick / 8e9 + MTU); windows: a window
    lasts 32 ticks or more. A closed gate decides without the time: coarse."""
    if not tick_ns:
        return Clock.PRECISE
    if gate == Gate.CLOSED:
        return Clock.COARSE
    if algo in (Algo.TOKEN_BUCKET, Algo.GCRA):
        fits = burst * NANOBITS_PER_BYTE >= COARSE_LAG_TICKS * rate * tick_ns + MTU * NANOBITS_PER_BYTE
    else:
        fits = 1 << window_shift >= COARSE_WINDOW_TICKS * tick_ns
    return Clock.COARSE if fits else Clock.PRECISE


@functools.lru_cache(maxsize=1024)  # kept for the policies met lately: a group writes each many times
def chunk_for(algo: Algo, rate: int, burst: int, gate: Gate, cpus: int) -> int:
    """The bytes each of `cpus` CPUs carves at a time for its credit (police.h, "The CPUs' credit"),
    with an open gate: token bucket and GCRA, the CPUs' chunks together an eighth of the burst at
    most (what the bucket gives up to them); windows, a sixteenth of a window's allowance at most
    (what they may leave unspent when it ends: the rate lost, at worst); each no more than CHUNK_MAX;
    none (0) where a chunk would be under an MTU, which would spare the shared state few atomic
    instructions and cost the bucket's or window's room."""
    if gate != Gate.OPEN or cpus < 1:
        return 0
    if algo in BUCKETS:
        room, share = burst, CHUNK_SHARE
    elif algo in WINDOWS:
        room, share = window_allowance(rate, window_shift_for(rate, burst)), WINDOW_CHUNK_SHARE
    else:
        return 0
    chunk = min(room // (share * cpus), CHUNK_MAX)
    return chunk if chunk >= MTU else 0


def window_allowance(rate: int, window_shift: int) -> int:
    """The whole bytes a window of 2**window_shift ns lets through at `rate` bit/s."""
    return (rate << window_shift) // NANOBITS_PER_BYTE


def cpu_share(spec: PolicerSpec, cpus: Optional[int] = None, window_credit: bool = True) -> Optional[PolicerStats]:
    """What each CPU's slot of dpp_policer_stats starts as when `spec` is written, with policer_value's
    bucket for as many CPUs (None: this machine's possible ones): counters and credit zeroed, its chunk
    (chunk_for; a window's none without `window_credit`); None where there is no chunk (a zeroed slot)."""
    cpus = possible_cpus() if cpus is None else cpus
    credited = window_credit or spec.algo not in WINDOWS
    chunk = chunk_for(spec.algo, spec.rate, spec.burst, spec.gate, cpus) if credited else 0
    return PolicerStats(chunk=chunk) if chunk else None


@functools.lru_cache(maxsize=1024)
def window_shift_for(rate: int, burst: int) -> int:
    """The windows' log2 length in ns: the longest whose allowance fits the burst (and a count), or
    the shortest there is when even it lets more through. Kept for the rates and bursts met lately:
    a QER's policy is usually many sessions' (each session's policers are written with it)."""
    fitting = [
        shift
        for shift in range(WINDOW_SHIFT_MIN, WINDOW_SHIFT_MAX + 1)
        if rate << shift <= min(burst, WINDOW_BYTES_MAX) * NANOBITS_PER_BYTE
    ]
    return max(fitting, default=WINDOW_SHIFT_MIN)


def policer_value(spec: PolicerSpec, tick_ns: Optional[int] = None, cpus: Optional[int] = None) -> Policer:
    """The slot of dpp_policers for `spec`, its clock chosen for a tick of `tick_ns` (None: this
    kernel's), its burst the bucket's share when `cpus` CPUs (None: this machine's possible ones) carve
    chunk_for's credit (a window's: its burst as asked); ValueError outside the limits police.h is exact within."""
    if not RATE_MIN <= spec.rate <= RATE_MAX:
        raise ValueError(f"rate {spec.rate} bit/s: {RATE_MIN} to {RATE_MAX} allowed")
    if not 1 <= spec.burst <= BURST_MAX:
        raise ValueError(f"burst {spec.burst} bytes: 1 to {BURST_MAX} allowed")
    if spec.algo == Algo.NONE:
        raise ValueError("a policer needs an algorithm")
    window_shift = window_shift_for(spec.rate, spec.burst)
    tick_ns = coarse_tick_ns() if tick_ns is None else tick_ns
    cpus = possible_cpus() if cpus is None else cpus
    held = cpus * chunk_for(spec.algo, spec.rate, spec.burst, spec.gate, cpus) if spec.algo in BUCKETS else 0
    bucket = spec.burst - held
    clock = clock_for(spec.algo, spec.rate, bucket, window_shift, spec.gate, tick_ns)
    return Policer(
        rate=spec.rate,
        burst=bucket,
        algo=spec.algo,
        gate=spec.gate,
        window_shift=window_shift,
        clock=clock,
        parent=spec.parent,
        interval=interval_for(spec, clock, tick_ns),
        previous=bucket_tick_for(spec, clock, tick_ns, bucket),
    )


def interval_for(spec: PolicerSpec, clock: Clock, tick_ns: int) -> int:
    """struct dpp_policer.interval: GCRA's byte time; a window's on the coarse clock, the kernel's
    tick, which its CPUs' credits are stamped in jiffies with (police.h, "A window's credit without
    the clock"): read from the running kernel (coarse_tick_ns), never configured, as a tick written
    shorter than the kernel's would let a credit outlive its window; 0 otherwise."""
    if spec.algo == Algo.GCRA:
        return gcra_interval(spec.rate)
    return tick_ns if spec.algo in WINDOWS and clock == Clock.COARSE else 0


def bucket_tick_for(spec: PolicerSpec, clock: Clock, tick_ns: int, burst: int) -> int:
    """struct dpp_policer.previous of a token bucket or GCRA on the coarse clock where a jiffies stamp
    can be made: the kernel's tick, which its CPUs' drops are stamped in jiffies with (stamp.h, "A
    bucket seen short by jiffies"), read from the running kernel as a window's (interval_for); 0
    otherwise (the sliding window's previous is its data path's state). A stamp needs the emptied
    bucket (of `burst` bytes) to take more than STAMP_MARGIN ticks to hold the frame, or a frame
    bigger than the bucket: elsewhere a tick would only make every drop pay for the jiffies and the
    stamp's arithmetic, for no stamp. The applier takes it away again from a token bucket a precise
    policer reads for (`PolicerApplier._untick`)."""
    if spec.algo not in BUCKETS or clock != Clock.COARSE:
        return 0
    slow = FRAME_MAX * NANOBITS_PER_BYTE > (STAMP_MARGIN + 1) * spec.rate * tick_ns
    return tick_ns if slow or burst < FRAME_MAX else 0


_CLOCK_AT = Policer.clock.offset  # the clock's byte in a policer's bytes (`_written`)


@functools.lru_cache(maxsize=1024)
def _written(spec: PolicerSpec, cpus: int) -> bytes:
    """`policer_value(spec, cpus=cpus)`'s bytes, kept for the specs met lately: a QER's policy is usually many
    sessions', and each session's policers are written with it (a refused spec is checked again
    each time: its ValueError is not kept)."""
    return bytes(policer_value(spec, cpus=cpus))


class ChildIndex:
    """The policers naming each parent (struct dpp_policer.parent), as the slots hold them: made from
    the records of every slot, then told each slot written. It is one applier's view: the slots of a
    chain are written through the applier of the range they are in (netapp.qos.ids: the UPF's QERs
    and their sessions' AMBRs), so no other writer names one of its parents."""

    def __init__(self, records: Iterable[tuple[int, Policer]]):
        self._parent: dict[int, int] = {}
        self._children: dict[int, set[int]] = {}
        self.written({policer_id: value.parent for policer_id, value in records if value.parent})

    def children(self, parent: int) -> set[int]:
        return set(self._children.get(parent, ()))

    def written(self, parents: Mapping[int, int]) -> None:
        """Slots written: each policer id -> the parent its slot now names (0: none, or emptied)."""
        for policer_id, parent in parents.items():
            old = self._parent.pop(policer_id, 0)
            if old:
                self._children[old].discard(policer_id)
                if not self._children[old]:
                    del self._children[old]
            if parent:
                self._parent[policer_id] = parent
                self._children.setdefault(parent, set()).add(policer_id)


class PolicerApplier:
    """Policers by id (1 .. the map's size - 1; 0 is "no policer"), through `table` (an instance's
    tables by name: `Dataplane.table`, as the UPF's applier takes them)."""

    def __init__(self, table: Callable[[str], Table], window_credit: bool = True):
        self._policers = table("dpp_policers")
        self._stats = table("dpp_policer_stats")
        # whether its windows' CPUs carve a credit: not where the data path decides them without one
        # (the UPF's QERs: dpp_upf_police, police.h's POLICE_WINDOW_CREDIT)
        self._window_credit = window_credit
        self._cpus = self._stats.cpus
        self.max_entries = self._policers.max_entries
        self._index: Optional[ChildIndex] = None  # made when first needed (`_children_index`)

    def _children_index(self) -> ChildIndex:
        """The index of children by parent, made from the map's every slot the first time."""
        if self._index is None:
            self._index = ChildIndex(self._policers.items())
        return self._index

    @contextlib.contextmanager
    def _writing(self, parents: Mapping[int, int]) -> Iterator[None]:
        """Around a write of slots: the index (once made) told the parent each slot names after it
        (0: none). A write that fails part way leaves the slots unknown: the index is dropped, made
        again from every slot when next needed."""
        try:
            yield
        except BaseException:
            self._index = None
            raise
        if self._index is not None:
            self._index.written(parents)

    def _check_ids(self, ids: Iterable[int]) -> list[int]:
        ids = list(ids)
        # the size read once, at start: the table's `max_entries` asks the kernel every time
        bad = [policer_id for policer_id in ids if not 0 < policer_id < self.max_entries]
        if bad:
            raise ValueError(f"policer ids {bad}: 1 to {self.max_entries - 1} allowed")
        return ids

    def apply(self, policers: Mapping[int, PolicerSpec], pairs: Optional[Mapping[int, int]] = None) -> None:
        """Write each policer afresh (state and counters zeroed); all are checked before any is written,
        parents before the policers that name them (a child never names a slot not yet written).
        `pairs`: a rule's own policer -> the slice policer it is paired with (nf/qos/rule.h), for
        the rules naming one of `policers` (netapp.qos.rules): the two share a reading as a chain."""
        _check_parents(policers)
        if not pairs and not any(spec.parent for spec in policers.values()):
            self._apply_unchained(policers)
            return
        ordered = sorted(policers.items(), key=lambda item: item[1].parent != 0)
        values = {policer_id: Policer.from_buffer_copy(_written(spec, self._cpus)) for policer_id, spec in ordered}
        values = self._joint(values, pairs or {})
        self._untick(values, pairs or {})
        self._check_ids([*values, *(spec.parent for spec in policers.values() if spec.parent)])
        specs, of_spec = _by_spec(policers.values())
        self._stats.fill(list(policers))  # no chunk until the policers are in: the module's docstring
        self._policers.update({**self._made_precise(values, pairs or {}), **self._unticked_outside(values, pairs or {})})
        with self._writing({policer_id: value.parent for policer_id, value in values.items()}):
            self._policers.update(values)
        self._write_shares(list(policers), specs, of_spec)

    def _apply_unchained(self, policers: Mapping[int, PolicerSpec]) -> None:
        """`apply` of policers of which none has a parent or is paired (a UPF establishment's QERs):
        none decides on another's reading, so each is written on the clock its spec chooses (what
        `_joint` would leave) and in any order. Their values are made as one C array from the specs'
        bytes, not a structure each: a group of establishments writes some 64 policers at a time, of
        a few policies (`_by_spec`)."""
        ids = self._check_ids(policers)
        specs, of_spec = _by_spec(policers.values())
        made = [_written(spec, self._cpus) for spec in specs]
        written = b"".join([made[index] for index in of_spec])
        values = (Policer * len(ids)).from_buffer_copy(written)
        # ones a precise child reads for: no tick. Asked once a spec: its policers are the same bytes.
        if any(_ticked_token_bucket(Policer.from_buffer_copy(value)) for value in made):
            self._untick(dict(zip(ids, values)), {})
        self._stats.fill(ids)  # no chunk until the policers are in: the module's docstring
        if any(Clock.PRECISE == value[_CLOCK_AT] for value in made):  # their coarse children first
            self._policers.update(self._made_precise(dict(zip(ids, values)), {}))
        with self._writing(dict.fromkeys(ids, 0)):
            self._policers.update_arrays(ids, values)
        self._write_shares(ids, specs, of_spec)

    def _write_shares(self, ids: list[int], specs: list[PolicerSpec], of_spec: list[int]) -> None:
        """Each policer's slot of every CPU afresh: counters and credit zeroed, its chunk (chunk_for), in
        one write per chunk met, once the policers are written (the module's docstring). `ids`' specs
        are `specs[of_spec[i]]` (`_by_spec`): a chunk is worked out once a spec."""
        chunks = [self.cpu_share(spec) for spec in specs]
        chunk_of = [share.chunk if share else 0 for share in chunks]
        if len(set(chunk_of)) == 1:  # one chunk for them all (the usual: one policy, or equal chunks)
            self._stats.fill(ids, chunks[0])
            return
        by_chunk: dict[int, list[int]] = {}
        for policer_id, index in zip(ids, of_spec):
            by_chunk.setdefault(chunk_of[index], []).append(policer_id)
        for chunk, same in by_chunk.items():
            self._stats.fill(same, PolicerStats(chunk=chunk) if chunk else None)

    def cpu_share(self, spec: PolicerSpec) -> Optional[PolicerStats]:
        """What `apply` writes in each CPU's slot of a policer of `spec` once the policer is in
        (`cpu_share` for this applier's CPUs and windows' credit; None: zeroed): for a writer of
        policers in bulk (bench/upf) to give their CPUs the chunk this gives."""
        return cpu_share(spec, self._cpus, self._window_credit)

    def _joint(self, values: dict[int, Policer], pairs: Mapping[int, int]) -> dict[int, Policer]:
        """`values` with a policer on the coarse clock only when every policer deciding on its reading
        (its parent; a rule's own policer's slice policer), written with it or as its slot holds it,
        is too: a chain and a rule's two policers decide on their first policer's reading (police.h),
        and a precise policer must not get coarse readings."""
        followers = {policer_id: {value.parent, pairs.get(policer_id, 0)} - {0}
                     for policer_id, value in values.items()}
        outside = sorted({follower for policer_id, value in values.items() if value.clock == Clock.COARSE
                          for follower in followers[policer_id] if follower not in values})
        clocks = {policer_id: value.clock for policer_id, value in zip(outside, self._policers.lookup(outside))
                  if value is not None}
        changed = True
        while changed:  # a follower made precise may have followers of its own written with it
            clocks.update({policer_id: value.clock for policer_id, value in values.items()})
            changed = False
            for policer_id, value in values.items():
                if value.clock == Clock.COARSE and any(clocks.get(f) != Clock.COARSE for f in followers[policer_id]):
                    value.clock, changed = Clock.PRECISE, True
        return values

    def _untick(self, values: dict[int, Policer], pairs: Mapping[int, int]) -> None:
        """`values`' coarse token buckets written without their tick (previous 0: no jiffies stamp,
        nf/qos/stamp.h) where a precise policer reads for them (a child of a parent, a rule's own
        policer of its slice policer), written with them or as its slot holds it: a stamp's time U
        holds for coarse readings only (a precise one may be ahead of the bucket's coarse last_ns by
        up to two ticks and refill what a stamp on another CPU says is not there). GCRA's TAT only
        grows, whatever the reading: its tick is kept."""
        ticked = [policer_id for policer_id, value in values.items() if _ticked_token_bucket(value)]
        if not ticked:
            return
        owns: dict[int, set[int]] = {}
        for own, shared in pairs.items():
            owns.setdefault(shared, set()).add(own)
        readers = {policer_id: (self._children_index().children(policer_id) | owns.get(policer_id, set()))
                   for policer_id in ticked}
        outside = sorted(set().union(*readers.values()) - set(values))
        clocks = {policer_id: value.clock for policer_id, value in zip(outside, self._policers.lookup(outside))
                  if value is not None}
        clocks.update({policer_id: value.clock for policer_id, value in values.items()})
        read_by = {follower for policer_id, value in values.items() if value.clock == Clock.PRECISE
                   for follower in (value.parent, pairs.get(policer_id, 0)) if follower}
        for policer_id in ticked:
            if policer_id in read_by or any(clocks.get(reader) == Clock.PRECISE for reader in readers[policer_id]):
                values[policer_id].previous = 0

    def _unticked_outside(self, values: dict[int, Policer], pairs: Mapping[int, int]) -> dict[int, Policer]:
        """The coarse token buckets not in `values` that a precise policer of `values` reads for (its
        parent, its slice policer), as their slots hold them without their tick (`_untick` says why):
        written before `values`, so that no precise reading ever meets a ticked bucket. Their state
        is kept (as `_made_precise`'s). A tick taken away is not given back when its precise reader
        goes: the bucket then drops by its lock or its bound seen short, as a precise one does, until
        it is rewritten."""
        read_by = sorted({follower for policer_id, value in values.items() if value.clock == Clock.PRECISE
                          for follower in (value.parent, pairs.get(policer_id, 0)) if follower} - set(values))
        found = {policer_id: value for policer_id, value in zip(read_by, self._policers.lookup(read_by))
                 if value is not None and _ticked_token_bucket(value)}
        for value in found.values():
            value.previous = 0
        return found

    def _made_precise(self, values: dict[int, Policer], pairs: Mapping[int, int]) -> dict[int, Policer]:
        """The coarse policers not in `values` that read first for one of them now precise (a child
        of a parent, a rule's own policer of a slice policer), as their slots hold them with the
        precise clock: written before `values`, so that no coarse policer is ever followed by a
        precise one. Their state is kept (a packet decided between the read and the write has its
        spending undone: at most once the room it took). A parent's children are found in the index
        (`ChildIndex`) and only their slots read, when a parent goes from coarse to precise."""
        precise = {policer_id for policer_id, value in values.items() if value.clock == Clock.PRECISE}
        leads = {own for own, shared in pairs.items() if shared in precise and own not in values}
        parents = sorted(policer_id for policer_id in precise if not values[policer_id].parent)
        was_coarse = {policer_id for policer_id, value in zip(parents, self._policers.lookup(parents))
                      if value is not None and value.clock == Clock.COARSE}
        children = sorted({child for parent in was_coarse for child in self._children_index().children(parent)}
                          - set(values))
        found = {policer_id: value for policer_id, value in zip(children, self._policers.lookup(children))
                 if value is not None and value.parent in was_coarse and value.clock == Clock.COARSE}
        leads -= set(found)
        leads = sorted(leads)
        found.update({policer_id: value for policer_id, value in zip(leads, self._policers.lookup(leads))
                      if value is not None and value.clock == Clock.COARSE})
        for value in found.values():
            value.clock = Clock.PRECISE
        return found

    def remove(self, ids: Iterable[int]) -> None:
        """Empty the slots: their packets pass unpoliced, uncounted. Children before their parents, as
        the slots hold them now: a parent is never emptied (and its id never given to another policer)
        while a child removed with it still names it."""
        ids = self._check_ids(ids)
        current = dict(zip(ids, self._policers.lookup(ids)))
        children_first = sorted(ids, key=lambda policer_id: not (current[policer_id] and current[policer_id].parent))
        with self._writing(dict.fromkeys(ids, 0)):
            self._policers.update({policer_id: Policer() for policer_id in children_first})

    def reconcile(self, desired: Mapping[int, PolicerSpec], ids: range,
                  pairs: Optional[Mapping[int, int]] = None) -> None:
        """The caller's range of ids (netapp.qos.ids) holding exactly `desired`: a policer configured
        otherwise written afresh, one configured so kept as it is (its state and counters too), any
        other of the range emptied. `pairs` as `apply`'s, for all of `desired`."""
        records = list(self._policers.items())  # every slot: the index is made from them too
        self._index = ChildIndex(records)
        current = {policer_id: value for policer_id, value in records if policer_id in ids}
        wanted = self._joint({policer_id: policer_value(spec, cpus=self._cpus) for policer_id, spec in desired.items()},
                             pairs or {})
        self._untick(wanted, pairs or {})
        stale = {policer_id: spec for policer_id, spec in desired.items()
                 if policer_id not in current or _config(current[policer_id]) != _config(wanted[policer_id])}
        self.apply(stale, pairs)
        self.remove([policer_id for policer_id, value in current.items()
                     if policer_id not in desired and value.algo != Algo.NONE])

    def state(self, policer_id: int) -> Policer:
        """The configuration and the state the data path keeps (police.h says how to read it)."""
        return self._policers.get(policer_id)

    def counters(self, policer_id: int) -> PolicerStats:
        """Its counters, every CPU's added up (and their credits and chunks: the CPUs' share of the
        burst)."""
        total = PolicerStats()
        for cpu in self._stats.get(policer_id):
            for name in SUMMED:
                setattr(total, name, getattr(total, name) + getattr(cpu, name))
        return total


def _by_spec(specs: Iterable[PolicerSpec]) -> tuple[list[PolicerSpec], list[int]]:
    """The distinct specs of `specs`, and the index among them of each: a group's policers are a few
    policies', each usually one object many times (the fast path's stencil holds it), so they are told
    apart by identity first and by value only when new (a spec's hash is a call of its own)."""
    distinct: list[PolicerSpec] = []
    by_id: dict[int, int] = {}
    by_value: dict[PolicerSpec, int] = {}
    of_spec = []
    for spec in specs:
        index = by_id.get(id(spec))
        if index is None:
            index = by_id[id(spec)] = by_value.setdefault(spec, len(distinct))
            if index == len(distinct):
                distinct.append(spec)
        of_spec.append(index)
    return distinct, of_spec


def _check_parents(policers: Mapping[int, PolicerSpec]) -> None:
    """ValueError for a policer that is its own parent or whose parent, written with it, has a parent:
    the data path follows one parent (DPP_POLICE_DEPTH) and would ignore the second silently."""
    for policer_id, spec in policers.items():
        if spec.parent and spec.parent == policer_id:
            raise ValueError(f"policer {policer_id}: its own parent")
        grandparent = policers[spec.parent].parent if spec.parent in policers else 0
        if spec.parent and grandparent:
            raise ValueError(f"policer {policer_id}: its parent {spec.parent} has a parent ({grandparent}); "
                             f"chains of {DEPTH} policers at most")


def _ticked_token_bucket(value: Policer) -> bool:
    """Whether `value` is a coarse token bucket written with the kernel's tick (bucket_tick_for)."""
    return value.algo == Algo.TOKEN_BUCKET and value.clock == Clock.COARSE and value.previous != 0


def _config(value: Policer) -> tuple[int, ...]:
    """What the control plane writes of a policer (the rest is the data path's state): a bucket's
    previous is its tick (bucket_tick_for), the sliding window's its data path's count."""
    tick = value.previous if value.algo in BUCKETS else 0
    return (value.rate, value.burst, value.algo, value.gate, value.window_shift, value.clock, value.parent, tick)
