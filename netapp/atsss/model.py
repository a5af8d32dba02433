"""The reference model of ATSSS's schedulers (bpf/nf/atsss/schedule.h), written from their
definitions rather than from the C: which of a session's paths carries each downlink packet, and
the numbers it carries (the connection's MP_SEQ, the path's DCCP sequence number). The tests hold
the kernel's picks against it packet by packet."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from netapp.atsss.abi import DCCP_SEQ_BITS, Mode

SEQ_MASK = (1 << DCCP_SEQ_BITS) - 1


@dataclass
class SessionModel:
    """A session's paths by position, in priority order: whether each is up, its weight (WEIGHTED),
    its RTT in µs (SMALLEST_DELAY; 0: unknown), its priority and whether it is congested (PRIORITY)
    and its next DCCP sequence number; the scheduler's state; the next MP_SEQ number."""

    mode: Mode
    up: list[bool]
    weights: Sequence[int] = ()
    mp_seq: int = 0
    rtts: list[int] = field(default_factory=list)
    dccp_seq: list[int] = field(default_factory=list)
    current: list[int] = field(default_factory=list)
    priorities: list[int] = field(default_factory=list)
    congested: list[bool] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.up)
        self.weights = list(self.weights) or [1] * n
        self.dccp_seq = self.dccp_seq or [0] * n
        self.current = self.current or [0] * n
        self.rtts = self.rtts or [0] * n
        self.priorities = self.priorities or [0] * n
        self.congested = self.congested or [False] * n

    def pick(self) -> int | None:
        """The position of the path the scheduler picks for the next packet, None when none is up
        (REDUNDANT: see copies)."""
        if self.mode == Mode.ACTIVE_STANDBY:
            return next((i for i, up in enumerate(self.up) if up), None)
        if self.mode == Mode.WEIGHTED:
            return self._pick_weighted()
        if self.mode == Mode.SMALLEST_DELAY:
            up = [i for i, up in enumerate(self.up) if up]
            return min(up, key=lambda i: (self.rtts[i] or float("inf"), i), default=None)
        if self.mode == Mode.PRIORITY:
            return self._pick_priority()
        return self._pick_round_robin()

    def _pick_priority(self) -> int | None:
        """The highest priority (the smallest number, the first of equals) among the paths up and not
        congested; among those up when every one is congested."""
        up = [i for i, up in enumerate(self.up) if up]
        free = [i for i in up if not self.congested[i]] or up
        return min(free, key=lambda i: (self.priorities[i], i), default=None)

    def copies(self) -> list[tuple[int, int, int]]:
        """REDUNDANT's next packet: (position, MP_SEQ number, DCCP sequence number) of a copy on every
        path up, all of one MP_SEQ number; none when no path is up (no number is taken)."""
        up = [i for i, up in enumerate(self.up) if up]
        if not up:
            return []
        mp_seq, self.mp_seq = self.mp_seq & SEQ_MASK, self.mp_seq + 1
        sent = []
        for pos in up:
            sent.append((pos, mp_seq, self.dccp_seq[pos] & SEQ_MASK))
            self.dccp_seq[pos] += 1
        return sent

    def _pick_round_robin(self) -> int | None:
        """The position the next MP_SEQ number falls on (its low 32 bits mod the number of paths)
        when that path is up; when it is down, of the positions up, the one the number's cycle falls
        on (its low 32 bits over the number of paths, mod how many are up, counted from the first):
        each position down hands its cycles to the paths up in turn, so every path up gets an
        equal share."""
        up = [i for i, up in enumerate(self.up) if up]
        if not up:
            return None
        turn = self.mp_seq & 0xFFFFFFFF
        position = turn % len(self.up)
        return position if self.up[position] else up[turn // len(self.up) % len(up)]

    def _pick_weighted(self) -> int | None:
        """Smooth weighted round-robin: every eligible position gains its weight, the largest (the
        first of equals) is picked and loses the sum of the eligible weights."""
        eligible = [i for i, up in enumerate(self.up) if up and self.weights[i]]
        if not eligible:
            return None
        for i in eligible:
            self.current[i] += self.weights[i]
        best = max(eligible, key=lambda i: (self.current[i], -i))
        self.current[best] -= sum(self.weights[i] for i in eligible)
        return best

    def send(self) -> tuple[int, int, int] | None:
        """The next packet: (position, its MP_SEQ number, its DCCP sequence number on that path), or
        None when no path is up (no number is taken)."""
        pos = self.pick()
        if pos is None:
            return None
        mp_seq, self.mp_seq = self.mp_seq & SEQ_MASK, self.mp_seq + 1
        seq, self.dccp_seq[pos] = self.dccp_seq[pos] & SEQ_MASK, self.dccp_seq[pos] + 1
        return pos, mp_seq, seq
