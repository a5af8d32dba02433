"""Entering a network namespace for a block of code (the service attaches to interfaces that live
in one; the testbed builds its sites from them)."""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator

CLONE_NEWNET = 0x40000000
NETNS_DIR = "/var/run/netns"


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def entered(netns: str) -> Iterator[None]:
    """Run the calling thread inside `netns` (a name under NETNS_DIR) for the duration of the block.

    Sockets opened and interfaces resolved in the block belong to that namespace; sockets keep it
    after the block ends. Only the calling thread moves, so other threads are not affected.
    """
    with open("/proc/thread-self/ns/net") as home, open(os.path.join(NETNS_DIR, netns)) as target:
        _setns(target.fileno())
        try:
            yield
        finally:
            _setns(home.fileno())
