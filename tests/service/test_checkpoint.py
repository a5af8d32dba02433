"""The store's checkpointer (netapp.service.checkpoint): woken every `every` commits, but not sooner
than `interval_s` after its last wake-up, so that small commits (an endpoint's groups of one) do not
keep it checkpointing back to back. The clock is the test's: nothing here waits for time to pass."""

from __future__ import annotations

import sqlite3

from netapp.service.checkpoint import Checkpointer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _checkpointer(tmp_path, clock: Clock, every: int, interval_s: float) -> Checkpointer:
    path = tmp_path / "netapp.db"
    with sqlite3.connect(str(path)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
    return Checkpointer(path, 1000, every, interval_s, clock)


def test_commits_within_the_interval_wake_it_once_and_those_after_it_again(tmp_path):
    clock = Clock()
    checkpointer = _checkpointer(tmp_path, clock, every=2, interval_s=0.5)
    try:
        for _ in range(10):  # the first wake-up at once, the others within its interval
            checkpointer.committed()
        assert checkpointer.wake_ups == 1
        clock.now += 0.5
        checkpointer.committed()  # the commits since the last wake-up are past `every` already
        assert checkpointer.wake_ups == 2
        clock.now += 1.0
        checkpointer.committed()  # one commit since: fewer than `every`, however long ago
        assert checkpointer.wake_ups == 2
        checkpointer.committed()
        assert checkpointer.wake_ups == 3
    finally:
        checkpointer.close()


def test_without_an_interval_every_every_commits_wake_it(tmp_path):
    checkpointer = _checkpointer(tmp_path, Clock(), every=2, interval_s=0.0)
    try:
        for _ in range(10):
            checkpointer.committed()
        assert checkpointer.wake_ups == 5
    finally:
        checkpointer.close()
