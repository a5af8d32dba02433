"""libdpp's writers of dpp_config read it whole and write it whole (dataplane/src/shapes.c,
config_lock), and the writers of every process that opens a pinned instance take turns through a
flock on its pin directory: a reopen (dppctl status, the CLI's commands) refreshes the functions'
word and must not land between another process's read and write. (The set-call's keeping of what
libdpp owns: test_functions_word.py.)"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

from netapp.dataplane.abi import PIN_ROOT
from tests.utils.kernel import require_kernel
from tests.utils.maps import pinned_instance, second_handle

LOCK_WAIT_S = 30  # how long a thread may take to reach the flock it must block on, on a loaded machine


def blocked_on(path: Path) -> bool:
    """Whether a flock on `path` has a waiter (/proc/locks marks one with "->")."""
    inode = f":{os.stat(path).st_ino} "
    return any("->" in line and "FLOCK" in line and inode in line
               for line in Path("/proc/locks").read_text().splitlines())  # fmt: skip


def test_a_config_write_waits_while_another_holds_the_instances_config_lock():
    """The lock held as another process holds it (an open file description of the pin directory of
    its own): the set-call blocks on it, and its write lands once it is released."""
    require_kernel()
    with pinned_instance("config-lock") as instance:
        writer = second_handle(instance)
        pin_dir = Path(PIN_ROOT) / instance
        held = os.open(pin_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            config = writer.config_get()
            before = config.default_verdict
            config.default_verdict = wanted = 1 if before != 1 else 2  # drop, or pass
            fcntl.flock(held, fcntl.LOCK_EX)
            thread = threading.Thread(target=writer.config_set, args=(config,), daemon=True)
            thread.start()
            deadline = time.monotonic() + LOCK_WAIT_S
            while not blocked_on(pin_dir) and thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.01)  # polling /proc/locks for the waiter, not waiting for time to pass
            assert blocked_on(pin_dir), "the set-call did not wait for the instance's config lock"
            assert writer.config_get().default_verdict == before
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
            os.close(held)
        thread.join(LOCK_WAIT_S)
        try:
            assert not thread.is_alive() and writer.config_get().default_verdict == wanted
        finally:
            writer.close()
