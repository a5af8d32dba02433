"""Where every frame of a trial went, per flow and per class (pure: counts in, accounts out).

A frame the generator sent is delivered (counted by the core's sink), forwarded (counted by the
alternative node's sink) or lost; nothing else can happen to it, so lost = offered - delivered -
forwarded. A flow that arrived more often than it was sent (negative loss), or frames of no known
flow at a sink, make the trial invalid: the counters would not mean what they say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

PRIORITY, BEST_EFFORT, TOTAL = "priority", "best_effort", "total"
CLASSES = (PRIORITY, BEST_EFFORT)


@dataclass(frozen=True)
class Account:
    """Frames of one flow or class: sent by the generator, counted at the core and at the alternative."""

    offered: int
    delivered: int
    forwarded: int

    @property
    def lost(self) -> int:
        return self.offered - self.delivered - self.forwarded

    def __add__(self, other: Account) -> Account:
        return Account(
            self.offered + other.offered, self.delivered + other.delivered, self.forwarded + other.forwarded
        )

    def rates(self, seconds: float) -> dict[str, float]:
        """Frames per second over `seconds` (the generator's sending time)."""
        if seconds <= 0:
            return dict.fromkeys(("offered", "delivered", "forwarded", "lost"), 0.0)
        return {name: count / seconds for name, count in self.as_dict().items()}

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "lost": self.lost}


ZERO = Account(0, 0, 0)


def flow_accounts(sent: Sequence[int], core: Sequence[int], alt: Sequence[int]) -> list[Account]:
    if not len(sent) == len(core) == len(alt):
        raise ValueError(f"flow counts differ in length: sent {len(sent)}, core {len(core)}, alt {len(alt)}")
    return [Account(s, c, a) for s, c, a in zip(sent, core, alt)]


def class_accounts(flows: Sequence[Account], priority: Sequence[bool]) -> dict[str, Account]:
    """Per class and in total; `priority[i]` tells flow i's class."""
    if len(flows) != len(priority):
        raise ValueError(f"{len(flows)} flows, {len(priority)} class flags")
    result = {PRIORITY: ZERO, BEST_EFFORT: ZERO}
    for account, is_priority in zip(flows, priority):
        name = PRIORITY if is_priority else BEST_EFFORT
        result[name] = result[name] + account
    result[TOTAL] = result[PRIORITY] + result[BEST_EFFORT]
    return result


def anomalies(flows: Sequence[Account], unknown_frames: int = 0) -> list[str]:
    """Why the counts cannot be trusted, if they cannot."""
    found = [
        f"flow {i}: {-a.lost} more frames arrived than were sent" for i, a in enumerate(flows) if a.lost < 0
    ]
    if unknown_frames:
        found.append(f"{unknown_frames} frames of no known flow reached a sink")
    return found


@dataclass(frozen=True)
class Verdict:
    """A trial's standing. It passes with zero loss (RFC 2544: every frame sent was received) and
    counts that can be trusted. Whether the generator offered the rate asked for is recorded but
    does not decide: a trial that passed proves zero loss at the rate it did offer (the schedule
    slips rather than bursts when the generator falls behind, so what it offered was never burstier
    than what was asked for)."""

    zero_loss: bool
    generator_held: bool
    valid: bool

    @property
    def passed(self) -> bool:
        return self.valid and self.zero_loss

    @property
    def limited_by(self) -> str | None:
        """Why a trial failed: counts that cannot be trusted, else loss."""
        if self.passed:
            return None
        return "invalid" if not self.valid else "loss"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed, "limited_by": self.limited_by}


def verdict(total: Account, generator_held: bool, problems: Sequence[str]) -> Verdict:
    return Verdict(zero_loss=total.lost == 0, generator_held=generator_held, valid=not problems)
