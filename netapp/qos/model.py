"""The policers' reference model: the four algorithms of dataplane/bpf/nf/qos/police.h written from
their definitions, in exact rational arithmetic (bytes as Fractions, no units to scale, nothing that
wraps), for tests to replay a sequence of (bytes, time) against the real program.

Definitions (W = 2**window_shift ns, R the rate in bit/s, B the burst in bytes):
  token bucket    a bucket of B bytes, full at most, filling at R / 8e9 bytes a ns since the last
                  packet (the first one: since time 0, from empty); a packet passes if the bucket
                  holds its bytes, which it then takes out.
  fixed window    the clock's windows [k W, (k + 1) W); a window lets R W / 8e9 bytes through.
  sliding window  the last W ns are estimated as the previous window's bytes weighted by
                  (W - t) / W, rounded up to a byte, plus the current window's (t: the time since it
                  began); a packet passes if the estimate with it stays within R W / 8e9 bytes.
  GCRA            the token bucket kept as the time it is full again (TAT), in integer units of
                  1/64 ns: a byte takes I = ceil(8e9 * 2**26 / R) units of 2**-26 ns; a packet of
                  b <= B bytes passes if max(TAT, now) - now <= floor((B - b) I / 2**20) (the
                  rest of the burst's time), then TAT becomes max(TAT, now) + ceil(b I / 2**20).
                  Full from the start (TAT 0). The roundings are the algorithm's, all against the
                  packet: at most R T / 8e9 + B bytes in any T ns, as the token bucket.
Both windows: a packet whose clock read is one window behind the policer's counts in the newer
window, at its start; a window's bytes never exceed WINDOW_BYTES_MAX. A closed gate, or a packet
over BURST_MAX bytes, never passes. State changes only when a packet passes. A chain (`Chain`: a
flow's policer, then its parent, the session's) offers the parent only what the child passed.

The CPUs' credit (a chunk C, police.h): each CPU holds a credit, at most C bytes, 0 at first. A
packet its CPU's credit covers (gate open) passes on it, the bucket or window untouched; any other is
offered to the bucket or window with what the credit lacks of C: when it has room for both, both are
taken (counted in the window) and the credit is C; else the packet alone is decided, the credit kept.
A window's credit holds for the window it was carved in (a packet counting in a newer window, late,
carves none): a packet of another window (gate open or not) finds it stale and empties it first, so
that it spends none of it and asks for a whole C.

A window's credit without the clock (police.h, "A window's credit without the clock"): a window on
the coarse clock with a tick (`tick_ns`) stamps its CPU's credit, on each packet that looks at the
clock, with a jiffies deadline, `credit_stamp` of the packet's time and jiffies; a packet whose
jiffies are not past its CPU's stamp (and at most STAMP_AHEAD before it) takes the credit as its
window's without looking at its time. A packet given without jiffies (0) stamps none. A ticked
window's CPUs are stamped so with a chunk or without one.

A window seen full (nf/qos/stamp.h, "A window seen full"): a ticked window that drops a packet (gate
open) on a time of its CPU's stamped window, the window's count then of that window too, keeps in the
CPU's `rooms` what it had left, `seen_room`: the allowance (whole bytes) less the count (the sliding
window: less the window before's bytes weighted by a tick, ceil(previous tick / W), too); while the
CPU's stamp holds, a packet its credit does not cover and bigger than that room is dropped without
being offered to the window. A new window of the CPU's forgets it.

A bucket seen short by jiffies (nf/qos/stamp.h): a token bucket or GCRA on the coarse clock with a
tick, for a packet its CPU's credit does not cover: while the CPU's stamp holds at the packet's
jiffies, a packet bigger than the CPU's room is dropped without being offered to the bucket (a stamp
that holds is kept); else the packet's jiffies are kept pending, and when the bucket drops the
packet (gate open) its room is the packet's size less one and its stamp `bucket_stamp` of the time
from which the bucket may hold the packet (`fills_at`: never for one over the burst); where that
makes no stamp (and the line's stamp no longer holds), the line keeps that time itself, in ns.

A bucket seen short in ns (nf/qos/stamp.h): a token bucket's or GCRA's drop by the bucket (gate
open, the packet's CPU's credit short) where no jiffies stamp is made (a bucket without a tick, on
either clock) keeps in the CPU's line the room below the packet and, as its stamp, `until_stamp` of
the time from which the bucket may hold it (`fills_at`, UNTIL_AHEAD past the packet's time at most,
tagged with UNTIL_TAG);
a later packet its credit does not cover, bigger than the room, at a time before that stamp
(`until_holds`), is dropped without being offered to the bucket, the line kept as it is.

A window seen full in ns (nf/qos/stamp.h): a window without a tick that drops a packet (gate open) on
a time of the window it counts, keeps the same in its CPU's line (`window_until`): the fixed window,
the room its count leaves until the window's end; the sliding window, the room below the packet
until the first time of the window at which its estimate has room for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from netapp.qos.abi import BURST_MAX, GCRA_INTERVAL_SHIFT, GCRA_TAT_SHIFT, WINDOW_BYTES_MAX, Algo, Clock, Gate

NS_PER_S = 10**9
BITS_PER_BYTE = 8
STAMP_AHEAD = 1 << 16  # police.h's POLICE_STAMP_AHEAD: a stamp further ahead of the jiffies is none
STAMP_MARGIN = 4  # police.h's POLICE_STAMP_MARGIN: the ticks a stamp keeps off its window's end
STAMP_PENDING = 1 << 63  # stamp.h's POLICE_STAMP_PENDING: marks the jiffies of a reading being made
WORD = (1 << 64) - 1
NEVER = WORD  # a bucket's U for a packet it never holds (bucket.h's all ones)
NANOBITS_PER_BYTE = BITS_PER_BYTE * NS_PER_S
UNTIL_AHEAD = 1 << 26  # stamp.h's POLICE_UNTIL_AHEAD: a bucket's U in ns further ahead of the time is none
UNTIL_TAG = 1 << 62  # stamp.h's POLICE_UNTIL_TAG: the bit a U is kept with (no jiffies stamp, and jiffies no U)


@dataclass(frozen=True)
class PolicerConfig:
    rate: int  # bit/s
    burst: int  # bytes (token bucket)
    algo: Algo
    window_shift: int = 20  # windows: 2**shift ns
    gate: Gate = Gate.OPEN
    clock: Clock = Clock.PRECISE
    tick_ns: int = 0  # on the coarse clock: the tick its CPUs' lines are stamped in (0: none)

    @property
    def window_ns(self) -> int:
        return 1 << self.window_shift

    @property
    def ticked(self) -> bool:
        """Whether its CPUs' window credits are stamped with jiffies (police.h's police_ticked)."""
        return self.algo in WINDOWS and self.clock == Clock.COARSE and self.tick_ns > 0

    @property
    def bucket_ticked(self) -> bool:
        """Whether its CPUs' drops are kept as jiffies stamps (bucket.h's bucket_tick: a tick below 2^32
        ns, a larger previous being a window's word)."""
        return self.algo in BUCKETS and self.clock == Clock.COARSE and 0 < self.tick_ns < 1 << 32

    @property
    def window_allowance(self) -> Fraction:
        """The bytes a window lets through: R W / 8e9."""
        return Fraction(self.rate * self.window_ns, BITS_PER_BYTE * NS_PER_S)


