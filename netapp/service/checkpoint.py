"""The store's WAL checkpoints, made on a thread of their own instead of inside a COMMIT.

SQLite's own checkpoint (the WAL's pages copied back into the database file, then a sync of that
file) runs in the COMMIT that finds the WAL past its mark, and that COMMIT, with every request
waiting for it, waits the while. Under the PFCP endpoint's load (a group of establishments a
commit) those were a tenth of the commits and took 2-6 ms against some 0.6 ms for the others: about
40% of the time spent committing, and the p99 of the requests in their groups (bench/README.md,
`bench/pfcp.py`).

`Checkpointer` copies the pages back from a connection of its own, woken every `every` commits but
not sooner than `interval_s` after its last wake-up: a PASSIVE checkpoint neither waits for the
writer nor makes it wait (in WAL mode a writer appends while pages are copied back), and its sync
holds no GIL. Wake-ups that come while one runs make one more run. The interval is for small
commits: the PFCP endpoint's groups of one to four requests (requests arriving evenly, below the
rate at which a queue forms) are a thousand commits a second or more, and a checkpoint every 8 of
them (a sync of the database file and the WAL's index read each time) ran back to back: in process,
41-63 us of CPU an establishment at groups of one, 15-20 at four (bench/README.md, `bench/pfcp.py`);
by the interval, checkpoints come at most 1 / `interval_s` times a second, each copying more pages
(12-18 and 9-11 us). The writer keeps SQLite's own checkpoint at a higher mark as a backstop, should
this thread fall behind. Durability is unchanged: a commit is durable once its WAL frames are
synced, which the COMMIT still does itself.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger("netapp.service.store")


class Checkpointer:
    """PASSIVE checkpoints of the database at `path` on a daemon thread, one after every `every`
    commits (`committed()`), at least `interval_s` apart by `clock` (the first at once). `close()`
    makes a last one and stops."""

    def __init__(self, path: Path, busy_timeout_ms: int, every: int, interval_s: float = 0.0,
                 clock: Callable[[], float] = time.monotonic):
        self._connection = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._connection.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        self._every, self._interval_s, self._clock = every, interval_s, clock
        self._commits = 0  # since the last wake-up (the writer's thread alone counts them)
        self._woken_at = -math.inf  # by `clock`
        self.wake_ups = 0  # how often it was woken (runs: how often it checkpointed)
        self._state = threading.Condition()
        self._wanted = False
        self._closing = False
        self.runs = 0  # checkpoints made
        self.failures = 0  # checkpoints SQLite refused (logged; the next wake-up tries again)
        self._thread = threading.Thread(target=self._serve, name="store-checkpoint", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """A commit was made; every `every` of them, once `interval_s` has passed since the last
        wake-up, their pages are to be copied back (those of commits made in between too)."""
        self._commits += 1
        if self._commits >= self._every and (now := self._clock()) - self._woken_at >= self._interval_s:
            self._commits, self._woken_at = 0, now
            self.wake_ups += 1
            with self._state:
                self._wanted = True
                self._state.notify_all()

    def wait_runs(self, runs: int, timeout_s: float) -> bool:
        """Whether `runs` checkpoints were made within `timeout_s` (for tests and diagnostics)."""
        with self._state:
            return self._state.wait_for(lambda: self.runs >= runs, timeout_s)

    def close(self) -> None:
        with self._state:
            self._closing = self._wanted = True
            self._state.notify_all()
        self._thread.join()
        self._connection.close()

    def _serve(self) -> None:
        while True:
            with self._state:
                self._state.wait_for(lambda: self._wanted)
                self._wanted = False
                closing = self._closing
            self._checkpoint()
            if closing:
                return

    def _checkpoint(self) -> None:
        try:
            self._connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            self.failures += 1
            log.warning("store: a WAL checkpoint failed (%s); the next wake-up tries again", exc)
            return
        with self._state:
            self.runs += 1
            self._state.notify_all()
