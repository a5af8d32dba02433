"""Sequence recovery's reference model: IEEE 802.1CB 7.4.3 (the vector and match algorithms,
SequenceRecoveryReset, the recovery timeout) and 7.4.4 (latent error detection), written from the
standard's pseudo-code in plain Python for tests to replay a sequence of frames against the real
program (dataplane/bpf/nf/frer/recover.h). The history is a list of booleans shifted one place at a
time as the standard's loop does, the timers are times; no bit masks, no saturation.

Readings the data path shares (its header says why):
  - lost counts a sequence number that leaves the history unseen, if it is at or after the first
    frame passed since the last reset;
  - discarded counts every tagged frame not passed (duplicate or rogue); tagless every frame
    without an R-tag;
  - a timer that expires in a silent stretch acts once, when the next frame arrives (before it is
    decided); the reset the standard runs at BEGIN is the configured state, not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from netapp.frer.abi import COUNTERS, SEQ_SPACE, Algo, Decision


@dataclass(frozen=True)
class RecoveryConfig:
    algo: Algo = Algo.VECTOR
    history_len: int = 2
    reset_ns: int = 0  # 0: no recovery timeout
    individual: bool = False
    take_no_sequence: bool = False
    latent: bool = False
    latent_difference: int = 0
    latent_period_ns: int = 0
    latent_reset_period_ns: int = 0
    latent_paths: int = 2


@dataclass
class Recovery:
    config: RecoveryConfig
    take_any: bool = True
    seq: int = SEQ_SPACE - 1
    history: list[bool] = field(default_factory=list)  # history[i]: seq - i was seen
    first: Optional[int] = None  # unwrapped number of the first frame passed since the reset
    number: int = 0  # unwrapped RecovSeqNum (grows with every forward step)
    restart_ns: int = 0
    latent_test_ns: int = 0
    latent_reset_ns: int = 0
    base_difference: int = 0
    counters: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))

    def __post_init__(self) -> None:
        self.history = [False] * self.config.history_len

    # ---- 7.4.3.3, and the timers ----

    def reset(self) -> None:
        self.seq = SEQ_SPACE - 1
        self.history = [False] * self.config.history_len
        self.take_any = True
        self.first = None
        self.counters["resets"] += 1

    def difference(self) -> int:
        return self.counters["passed"] * (self.config.latent_paths - 1) - self.counters["discarded"]

    def timers(self, now: int) -> None:
        config = self.config
        if not self.take_any and config.reset_ns and now > self.restart_ns and now - self.restart_ns >= config.reset_ns:
            self.reset()
        if not config.latent:
            return
        if now >= self.latent_reset_ns:
            self.base_difference = self.difference()
            self.counters["latent_resets"] += 1
            self.latent_reset_ns = now + config.latent_reset_period_ns
            if not self.latent_test_ns:
                self.latent_test_ns = now + config.latent_period_ns
        if now >= self.latent_test_ns:
            if abs(self.base_difference - self.difference()) > config.latent_difference:
                self.counters["latent_errors"] += 1
            self.latent_test_ns = now + config.latent_period_ns

    # ---- 7.4.3.4 and 7.4.3.5 ----

    def take(self, seq: int) -> Decision:
        self.take_any = False
        self.seq = seq
        self.history = [True] + [False] * (self.config.history_len - 1)
        self.number = self.first = 0
        return Decision.TAKE_ANY

    def shift(self) -> None:
        """One place forward: the oldest number leaves the history (lost if never seen and
        expected), a new unseen one enters."""
        leaving = self.number - (self.config.history_len - 1)
        if not self.history[-1] and self.first is not None and leaving >= self.first:
            self.counters["lost"] += 1
        self.history = [False] + self.history[:-1]
        self.number += 1

    def vector(self, seq: int) -> Decision:
        delta = (seq - self.seq) % SEQ_SPACE
        if delta >= SEQ_SPACE // 2:
            delta -= SEQ_SPACE
        length = self.config.history_len
        if delta >= length or delta <= -length:
            self.counters["rogue"] += 1
            return Decision.ROGUE
        if delta <= 0:
            if self.history[-delta]:
                return Decision.DUPLICATE
            self.history[-delta] = True
            self.counters["out_of_order"] += 1
            return Decision.OUT_OF_ORDER
        for _ in range(delta):
            self.shift()
        self.history[0] = True
        self.seq = seq
        if delta != 1:
            self.counters["out_of_order"] += 1
            return Decision.OUT_OF_ORDER
        return Decision.IN_ORDER

    def match(self, seq: int) -> Decision:
        delta = (seq - self.seq) % SEQ_SPACE
        if delta == 0:
            return Decision.DUPLICATE
        self.seq = seq
        if delta != 1:
            self.counters["out_of_order"] += 1
            return Decision.OUT_OF_ORDER
        return Decision.IN_ORDER

    def decide(self, seq: Optional[int], now: int) -> Decision:
        """A frame with sequence number `seq` (None: no R-tag) arriving at `now` ns."""
        self.timers(now)
        if seq is None:
            self.counters["tagless"] += 1
            decision = Decision.TAGLESS_PASSED if self.config.take_no_sequence else Decision.TAGLESS_DISCARDED
        elif self.take_any:
            decision = self.take(seq)
        else:
            decision = self.match(seq) if self.config.algo == Algo.MATCH else self.vector(seq)
        if decision.passes:
            self.counters["passed"] += 1
            self.restart_ns = now
        else:
            if decision != Decision.TAGLESS_DISCARDED:
                self.counters["discarded"] += 1
            if self.config.individual:
                self.restart_ns = now
        return decision