class TokenBucket:
    def __init__(self, config: PolicerConfig):
        self.config = config
        self.credit = Fraction(0)
        self.last_ns = 0

    def decide(self, size: int, now: int) -> bool:
        return self.carve(size, now, 0) is not None

    def carve(self, size: int, now: int, extra: int) -> Optional[int]:
        """Take the packet and `extra` bytes more when the bucket holds both (-> extra), else the
        packet alone (-> 0); None: dropped."""
        if now > self.last_ns:
            refill = Fraction(self.config.rate * (now - self.last_ns), BITS_PER_BYTE * NS_PER_S)
            self.credit = min(Fraction(self.config.burst), self.credit + refill)
            self.last_ns = now
        for taken in ((extra, 0) if extra else (0,)):
            if self.credit >= size + taken:
                self.credit -= size + taken
                return taken
        return None

    def fills_at(self, size: int) -> int:
        """The earliest time the bucket, as it is, may hold `size` bytes (more than it holds): its
        refill from last_ns on, in whole ns; NEVER over its size."""
        if size > self.config.burst:
            return NEVER
        missing = (size - self.credit) * BITS_PER_BYTE * NS_PER_S
        return self.last_ns + math.ceil(missing / self.config.rate)


class FixedWindow:
    def __init__(self, config: PolicerConfig):
        self.config = config
        self.number = 0  # the current window, now // W
        self.count = 0  # its bytes

    def decide(self, size: int, now: int) -> bool:
        return self.carve(size, now, 0) is not None

    def carve(self, size: int, now: int, extra: int) -> Optional[int]:
        """As TokenBucket.carve, `extra` counted in the window (a late packet's: none)."""
        number = now // self.config.window_ns
        count = self.count if number in (self.number, self.number - 1) else 0
        if number == self.number - 1:
            number, extra = self.number, 0
        taken = window_take(self.config, count, size, extra)
        if taken is not None:
            self.number, self.count = number, count + size + taken
        return taken


