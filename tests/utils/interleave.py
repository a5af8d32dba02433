"""Two changes of one object interleaved at a chosen point, with no sleep: the second started, on a
thread of its own, at the first's read of the object, and the first let go on once the second has
ended, holds the service's lock or waits for it. A service that reads before it takes its lock
then has both changes read the same object, and the one written last loses the other's; one that
reads under its lock has the second wait, then read what the first wrote."""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

WAIT_S = 60.0  # only a broken interleaving waits this long: then the test fails, it does not hang


class SecondChange:
    """Put in place of the service's lock (it takes the real one, `lock`) and call `at_read` where the
    first change has read the object: `second` runs then, once."""

    def __init__(self, lock: Any, second: Callable[[], Any], ends_first: bool = False):
        """`ends_first`: a second that takes a free lock ends before the first goes on (for a first
        that takes no lock: it would else read while the second writes)."""
        self._lock, self._second, self._ends_first = lock, second, ends_first
        self._thread: Optional[threading.Thread] = None
        self._waiting = threading.Event()  # the second ended, or asks for the lock
        self._error: Optional[BaseException] = None

    def __enter__(self) -> Any:
        if threading.current_thread() is self._thread:
            # A free lock is taken before the first change goes on, which could else take it first.
            taken = self._lock.acquire(blocking=False)
            if not (taken and self._ends_first):
                self._waiting.set()
            if taken:
                return taken
        return self._lock.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._lock.__exit__(*exc)

    def at_read(self) -> None:
        """The first change's read: the second started (the first time only), and waited for until
        it ended, holds the lock or asks for it."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="second-change")
        self._thread.start()
        assert self._waiting.wait(WAIT_S), "the second change neither ended nor asked for the lock"

    def join(self) -> None:
        """The second change ended; its error, if any, raised here."""
        assert self._thread is not None, "the first change never read the object"
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the second change did not end"
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            self._second()
        except BaseException as exc:  # told by join, in the test's thread
            self._error = exc
        finally:
            self._waiting.set()


def calling_back(read: Callable[..., Any], back: Callable[[], None]) -> Callable[..., Any]:
    """`read`, which calls `back` once it has read (its answer already taken)."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        found = read(*args, **kwargs)
        back()
        return found

    return wrapped
