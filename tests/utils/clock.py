"""A nanosecond clock the test moves by hand: the collector's poll times (and the subscription
manager's now) without sleeping."""

from __future__ import annotations

SECOND = 1_000_000_000
START = 1_750_000_000 * SECOND


class NanoClock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * SECOND)