class SlidingWindow:
    def __init__(self, config: PolicerConfig):
        self.config = config
        self.number = 0
        self.count = 0
        self.previous = 0  # the bytes of window number - 1 (0 when it was idle)

    def decide(self, size: int, now: int) -> bool:
        return self.carve(size, now, 0) is not None

    def carve(self, size: int, now: int, extra: int) -> Optional[int]:
        """As FixedWindow.carve."""
        width = self.config.window_ns
        number, t = now // width, now % width
        if number in (self.number, self.number - 1):
            if number != self.number:
                t, extra = 0, 0
            number, count, previous = self.number, self.count, self.previous
        else:
            previous = self.count if number == self.number + 1 else 0
            count = 0
        weighted = math.ceil(Fraction(previous * (width - t), width))
        taken = window_take(self.config, weighted + count, size, extra)
        if taken is not None:
            self.number, self.count, self.previous = number, count + size + taken, previous
        return taken


def gcra_interval(rate: int) -> int:
    """A byte's time at `rate` bit/s in units of 2**-(TAT_SHIFT + INTERVAL_SHIFT) ns, rounded up
    (struct dpp_policer.interval, as the control plane writes it)."""
    unit = 1 << (GCRA_TAT_SHIFT + GCRA_INTERVAL_SHIFT)
    return -(-BITS_PER_BYTE * NS_PER_S * unit // rate)


class Gcra:
    def __init__(self, config: PolicerConfig):
        self.config = config
        self.interval = gcra_interval(config.rate)
        self.tat = 0  # the time the bucket is full again, 1/64 ns

    def _time(self, size: int, up: bool) -> int:
        """size bytes' time in 1/64 ns, rounded up or down."""
        whole, rest = divmod(size * self.interval, 1 << GCRA_INTERVAL_SHIFT)
        return whole + (1 if up and rest else 0)

    def decide(self, size: int, now: int) -> bool:
        return self.carve(size, now, 0) is not None

    def carve(self, size: int, now: int, extra: int) -> Optional[int]:
        """As TokenBucket.carve: the packet and `extra` bytes more taken when the bucket holds both."""
        at = now << GCRA_TAT_SHIFT
        start = max(self.tat, at)
        if size > self.config.burst:
            return None
        for taken in ((extra, 0) if extra else (0,)):
            whole = size + taken
            if whole <= self.config.burst and start - at <= self._time(self.config.burst - whole, up=False):
                self.tat = start + self._time(whole, up=True)
                return taken
        return None

    def fills_at(self, size: int) -> int:
        """The earliest time (ns) a packet of `size` bytes may pass: its arrival time less the rest of
        the burst's time, in 1/64 ns, rounded up to a ns; NEVER over the burst."""
        if size > self.config.burst:
            return NEVER
        return -(-(self.tat - self._time(self.config.burst - size, up=False)) >> GCRA_TAT_SHIFT)


def window_fits(config: PolicerConfig, size: int) -> bool:
    return size <= WINDOW_BYTES_MAX and size <= config.window_allowance


def window_take(config: PolicerConfig, held: int, size: int, extra: int) -> Optional[int]:
    """What a window holding `held` bytes takes besides the packet: `extra` when both fit, 0 when the
    packet alone does; None: dropped."""
    for taken in ((extra, 0) if extra else (0,)):
        if window_fits(config, held + size + taken):
            return taken
    return None


ALGORITHMS = {Algo.TOKEN_BUCKET: TokenBucket, Algo.FIXED_WINDOW: FixedWindow, Algo.SLIDING_WINDOW: SlidingWindow,
              Algo.GCRA: Gcra}


WINDOWS = (Algo.FIXED_WINDOW, Algo.SLIDING_WINDOW)
BUCKETS = (Algo.TOKEN_BUCKET, Algo.GCRA)


def credit_stamp(config: PolicerConfig, now: int, jiffies: int) -> int:
    """The jiffies up to which a credit of `now`'s window holds without the clock, `jiffies` read
    just before `now`: the window's end less STAMP_MARGIN ticks, in whole ticks; 0 (none) when that
    is not past `jiffies` or `jiffies` is unknown (0)."""
    width = config.window_ns
    return stamp_after(jiffies, (width - now % width) // config.tick_ns)


def stamp_after(jiffies: int, ticks: int) -> int:
    """stamp.h's police_stamp_after: `ticks` after `jiffies` less STAMP_MARGIN; 0 (none) when that is
    not past `jiffies` or they are unknown (0)."""
    return jiffies + ticks - STAMP_MARGIN if jiffies and ticks > STAMP_MARGIN else 0


def bucket_stamp(config: PolicerConfig, now: int, until: int, jiffies: int) -> int:
    """stamp.h's police_stamp_until: the jiffies up to which a coarse clock read at `now`, `jiffies`
    read just before, stays before `until` (a bucket's U), STAMP_AHEAD - 1 ticks at most."""
    ticks = (until - now) // config.tick_ns if until > now else 0
    return stamp_after(jiffies, min(ticks, STAMP_AHEAD - 1))


def stamp_holds(stamp: int, jiffies: int) -> bool:
    """stamp.h's police_stamp_holds: the stamp not past the jiffies, nor more than STAMP_AHEAD ahead
    (none, 0, and a pending word never hold)."""
    return (stamp - jiffies) & WORD < STAMP_AHEAD


def until_stamp(now: int, until: int) -> int:
    """stamp.h's police_until: the stamp a bucket's line keeps for its U `until` at `now`, UNTIL_AHEAD
    past `now` at most, tagged with UNTIL_TAG."""
    return (now + UNTIL_AHEAD if until - now > UNTIL_AHEAD else until) | UNTIL_TAG


def until_holds(stamp: int, now: int) -> bool:
    """stamp.h's police_until_holds: a U kept as `stamp` (tagged) after `now`, by UNTIL_AHEAD at most;
    a word without the tag wraps, as in 64 bits."""
    return (stamp - UNTIL_TAG - now - 1) & WORD < UNTIL_AHEAD


def window_until(config: PolicerConfig, algorithm: "FixedWindow | SlidingWindow", size: int, now: int
                 ) -> Optional[tuple[int, int]]:
    """police.h's window_saw_until: (room, U) after a window dropped `size` bytes at `now`, as it
    shows `now`'s window (counted, or yet to start: its count 0, the sliding window's previous the
    window before's count): the fixed window's room left until the window's end; the sliding
    window's size - 1 until its first time with room for `size` (sliding_window_fits_at). None:
    nothing kept (a late reading; room from the window's start)."""
    width = config.window_ns
    number = now // width
    if algorithm.number == number + 1:
        return None  # a late reading: it counts in the newer window
    count = algorithm.count if algorithm.number == number else 0
    previous = getattr(algorithm, "previous", 0) if algorithm.number == number else \
        algorithm.count if algorithm.number + 1 == number else 0
    room, end = max(0, min(math.floor(config.window_allowance), WINDOW_BYTES_MAX) - count), (number + 1) * width
    if isinstance(algorithm, FixedWindow):
        return room, end
    if room < size:
        return size - 1, end
    gone = (room - size) * width // previous if previous else width
    return (size - 1, end - gone) if gone < width else None


def pending_stamp(jiffies: int) -> int:
    """The word a CPU keeps the jiffies of a reading being made in (stamp.h's police_stamp_pending)."""
    return jiffies | STAMP_PENDING


def seen_room(config: PolicerConfig, algorithm: "FixedWindow | SlidingWindow") -> int:
    """police.h's window_saw_full: the most room the window can have while a stamp made in it
    holds (a time at least a tick before its end): the allowance in whole bytes less its count, and
    the sliding window's previous bytes weighted by a tick, rounded up."""
    held = algorithm.count
    if isinstance(algorithm, SlidingWindow):
        held += -(-algorithm.previous * config.tick_ns // config.window_ns)
    return max(0, min(math.floor(config.window_allowance), WINDOW_BYTES_MAX) - held)


class Policer:
    """One policer: decide(size, now, cpu) -> whether the packet passes, with its counters; `chunk`:
    each CPU's credit's (0: none), a token bucket's or GCRA's `config.burst` then the bucket's."""

    def __init__(self, config: PolicerConfig, chunk: int = 0):
        self.config = config
        self.chunk = chunk
        self.credits: dict[int, int] = {}  # cpu -> its credit, bytes
        self.windows: dict[int, int] = {}  # cpu -> the window its credit was carved in (windows)
        self.stamps: dict[int, int] = {}  # cpu -> the jiffies its window credit holds to (ticked windows)
        self.rooms: dict[int, int] = {}  # cpu -> the room it saw its window (bucket) have when it dropped (ticked)
        self.pendings: dict[int, int] = {}  # cpu -> the jiffies of a ticked bucket's decision being made
        self.algorithm = ALGORITHMS[config.algo](config)
        self.passed_packets = self.passed_bytes = self.dropped_packets = self.dropped_bytes = 0

    def _credit_window(self, now: int, cpu: int, jiffies: int) -> bool:
        """A window policer's CPU credit emptied when it is of another window than `now`'s, which
        it is then stamped with (the window a carve at `now` is counted in, its room seen forgotten),
        and stamped with the jiffies it holds to (a ticked one, with a chunk or not); left as it is,
        `now` not looked at, while the stamp holds at `jiffies`: then True."""
        ticked = self.config.ticked
        if self.config.algo not in WINDOWS or not (self.chunk or ticked):
            return False
        if ticked and jiffies and stamp_holds(self.stamps.get(cpu, 0), jiffies):
            return True
        window = now >> self.config.window_shift
        if self.windows.get(cpu) != window:
            self.credits[cpu], self.windows[cpu] = 0, window
            self.rooms.pop(cpu, None)
        if ticked:
            self.stamps[cpu] = credit_stamp(self.config, now, jiffies)
        return False

    def _saw_full(self, now: int, cpu: int) -> None:
        """After a drop on the window: the room it had kept, when the drop was of the CPU's window."""
        number = now >> self.config.window_shift
        if self.config.ticked and self.config.gate == Gate.OPEN and self.windows.get(cpu) == number == \
                self.algorithm.number:
            self.rooms[cpu] = seen_room(self.config, self.algorithm)

    def _bucket_line(self, size: int, cpu: int, jiffies: int) -> bool:
        """A ticked bucket's line for a packet its CPU's credit does not cover: True when its stamp
        holds and the packet is bigger than its room (dropped on it); else the packet's jiffies kept
        pending (a stamp that holds, for a smaller packet, is replaced by that packet's if it drops)."""
        if not self.config.bucket_ticked or self.credits.get(cpu, 0) >= size:
            return False
        if jiffies and stamp_holds(self.stamps.get(cpu, 0), jiffies) and size > self.rooms.get(cpu, WORD):
            return True
        self.pendings[cpu] = pending_stamp(jiffies)
        return False

    def _seen_short(self, size: int, now: int, cpu: int) -> bool:
        """stamp.h's police_until_short on the CPU's line of a bucket or an unticked window: a U in ns
        that holds at `now`, the packet bigger than the room kept with it."""
        return not self.config.ticked and size > self.rooms.get(cpu, WORD) and \
            until_holds(self.stamps.get(cpu, 0), now)

    def _saw_until(self, size: int, now: int, cpu: int) -> None:
        """After an unticked window dropped the packet: its room and U (window_until)."""
        kept = window_until(self.config, self.algorithm, size, now)
        if kept:
            self.rooms[cpu], self.stamps[cpu] = kept[0], until_stamp(now, kept[1])

    def _keep_until(self, size: int, now: int, cpu: int) -> None:
        """After the bucket dropped the packet: the room below it and the time the bucket may hold it."""
        self.rooms[cpu], self.stamps[cpu] = size - 1, until_stamp(now, self.algorithm.fills_at(size))

    def _bucket_saw(self, size: int, now: int, cpu: int, pending: int) -> None:
        """After the bucket dropped the packet on a pending line: the room below the packet and the
        stamp of the time the bucket may hold it; else, no stamp made, that time in ns (where the
        line's stamp no longer holds)."""
        jiffies = pending - STAMP_PENDING
        stamp = bucket_stamp(self.config, now, self.algorithm.fills_at(size), jiffies)
        if stamp:
            self.rooms[cpu], self.stamps[cpu] = size - 1, stamp
        elif not stamp_holds(self.stamps.get(cpu, 0), jiffies):
            self._keep_until(size, now, cpu)

    def _shared(self, size: int, now: int, cpu: int) -> bool:
        """The decision on the CPU's credit, else on the policer's state (carving when it may)."""
        credit = self.credits.get(cpu, 0)
        if not self.chunk:
            return self.algorithm.decide(size, now)
        if credit >= size:
            self.credits[cpu] = credit - size
            return True
        taken = self.algorithm.carve(size, now, self.chunk - credit)
        if taken:
            self.credits[cpu] = self.chunk
        return taken is not None

    def decide(self, size: int, now: int, cpu: int = 0, jiffies: int = 0) -> bool:
        """`jiffies`: read just before `now` (0: unknown, no stamp made or looked at)."""
        held = self._credit_window(now, cpu, jiffies)
        open_gate = self.config.gate == Gate.OPEN and size <= BURST_MAX
        covered = open_gate and self.credits.get(cpu, 0) >= size
        if held and not covered and size > self.rooms.get(cpu, WORD):
            passed = False  # its window seen full: not offered to the window
        elif self._bucket_line(size, cpu, jiffies):
            passed = False  # its bucket seen short by jiffies: not offered to the bucket
        elif open_gate and not covered and self._seen_short(size, now, cpu):
            passed = False  # its bucket seen short in ns: not offered to the bucket, no stamp made
            self.pendings.pop(cpu, None)
        else:
            passed = open_gate and self._shared(size, now, cpu)
            if not passed:
                self._saw_full(now, cpu)
            if not passed and open_gate and self.config.algo in WINDOWS and not self.config.ticked:
                self._saw_until(size, now, cpu)
            pending = self.pendings.pop(cpu, 0)
            if open_gate and not covered and not passed and pending:
                self._bucket_saw(size, now, cpu, pending)
            elif open_gate and not covered and not passed and self.config.algo in BUCKETS:
                self._keep_until(size, now, cpu)
        if passed:
            self.passed_packets, self.passed_bytes = self.passed_packets + 1, self.passed_bytes + size
        else:
            self.dropped_packets, self.dropped_bytes = self.dropped_packets + 1, self.dropped_bytes + size
        return passed


class Chain:
    """A policer and its parent (struct dpp_policer.parent): the child decides first, the parent only
    on what the child passed; a packet the parent drops keeps what it took from the child."""

    def __init__(self, child: Policer, parent: Policer):
        self.child, self.parent = child, parent

    def decide(self, size: int, now: int) -> bool:
        return self.child.decide(size, now) and self.parent.decide(size, now)
